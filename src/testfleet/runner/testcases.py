"""Per-testcase results of a pytest file, read from the log the runner's plugin writes.

Pure functions over the log's text, so the rules are testable without a process:

- a test is reported when its teardown finished (or its collection failed);
- a pytest file that exited 0 passes only if pytest reported every test it collected:
  "collected 3, reported 1" means the process ended early (``os._exit(0)`` in a test,
  a ``SystemExit`` swallowed by a fixture...), and that is a failure with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")
FAILING = ("failed", "error")
LOG_MAX = 64 * 1024 * 1024  # a log bigger than this is not ours: read no further
NAME_MAX = 1024


@dataclass(frozen=True)
class CaseResult:
    """One test of a file: pytest's node id, its outcome over all phases, its duration."""

    nodeid: str
    outcome: str
    duration: float = 0.0
    message: str = ""
    phase: str = ""  # where it failed: setup | call | teardown | collect

    @property
    def name(self) -> str:
        """The node id without the file part (``TestA::test_b[1]``), or the whole id."""
        _, sep, rest = self.nodeid.partition("::")
        return (rest if sep else self.nodeid)[:NAME_MAX]

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING


@dataclass
class TestcaseLog:
    """What the plugin reported for one attempt (``started`` False: no log at all)."""

    started: bool = False
    collected: int | None = None
    exitstatus: int | None = None  # None: the session never finished
    cases: list[CaseResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable lines, skipped
    # Batch sessions: pytest's rootdir (node ids are relative to it), tests collected per
    # file (node id's file part), and where each file's tests began (file part, wall time).
    rootdir: str = ""
    collected_files: dict[str, int] | None = None
    file_starts: list[tuple[str, float]] = field(default_factory=list)

    @property
    def reported(self) -> int:
        return sum(1 for c in self.cases if c.phase != "collect")


def log_path(record_dir: Path) -> Path:
    """Beside the attempt's record directory (the gate reads every ``*.jsonl`` inside it)."""
    return record_dir.with_name(record_dir.name + ".testcases.jsonl")


def parse_log(text: str) -> TestcaseLog:
    """The log's lines in order; a malformed line is a problem, never an exception."""
    log = TestcaseLog()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            log.problems.append(f"line {number}: not JSON")
            continue
        if not isinstance(event, dict):
            log.problems.append(f"line {number}: not an object")
            continue
        kind = event.get("event")
        if kind == "start":
            log.started = True
            log.rootdir = event["rootdir"] if isinstance(event.get("rootdir"), str) else ""
        elif kind == "collected" and _is_int(event.get("count")):
            log.collected = int(event["count"])
            files = event.get("files")
            if isinstance(files, dict):
                log.collected_files = {str(k): int(v) for k, v in files.items() if _is_int(v)}
        elif kind == "file" and isinstance(event.get("file"), str) \
                and isinstance(event.get("t"), (int, float)) and not isinstance(event["t"], bool):
            log.file_starts.append((event["file"], float(event["t"])))
        elif kind == "finish" and _is_int(event.get("exitstatus")):
            log.exitstatus = int(event["exitstatus"])
        elif kind == "case" and isinstance(event.get("nodeid"), str) \
                and event.get("outcome") in OUTCOMES:
            duration = event.get("duration", 0.0)
            log.cases.append(CaseResult(
                event["nodeid"], event["outcome"],
                float(duration) if isinstance(duration, (int, float)) and duration >= 0 else 0.0,
                str(event.get("message") or ""), str(event.get("phase") or "")))
        else:
            log.problems.append(f"line {number}: unknown event")
    return log


def read_log(path: Path) -> TestcaseLog:
    """The log of one attempt; a missing or unreadable file is an empty log."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(LOG_MAX)
    except OSError:
        return TestcaseLog()
    return parse_log(data.decode("utf-8", "replace"))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def unreported(log: TestcaseLog) -> str:
    """Why a pytest file that exited 0 did not pass, or "" when pytest reported its tests."""
    if not log.started:
        return "pytest exited 0 but never started its session (nothing was reported)"
    if log.collected is None:
        return "pytest exited 0 before collection finished (nothing was reported)"
    if log.reported < log.collected:
        return (f"pytest collected {log.collected} test(s) but reported {log.reported}; the "
                "process ended before the others finished (os._exit in a test?)")
    if log.exitstatus is None:
        return "pytest exited 0 without finishing its session (os._exit in a fixture or hook?)"
    return ""
