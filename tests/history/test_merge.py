"""Export and merge against both engines (SQLite file and the real PostgreSQL server)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from testfleet.config import Project
from testfleet.history.bundle import BundleError, Payload, Source, decode, encode
from testfleet.history.export import EXECUTION_COLUMNS, GATE_RUN_COLUMNS, export_payload
from testfleet.history.merge import merge_bundles, read_bundles
from testfleet.store import open_store
from testfleet.store.metric_store import MetricStore
from testfleet.store.metrics import gate_runs
from testfleet.store.schema import executions

PUSH = Source(event="push", ref="refs/heads/main", cadence="nightly", write_baseline=True)


def bundle_of(project: Project, url: str | None, path: Path, *, run_id: str | None = None,
              source: Source = PUSH) -> Path:
    with open_store(project, url) as store:
        path.write_bytes(encode(export_payload(store, run_id=run_id, source=source)))
    return path


def records(project: Project, url: str | None) -> dict[str, Any]:
    """Everything the history holds, without local keys, comparable across databases."""
    with open_store(project, url) as store:
        p = export_payload(store, run_id=None, source=Source())
    run_of = {r.uid: r for r in p.gate_runs}
    return {
        "executions": by_repr(r.model_dump() for r in p.executions),
        "gate_runs": by_repr((r.uid, r.trusted, r.commit_sha, r.recorded_at, r.run_id)
                            for r in p.gate_runs),
        "gate_values": by_repr((run_of[v.run].run_id, *v.key[1:], v.value, v.actual_step)
                              for v in p.gate_values),
        "testcases": stored_cases(project, url),
        "signatures": by_repr(s.model_dump() for s in p.signatures),
    }


def stored_cases(project: Project, url: str | None) -> list[Any]:
    """Every stored testcase row but its local key (read from the table, not an export)."""
    from testfleet.store.testcases import testcases

    with open_store(project, url) as store, store.read() as conn:
        cols = [c for c in testcases.columns if c.name != "id"]
        return by_repr(tuple(row) for row in conn.execute(select(*cols)))


def by_repr(rows: Any) -> list[Any]:
    """Rows in a stable order (dicts do not sort by themselves)."""
    return sorted(rows, key=repr)


@pytest.fixture
def source_db(project: Project, seed: Callable[..., None]) -> str:
    """A second SQLite history (a job's runner) seeded with two CI runs."""
    url = str(project.root / "job.db")
    seed(project, url, ci_run_id="100")
    seed(project, url, ci_run_id="200", t0=5000.0)
    return url


def test_round_trip_keeps_every_record(project: Project, store_url: str | None, source_db: str,
                                       tmp_path: Path) -> None:
    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    with open_store(project, store_url) as store:
        result = merge_bundles(store, read_bundles([b]))
    assert result.added == {"executions": 6, "gate_runs": 4, "gate_values": 12, "testcases": 12,
                            "signatures": 2}
    assert result.rows == {"executions": 6, "gate_runs": 4, "gate_series": 3, "gate_values": 12,
                           "testcases": 12, "failure_signatures": 2}
    assert records(project, store_url) == records(project, source_db)
    with open_store(project, store_url) as store:  # the merged baseline is what the gate reads
        got = MetricStore(store).baselines(("tests/test_1.py", "cuda", "stage-c-h200", "torch=2"),
                                           [("train/loss", "all", "lt:2", 2)], 10)
    assert got == {("train/loss", "all", "lt:2", 2): [1.2, 1.2]}  # trusted runs of both CI runs


def test_merging_twice_adds_nothing(project: Project, store_url: str | None, source_db: str,
                                    tmp_path: Path) -> None:
    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    run1 = bundle_of(project, source_db, tmp_path / "run1.tfb", run_id="100")
    with open_store(project, store_url) as store:
        first = merge_bundles(store, read_bundles([b, run1]))  # overlapping bundles, one merge
        again = merge_bundles(store, read_bundles([run1, b]))
    assert first.rows == again.rows
    assert first.added["executions"] == 6 and first.known["executions"] == 3
    assert first.added["testcases"] == 12  # the overlap's testcases once, with their execution
    assert again.added == {"executions": 0, "gate_runs": 0, "gate_values": 0, "testcases": 0,
                           "signatures": 0}
    assert again.known == {"executions": 9, "gate_runs": 6}  # per record in the bundles
    assert records(project, store_url) == records(project, source_db)


def test_run_id_selects_one_run(project: Project, source_db: str, tmp_path: Path) -> None:
    with open_store(project, source_db) as store:
        p = export_payload(store, run_id="200", source=PUSH)
        gate_run = export_payload(store, run_id="100.1-job2", source=PUSH)
    assert {r.ci_run_id for r in p.executions} == {"200"} and len(p.executions) == 3
    assert {c.execution for c in p.testcases} == {r.uid for r in p.executions}
    assert len(p.testcases) == 6
    assert {r.ci_run_id for r in p.gate_runs} == {"200"} and len(p.gate_values) == 6
    assert (len(gate_run.executions), [r.run_id for r in gate_run.gate_runs]) == (0, ["100.1-job2"])


def test_a_bad_bundle_among_good_ones_changes_nothing(project: Project, store_url: str | None,
                                                      source_db: str, tmp_path: Path) -> None:
    good = bundle_of(project, source_db, tmp_path / "good.tfb")
    bad = tmp_path / "bad.tfb"
    bad.write_bytes(good.read_bytes()[:-10])
    with pytest.raises(BundleError, match=r"bad\.tfb: truncated"):
        read_bundles([good, bad])
    with open_store(project, store_url) as store, store.read() as conn:
        assert conn.execute(select(executions.c.id)).first() is None


def test_a_failure_inside_the_transaction_rolls_everything_back(
        project: Project, store_url: str | None, source_db: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import testfleet.store.durations as durations

    def broken(*_a: object, **_k: object) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(durations, "prune", broken)
    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    with open_store(project, store_url) as store:
        with pytest.raises(RuntimeError):
            merge_bundles(store, read_bundles([b]))
        with store.read() as conn:
            assert conn.execute(select(executions.c.id)).first() is None
            assert conn.execute(select(gate_runs.c.id)).first() is None


def test_pull_request_bundles_are_refused(project: Project, store_url: str | None,
                                          source_db: str, tmp_path: Path) -> None:
    good = bundle_of(project, source_db, tmp_path / "push.tfb", run_id="100")
    pr = bundle_of(project, source_db, tmp_path / "pr.tfb", run_id="200",
                   source=Source(event="pull_request", ref="refs/pull/7/merge"))
    with open_store(project, store_url) as store:
        with pytest.raises(BundleError, match=r"pr.tfb: refused: exported by a 'pull_request' run"):
            merge_bundles(store, read_bundles([good, pr]))
        with store.read() as conn:
            assert conn.execute(select(executions.c.id)).first() is None
        with pytest.raises(BundleError, match="not 'refs/heads/main'"):
            merge_bundles(store, read_bundles([bundle_of(
                project, source_db, tmp_path / "branch.tfb",
                source=Source(event="push", ref="refs/heads/topic"))]),
                require_ref="refs/heads/main")
        forced = merge_bundles(store, read_bundles([pr]), allow_untrusted=True)
        with store.read() as conn:
            trusted = list(conn.execute(select(gate_runs.c.trusted, gate_runs.c.untrusted_by)))
    assert forced.added["executions"] == 3 and "merged as untrusted" in forced.notes[0]
    assert [t for t, _ in trusted] == [False, False]
    assert any("may not write baselines" in (by or "") for _, by in trusted)


def test_cadences_that_do_not_write_baselines_never_merge_trusted_runs(
        project: Project, store_url: str | None, source_db: str, tmp_path: Path) -> None:
    b = bundle_of(project, source_db, tmp_path / "regular.tfb", run_id="100",
                  source=Source(event="push", ref="refs/heads/main", cadence="regular",
                                write_baseline=False))
    with open_store(project, store_url) as store:
        result = merge_bundles(store, read_bundles([b]))
        with store.read() as conn:
            assert not any(conn.execute(select(gate_runs.c.trusted)).scalars())
    assert "cadence regular does not write metric baselines" in result.notes[0]


def test_merge_prunes_like_db_prune(project: Project, store_url: str | None,
                                    seed: Callable[..., None], tmp_path: Path) -> None:
    job = str(tmp_path / "job.db")
    for n in range(4):
        seed(project, job, ci_run_id=str(n), t0=1000.0 * (n + 1))
    b = bundle_of(project, job, tmp_path / "all.tfb")
    with open_store(project, store_url) as store:
        result = merge_bundles(store, read_bundles([b]), keep=2)
        assert store.durations("stage-a-cpu", None, 10)["tests/test_2.py"] == [3.5, 3.5]
    # 4 runs x 3 files; test_0 fails every time: per (file, outcome class) 2 are kept.
    assert (result.pruned, result.rows["executions"]) == (6, 6)


def test_bundle_models_carry_every_column() -> None:
    """A column added to a history table must be carried by bundles (or merged history
    silently loses it): add it to ExecutionRecord / GateRunRecord / TestcaseRecord."""
    from testfleet.history.bundle import TestcaseRecord
    from testfleet.store.testcases import testcases

    assert set(EXECUTION_COLUMNS) == {c.name for c in executions.columns} - {"id"}
    assert set(GATE_RUN_COLUMNS) == {c.name for c in gate_runs.columns} - {"id", "test_hash"}
    # a testcase row: its own values, and the columns it shares with its execution
    shared = {"file", "stage", "backend", "attempt", "commit_sha", "ci_run_id", "ts"}
    assert set(TestcaseRecord.model_fields) - {"execution"} | shared == {
        c.name for c in testcases.columns} - {"id"}


def test_testcases_without_their_execution_stay_behind(project: Project, source_db: str,
                                                       tmp_path: Path) -> None:
    """A testcase row whose execution was pruned has nothing to travel with."""
    from sqlalchemy import select

    from testfleet.store.execution_rows import AlchemyDb, delete_ids

    with open_store(project, source_db) as store:
        with store.write() as conn:
            delete_ids(AlchemyDb(conn), list(conn.execute(select(executions.c.id).where(
                executions.c.file == "tests/test_2.py")).scalars()))
        p = export_payload(store, run_id=None, source=PUSH)
    assert len(p.executions) == 4 and len(p.testcases) == 8


def test_an_untrust_mark_travels_and_wins(project: Project, store_url: str | None,
                                          source_db: str, tmp_path: Path) -> None:
    """``gate untrust`` in one database reaches another through a bundle; a copy that
    still says trusted never gives the trust back; merging the mark again changes nothing."""
    key = ("tests/test_1.py", "cuda", "stage-c-h200", "torch=2")
    coord = [("train/loss", "all", "lt:2", 2)]
    before = bundle_of(project, source_db, tmp_path / "before.tfb")
    with open_store(project, store_url) as store:
        merge_bundles(store, read_bundles([before]))
        assert MetricStore(store).baselines(key, coord, 10)[coord[0]] == [1.2, 1.2]
    with open_store(project, source_db) as store:
        assert MetricStore(store).mark_untrusted(ci_run_id="100") == 1
    after = bundle_of(project, source_db, tmp_path / "after.tfb", run_id="100")
    with open_store(project, store_url) as store:
        first = merge_bundles(store, read_bundles([after]))
        again = merge_bundles(store, read_bundles([after, before]))
        assert MetricStore(store).baselines(key, coord, 10)[coord[0]] == [1.2]  # run 200 only
        with store.read() as conn:
            row = conn.execute(select(gate_runs.c.trusted, gate_runs.c.untrusted_by).where(
                gate_runs.c.run_id == "100.1-job1")).one()
    assert (first.untrusted, again.untrusted) == (1, 0)
    assert row == (False, "ci_run_id 100")
    assert records(project, store_url)["gate_runs"] == records(project, source_db)["gate_runs"]


def test_export_then_decode_is_valid(project: Project, source_db: str, tmp_path: Path) -> None:
    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    decoded = decode(b.read_bytes(), "all.tfb")
    assert isinstance(decoded.payload, Payload) and decoded.payload.source == PUSH


def test_a_failed_compaction_is_a_warning_after_the_commit(
        project: Project, source_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    from testfleet.store.core import Store

    def busy(_store: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(Store, "compact", busy)
    monkeypatch.setattr("testfleet.history.merge._COMPACT_WAIT", 0.3)  # then it gives up
    with open_store(project, None) as store:
        result = merge_bundles(store, read_bundles([b]))
    assert result.rows["executions"] == 6 and result.size_bytes
    assert "not compacted (the merge itself is committed): database is locked" in result.notes[-1]
    assert "gave up after waiting 0 s" in result.notes[-1]


def test_a_locked_database_is_waited_for_and_the_failed_try_counts_nothing(
        project: Project, source_db: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tries find the database locked (another merge), the third merges: the counts
    are the third's alone, and the merge said it was waiting."""
    from testfleet.store.core import Store
    from testfleet.store.errors import StoreLocked

    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    real_write = Store.write
    tries: list[int] = []

    def write(store: Store) -> Any:
        tries.append(1)
        if len(tries) < 3:
            raise StoreLocked("history database x is locked by another process")
        return real_write(store)

    said: list[str] = []
    with open_store(project, None) as store:
        monkeypatch.setattr(Store, "write", write)
        result = merge_bundles(store, read_bundles([b]), say=said.append)
    assert len(tries) == 3
    assert result.added["executions"] == result.rows["executions"] == 6
    assert said and "waiting for it" in said[0]


def test_a_merge_gives_up_at_its_deadline(project: Project, source_db: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from testfleet.store.core import Store
    from testfleet.store.errors import StoreLocked

    def write(store: Store) -> Any:
        raise StoreLocked("history database x is locked by another process")

    b = bundle_of(project, source_db, tmp_path / "all.tfb")
    with open_store(project, None) as store, pytest.raises(StoreLocked, match="gave up after"):
        monkeypatch.setattr(Store, "write", write)
        merge_bundles(store, read_bundles([b]), deadline=time.monotonic() + 0.3)
