"""The data that flows through a run: what to run, what happened to each attempt and file.

Plain dataclasses so that the executor, the reporters, the JUnit writer and the step
summary all read the same facts and none of them recomputes a verdict.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testfleet.failures.signature import Signature
    from testfleet.runner.testcases import CaseResult

#: "pytest", "python" or a command template (testfleet.commands); never "auto" here.
Command = str


class Outcome(str, enum.Enum):
    """What happened to a file (or to one attempt of it)."""

    PASSED = "passed"
    FLAKY = "flaky"  # failed at first, passed on a retry: counts as passed
    FAILED = "failed"
    TIMEOUT = "timeout"
    ERROR = "error"  # the runner could not execute the file at all
    INTERRUPTED = "interrupted"  # the runner was told to stop while this file ran
    NOT_RUN = "not-run"  # never started (fast-fail or interruption): reported, never absent

    @property
    def ok(self) -> bool:
        return self in (Outcome.PASSED, Outcome.FLAKY)

    @property
    def label(self) -> str:
        return self.value.upper().replace("-", " ")


@dataclass(frozen=True)
class RunItem:
    """One file of the job, in plan order, with the estimate its timeout derives from."""

    file: str
    estimate: float
    source: str = ""  # where the estimate came from (history, registration, ...)
    command: str = ""  # the plan's resolved command for this file; "" = the stage's
    quarantined: str = ""  # why a flaky file runs without blocking the job ("" if it blocks)


@dataclass(frozen=True)
class StageSettings:
    """Everything about the stage that decides how a file is executed."""

    stage: str
    backend: str
    command: Command
    timeout_floor: float
    timeout_factor: float
    grace_seconds: float
    env: dict[str, str] = field(default_factory=dict)
    # Per-stage runner settings real runners use (#12): a fixed per-file timeout instead of
    # the estimate-derived one, a wait before a retry and a raised timeout for it, and
    # arguments appended after the file (``python3 FILE -f``).
    file_timeout: float | None = None
    retry_wait: float = 0.0
    retry_timeout_factor: float = 1.0
    extra_args: tuple[str, ...] = ()
    # Session mode (#15): pytest files share one process, sessions cut by these limits.
    batch: bool = False
    batch_max_files: int | None = None
    batch_max_seconds: float | None = None

    def timeout_for(self, estimate: float, attempt: int = 1) -> float:
        """``file_timeout`` when the stage fixes one, else ``max(floor, factor x estimate)``
        (a generous multiple, never below the floor); a retry's is raised by
        ``retry_timeout_factor``."""
        base = (self.file_timeout if self.file_timeout is not None
                else max(self.timeout_floor, self.timeout_factor * max(estimate, 0.0)))
        return base * self.retry_timeout_factor if attempt > 1 else base

    def command_for(self, item: RunItem) -> Command:
        return item.command or self.command


@dataclass(frozen=True)
class RunOptions:
    """How the job loop behaves: attempts, fast-fail, retry classification."""

    max_attempts: int = 1
    fast_fail: bool = True
    retriable_patterns: tuple[str, ...] = ()
    fatal_patterns: tuple[str, ...] = ()
    tail_bytes: int = 64 * 1024
    # incidents (#29): the backend's configured start-up patterns, whether its built-in
    # ones apply, and the config table that makes this lane dormant ("stages.<stage>...")
    infra_patterns: tuple[str, ...] = ()
    infra_defaults: bool = True
    config_table: str = ""


@dataclass(frozen=True)
class JobSpec:
    """One job ready to execute: its files, the stage settings, where records go."""

    job_id: str
    settings: StageSettings
    items: tuple[RunItem, ...]
    root: Path
    records_dir: Path
    options: RunOptions
    run_id: str


@dataclass
class Attempt:
    """One execution of one file."""

    number: int
    outcome: Outcome
    duration: float
    returncode: int | None
    reason: str
    tail: str = ""
    record_dir: Path | None = None
    retry_reason: str = ""  # why it was (or was not) retried; empty when it passed
    leftovers: int = 0  # processes still alive after the test ended, killed by the runner
    output_bytes: int = 0
    cases: list[CaseResult] | None = None  # pytest stages: the tests pytest reported
    # incidents (#29): computed once by runner.incident_job for history and the summary
    signature: Signature | None = None
    case_signatures: dict[str, Signature] | None = None


@dataclass
class FileResult:
    """The verdict on one file, with every attempt that led to it."""

    item: RunItem
    timeout: float
    outcome: Outcome
    attempts: list[Attempt] = field(default_factory=list)
    message: str = ""
    gate_lines: list[str] = field(default_factory=list)
    gate_failed: bool = False
    gate_status: str | None = None  # the gate's own verdict (PASS/FAIL/ERROR/INACTIVE)
    gate_mode: str | None = None  # enforced | shadow

    @property
    def duration(self) -> float:
        return sum(a.duration for a in self.attempts)

    @property
    def tail(self) -> str:
        return self.attempts[-1].tail if self.attempts else ""

    @property
    def blocks_nothing(self) -> bool:
        """Passed, or failed while quarantined (its failure is recorded, never blocking);
        a quarantined file that was never run still blocks: nothing proved it runs. The
        rule is :func:`testfleet.results.quarantine.blocks`, the pytest plugin's too."""
        from testfleet.results.quarantine import blocks

        return not blocks(self.outcome.ok, bool(self.item.quarantined), bool(self.attempts))

    @property
    def cases(self) -> list[CaseResult] | None:
        """The last attempt's per-testcase results (None: not a pytest stage)."""
        return self.attempts[-1].cases if self.attempts else None


@dataclass
class JobResult:
    """The verdict on a job; ``exit_code`` is the runner's exit status."""

    spec: JobSpec
    results: list[FileResult]
    started_at: float
    duration: float
    interrupted_by: int | None = None  # signal number that stopped the runner

    @property
    def exit_code(self) -> int:
        if self.interrupted_by is not None:
            return 128 + self.interrupted_by
        return 0 if self.results and all(r.blocks_nothing for r in self.results) else 1

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)

    @property
    def estimate(self) -> float:
        return sum(r.item.estimate for r in self.results)
