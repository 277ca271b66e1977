"""One queue runner (#40): enqueue the lane once, then claim, run and complete files until
every file of the lane has its one report.

Each file runs through the runner's own one-file execution (``runner.executor``), so
timeouts, classified retries, quarantine, the metric gate, incidents, JUnit and history
behave as in shard mode. What differs is where the next file comes from, and when its
outcome counts: only the transaction that completes a claim this runner still holds
records it, and only then does the file reach the history (``QueueHooks``). A runner
whose lease expired (stopped, cut off) finds its outcome discarded: the file was put back
and its report is another runner's.

A database that stops answering is waited for (``TESTFLEET_QUEUE_DB_WAIT`` seconds,
default ten minutes); past that the runner stops claiming and fails loudly, and the file
it held comes back to another runner when its lease expires.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from testfleet.queue import policy
from testfleet.runner.capture import compile_patterns, dropped_notes
from testfleet.runner.executor import GateVerdict, _run_file, partial_result
from testfleet.runner.hooks import final_outcome, infrastructure_failure
from testfleet.runner.model import Attempt, FileResult, JobResult, JobSpec, Outcome, RunItem
from testfleet.runner.tree import subreaper
from testfleet.store.errors import StoreError, StoreLocked, StoreUnavailable

if TYPE_CHECKING:
    from testfleet.runner.interrupt import Interrupt
    from testfleet.runner.reporting import Reporter
    from testfleet.store import Store
    from testfleet.store.queue import Claim

T = TypeVar("T")
DB_WAIT_ENV = "TESTFLEET_QUEUE_DB_WAIT"
DEFAULT_DB_WAIT = 600.0


class DatabaseLost(Exception):
    """The queue database did not answer for longer than this runner waits."""


@dataclass(frozen=True)
class QueueSettings:
    """One lane's queue as this runner joins it."""

    plan_digest: str
    lane: str
    lease_seconds: float
    infra_retries: int
    pull_request: bool
    runner: str = ""

    def __post_init__(self) -> None:
        if not self.runner:
            object.__setattr__(self, "runner", runner_name())


def runner_name() -> str:
    """Unique per runner process, readable in ``queue status``: the CI job if any, the
    host and pid, and a random tail (two runners of one CI job on one host differ)."""
    ci = os.environ.get("GITHUB_JOB") or os.environ.get("BUILDKITE_JOB_ID") or ""
    host = socket.gethostname().split(".")[0] or "host"
    name = f"{ci + '@' if ci else ''}{host}:{os.getpid()}:{secrets.token_hex(3)}"
    return name[:255]


