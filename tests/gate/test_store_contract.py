"""The metric store contract, run against SQLite and a real PostgreSQL (restricted role)."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select

from testfleet.store.metric_store import MetricStore
from testfleet.store.metrics import (
    GateRun,
    InvalidMetricRun,
    StoredValue,
    gate_runs,
    gate_series,
    gate_values,
)

IDENT = ("tests/unit/test_curve.py", "cpu", "stage-b-cpu", "")
LOSS = ("train/loss", '"last"', '{"rel_down":0.1,"rel_up":0.1}')


def sha(n: int) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def run(n: int, **kw: object) -> GateRun:
    base = dict(run_id=f"r{n}", test_path=IDENT[0], backend=IDENT[1], suite=IDENT[2],
                env_key=IDENT[3], ci_run_id=f"ci{n}", commit=sha(n))
    base.update(kw)
    return GateRun(**base)  # type: ignore[arg-type]


def val(value: float, step: int = -1, key: tuple[str, str, str] = LOSS) -> StoredValue:
    return StoredValue(*key, step, value, actual_step=99 if step == -1 else step)


def counts(ms: MetricStore) -> tuple[int, int, int]:
    with ms.store.read() as conn:
        return tuple(conn.execute(select(func.count()).select_from(t)).scalar_one()
                     for t in (gate_runs, gate_series, gate_values))  # type: ignore[return-value]


def test_baseline_is_newest_trusted_first_and_limited(metric_store: MetricStore) -> None:
    for i in range(6):
        metric_store.write_run(run(i), [val(float(i)), val(10.0 + i, 5)], trusted=(i != 4))
    coords = [(*LOSS, -1), (*LOSS, 5), (*LOSS, 7)]
    got = metric_store.baselines(IDENT, coords, limit=3)
    assert got == {(*LOSS, -1): [5.0, 3.0, 2.0], (*LOSS, 5): [15.0, 13.0, 12.0]}
    assert metric_store.baselines_per_coordinate(IDENT, coords, limit=3) == got
    assert metric_store.baselines(IDENT, [], limit=3) == {}


def test_histories_never_cross_identities(metric_store: MetricStore) -> None:
    metric_store.write_run(run(1), [val(1.0)], trusted=True)
    metric_store.write_run(run(2, env_key='{"GPU":"mi300x"}'), [val(2.0)], trusted=True)
    metric_store.write_run(run(3, suite="stage-a-cpu"), [val(3.0)], trusted=True)
    metric_store.write_run(run(4), [val(4.0, key=("train/loss", '"last"', '{"rel_up":0.2}'))],
                           trusted=True)
    assert metric_store.baselines(IDENT, [(*LOSS, -1)], limit=20) == {(*LOSS, -1): [1.0]}
    other = (IDENT[0], "cpu", "stage-b-cpu", '{"GPU":"mi300x"}')
    assert metric_store.baselines(other, [(*LOSS, -1)], limit=20) == {(*LOSS, -1): [2.0]}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_refused_before_anything_is_written(
        metric_store: MetricStore, bad: float) -> None:
    with pytest.raises(InvalidMetricRun, match="not finite"):
        metric_store.write_run(run(1), [val(1.0, 0), val(bad, 1)], trusted=True)
    assert counts(metric_store) == (0, 0, 0)


def test_invalid_identity_refused(metric_store: MetricStore) -> None:
    with pytest.raises(InvalidMetricRun) as info:
        metric_store.write_run(run(1, run_id="", backend="x" * 65, commit="a\x00b"),
                               [val(1.0), val(1.0)], trusted=True)
    text = str(info.value)
    assert "run_id" in text and "backend" in text and "commit" in text and "twice" in text
    assert counts(metric_store) == (0, 0, 0)


def test_mark_untrusted_by_run_ci_run_and_commit(metric_store: MetricStore) -> None:
    for i in range(4):
        metric_store.write_run(run(i), [val(float(i))], trusted=True)
    metric_store.write_run(run(9, run_id="r1"), [val(9.0)], trusted=True)  # same run, other file
    assert metric_store.mark_untrusted(run_id="r1") == 2
    assert metric_store.mark_untrusted(run_id="r1") == 0  # already untrusted: nothing changed
    assert metric_store.mark_untrusted(ci_run_id="ci2") == 1
    assert metric_store.mark_untrusted(commit=sha(3)[:10].upper()) == 1  # prefix, any case
    assert metric_store.mark_untrusted(commit="nope") == 0
    assert metric_store.baselines(IDENT, [(*LOSS, -1)], limit=20) == {(*LOSS, -1): [0.0]}
    rows = metric_store.history(IDENT[0])
    assert [r.trusted for r in rows] == [False, False, False, False, True]
    assert rows[-2].untrusted_by == "run_id r1"
    with pytest.raises(ValueError, match="exactly one"):
        metric_store.mark_untrusted(run_id="a", commit="b")
    with pytest.raises(ValueError):
        metric_store.mark_untrusted()


def test_history_listing(metric_store: MetricStore) -> None:
    metric_store.write_run(run(1), [val(1.0), val(0.5, key=("grad", '"all"', "{}"), step=0)],
                           trusted=True)
    metric_store.write_run(run(2), [val(2.0)], trusted=False)
    rows = metric_store.history(IDENT[0])
    assert [(r.run_id, r.metric_key, r.value) for r in rows] == [
        ("r2", "train/loss", 2.0), ("r1", "grad", 0.5), ("r1", "train/loss", 1.0)]
    assert rows[0].actual_step == 99 and rows[0].commit == sha(2)
    only = metric_store.history(IDENT[0], metric_key="grad")
    assert [r.value for r in only] == [0.5]
    assert metric_store.history(IDENT[0], runs=1)[0].run_id == "r2"
    assert metric_store.history("tests/other.py") == []


@pytest.mark.parametrize("key", [
    "a'; DROP TABLE gate_values; --", 'q"uote\\', "k" * 10_000, "ünï/cödé 🚀", "%_like*",
])
def test_hostile_metric_keys_round_trip(metric_store: MetricStore, key: str) -> None:
    coord = (key, '"last"', '{"rel_up":0.1}')
    metric_store.write_run(run(1), [val(1.5, key=coord)], trusted=True)
    assert metric_store.baselines(IDENT, [(*coord, -1)], limit=5) == {(*coord, -1): [1.5]}
    assert metric_store.history(IDENT[0], metric_key=key)[0].metric_key == key
    assert counts(metric_store) == (1, 1, 1)


def test_many_coordinates_read_in_chunks(metric_store: MetricStore) -> None:
    values = [val(float(s), s, key=("curve", '"all"', "{}")) for s in range(2500)]
    metric_store.write_run(run(1), values, trusted=True)
    metric_store.write_run(run(2), values, trusted=True)
    coords = [v.coordinate for v in values]
    got = metric_store.baselines(IDENT, coords, limit=20)
    assert len(got) == 2500 and got[("curve", '"all"', "{}", 2499)] == [2499.0, 2499.0]


WRITER = """
import sys
from pathlib import Path
from testfleet.config import Config, Project
from testfleet.store.core import open_store
from testfleet.store.metric_store import MetricStore
from testfleet.store.metrics import GateRun, StoredValue
root = Path(sys.argv[1]); url = sys.argv[2]; me = int(sys.argv[3])
project = Project(root=root, config_path=root / "t.toml", config=Config(), raw_config_text="")
ms = MetricStore(open_store(project, url))
for i in range(15):
    values = [StoredValue("m", '"all"', "{}", s, float(me * 1000 + i)) for s in range(10)]
    ms.write_run(GateRun(f"p{me}-{i}", "t.py", "cpu", "s"), values, trusted=True)
