"""One file's run: attempts, retry decisions, the gate, and its verdict.

This is the only place that turns process results into verdicts (the job loop in
``runner/loop.py`` and session mode in ``runner/session.py`` call it). It never invents a
green result: a file it did not execute is NOT RUN with the reason, a file it could not
start is ERROR, a pytest file that collected nothing is FAILED.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from testfleet import commands
from testfleet.runner.capture import BoundedPattern, OutputCapture
from testfleet.runner.interrupt import Interrupt
from testfleet.runner.model import (
    Attempt,
    Command,
    FileResult,
    JobResult,
    JobSpec,
    Outcome,
    RunItem,
)
from testfleet.runner.process import ProcessResult, run_process
from testfleet.runner.pytest_report import ENV as TESTCASES_ENV
from testfleet.runner.reporting import Reporter
from testfleet.runner.retry import decide
from testfleet.runner.testcases import log_path, read_log, unreported

PYTEST_NO_TESTS = 5
PYTEST_PLUGIN = "testfleet.runner.pytest_report"
PLUGIN_SHIM = "_testfleet_pytest_report"
# Signals that mean a crash (or the OOM killer), never a noisy assertion: not retried.
FATAL_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT,
                 signal.SIGKILL}


@dataclass
class GateVerdict:
    """What the metric gate said about a passing file."""

    fails_test: bool
    lines: list[str] = field(default_factory=list)
    status: str | None = None  # PASS | FAIL | ERROR | INACTIVE; None: nothing gated
    mode: str | None = None  # enforced | shadow


class Hooks(Protocol):
    """Side effects the job loop triggers; each implementation must be fail-soft."""

    def attempt_done(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> None:
        """An attempt that is retried (not the file's last)."""

    def file_done(self, spec: JobSpec, item: RunItem, result: FileResult) -> None:
        """The file's final verdict, gate included (its last attempt is ``result.attempts[-1]``)."""

    def gate(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> GateVerdict | None: ...

    def checkpoint(self, partial: Callable[[], JobResult]) -> None:
        """``partial`` builds the snapshot; called only when a checkpoint is due."""


class NoHooks:
    def attempt_done(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> None:
        pass

    def file_done(self, spec: JobSpec, item: RunItem, result: FileResult) -> None:
        pass

    def gate(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> GateVerdict | None:
        return None

    def checkpoint(self, partial: Callable[[], JobResult]) -> None:
        pass


def command_argv(command: Command, file: str, extra_args: Sequence[str] = ()) -> list[str]:
    """How a stage executes one file (see :mod:`testfleet.commands`); shorthands use
    ``sys.executable`` so the runner's environment is used. The ``pytest`` shorthand
    loads the plugin that reports each test as it finishes (per-testcase results, and
    the proof that every collected test was reported: see runner.testcases). A template
    that runs pytest loads the same plugin as a stand-alone module (see :func:`plugin_dir`):
    its interpreter may be one where testfleet is not installed."""
    argv = commands.command_argv(command, file, extra_args)
    if command == "pytest":
        argv[3:3] = ["-p", PYTEST_PLUGIN]  # after "<python> -m pytest"
        return argv
    return commands.with_pytest_plugin(argv, PLUGIN_SHIM) or argv


def reports_tests(command: Command) -> bool:
    """Whether the child reports each test through the plugin (the ``pytest`` shorthand,
    or a template that runs pytest); otherwise results stay per file."""
    return command == "pytest" or (
        command not in ("python", commands.AUTO)
        and commands.with_pytest_plugin(commands.command_argv(command, "F"), PLUGIN_SHIM)
        is not None)


def plugin_dir(records_dir: Path) -> Path:
    """A directory holding only the plugin, as the top-level module ``PLUGIN_SHIM``: put on
    a pytest template's ``PYTHONPATH`` it loads in any interpreter that has pytest, and
    it shadows nothing of the project (the plugin imports only the standard library)."""
    from testfleet.runner import pytest_report

    where = records_dir / ".pytest-plugin"
    target = where / f"{PLUGIN_SHIM}.py"
    if not target.is_file():
        where.mkdir(parents=True, exist_ok=True)
        source = Path(pytest_report.__file__).read_text(encoding="utf-8")
        tmp = where / f".{PLUGIN_SHIM}.{os.getpid()}.tmp"
        tmp.write_text(source, encoding="utf-8")
        os.replace(tmp, target)
    return where


def record_slug(file: str) -> str:
    """A flat, filesystem-safe directory name for a file's records."""
    slug = file.removesuffix(".py").replace("/", "__").replace("\\", "__")
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in slug) or "_"


def file_problem(root: Path, file: str) -> str:
    """Why ``file`` (from a plan) must not be executed, or "" - a plan is data and may lie."""
    if not file or "\0" in file or file.startswith(("/", "-")) or "\\" in file:
        return f"{file!r} is not a repository-relative path"
    path = root / file
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return f"{file} resolves outside the project root {root}"
    if not path.is_file():
        return f"{file} does not exist under {root}"
    return ""


def fresh_dir(parent: Path, name: str) -> Path:
    """Create ``parent/name`` new and empty; if it exists (the same run id ran before on
    this machine) use ``name.2``, ``name.3``... so a gate never reads stale records."""
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = parent / (name if n == 1 else f"{name}.{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no fresh record directory under {parent}")


def child_env(spec: JobSpec, attempt: int, record_dir: Path,
              base: Mapping[str, str] | None = None, plugin: Path | None = None) -> dict[str, str]:
    """The runner's environment (device visibility included, untouched) plus the stage's and
    the ``TESTFLEET_*`` variables a test and the metric gate need; ``plugin`` (a pytest
    template's :func:`plugin_dir`) goes first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    env.update(spec.settings.env)
    env.setdefault("PYTHONUNBUFFERED", "1")  # live output, stdout/stderr in order
    env.update({
        "TESTFLEET_STAGE": spec.settings.stage,
        "TESTFLEET_BACKEND": spec.settings.backend,
        "TESTFLEET_JOB": spec.job_id,
        "TESTFLEET_RUN_ID": spec.run_id,
        "TESTFLEET_ATTEMPT": str(attempt),
        "TESTFLEET_RECORD_DIR": str(record_dir),
    })
    env[TESTCASES_ENV] = str(log_path(record_dir))  # read by the `pytest` shorthand's plugin
    if plugin is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(plugin), env.get("PYTHONPATH", "")) if p)
    return env


def attempt_outcome(res: ProcessResult, command: Command, timeout: float) -> tuple[Outcome, str]:
    """Process facts -> (outcome, human reason). Pure."""
    if res.error is not None:
        return Outcome.ERROR, res.error
    if res.interrupted is not None:
        return Outcome.INTERRUPTED, f"runner received {_signame(res.interrupted)}"
    if res.timed_out:
        return Outcome.TIMEOUT, f"timed out after {timeout:g}s"
    rc = res.returncode
    if rc == 0:
        return Outcome.PASSED, "exit status 0"
    if rc is None:  # pragma: no cover - defensive
        return Outcome.ERROR, "no exit status"
    if rc < 0:
        return Outcome.FAILED, f"killed by {_signame(-rc)}"
    if rc == PYTEST_NO_TESTS and commands.is_pytest(command):
        return Outcome.FAILED, "pytest collected no tests (exit status 5)"
    return Outcome.FAILED, f"exit status {rc}"


def _signame(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def partial_result(spec: JobSpec, done: list[FileResult], started: float, t0: float) -> JobResult:
    """A snapshot for a checkpoint: files not finished yet count as errors, so a JUnit file
    left behind by a runner killed with ``kill -9`` is red, never green."""
    pending = [FileResult(item, spec.settings.timeout_for(item.estimate), Outcome.ERROR,
                          message="runner stopped before this file finished")
               for item in spec.items[len(done):]]
    return JobResult(spec, [*done, *pending], started, time.monotonic() - t0)


def _run_file(spec: JobSpec, index: int, item: RunItem, reporter: Reporter,
              interrupt: Interrupt | None, hooks: Hooks, reaping: bool,
              retriable: tuple[BoundedPattern, ...], fatal: tuple[BoundedPattern, ...]) -> FileResult:
    settings, options = spec.settings, spec.options
    timeout = settings.timeout_for(item.estimate)
    command = settings.command_for(item)
    problem = file_problem(spec.root, item.file)
    if problem:
        return FileResult(item, timeout, Outcome.ERROR, message=problem)
    attempts: list[Attempt] = []
    per_test = reports_tests(command)
    for number in range(1, options.max_attempts + 1):
        try:
            record_dir = fresh_dir(spec.records_dir / record_slug(item.file), f"attempt-{number}")
        except OSError as exc:
            record_dir = spec.records_dir / record_slug(item.file) / f"attempt-{number}"
            return FileResult(item, timeout, Outcome.ERROR, attempts,
                              message=f"cannot create record directory {record_dir}: {exc}")
        capture = OutputCapture(retriable, fatal, options.tail_bytes)

        def sink(data: bytes, capture: OutputCapture = capture) -> None:
            capture.feed(data)
            reporter.output(data)

        limit = settings.timeout_for(item.estimate, number)
        reporter.attempt_started(index, item, number, limit)
        shim = (plugin_dir(spec.records_dir) if per_test and command != "pytest" else None)
        res = run_process(command_argv(command, item.file, settings.extra_args), cwd=spec.root,
                          env=child_env(spec, number, record_dir, plugin=shim), timeout=limit,
                          grace=settings.grace_seconds, sink=sink, interrupt=interrupt,
                          subreaper=reaping)
        capture.close()
        outcome, reason = attempt_outcome(res, command, limit)
        cases = None
        if per_test:
            log = read_log(log_path(record_dir))
            cases = log.cases
            missing = unreported(log) if outcome is Outcome.PASSED else ""
            if missing:
                outcome, reason = Outcome.FAILED, missing
        fatal_hits = list(capture.fatal)
        if res.returncode is not None and res.returncode < 0 and -res.returncode in FATAL_SIGNALS:
            fatal_hits.insert(0, f"killed by {_signame(-res.returncode)}")
        if res.leftovers:
            reason += f"; {res.leftovers} leftover process(es) killed after the test ended"
            if res.sweep_cut:
                reason += f" (at the file's {limit:g}s timeout)"
        if res.unkillable:
            pids = ", ".join(map(str, res.unkillable))
            reason += f"; process(es) {pids} survived SIGKILL (uninterruptible?), abandoned"
            reporter.warning(f"{item.file}: process(es) {pids} could not be killed (probably "
                             "in uninterruptible sleep, e.g. a hung device driver); the "
                             "next file may find the device busy")
        decision = decide(outcome, fatal=fatal_hits, retriable=capture.retriable,
                          attempt=number, max_attempts=options.max_attempts)
        stop = interrupt is not None and interrupt.signum is not None
        attempt = Attempt(number, outcome, res.duration, res.returncode, reason, capture.tail,
                          record_dir, decision.reason, res.leftovers, capture.total_bytes,
                          cases)
        attempts.append(attempt)
        retrying = decision.retry and not stop
        if retrying and settings.retry_wait > 0:
            attempt.retry_reason += f"; retrying after {settings.retry_wait:g}s"
        reporter.attempt_finished(index, item, attempt, retrying)
        if not retrying or not retry_pause(settings.retry_wait, interrupt):
            break
        hooks.attempt_done(spec, item, attempt)
    result = _verdict(spec, item, timeout, attempts, hooks)
    if item.quarantined and not result.outcome.ok:
        result.message = (f"quarantined, does not fail the job ({item.quarantined}): "
                          f"{result.message}")
    # Recorded only now: the history's outcome is the final verdict, gate included.
    hooks.file_done(spec, item, result)
    return result


def _verdict(spec: JobSpec, item: RunItem, timeout: float, attempts: list[Attempt],
             hooks: Hooks) -> FileResult:
    last = attempts[-1]
    if not last.outcome.ok:
        return FileResult(item, timeout, last.outcome, attempts, message=last.reason)
    outcome = Outcome.FLAKY if len(attempts) > 1 else Outcome.PASSED
    message = (f"passed on attempt {last.number} of {len(attempts)}"
               if outcome is Outcome.FLAKY else "")
    result = FileResult(item, timeout, outcome, attempts, message=message)
    verdict = hooks.gate(spec, item, last)
    if verdict is not None:
        result.gate_lines = list(verdict.lines)
        result.gate_status, result.gate_mode = verdict.status, verdict.mode
        if verdict.fails_test:
            result.outcome = Outcome.FAILED
            result.gate_failed = True
            result.message = gate_note(verdict.lines)
    return result


def retry_pause(seconds: float, interrupt: Interrupt | None) -> bool:
    """Wait before a retry; False when the runner was told to stop meanwhile."""
    if seconds <= 0:
        return True
    if interrupt is None:
        time.sleep(seconds)
        return True
    deadline = time.monotonic() + seconds
    while interrupt.signum is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        select.select([interrupt], [], [], left)
    return False


def gate_note(lines: Sequence[str]) -> str:
    """The note of a file the metric gate failed: the first failing declaration's line
    (else the first line) without its own ``gate:`` prefix and status padding, so it
    reads ``metric gate failed: FAIL loss ...``, not ``metric gate failed: gate: FAIL  ...``."""
    texts = [line.removeprefix("gate:").strip() for line in lines]
    failing = [t for t in texts if t.split(" ", 1)[0] in ("FAIL", "ERROR")]
    text = (failing or texts or [""])[0]
    status, _, rest = text.partition(" ")
    text = f"{status} {rest.lstrip()}" if rest else status
    return "metric gate failed" + (f": {text}" if text else "")
