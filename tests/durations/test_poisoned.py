"""Poisoned estimates (issue #17): a JUnit file dated 9999-12-31 used to pin estimates
forever (the window was ordered by the stored timestamp) and made ``db prune`` delete the
real rows instead of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.config import Project
from testfleet.errors import UsageError
from testfleet.store.durations import Execution
from testfleet.store.junit_import import read_cases

FUTURE = """<?xml version="1.0"?>
<testsuite name="pytest" timestamp="9999-12-31T00:00:00">
  <testcase classname="tests.test_x" name="t" time="9999"/>
</testsuite>
"""


def test_a_junit_file_dated_in_the_future_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(FUTURE)
    with pytest.raises(UsageError, match="in the future"):
        read_cases(path)
    # a few minutes of clock skew are not poison
    path.write_text(FUTURE.replace("9999-12-31T00:00:00", "2026-01-01T00:03:00"))
    assert read_cases(path, now=1767225600.0)  # 2026-01-01T00:00:00Z


def _rows(durations: list[float], ts: float) -> list[Execution]:
    return [Execution("tests/test_x.py", "stage-a-cpu", "cpu", d, timestamp=ts) for d in durations]


@pytest.fixture
def store(project: Project, tmp_path: Path):  # type: ignore[no-untyped-def]
    from testfleet.store.core import open_store

    with open_store(project, f"sqlite:///{tmp_path / 'h.db'}") as opened:
        yield opened


def test_the_window_is_the_most_recently_recorded_not_the_latest_dated(store) -> None:  # type: ignore[no-untyped-def]
    store.record_executions(_rows([9999.0], 253402214400.0))  # dated 9999-12-31, recorded first
    store.record_executions(_rows([10.0, 11.0, 12.0], 1_700_000_000.0))  # real runs, after it
    assert store.durations("stage-a-cpu", None, window=3) == {"tests/test_x.py": [12.0, 11.0, 10.0]}


def test_prune_keeps_the_real_rows(store) -> None:  # type: ignore[no-untyped-def]
    store.record_executions(_rows([9999.0], 253402214400.0))
    store.record_executions(_rows([10.0, 11.0], 1_700_000_000.0))
    assert store.prune_executions(keep=2) == 1
    assert store.durations("stage-a-cpu", None, window=10) == {"tests/test_x.py": [11.0, 10.0]}


# -- the same JUnit file imported twice (content identity) ------------------------------

REPORT = """<?xml version="1.0"?>
<testsuite name="pytest" timestamp="2026-01-01T00:00:00">
  <testcase classname="tests.test_x" name="t" time="{seconds}"/>
</testsuite>
"""


def _raw(opened) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from testfleet.store.schema import executions as ex

    with opened.read() as conn:
        return sorted((r[0], r[1]) for r in conn.execute(select(ex.c.ci_run_id, ex.c.duration)))


def test_the_same_file_under_a_new_run_id_is_refused(project: Project, store_url: str | None,
                                                     cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """#17: ``--run-id`` used to make any file new, so one report imported under N run ids
    counted N times in every estimate. Its content identity is stored with the import."""
    (project.root / "tests" / "test_x.py").write_text(
        'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="stage-a-cpu")\n')
    report = tmp_path / "r.xml"
    report.write_text(REPORT.format(seconds=7))
    db = [] if store_url is None else ["--database", store_url]
    base = ["-C", str(project.root), "durations", "import", "--stage", "stage-a-cpu", *db]
    code, out, err = cli(*base, str(report), "--run-id", "101")
    assert code == 0 and "recorded 1 execution(s)" in out, out + err
    code, out, err = cli(*base, str(report), "--run-id", "102")
    assert code == 2, out + err
    assert "already imported for stage stage-a-cpu as run 101" in err
    assert "nothing imported" in err and "--force" in err
    code, out, _ = cli(*base, str(report), "--run-id", "101")  # same run id: skipped, as before
    assert code == 0 and "already imported as 101, skipped" in out
    copy = tmp_path / "copy.xml"  # the same bytes under another name
    copy.write_text(report.read_text())
    assert cli(*base, str(copy))[0] == 2
    # A different report is new; the same one twice in one command is stored once.
    other = tmp_path / "other.xml"
    other.write_text(REPORT.format(seconds=9))
    code, out, err = cli(*base, str(other), str(other))
    assert code == 0 and "recorded 1 execution(s)" in out, out + err
    assert _raw_rows(project, store_url) == [("101", 7.0), ("junit:" + _sha(other)[:16], 9.0)]
    # --force imports again on purpose.
    code, out, _ = cli(*base, str(report), "--run-id", "103", "--force")
    assert code == 0 and "recorded 1 execution(s)" in out
    assert len(_raw_rows(project, store_url)) == 3


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _raw_rows(project: Project, url: str | None) -> list[tuple[str, float]]:
    from testfleet.store.core import open_store

    with open_store(project, url) as opened:
        return _raw(opened)