def db_wait(environ: dict[str, str] | None = None) -> float:
    raw = (os.environ if environ is None else environ).get(DB_WAIT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_DB_WAIT
    except ValueError:
        return DEFAULT_DB_WAIT
    return value if math.isfinite(value) and value >= 0 else DEFAULT_DB_WAIT


@dataclass
class QueueRun:
    """What this runner did: the files whose report it made, and what it says about the rest."""

    job: JobResult
    enqueued: bool
    ran: int = 0
    requeued: list[str] = field(default_factory=list)  # infra retries sent elsewhere
    discarded: list[str] = field(default_factory=list)  # outcomes of leases it had lost
    released: list[str] = field(default_factory=list)  # put back when interrupted
    stopped: str = ""  # the lane failed fast
    database_lost: str = ""
    empty_on_arrival: bool = False


class QueueDb:
    """The queue's statements for one lane, each in its own transaction, retried while
    the database is unreachable (a restarted server, a cut connection)."""

    def __init__(self, store: Store, settings: QueueSettings, warn: Callable[[str], None],
                 wait: float, stop: Callable[[], bool]) -> None:
        self.store = store
        self.s = settings
        self.warn = warn
        self.wait = wait
        self.stop = stop

    def _retrying(self, what: str, fn: Callable[[Any], T]) -> T:
        deadline = time.monotonic() + self.wait
        delay = 0.5
        warned = False
        while True:
            try:
                with self.store.write() as conn:
                    out = fn(conn)
                if warned:
                    self.warn(f"queue database back: {what} done")
                return out
            except (StoreUnavailable, StoreLocked) as exc:  # anything else: fail loudly now
                if time.monotonic() + delay > deadline or self.stop():
                    raise DatabaseLost(f"{what}: {exc}") from None
                if not warned:
                    self.warn(f"queue database unreachable ({what}): {exc}; waiting up to "
                              f"{self.wait:g}s ({DB_WAIT_ENV})")
                    warned = True
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def enqueue(self, items: Sequence[tuple[str, float]]) -> bool:
        from testfleet.store import queue as q

        def step(c: Any) -> bool:
            now = q.server_now(c)
            made = q.enqueue(c, self.s.plan_digest, self.s.lane, items, runner=self.s.runner,
                             pull_request=self.s.pull_request, now=now)
            if made:  # once per new lane: the rows of lanes idle for KEEP_DAYS go
                q.prune(c, now - q.KEEP_DAYS * 86400, keep=(self.s.plan_digest, self.s.lane))
            return made

        return self._retrying("enqueue", step)

    def claim(self) -> tuple[str, Claim | None]:
        """(what to do next, the claim when it is ``run``)."""
        from testfleet.store import queue as q

        def step(conn: Any) -> tuple[str, Claim | None]:
            s = self.s
            now = q.server_now(conn)
            for held in q.expired_claims(conn, s.plan_digest, s.lane, now):
                if policy.after_expiry(held.lost) == "give-up":
                    q.give_up_expired(conn, s.plan_digest, s.lane, held, now,
                                      policy.give_up_reason(held.lost + 1))
                else:
                    q.requeue_expired(conn, s.plan_digest, s.lane, held, now)
            token = secrets.token_hex(16)
            # a stopped lane has no pending file (fast-fail reported them): nothing to claim
            got = q.claim_next(conn, s.plan_digest, s.lane, s.runner, token, s.lease_seconds,
                               now, take_avoided=False)
            if got is not None:
                return "run", got
            lane = q.lane_row(conn, s.plan_digest, s.lane)
            stopped = lane is not None and lane.stopped is not None
            n = q.counts(conn, s.plan_digest, s.lane, s.runner, now)
            action = policy.next_step(claimed=got is not None, pending=n["pending"],
                                      avoided=n["avoided"], others_live=n["others_live"],
                                      claimed_total=n["claimed"], stopped=stopped)
            if action == "take-avoided":
                got = q.claim_next(conn, s.plan_digest, s.lane, s.runner, token,
                                   s.lease_seconds, now, take_avoided=True)
                action = "run" if got is not None else "wait"
            return action, got

        return self._retrying("claim", step)

    def heartbeat(self, claim: Claim) -> bool:
        from testfleet.store import queue as q

        with self.store.write() as conn:  # one try: the next beat comes a third of a lease later
            return q.heartbeat(conn, claim, self.s.lease_seconds, q.server_now(conn))

    def complete(self, claim: Claim, result: FileResult, infrastructure: bool) -> str:
        """``final`` (this runner made the file's report), ``retry-elsewhere`` or ``lost``,
        in one transaction with the claim's check."""
        from testfleet.store import queue as q

        outcome = final_outcome(result)

        def step(conn: Any) -> str:
            now = q.server_now(conn)
            row = q.lock_claim(conn, claim)
            if row is None:
                if q.reported_by(conn, claim.token):
                    return "final"  # committed before the connection was lost
                q.discard(conn, claim, outcome=outcome, now=now)
                return "lost"
            decision = policy.after_outcome(outcome, infrastructure=infrastructure,
                                            retries_used=row.infra_retries,
                                            retries_allowed=self.s.infra_retries)
            if decision == "retry-elsewhere":
                q.put_back(conn, claim, status="requeued", outcome=outcome, avoid=True, now=now,
                           detail=f"infrastructure failure, retried on another runner: "
                                  f"{result.message}")
                return decision
            q.finish(conn, claim, outcome=outcome, attempts=len(result.attempts),
                     duration=round(result.duration, 3),
                     reason=result.message or (result.attempts[-1].reason
                                               if result.attempts else ""), now=now)
            return "final"

        return self._retrying(f"report {claim.file}", step)

    def release(self, claim: Claim, why: str) -> None:
        from testfleet.store import queue as q

        def step(conn: Any) -> None:
            if q.lock_claim(conn, claim) is not None:
                q.put_back(conn, claim, status="released", outcome=None, avoid=False,
                           now=q.server_now(conn), detail=why)

        self._retrying(f"release {claim.file}", step)

    def stop_lane(self, reason: str) -> int:
        from testfleet.store import queue as q

        return self._retrying("fast-fail", lambda c: q.stop_lane(
            c, self.s.plan_digest, self.s.lane, reason, q.server_now(c)))


class QueueHooks:
    """The run's hooks around a claim: the file's outcome is completed in the queue first,
    and reaches the history (and the rest of ``inner``) only when this runner made the
    file's report."""

    def __init__(self, inner: Any, db: QueueDb) -> None:
        self.inner = inner
        self.db = db
        self.claim: Claim | None = None
        self.beat: Heartbeat | None = None
        self.verdict = ""

    def attempt_done(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> None:
        self.inner.attempt_done(spec, item, attempt)

    def gate(self, spec: JobSpec, item: RunItem, attempt: Attempt) -> GateVerdict | None:
        return self.inner.gate(spec, item, attempt)  # type: ignore[no-any-return]

    def checkpoint(self, partial: Callable[[], JobResult]) -> None:
        self.inner.checkpoint(partial)

    def file_done(self, spec: JobSpec, item: RunItem, result: FileResult) -> None:
        assert self.claim is not None
        if self.beat is not None:  # a beat after the report would find the claim gone
            self.beat.stop()
        if result.outcome is Outcome.INTERRUPTED:
            self.db.release(self.claim, "the runner was interrupted while the file ran")
            self.verdict = "released"
            return
        infra = not result.outcome.ok and infrastructure_failure(spec, result)
        self.verdict = self.db.complete(self.claim, result, infra)
        if self.verdict == "final":
            self.inner.file_done(spec, item, result)


class Heartbeat:
    """Renews the claim's lease every third of it while the file runs."""

    def __init__(self, db: QueueDb, claim: Claim, warn: Callable[[str], None]) -> None:
        self.db = db
        self.claim = claim
        self.warn = warn
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="testfleet-queue-heartbeat",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _beat(self) -> None:
        every = policy.heartbeat_interval(self.db.s.lease_seconds)
        while not self._stop.wait(every):
            try:
                held = self.db.heartbeat(self.claim)
            except StoreError as exc:
                self.warn(f"heartbeat for {self.claim.file} failed ({exc}); retrying in "
                          f"{every:g}s")
                continue
            if not held and not self.lost:
                self.lost = True
                self.warn(f"{self.claim.file}: the lease expired and the file was put back "
                          "(this runner was too slow to renew it); its outcome here will not "
                          "be reported")


def run_queue(spec: JobSpec, settings: QueueSettings, store: Store, *, reporter: Reporter,
              interrupt: Interrupt | None, hooks: Any, use_subreaper: bool = True,
              poll: float | None = None) -> QueueRun:
    """Join the lane's queue and run files from it until every file has its report."""
    spec = replace(spec, settings=replace(spec.settings, batch=False))  # one file per claim

    def stopping() -> bool:
        return interrupt is not None and interrupt.signum is not None

    db = QueueDb(store, settings, reporter.warning, db_wait(), stopping)
    by_file = {item.file: item for item in spec.items}
    index_of = {item.file: i for i, item in enumerate(spec.items)}
    qhooks = QueueHooks(hooks, db)
    retriable = compile_patterns(spec.options.retriable_patterns)
    fatal = compile_patterns(spec.options.fatal_patterns)
    started, t0 = time.time(), time.monotonic()
    results: list[FileResult] = []
    out = QueueRun(JobResult(spec, results, started, 0.0, None), enqueued=False)
    wait_every = poll if poll is not None else min(5.0, settings.lease_seconds / 6)
    reporter.job_started(spec)  # the lane's files: the indices the reporter is given
    try:
        out.enqueued = db.enqueue([(i.file, i.estimate) for i in spec.items])
        first = True
        with subreaper(use_subreaper) as reaping:
            while not stopping():
                action, claim = db.claim()
                if first and action == "done":
                    out.empty_on_arrival = True
                first = False
                if action in ("done", "stopped"):
                    if action == "stopped":
                        out.stopped = "the lane failed fast on another runner"
                    break
                if action == "wait" or claim is None:
                    _sleep(wait_every, stopping)
                    continue
                item = by_file.get(claim.file)
                if item is None:  # queued from another plan's files under this digest
                    raise StoreError(f"the queue of {settings.lane} holds {claim.file!r}, "
                                     "which this plan's lane does not: the queue is not this "
                                     "plan's")
                qhooks.claim, qhooks.verdict = claim, ""
                with Heartbeat(db, claim, reporter.warning) as qhooks.beat:
                    result = _run_file(spec, index_of[claim.file], item, reporter, interrupt,
                                       qhooks, reaping, retriable, fatal)
                    if not qhooks.verdict:  # never started (missing file, no record dir):
                        qhooks.beat.stop()  # its ERROR is the report, as in shard mode
                        qhooks.verdict = db.complete(claim, result, False)  # no history
                for note in dropped_notes((*retriable, *fatal)):
                    reporter.warning(note)
                verdict = qhooks.verdict
                if verdict == "final":
                    results.append(result)
                    out.ran += 1
                    reporter.file_finished(index_of[claim.file], result)
                    hooks.checkpoint(lambda: partial_result(_ran(spec, results), results,
                                                            started, t0))
                elif verdict == "retry-elsewhere":
                    out.requeued.append(claim.file)
                    reporter.warning(f"{claim.file}: {result.outcome.label} with an "
                                     "infrastructure signature; queued again for another "
                                     "runner")
                elif verdict == "lost":
                    out.discarded.append(claim.file)
                elif verdict == "released":
                    out.released.append(claim.file)
                if result.outcome is Outcome.INTERRUPTED:
                    break
                if (verdict == "final" and not result.blocks_nothing
                        and spec.options.fast_fail):
                    why = f"fast-fail: {claim.file} {result.outcome.label}"
                    skipped = db.stop_lane(why)
                    out.stopped = f"{why} ({skipped} queued file(s) reported NOT RUN)"
                    break
    except DatabaseLost as exc:
        out.database_lost = str(exc)
    sig = interrupt.signum if interrupt is not None else None
    out.job = JobResult(_ran(spec, results), results, started, time.monotonic() - t0, sig)
    reporter.job_finished(out.job)
    return out


def _ran(spec: JobSpec, results: Sequence[FileResult]) -> JobSpec:
    """The job as this runner ran it: the files whose report it made (its JUnit, status
    and summary list those, never the lane's other files as not run)."""
    return replace(spec, items=tuple(r.item for r in results))


def exit_status(run: QueueRun) -> int:
    """0 when every file this runner reported passed (none is fine: the queue was empty or
    others took them all), 1 when one failed or the database was lost, 128+N on signal N."""
    if run.job.interrupted_by is not None:
        return 128 + run.job.interrupted_by
    if run.database_lost:
        return 1
    return 0 if all(r.blocks_nothing for r in run.job.results) else 1


def _sleep(seconds: float, stop: Callable[[], bool]) -> None:
    end = time.monotonic() + seconds
    while not stop() and time.monotonic() < end:
        time.sleep(min(0.2, end - time.monotonic()) if end > time.monotonic() else 0)