"""


def test_eight_processes_writing_concurrently_lose_nothing(tmp_path: Path) -> None:
    from gate_helpers import make_project

    from testfleet.store.core import open_store

    url = f"sqlite:///{tmp_path / 'history.db'}"
    open_store(make_project(tmp_path), url).close()  # create the schema once
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), url, str(n)],
                              stderr=subprocess.PIPE, env=os.environ.copy()) for n in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()
    ms = MetricStore(open_store(make_project(tmp_path), url))
    try:
        assert counts(ms) == (8 * 15, 10, 8 * 15 * 10)
        base = ms.baselines(("t.py", "cpu", "s", ""), [("m", '"all"', "{}", 3)], limit=1000)
        assert len(base[("m", '"all"', "{}", 3)]) == 120
    finally:
        ms.store.close()


@given(ident=st.tuples(st.text(), st.text(), st.text(), st.text()),
       coords=st.lists(st.tuples(st.text(), st.sampled_from(['"last"', '"all"', "[1,2]"]),
                                 st.text(), st.integers(-1, 10**9)), max_size=5))
def test_fast_hashes_equal_the_reference_hash(ident, coords) -> None:
    from testfleet.store.metrics import coord_hash, coord_hashes

    fast = coord_hashes(ident, coords)
    assert fast == {coord_hash(ident, c): c for c in coords}
