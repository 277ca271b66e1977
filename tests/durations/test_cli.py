"""The durations commands end to end on the example project, and plan with history."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

Cli = Callable[..., tuple[int, str, str]]
DENSE = "tests/e2e/megatron/test_qwen3_8B_dense.py"

H200_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
 <testsuite name="pytest" timestamp="2026-11-30T10:00:00">
  <testcase classname="tests.e2e.megatron.test_qwen3_8B_dense" name="test_dense" time="{dense}"/>
  <testcase classname="tests.e2e.rollout.test_multi_turn_agent.TestAgent" name="test_a" time="480"/>
  <testcase classname="tests.helpers.test_missing" name="test_x" time="3"/>
 </testsuite>
</testsuites>
"""


def xml(tmp_path: Path, name: str, dense: float = 2400.5) -> Path:
    path = tmp_path / name
    path.write_text(H200_XML.format(dense=dense), encoding="utf-8")
    return path


def test_import_show_suggest_write(cli: Cli, example_project: Path, tmp_path: Path) -> None:
    root = str(example_project)
    code, out, err = cli("-C", root, "durations", "import", str(xml(tmp_path, "a.xml")),
                         "--stage", "stage-c-4-gpu-h200", "--commit", "abc123")
    assert code == 0, err
    assert "3 testcase(s), 2 matched, 1 unmatched -> 2 file execution(s)" in out
    assert "recorded 2 execution(s)" in out
    assert "unmatched testcase tests.helpers.test_missing::test_x" in err

    code, out, _ = cli("-C", root, "durations", "import", str(xml(tmp_path, "a.xml")),
                       "--stage", "stage-c-4-gpu-h200")
    assert code == 0 and "already imported" in out and "recorded 0" in out

    code, out, _ = cli("-C", root, "durations", "show", "--stage", "stage-c-4-gpu-h200",
                       "--format", "json")
    assert code == 0
    doc = json.loads(out)
    rows = {r["file"]: r for r in doc["rows"]}
    assert rows[DENSE]["history"] == 2400.5 and rows[DENSE]["est_time"] == 1100
    assert rows[DENSE]["source"] == "history" and rows[DENSE]["samples"] == 1
    assert rows["tests/e2e/fsdp/test_fsdp_cpu_offload.py"]["source"] == "est_time"

    code, out, _ = cli("-C", root, "durations", "show", "--stage", "stage-c-4-gpu-h200")
    assert code == 0 and "2/12 registration(s) estimated from history" in out
    assert "2.18x" in out

    code, out, _ = cli("-C", root, "durations", "suggest")
    assert code == 1  # a drifted literal, not written
    assert DENSE in out and "2401" in out and "test_multi_turn_agent" not in out

    before = (example_project / DENSE).read_bytes()
    inode = (example_project / DENSE).stat().st_ino
    linked = tmp_path / "hard-link.py"  # the edit is made in the file: its links see it (#27 D1)
    linked.hardlink_to(example_project / DENSE)
    code, out, _ = cli("-C", root, "durations", "suggest", "--write")
    assert code == 0
    assert "updated line 3: 1100 -> 2401" in out
    after = (example_project / DENSE).read_bytes()
    assert after == before.replace(b"est_time=1100", b"est_time=2401", 1)
    assert (example_project / DENSE).stat().st_ino == inode and linked.read_bytes() == after

    code, out, _ = cli("-C", root, "durations", "suggest")
    assert code == 0 and "no literal is off" in out


