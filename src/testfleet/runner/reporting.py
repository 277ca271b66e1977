"""What the job loop tells the outside world while it runs (terminal, CI log, tests).

The executor only calls these methods; how they render (plain log, GitHub Actions groups,
a rich progress display, nothing at all in unit tests) is the reporter's business.
"""

from __future__ import annotations

from typing import Protocol

from testfleet.runner.model import Attempt, FileResult, JobResult, JobSpec, RunItem


class Reporter(Protocol):
    def job_started(self, spec: JobSpec) -> None: ...

    def attempt_started(self, index: int, item: RunItem, attempt: int, timeout: float) -> None: ...

    def output(self, data: bytes) -> None: ...

    def attempt_finished(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None: ...

    def session_file(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        """Session mode: one file's attempt inside the session just reported (whose own
        ``attempt_started``/``attempt_finished`` framed the shared output)."""

    def file_finished(self, index: int, result: FileResult) -> None: ...

    def job_finished(self, result: JobResult) -> None: ...

    def warning(self, message: str) -> None: ...


class NullReporter:
    """Swallows everything; collects warnings so tests can assert on them."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.output_bytes = 0

    def job_started(self, spec: JobSpec) -> None:
        pass

    def attempt_started(self, index: int, item: RunItem, attempt: int, timeout: float) -> None:
        pass

    def output(self, data: bytes) -> None:
        self.output_bytes += len(data)

    def attempt_finished(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        pass

    def session_file(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        pass

    def file_finished(self, index: int, result: FileResult) -> None:
        pass

    def job_finished(self, result: JobResult) -> None:
        pass

    def warning(self, message: str) -> None:
        self.warnings.append(message)
