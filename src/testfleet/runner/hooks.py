"""The job loop's side effects, each fail-soft: history, metric gate, JUnit checkpoints.

A database that is down, a gate that raises, a JUnit path that cannot be written: each
prints a warning and never changes a verdict or stops the run.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.config import Project
from testfleet.runner.executor import GateVerdict
from testfleet.runner.model import Attempt, FileResult, JobResult, JobSpec, Outcome, RunItem
from testfleet.vcs import current_commit

if TYPE_CHECKING:
    from testfleet.documents.vocabulary import Outcome as HistoryOutcome

Warn = Callable[[str], None]
CHECKPOINT_EVERY = 2.0  # seconds between JUnit checkpoints (the final write is always done)
#: Longest wait for one history write or gate evaluation (seconds); a database that
#: stops answering must not hold the run, nor its signal handling (issue #17).
HISTORY_TIMEOUT_ENV = "TESTFLEET_HISTORY_TIMEOUT"
DEFAULT_HISTORY_TIMEOUT = 60.0


#: (item, attempt, outcome, reason, gate status, gate mode, tests that failed earlier,
#: the failure signature) of one execution row to record.
Entry = tuple[RunItem, Attempt, str, str, "str | None", "str | None", "set[str] | frozenset[str]",
              Any]


def _named_signatures(spec: JobSpec, entries: Sequence[Entry]) -> list[Any]:
    """The signatures the rows and their testcases name (each written once per digest)."""
    from testfleet.runner.incident_job import case_signatures

    found = {sig.digest: sig for *_, sig in entries if sig is not None}
    for _, attempt, *_ in entries:
        if attempt.cases:
            found.update((s.digest, s) for s in case_signatures(spec, attempt).values())
    return list(found.values())


def infrastructure_failure(spec: JobSpec, result: FileResult) -> bool:
    """Whether a file's failure carries an infrastructure incident's signature (a backend's
    start-up pattern): what queue mode may retry on another runner (#40)."""
    from testfleet.runner.incident_job import file_signature

    signature = file_signature(spec, result)
    return signature is not None and signature.kind == "infra"


class HistoryTimeout(Exception):
    """A history operation did not finish in time, or the run was interrupted meanwhile."""


def history_timeout(environ: dict[str, str]) -> float:
    raw = environ.get(HISTORY_TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_HISTORY_TIMEOUT
    except ValueError:
        return DEFAULT_HISTORY_TIMEOUT
    return value if math.isfinite(value) and value > 0 else DEFAULT_HISTORY_TIMEOUT


def history_outcome(attempt: Attempt) -> str:
    """The history's vocabulary: a pass on a retry is FLAKY, an interrupted attempt ERROR."""
    if attempt.outcome is Outcome.PASSED and attempt.number > 1:
        return "FLAKY"
    if attempt.outcome is Outcome.INTERRUPTED:
        return "ERROR"
    return attempt.outcome.name


#: the runner's outcome as the history's word (an interrupted file is an ERROR)
_HISTORY: dict[Outcome, HistoryOutcome] = {
    Outcome.PASSED: "PASSED", Outcome.FLAKY: "FLAKY", Outcome.FAILED: "FAILED",
    Outcome.TIMEOUT: "TIMEOUT", Outcome.ERROR: "ERROR", Outcome.INTERRUPTED: "ERROR",
    Outcome.NOT_RUN: "NOT_RUN"}


def final_outcome(result: FileResult) -> HistoryOutcome:
    """The history's vocabulary for a file's final verdict (a failed enforced gate is FAILED)."""
    if result.outcome is Outcome.PASSED and result.attempts and result.attempts[-1].number > 1:
        return "FLAKY"
    return _HISTORY[result.outcome]


def case_rows(spec: JobSpec, item: RunItem, attempt: Attempt, commit: str | None,
              ci_run_id: str | None, now: float, final: bool,
              retried: set[str] | frozenset[str]) -> list[Any]:
    """The history rows of one attempt's testcases; a test that failed in an earlier
    attempt of this run and passed now is FLAKY (a pass on a retry). A failing test's
    row names its failure signature (runner.incident_job computed it for the attempt)."""
    from testfleet.runner.incident_job import case_signatures
    from testfleet.store.caserow import CaseRow

    signatures = case_signatures(spec, attempt) if attempt.cases else {}
    rows = []
    for c in attempt.cases or []:
        outcome = c.outcome.upper()
        if final and outcome == "PASSED" and c.nodeid in retried:
            outcome = "FLAKY"
        sig = signatures.get(c.nodeid)
        rows.append(CaseRow(item.file, spec.settings.stage, spec.settings.backend, c.name or item.file,
                            outcome, round(c.duration, 3), attempt.number, commit, ci_run_id,
                            now, final, sig.digest if sig is not None else None))
    return rows


class RunHooks:
    """History recording + metric gate + JUnit checkpoints for one ``testfleet run``."""

    def __init__(self, project: Project | None, *, warn: Warn, database: str | None = None,
                 record_history: bool = True, gate: bool = True, junit: Path | None = None,
                 write_baseline: bool = False, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        self.project = project
        self.warn = warn
        self.database = database
        self.junit = junit
        self.write_baseline = write_baseline
        # the CI run the records belong to (history export --run-id selects by it)
        from testfleet.runner.jobs import ci_run_id

        self.ci_run_id = ci_run_id(env)
        self.commit = current_commit(project.root, env) if project is not None else None
        self._store: Any = None
        self._store_cm: Any = None
        self._history = record_history and project is not None
        self._gate = gate and project is not None
        self._last_checkpoint = 0.0
        self.timeout = history_timeout(env)
        #: set by the caller: True once the run was asked to stop (a signal arrived)
        self.interrupted: Callable[[], bool] = lambda: False
        self._stuck = False  # a history call was abandoned: never touch its store again

    def _bounded(self, what: str, call: Callable[[], Any]) -> Any:
        """Run ``call`` in a worker thread and wait for it at most ``self.timeout``
        seconds, giving up at once when the run is interrupted. The database driver
        blocks in C on a silent server, where neither a timeout nor a signal can reach
        it; the main thread waiting here stays free to handle the signal."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name=f"testfleet-{what}", daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not done.wait(0.05):
            if self.interrupted():
                self._stuck = True
                raise HistoryTimeout(f"{what} abandoned: the run was interrupted")
            if time.monotonic() > deadline:
                self._stuck = True
                raise HistoryTimeout(f"{what} did not finish within {self.timeout:g}s "
                                     f"(the database stopped answering; ${HISTORY_TIMEOUT_ENV} "
                                     "sets the limit)")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    # -- history ---------------------------------------------------------------------------

    def _open_store(self) -> Any:
        if self._store is not None or not self._history:
            return self._store
        try:
            from testfleet.store.engine import resolve_target

            assert self.project is not None  # history is off without a project
            target = resolve_target(self.project, self.database)
            if target.path is not None and target.path.is_file():
                # An existing SQLite history: the standard library writes it (start-up).
                from testfleet.store.sqlite_write import open_writer

                self._store = open_writer(target)
                if self._store is not None:
                    return self._store
            from testfleet.store import open_store

            opened = open_store(self.project, self.database)
            if hasattr(opened, "__enter__"):
                self._store_cm = opened
                opened = opened.__enter__()
            self._store = opened
        except Exception as exc:
            self._disable_history(exc)
        return self._store

    def _disable_history(self, exc: BaseException) -> None:
        self._history = False
        self._store = None
        if self._stuck:  # its connection is held by a stuck thread: never touch it again
            self._store_cm = None
        self.warn(f"history database unavailable, durations of this run are not recorded "
                  f"(verdicts unchanged): {exc}")

    def _reset_store(self) -> None:
        old_cm, old = self._store_cm, self._store
        self._store = self._store_cm = None
        with contextlib.suppress(Exception):
            if old_cm is not None:
                old_cm.__exit__(None, None, None)
            elif old is not None and hasattr(old, "close"):
                old.close()

    def attempt_done(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> None:
        from testfleet.runner.incident_job import attempt_signature

        self._record(spec, [(item, attempt, history_outcome(attempt), attempt.reason, None, None,
                             frozenset(), attempt_signature(spec, attempt))], final=False)

    def file_done(self, spec: JobSpec, item: RunItem, result: FileResult) -> None:
        self.files_done(spec, [(item, result)])

    def files_done(self, spec: JobSpec, done: list[tuple[RunItem, FileResult]]) -> None:
        """Final verdicts of several files in one history transaction (a pytest session's
        files finish together; one write instead of one per file)."""
        from testfleet.runner.incident_job import file_signature

        rows = []
        for item, result in done:
            if not result.attempts:
                continue
            earlier = {c.nodeid for a in result.attempts[:-1] for c in (a.cases or [])
                       if c.failing}
            rows.append((item, result.attempts[-1], final_outcome(result),
                         result.message or result.attempts[-1].reason, result.gate_status,
                         result.gate_mode, earlier, file_signature(spec, result)))
        self._record(spec, rows, final=True)

    def _record(self, spec: JobSpec, entries: Sequence[Entry], *, final: bool) -> None:
        """Store executions (and their testcases, and the failure signatures both name),
        one transaction each for all ``entries``."""
        if not self._history or not entries:
            return
        try:
            from testfleet.store.durations import REASON_MAX, Execution

            now = time.time()
            rows = [Execution(
                file=item.file, stage=spec.settings.stage, backend=spec.settings.backend,
                duration=round(attempt.duration, 3), outcome=outcome,
                attempt=attempt.number, commit=self.commit, ci_run_id=self.ci_run_id,
                timestamp=now, gate_status=gate_status, gate_mode=gate_mode,
                reason=reason[:REASON_MAX] or None, final=final,
                signature=sig.digest if sig is not None else None,
            ) for item, attempt, outcome, reason, gate_status, gate_mode, _, sig in entries]
            cases = [case for item, attempt, _, _, _, _, retried, _ in entries if attempt.cases
                     for case in case_rows(spec, item, attempt, self.commit, self.ci_run_id,
                                           now, final, retried)]
            signatures = _named_signatures(spec, entries)

            def record() -> None:
                store = self._open_store()
                if store is None:
                    return
                try:
                    store.record_executions(rows, signatures)
                except Exception as first:
                    from testfleet.store.errors import StoreUnavailable

                    if not isinstance(first, StoreUnavailable):
                        raise
                    # A dropped connection (server restart, idle cut): reopen once, retry once.
                    self._reset_store()
                    store = self._open_store()
                    if store is not None:
                        store.record_executions(rows, signatures)
                if store is not None and cases and hasattr(store, "record_testcases"):
                    store.record_testcases(cases)

            self._bounded("history write", record)
        except Exception as exc:
            if self._history:
                self._disable_history(exc)

    def close(self) -> None:
        if self._stuck:  # closing would wait on the connection the stuck thread holds
            self._store = self._store_cm = None
            return
        if self._store_cm is not None:
            with contextlib.suppress(Exception):
                self._store_cm.__exit__(None, None, None)
        elif self._store is not None and hasattr(self._store, "close"):
            with contextlib.suppress(Exception):
                self._store.close()
        self._store = self._store_cm = None

    # -- gate ------------------------------------------------------------------------------

    def gate(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> GateVerdict | None:
        if not self._gate or attempt.record_dir is None or self.project is None:
            return None
        try:
            from testfleet.gate.hook import gate_file
        except ModuleNotFoundError as exc:
            if exc.name in ("testfleet.gate.hook", "testfleet.gate"):
                self._gate = False  # this installation has no gate: nothing to evaluate
                return None
            self.warn(f"metric gate could not be loaded, {item.file} not gated: {exc}")
            return None
        except Exception as exc:
            self.warn(f"metric gate could not be loaded, {item.file} not gated: {exc}")
            return None
        project, record_dir = self.project, attempt.record_dir
        try:
            res = self._bounded("metric gate", lambda: gate_file(
                project, file=item.file, backend=spec.settings.backend,
                suite=spec.settings.stage, record_dir=record_dir,
                write_baseline=self.write_baseline, run_id=spec.run_id,
                ci_run_id=self.ci_run_id, commit=self.commit, database=self.database,
            ))
        except HistoryTimeout as exc:
            self.warn(f"metric gate on {item.file} gave no verdict (verdict unchanged): {exc}")
            return None
        except Exception as exc:
            self.warn(f"metric gate failed with an internal error on {item.file} "
                      f"(verdict unchanged): {type(exc).__name__}: {exc}")
            return None
        return GateVerdict(bool(res.fails_test), [str(x) for x in res.lines], res.status, res.mode)

    # -- JUnit -----------------------------------------------------------------------------

    def checkpoint(self, partial: Callable[[], JobResult]) -> None:
        if self.junit is None:
            return
        now = time.monotonic()
        if now - self._last_checkpoint < CHECKPOINT_EVERY:
            return
        self._last_checkpoint = now
        self.write_junit(partial())

    def write_junit(self, job: JobResult) -> bool:
        if self.junit is None:
            return False
        from testfleet.runner.junit import write_junit

        try:
            write_junit(job, self.junit)
        except OSError as exc:
            self.warn(f"cannot write JUnit file {self.junit}: {exc}")
            return False
        return True