def test_suggest_lower_factor_and_json(cli: Cli, example_project: Path, tmp_path: Path) -> None:
    root = str(example_project)
    cli("-C", root, "durations", "import", str(xml(tmp_path, "b.xml", dense=1200)),
        "--stage", "stage-c-4-gpu-h200")
    code, out, _ = cli("-C", root, "durations", "suggest", "--factor", "1.05", "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert [s["file"] for s in doc["suggestions"]] == [DENSE]
    assert doc["suggestions"][0]["suggested"] == 1200


def test_suggest_write_skips_implicit_registrations(cli: Cli, example_project: Path,
                                                    tmp_path: Path) -> None:
    root = str(example_project)
    report = tmp_path / "cpu.xml"
    report.write_text('<testsuite><testcase classname="tests.fast.test_kl" name="t" time="50"/>'
                      "</testsuite>", encoding="utf-8")
    assert cli("-C", root, "durations", "import", str(report), "--stage", "stage-a-cpu")[0] == 0
    code, out, _ = cli("-C", root, "durations", "suggest", "--write")
    assert code == 1
    assert "skipped: implicit registration" in out


def test_import_refuses_bad_input(cli: Cli, example_project: Path, tmp_path: Path) -> None:
    root = str(example_project)
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuite><testcase name='a' time='-3'/></testsuite>", encoding="utf-8")
    code, _, err = cli("-C", root, "durations", "import", str(bad), "--stage", "stage-a-cpu")
    assert code == 2 and "must be finite and >= 0" in err and "Traceback" not in err
    code, _, err = cli("-C", root, "durations", "import", str(bad), "--stage", "stage-h200")
    assert code == 2 and "not a configured stage" in err
    code, _, err = cli("-C", root, "durations", "import", str(tmp_path / "none.xml"),
                       "--stage", "stage-a-cpu")
    assert code == 2 and "cannot read" in err
    assert not (example_project / ".testfleet" / "history.db").exists()


def test_import_dry_run_and_strict(cli: Cli, example_project: Path, tmp_path: Path) -> None:
    root = str(example_project)
    path = str(xml(tmp_path, "c.xml"))
    code, out, _ = cli("-C", root, "durations", "import", path, "--stage", "stage-c-4-gpu-h200",
                       "--dry-run")
    assert code == 0 and "(dry run)" in out and f"{DENSE}: 2400.5s PASSED" in out
    assert not (example_project / ".testfleet" / "history.db").exists()
    code, _, _ = cli("-C", root, "durations", "import", path, "--stage", "stage-c-4-gpu-h200",
                     "--strict")
    assert code == 1


def _plan(cli: Cli, root: str, *extra: str) -> dict:  # type: ignore[type-arg]
    code, out, err = cli("-C", root, "plan", "--labels", "run-ci-all", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_plan_uses_history_and_reports_its_share(cli: Cli, example_project: Path,
                                                 tmp_path: Path) -> None:
    root = str(example_project)
    plan = _plan(cli, root)
    assert any("no history database" in w for w in plan["warnings"])
    cli("-C", root, "durations", "import", str(xml(tmp_path, "d.xml", dense=3000)),
        "--stage", "stage-c-4-gpu-h200")
    plan = _plan(cli, root)
    assert not any("history" in w for w in plan["warnings"])
    tests = {t["file"]: t for j in plan["jobs"] if j["stage"] == "stage-c-4-gpu-h200"
             for t in j["tests"]}
    assert tests[DENSE]["estimate"] == 3000 and tests[DENSE]["source"] == "history"
    assert tests["tests/e2e/fsdp/test_fsdp_cpu_offload.py"]["source"] == "est_time"
    stage = next(s for s in plan["stages"] if s["name"] == "stage-c-4-gpu-h200")
    assert stage["history_share"] == pytest.approx(2 / len(tests), abs=1e-4)
    assert stage["makespan"] >= stage["lower_bound"] > 0


def test_plan_falls_back_when_history_is_locked_or_corrupt(cli: Cli, example_project: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(example_project)
    monkeypatch.setattr("testfleet.app.estimates.BUSY_TIMEOUT", 0.2)
    db = example_project / ".testfleet" / "history.db"
    db.parent.mkdir(exist_ok=True)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        plan = _plan(cli, root)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert any("locked" in w and "est_time literals" in w for w in plan["warnings"])
    db.write_bytes(b"garbage" * 1000)
    plan = _plan(cli, root)
    assert any("not a valid SQLite database" in w for w in plan["warnings"])
    assert plan["jobs"]


def test_plan_database_option(cli: Cli, example_project: Path) -> None:
    plan = _plan(cli, str(example_project), "--database", "postgresql://u:pw@127.0.0.1:1/x")
    assert any("cannot connect" in w and "pw@" not in w for w in plan["warnings"])


def test_suggest_ignores_a_literal_it_cannot_improve(cli: Cli, example_project: Path,
                                                     tmp_path: Path) -> None:
    """A sub-second file registered with est_time=1 is 'drifted' by ratio, but 1 s is the
    smallest literal written: suggest must not fail CI forever over a 1 -> 1 rewrite."""
    root = str(example_project)
    path = example_project / "tests" / "unit" / "test_engine_args.py"
    path.write_text(path.read_text().replace("est_time=15", "est_time=1"))
    report = tmp_path / "cpu.xml"
    report.write_text('<testsuite><testcase classname="tests.unit.test_engine_args" name="t" '
                      'time="0.05"/></testsuite>', encoding="utf-8")
    assert cli("-C", root, "durations", "import", str(report), "--stage", "stage-b-cpu")[0] == 0
    code, out, _ = cli("-C", root, "durations", "suggest", "--stage", "stage-b-cpu")
    assert code == 0 and "no literal is off" in out
    code, out, _ = cli("-C", root, "durations", "suggest", "--stage", "stage-b-cpu", "--write")
    assert code == 0 and "1 -> 1" not in out


@pytest.mark.parametrize(("option", "value"), [("--commit", "abc\nfake line"), ("--run-id", "r\x00")])
def test_import_refuses_control_characters(cli: Cli, example_project: Path, tmp_path: Path,
                                           option: str, value: str) -> None:
    """A stored commit / run id with a newline would forge lines in listings."""
    code, out, err = cli("-C", str(example_project), "durations", "import", str(xml(tmp_path, "a.xml")),
                         "--stage", "stage-c-4-gpu-h200", option, value)
    assert code == 2 and f"{option} {value!r}: contains a control character" in err
    assert "recorded" not in out


def test_show_names_a_cache_dir_that_is_a_file(cli: Cli, example_project: Path) -> None:
    cache = example_project / ".testfleet"
    if cache.is_dir():
        import shutil

        shutil.rmtree(cache)
    cache.write_text("")
    code, out, _ = cli("-C", str(example_project), "durations", "show", "--format", "json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert len(warnings) == 1 and ".testfleet (the config's cache_dir) is a file" in warnings[0]


FAILED_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" timestamp="2026-11-30T10:00:00">
 <testcase classname="tests.e2e.megatron.test_qwen3_8B_dense" name="test_dense" time="3">
  <error message="RuntimeError: CUDA error: no CUDA-capable device is detected">
E   RuntimeError: CUDA error: no CUDA-capable device is detected</error></testcase>
 <testcase classname="tests.e2e.rollout.test_multi_turn_agent.TestAgent" name="test_a" time="2">
  <failure message="assert 0.41 &gt;= 0.5">E   assert 0.41 &gt;= 0.5
tests/e2e/rollout/test_multi_turn_agent.py:40: AssertionError</failure></testcase>
</testsuite></testsuites>
"""


def test_imported_failures_carry_their_signatures(cli: Cli, example_project: Path,
                                                  tmp_path: Path) -> None:
    """JUnit history groups into incidents like recorded history (#29)."""
    root = str(example_project)
    path = tmp_path / "failed.xml"
    path.write_text(FAILED_XML, encoding="utf-8")
    code, _, err = cli("-C", root, "durations", "import", str(path), "--stage",
                       "stage-c-4-gpu-h200", "--run-id", "77")
    assert code == 0, err
    code, out, err = cli("-C", root, "incident", "list", "--format", "json")
    assert code == 0, err
    found = {(i["kind"], i["label"], tuple(i["files"])) for i in json.loads(out)["incidents"]}
    assert found == {
        ("infra", "no CUDA-capable device is detected", (DENSE,)),
        ("exception", "AssertionError", ("tests/e2e/rollout/test_multi_turn_agent.py",))}
