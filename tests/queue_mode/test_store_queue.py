"""The queue's statements on the test PostgreSQL server (#40): one enqueue however many
runners try, one claim per file however many claim at once, expired leases, infra
retries on another runner, fast-fail, and a lost claim's outcome never reported."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from testfleet.config import Project
from testfleet.queue.worker import QueueDb, QueueSettings
from testfleet.runner.model import Attempt, FileResult, Outcome, RunItem
from testfleet.store import Store, connect, open_store
from testfleet.store import queue as q

FILES = [(f"tests/test_{i:02d}.py", float(100 - i)) for i in range(40)]


@pytest.fixture
def store(config_project: Callable[[str], Project], pg_url: str, pg_url_rw: str) -> Iterator[Store]:
    project = config_project('roots = ["tests"]\n')
    with connect(project, pg_url) as admin:
        admin.migrate()
    with open_store(project, pg_url_rw) as s:
        yield s


def _db(store: Store, runner: str, lease: float = 30.0, retries: int = 1) -> QueueDb:
    settings = QueueSettings("sha256:" + "ab" * 32, "lane", lease, retries, False, runner)
    return QueueDb(store, settings, lambda _m: None, 5.0, lambda: False)


def _result(file: str, outcome: Outcome) -> FileResult:
    item = RunItem(file, 1.0)
    return FileResult(item, 10.0, outcome, [Attempt(1, outcome, 0.5, 0, "")])


def test_enqueue_once_and_every_file_claimed_exactly_once(store: Store) -> None:
    enqueued: list[bool] = []
    reported: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def runner(name: str) -> None:
        try:
            work(name)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    def work(name: str) -> None:
        db = _db(store, name)
        made = db.enqueue(FILES)
        with lock:
            enqueued.append(made)
        while True:
            action, claim = db.claim()
            if action == "wait":  # others hold the last files: stay until they report
                time.sleep(0.05)
                continue
            if action != "run":
                assert action == "done"
                return
            assert claim is not None
            assert db.complete(claim, _result(claim.file, Outcome.PASSED), False) == "final"
            with lock:
                reported.append((claim.file, name))

    threads = [threading.Thread(target=runner, args=(f"r{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert enqueued.count(True) == 1 and len(enqueued) == 6
    assert Counter(f for f, _ in reported) == Counter({f: 1 for f, _ in FILES})
    assert len({r for _, r in reported}) > 1  # the work was shared
    with store.read() as conn:
        rows = q.items_of(conn, "sha256:" + "ab" * 32)
    assert {r.state for r in rows} == {"done"} and len(rows) == len(FILES)


def test_claim_order_is_longest_first(store: Store) -> None:
    db = _db(store, "r1")
    db.enqueue(sorted(FILES, key=lambda fe: -fe[1]))
    _, claim = db.claim()
    assert claim is not None and claim.file == "tests/test_00.py"


def test_an_expired_lease_puts_the_file_back_and_the_late_outcome_is_discarded(
        store: Store) -> None:
    slow, fast = _db(store, "slow", lease=5), _db(store, "fast", lease=5)
    slow.enqueue(FILES[:1])
    _, lost = slow.claim()
    assert lost is not None
    assert fast.claim()[0] == "wait"  # claimed by a live runner: wait for it, do not leave
    with store.write() as conn:  # the lease runs out (as if 5 s passed without a beat)
        conn.execute(q.queue_items.update().values(lease_until=0.0))
    action, again = fast.claim()
    assert action == "run" and again is not None and again.file == lost.file
    assert not slow.heartbeat(lost)
    assert slow.complete(lost, _result(lost.file, Outcome.PASSED), False) == "lost"
    assert fast.complete(again, _result(again.file, Outcome.FAILED), False) == "final"
    with store.read() as conn:
        tries = q.attempt_counts(conn, slow.s.plan_digest)
        finals = q.final_runners(conn, slow.s.plan_digest)
    assert tries == {("lane", lost.file, "expired"): 1, ("lane", lost.file, "discarded"): 1,
                     ("lane", lost.file, "final"): 1}
    assert finals == {("lane", lost.file): ["fast"]}


def test_a_file_that_loses_its_runner_three_times_is_reported_error_once(store: Store) -> None:
    db = _db(store, "r", lease=5)
    db.enqueue(FILES[:1])
    for _ in range(3):
        action, _ = db.claim()
        assert action == "run"
        with store.write() as conn:
            conn.execute(q.queue_items.update().values(lease_until=0.0))
    assert db.claim()[0] == "done"
    with store.read() as conn:
        (row,) = q.items_of(conn, db.s.plan_digest)
    assert (row.state, row.outcome, row.lost) == ("done", "ERROR", 3)
    assert "lost its runner 3 times" in row.reason


def test_an_infrastructure_failure_goes_to_another_runner_once(store: Store) -> None:
    a, b = _db(store, "a"), _db(store, "b")
    a.enqueue(FILES[:1])
    _, claim = a.claim()
    assert claim is not None
    assert a.complete(claim, _result(claim.file, Outcome.ERROR), True) == "retry-elsewhere"
    action, again = b.claim()
    assert action == "run" and again is not None and again.runner == "b"
    # the second infrastructure failure is final: retried once, not forever
    assert b.complete(again, _result(again.file, Outcome.ERROR), True) == "final"


def test_a_test_failure_is_never_retried_elsewhere(store: Store) -> None:
    a = _db(store, "a")
    a.enqueue(FILES[:1])
    _, claim = a.claim()
    assert claim is not None
    assert a.complete(claim, _result(claim.file, Outcome.FAILED), False) == "final"
    assert a.claim()[0] == "done"


def test_an_infra_retry_left_to_its_own_runner_runs_there_rather_than_never(
        store: Store) -> None:
    a = _db(store, "a")
    a.enqueue(FILES[:1])
    _, claim = a.claim()
    assert claim is not None
    assert a.complete(claim, _result(claim.file, Outcome.ERROR), True) == "retry-elsewhere"
    action, again = a.claim()  # nobody else holds a live claim that could take it
    assert action == "run" and again is not None and again.file == claim.file


def test_fast_fail_reports_the_rest_not_run_and_stops_every_runner(store: Store) -> None:
    a, b = _db(store, "a"), _db(store, "b")
    a.enqueue(FILES[:5])
    assert a.stop_lane("fast-fail: tests/test_00.py FAILED") == 5
    assert b.claim()[0] == "stopped"
    with store.read() as conn:
        rows = q.items_of(conn, a.s.plan_digest)
    assert {(r.state, r.outcome) for r in rows} == {("done", "NOT_RUN")}


def test_claim_overhead_per_file(store: Store) -> None:
    """Claim and complete, each its own transaction, against the test server; the
    benchmark's target is 50 ms per file on a local server (this one is shared, so the
    bound here is looser)."""
    db = _db(store, "r")
    db.enqueue(FILES)
    start = time.perf_counter()
    n = 0
    while True:
        action, claim = db.claim()
        if action != "run":
            break
        assert claim is not None
        db.complete(claim, _result(claim.file, Outcome.PASSED), False)
        n += 1
    per_file = (time.perf_counter() - start) / n
    assert n == len(FILES)
    assert per_file < 0.25, f"{per_file * 1000:.1f} ms per file"
