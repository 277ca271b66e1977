"""What a merge takes from each bundle (#27 D3): rows dated after the merge stay out, with
a warning; conflicting copies of one record are named; pruning keeps what was merged last."""

from __future__ import annotations

import time
from pathlib import Path

from testfleet.config import Project
from testfleet.history.bundle import (
    Bundle,
    ExecutionRecord,
    GateRunRecord,
    GateValueRecord,
    Payload,
    Source,
    TestcaseRecord,
    encode,
)
from testfleet.history.merge import merge_bundles, read_bundles
from testfleet.history.screen import bound_times, conflicts, stored_conflicts
from testfleet.store import open_store

NOW = 2_000_000_000.0  # a merge's clock, for the pure functions
PUSH = Source(event="push", ref="refs/heads/main", cadence="nightly", write_baseline=True,
              ci_run_id="77")


def ex(n: int, ts: float, duration: float = 1.0, outcome: str = "PASSED") -> ExecutionRecord:
    return ExecutionRecord(uid=f"{n:032x}", file="tests/test_a.py", stage="stage-a-cpu",
                           backend="cpu", duration=duration, outcome=outcome, attempt=1,
                           ci_run_id="77", ts=ts, recorded_at=ts)


def run(n: int, ts: float) -> GateRunRecord:
    return GateRunRecord(uid=f"{n:032x}", run_id=f"r{n}", test_path="tests/test_a.py",
                         backend="cpu", suite="stage-a-cpu", env_key="", ci_run_id="77",
                         trusted=True, recorded_at=ts)


def bundle(*executions: ExecutionRecord, runs: tuple[GateRunRecord, ...] = (),
           name: str = "b.tfb") -> Bundle:
    payload = Payload(store_schema=5, created_at=NOW, testfleet="0", source=PUSH,
                      executions=list(executions), gate_runs=list(runs),
                      gate_values=[GateValueRecord(run=r.uid, metric_key="m", steps_key="all",
                                                   constraint_key="{}", step=-1, value=1.0)
                                   for r in runs],
                      testcases=[TestcaseRecord(execution=e.uid, name="t", outcome="PASSED",
                                                duration=1.0, final=True, recorded_at=e.ts)
                                 for e in executions])
    return Bundle(payload, "0" * 64, name)


def test_rows_dated_after_the_merge_are_left_out_with_their_dependants() -> None:
    b = bundle(ex(1, NOW - 10), ex(2, NOW + 10_000), runs=(run(3, NOW - 5), run(4, 4e9)))
    bounded = bound_times(b, NOW + 300)
    p = bounded.bundle.payload
    assert [e.uid[-1] for e in p.executions] == ["1"]
    assert [c.execution[-1] for c in p.testcases] == ["1"]
    assert [r.uid[-1] for r in p.gate_runs] == ["3"] and len(p.gate_values) == 1
    assert bounded.dropped == {"executions": 1, "testcase_results": 1, "gate_runs": 1,
                               "gate_values": 1}
    note = bounded.note()
    assert note is not None and "2096-" in note and "CI run 77" in note and "b.tfb" in note
    assert bound_times(bundle(ex(1, NOW + 299)), NOW + 300).note() is None  # within the skew


def test_conflicting_copies_of_one_uid_are_named() -> None:
    a, b = bundle(ex(1, NOW), name="a.tfb"), bundle(ex(1, NOW, duration=9.0), name="b.tfb")
    lines = conflicts([a, b])
    assert len(lines) == 1 and "b.tfb carries different content than a.tfb (duration)" in lines[0]
    assert conflicts([a, bundle(ex(1, NOW), name="c.tfb")]) == []  # identical copies: fine
    untrusted = bundle(runs=(run(5, NOW).model_copy(update={"trusted": False}),))
    assert conflicts([bundle(runs=(run(5, NOW),)), untrusted]) == []  # trust may be taken away
    stored = {ex(1, NOW).uid: {**ex(1, NOW).model_dump(), "commit_sha": None, "id": 4}}
    assert stored_conflicts([b], stored)[0].endswith("(duration); the stored copy is kept")


def test_prune_keeps_what_was_merged_last_whatever_it_claims(project: Project, tmp_path: Path) -> None:
    """A runner whose clock is years behind: its rows claim to be the oldest, yet they are
    the ones just merged; pruning ranks rows by when this history stored them."""
    now = time.time()
    path = tmp_path / "now.tfb"
    path.write_bytes(encode(bundle(ex(1, now - 20), ex(2, now - 10)).payload))
    with open_store(project, None) as store:
        merge_bundles(store, read_bundles([path]), keep=2)
    late = tmp_path / "behind.tfb"
    late.write_bytes(encode(bundle(ex(3, 1000.0), ex(4, 1001.0)).payload))
    with open_store(project, None) as store:
        result = merge_bundles(store, read_bundles([late]), keep=2)
        assert result.added["executions"] == 2 and result.pruned == 2
        assert store.durations("stage-a-cpu", None, window=10) == {"tests/test_a.py": [1.0, 1.0]}
        assert store.runs_of_uids([f"{n:032x}" for n in (1, 2, 3, 4)]).keys() == {
            f"{n:032x}" for n in (3, 4)}
