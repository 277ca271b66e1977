"""Session mode (``batch = true``): a job's pytest files in one pytest process, or a few.

One process per file pays an interpreter start, pytest's start-up and the imports of
``conftest.py`` and the library under test for every file: on a CPU stage of small files
that is most of the job. Session mode hands consecutive pytest files of the job to one
``pytest`` process (cut into several by ``batch_max_files`` / ``batch_max_seconds``) and
rebuilds per-file verdicts from the plugin's log (:mod:`.pytest_report`):

- a file whose tests were all reported gets its verdict from them: FAILED when one
  failed or errored (a collection error included), else PASSED, with its own testcases;
- a file that collected nothing is FAILED, as ``pytest FILE`` exiting 5 would be;
- the file that was running when the session ended early (timeout, crash, interrupt,
  ``os._exit``) gets the session's outcome, with the process-tree kill of :mod:`.process`;
- a file none of whose tests started is NOT RUN, never passed; with fast-fail off it
  runs in the next session instead.

Only failed files the retry rules admit (:mod:`.retry`) run again, together, in a new
session. A session's time limit is the sum of its files' limits. A file's duration runs
from its first test starting to the next file's, plus an equal share of the session's
start-up (interpreter, imports, collection): the files' durations add up to the session's
wall time, so sharding estimates see what a file costs in a session.

The rules are pure functions (:func:`next_group`, :func:`session_verdicts`); the
process, record directories and hooks are handled by :func:`run_batched`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from testfleet.runner.capture import BoundedPattern, OutputCapture
from testfleet.runner.model import Attempt, FileResult, JobSpec, Outcome, RunItem, StageSettings
from testfleet.runner.process import run_process
from testfleet.runner.pytest_report import SESSION_FILES_ENV
from testfleet.runner.retry import decide
from testfleet.runner.testcases import CaseResult, TestcaseLog, log_path, read_log, unreported

if TYPE_CHECKING:
    from testfleet.runner.executor import Hooks
    from testfleet.runner.interrupt import Interrupt
    from testfleet.runner.reporting import Reporter

SESSION_DIR = "_sessions"  # under the job's records directory, beside the per-file ones


@dataclass(frozen=True)
class FileVerdict:
    """What one session said about one of its files; ``outcome`` None: it never started."""

    outcome: Outcome | None
    reason: str
    cases: tuple[CaseResult, ...] = ()
    duration: float = 0.0
    from_session: bool = False  # the verdict is the session's end (crash, timeout...), not its tests


def batchable(settings: StageSettings, item: RunItem) -> bool:
    return settings.batch and settings.command_for(item) == "pytest"


def next_group(indices: Sequence[int], items: Sequence[RunItem],
               settings: StageSettings) -> list[int]:
    """The plan-order prefix of ``indices`` that runs as one unit: consecutive batchable
    files up to the size limits (a file over ``batch_max_seconds`` alone still runs), or
    the first file alone when it is not batchable. A file listed twice starts a new
    session (pytest would collect it once)."""
    if not indices:
        return []
    if not batchable(settings, items[indices[0]]):
        return [indices[0]]
    group: list[int] = []
    seen: set[str] = set()
    seconds = 0.0
    for i in indices:
        item = items[i]
        if not batchable(settings, item) or item.file in seen:
            break
        if group and settings.batch_max_files is not None and len(group) >= settings.batch_max_files:
            break
        if (group and settings.batch_max_seconds is not None
                and seconds + item.estimate > settings.batch_max_seconds):
            break
        group.append(i)
        seen.add(item.file)
        seconds += max(item.estimate, 0.0)
    return group


def plan_groups(items: Sequence[RunItem], settings: StageSettings) -> list[list[int]]:
    """Every unit of a job in order (what ``run --dry-run`` shows)."""
    left = list(range(len(items)))
    groups = []
    while left:
        group = next_group(left, items, settings)
        groups.append(group)
        left = left[len(group):]
    return groups


def session_argv(files: Sequence[str], extra_args: Sequence[str] = ()) -> list[str]:
    """One pytest process for ``files``; a file that fails to import must not stop the
    others (pytest's default aborts the whole session on a collection error)."""
    from testfleet.runner.executor import PYTEST_PLUGIN

    return [sys.executable, "-m", "pytest", "-p", PYTEST_PLUGIN,
            "--continue-on-collection-errors", *files, *extra_args]


def session_verdicts(files: Sequence[str], log: TestcaseLog, file_of: Callable[[str], str | None],
                     outcome: Outcome, reason: str, started_at: float,
                     ended_at: float) -> list[FileVerdict]:
    """Per-file verdicts of one session, in ``files`` order. Pure.

    ``file_of`` maps a node id's file part (relative to pytest's rootdir) to one of
    ``files`` (None: not one of them); ``outcome``/``reason`` are the session process's
    (``attempt_outcome``); times are wall-clock seconds of the process's start and end.
    """
    by_file: dict[str, list[CaseResult]] = {f: [] for f in files}
    stray: list[CaseResult] = []
    for case in log.cases:
        owner = file_of(case.nodeid.split("::", 1)[0])
        by_file.get(owner or "", stray).append(case)
    collected: dict[str, int] = {}
    for part, count in (log.collected_files or {}).items():
        owner = file_of(part)
        if owner in by_file:
            collected[owner] = collected.get(owner, 0) + count
    starts = [(owner, t) for part, t in log.file_starts
              if (owner := file_of(part)) in by_file]
    spans = _spans(starts, ended_at)
    current = starts[-1][0] if starts else None
    session_failed = outcome is not Outcome.PASSED
    early = log.exitstatus is None  # pytest never finished its session (killed, os._exit...)

    raw: list[tuple[str, Outcome | None, str, bool]] = []
    for f in files:
        cases = by_file[f]
        ran = [c for c in cases if c.phase != "collect"]
        broken = [c for c in cases if c.phase == "collect"]
        if not log.started or log.collected is None:
            if outcome is Outcome.PASSED:
                raw.append((f, Outcome.FAILED, unreported(log), True))
            else:
                raw.append((f, outcome, f"the pytest session ended before its tests started "
                                        f"({reason})", True))
            continue
        count = collected.get(f, 0) if log.collected_files is not None else len(ran)
        if broken:
            raw.append((f, Outcome.FAILED, "collection error: " + _last_line(broken[0].message),
                        False))
        elif count == 0 and not ran:
            note = f" ({len(stray)} collection error(s) outside the job's files)" if stray else ""
            raw.append((f, Outcome.FAILED, "pytest collected no tests from this file" + note,
                        False))
        elif len(ran) >= count:
            failing = [c for c in ran if c.failing]
            if failing:
                raw.append((f, Outcome.FAILED, f"{len(failing)} of {len(ran)} test(s) failed, "
                                               f"first {failing[0].name}", False))
            else:
                raw.append((f, Outcome.PASSED, f"{len(ran)} test(s) reported", False))
        elif ran or f == current:
            done = f"{len(ran)} of {count} test(s) reported"
            if outcome is Outcome.PASSED:
                raw.append((f, Outcome.FAILED, f"pytest collected {count} test(s) from this file "
                                               f"but reported {len(ran)}; the session ended "
                                               "before the others finished (os._exit in a test?)",
                            True))
            elif outcome is Outcome.FAILED:
                raw.append((f, Outcome.FAILED, f"the pytest session ended while this file ran "
                                               f"({reason}); {done}", True))
            else:
                raw.append((f, outcome, f"{reason} while this file ran; {done}", True))
        else:
            raw.append((f, None, f"the pytest session ended ({reason}) before this file started",
                        False))
    if all(o is None for _, o, _, _ in raw):  # nothing ran: the session itself failed
        failed = Outcome.FAILED if outcome is Outcome.PASSED else outcome
        raw = [(f, failed, f"the pytest session ran none of its files ({reason})", True)
               for f in files]
    # pytest's own verdict must never vanish: a session that failed (or ended early) with
    # every file green is charged to the file that ran last.
    if (session_failed or early) and not any(
            o is not None and not o.ok for _, o, _, _ in raw):
        blame = current if current is not None else next(
            (f for f, o, _, _ in raw if o is not None), None)
        why = reason if session_failed else unreported(log) or "session did not finish"
        raw = [(f, (Outcome.FAILED if outcome in (Outcome.PASSED, Outcome.FAILED) else outcome),
                f"the pytest session failed after this file's tests ({why})", True)
               if f == blame else (f, o, r, s) for f, o, r, s in raw]

    ran_files = [f for f, o, _, _ in raw if o is not None]
    first_start = min((t for _, t in starts), default=ended_at)
    share = max(first_start - started_at, 0.0) / len(ran_files) if ran_files else 0.0
    return [FileVerdict(o, r, tuple(by_file[f]), round(spans.get(f, 0.0) + share, 6)
                        if o is not None else 0.0, s)
            for f, o, r, s in raw]


def _spans(starts: Sequence[tuple[str, float]], ended_at: float) -> dict[str, float]:
    spans: dict[str, float] = {}
    for n, (owner, t) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else ended_at
        spans[owner] = spans.get(owner, 0.0) + max(end - t, 0.0)
    return spans


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "(no message)"


# -- the I/O around it --------------------------------------------------------------------


@dataclass
class _Session:
    attempts: dict[int, Attempt]  # files the session gave a verdict
    not_started: dict[int, str]  # files it never reached, with why
    retry: list[int]


def run_batched(spec: JobSpec, results: list[FileResult], reporter: Reporter,
                interrupt: Interrupt | None, hooks: Hooks, reaping: bool,
                retriable: tuple[BoundedPattern, ...], fatal: tuple[BoundedPattern, ...],
                checkpoint: Callable[[], None]) -> str:
    """Run the whole job in session mode; fill ``results`` in plan order and return why the
    job stopped early ("" if it did not)."""
    from testfleet.runner.executor import _run_file, _signame

    items = spec.items
    done: dict[int, FileResult] = {}
    queue = list(range(len(items)))
    stop_reason = ""

    def publish() -> None:
        while len(results) in done:
            results.append(done[len(results)])
            reporter.file_finished(len(results) - 1, results[-1])

    while queue:
        if interrupt is not None and interrupt.signum is not None:
            stop_reason = f"runner received {_signame(interrupt.signum)}"
            break
        group = next_group(queue, items, spec.settings)
        queue = queue[len(group):]
        if len(group) == 1:
            done[group[0]] = _run_file(spec, group[0], items[group[0]], reporter, interrupt,
                                       hooks, reaping, retriable, fatal)
            finished = [group[0]]
        else:
            finished, left, why = _run_group(spec, group, reporter, interrupt, hooks, reaping,
                                             retriable, fatal, done)
            if left and not spec.options.fast_fail and not _stopped(interrupt):
                queue = left + queue  # continue-on-error: what the crash skipped runs next
            else:
                for i in left:
                    done[i] = FileResult(items[i], spec.settings.timeout_for(items[i].estimate),
                                         Outcome.NOT_RUN, message=f"not run ({why})")
                    finished.append(i)
        publish()
        checkpoint()
        outcomes = [done[i] for i in finished]
        if any(r.outcome is Outcome.INTERRUPTED for r in outcomes) or _stopped(interrupt):
            stop_reason = (f"runner received {_signame(interrupt.signum or 0)}"
                           if interrupt is not None else "interrupted")
            break
        bad = next((r for r in outcomes if not r.blocks_nothing and r.outcome is not Outcome.NOT_RUN),
                   None)
        if bad is not None and spec.options.fast_fail and queue:
            stop_reason = f"fast-fail: {bad.item.file} {bad.outcome.label}"
            break
    for i in range(len(items)):
        done.setdefault(i, FileResult(items[i], spec.settings.timeout_for(items[i].estimate),
                                      Outcome.NOT_RUN, message=f"not run ({stop_reason})"))
    publish()
    return stop_reason


def _stopped(interrupt: Interrupt | None) -> bool:
    return interrupt is not None and interrupt.signum is not None


def _run_group(spec: JobSpec, group: list[int], reporter: Reporter, interrupt: Interrupt | None,
               hooks: Hooks, reaping: bool, retriable: tuple[BoundedPattern, ...],
               fatal: tuple[BoundedPattern, ...],
               done: dict[int, FileResult]) -> tuple[list[int], list[int], str]:
    """One group of files: a session, then sessions of its retriable failures. Returns the
    files given a verdict (in ``done``), the files the first session never reached, and why."""
    from testfleet.runner.executor import _verdict, file_problem, retry_pause

    items, settings = spec.items, spec.settings
    attempts: dict[int, list[Attempt]] = {}
    finished: list[int] = []
    pending: list[int] = []
    for i in group:
        problem = file_problem(spec.root, items[i].file)
        if problem:
            done[i] = FileResult(items[i], settings.timeout_for(items[i].estimate), Outcome.ERROR,
                                 message=problem)
            finished.append(i)
        else:
            pending.append(i)
    left: list[int] = []
    why = ""
    number = 1
    while pending:
        session = _session(spec, pending, number, reporter, interrupt, reaping, retriable, fatal)
        for i, attempt in session.attempts.items():
            attempts.setdefault(i, []).append(attempt)
        if number == 1:
            left = [i for i in pending if i in session.not_started]
            why = next(iter(session.not_started.values()), "")
        else:
            for i in session.not_started:  # a retry the session never reached: keep the failure
                attempts[i][-1].retry_reason += "; the retry session ended before it started"
        if not session.retry or _stopped(interrupt) or not retry_pause(settings.retry_wait,
                                                                       interrupt):
            for i in session.retry:
                attempts[i][-1].retry_reason += "; not retried: the runner was told to stop"
            break
        for i in session.retry:
            hooks.attempt_done(spec, items[i], attempts[i][-1])
        pending = session.retry
        number += 1
    verdicts: list[tuple[RunItem, FileResult]] = []
    for i in group:
        if i not in attempts:
            continue
        item = items[i]
        result = _verdict(spec, item, settings.timeout_for(item.estimate), attempts[i], hooks)
        if item.quarantined and not result.outcome.ok:
            result.message = (f"quarantined, does not fail the job ({item.quarantined}): "
                              f"{result.message}")
        verdicts.append((item, result))
        done[i] = result
        finished.append(i)
    # Recorded only now, gate included, like a file run alone; one write for the session.
    record_many = getattr(hooks, "files_done", None)
    if record_many is not None:
        record_many(spec, verdicts)
    else:
        for item, result in verdicts:
            hooks.file_done(spec, item, result)
    return finished, left, why


def _session(spec: JobSpec, indices: list[int], number: int, reporter: Reporter,
             interrupt: Interrupt | None, reaping: bool, retriable: tuple[BoundedPattern, ...],
             fatal: tuple[BoundedPattern, ...]) -> _Session:
    from testfleet.runner.executor import (
        FATAL_SIGNALS,
        _signame,
        attempt_outcome,
        child_env,
        fresh_dir,
        record_slug,
    )

    items, settings, options = spec.items, spec.settings, spec.options
    files = [items[i].file for i in indices]
    session_dir = fresh_dir(spec.records_dir / SESSION_DIR,
                            f"{record_slug(files[0])}-{len(files)}-attempt-{number}")
    record_dirs = {i: fresh_dir(spec.records_dir / record_slug(items[i].file), f"attempt-{number}")
                   for i in indices}
    by_path = {os.path.realpath(spec.root / items[i].file): items[i].file for i in indices}
    index_of = {items[i].file: i for i in indices}
    files_map = session_dir / "files.json"
    files_map.write_text(json.dumps({path: str(record_dirs[index_of[f]])
                                     for path, f in by_path.items()}), encoding="utf-8")
    env = child_env(spec, number, session_dir)
    env[SESSION_FILES_ENV] = str(files_map)
    limit = sum(settings.timeout_for(items[i].estimate, number) for i in indices)
    head = RunItem(f"pytest session of {len(files)} files ({files[0]} ... {files[-1]})",
                   sum(items[i].estimate for i in indices))
    capture = OutputCapture(retriable, fatal, options.tail_bytes)

    def sink(data: bytes) -> None:
        capture.feed(data)
        reporter.output(data)

    reporter.attempt_started(indices[0], head, number, limit)
    started_at = time.time()
    res = run_process(session_argv(files, settings.extra_args), cwd=spec.root, env=env,
                      timeout=limit, grace=settings.grace_seconds, sink=sink,
                      interrupt=interrupt, subreaper=reaping)
    capture.close()
    outcome, reason = attempt_outcome(res, "pytest", limit)
    if res.leftovers:
        reason += f"; {res.leftovers} leftover process(es) killed after the session ended"
        if res.sweep_cut:
            reason += f" (at the session's {limit:g}s timeout)"
    log = read_log(log_path(session_dir))
    rootdir = Path(log.rootdir) if log.rootdir else spec.root
    resolved: dict[str, str | None] = {}

    def file_of(part: str) -> str | None:
        if part not in resolved:
            resolved[part] = by_path.get(os.path.realpath(rootdir / part))
        return resolved[part]

    verdicts = session_verdicts(files, log, file_of, outcome, reason, started_at,
                                started_at + res.duration)
    crash_fatal = list(capture.fatal)
    if res.returncode is not None and res.returncode < 0 and -res.returncode in FATAL_SIGNALS:
        crash_fatal.insert(0, f"killed by {_signame(-res.returncode)}")
    stop = _stopped(interrupt)
    out = _Session({}, {}, [])
    for i, verdict in zip(indices, verdicts, strict=True):
        if verdict.outcome is None:
            out.not_started[i] = verdict.reason
            continue
        if verdict.from_session:
            hits_fatal, hits_retriable = crash_fatal, list(capture.retriable)
        else:
            own = OutputCapture(retriable, fatal, 1024)
            own.feed("\n".join(c.message for c in verdict.cases if c.failing).encode())
            own.close()
            hits_fatal, hits_retriable = list(own.fatal), list(own.retriable)
        decision = decide(verdict.outcome, fatal=hits_fatal, retriable=hits_retriable,
                          attempt=number, max_attempts=options.max_attempts)
        attempt = Attempt(number, verdict.outcome, verdict.duration, res.returncode,
                          verdict.reason, "" if verdict.outcome.ok else capture.tail,
                          record_dirs[i], decision.reason, 0,
                          capture.total_bytes if verdict.from_session else 0,
                          list(verdict.cases))
        out.attempts[i] = attempt
        if decision.retry and not stop:
            out.retry.append(i)
    failed = sum(1 for a in out.attempts.values() if not a.outcome.ok)
    summary = (f"{len(out.attempts) - failed} passed, {failed} failed, "
               f"{len(out.not_started)} not started of {len(files)} files; {reason}")
    reporter.attempt_finished(indices[0], head, Attempt(
        number, outcome if outcome is not Outcome.PASSED or not failed else Outcome.FAILED,
        res.duration, res.returncode, summary, capture.tail, session_dir), bool(out.retry))
    for i in indices:
        if i in out.attempts:
            reporter.session_file(i, items[i], out.attempts[i], i in out.retry)
    return out
