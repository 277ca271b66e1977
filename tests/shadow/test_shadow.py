"""Shadow mode's pieces: the records the old CI's jobs write, the lane-by-lane comparison
(files, runner labels, shard count), the history that makes "safe to switch" counted, and
the command's promises (exit 0 whatever differs, 2 on bad input naming file and line)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from support import run_cli
from testfleet.errors import UsageError
from testfleet.planning.model import Plan, load_plan
from testfleet.shadow.compare import compare, plan_files, render_markdown
from testfleet.shadow.history import add_run, load_history, verdict
from testfleet.shadow.observed import ObservedLane, parse_record

MILES = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "miles-ci"


@pytest.fixture(scope="module")
def miles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """miles adopted, with its nightly plan in nightly.json."""
    from testfleet.cli.main import main

    root = tmp_path_factory.mktemp("shadow") / "miles"
    shutil.copytree(MILES, root)
    for argv in (["init", "--from-existing", "--github", "--allow-findings", "--install", "pip x"],
                 ["plan", "--event", "schedule", "--schedule", "0 15 * * 0-5", "--format", "json",
                  "-o", str(root / "nightly.json")]):
        with pytest.raises(SystemExit) as info:
            main(["-C", str(root), *argv])
        assert info.value.code == 0
    return root


@pytest.fixture
def nightly(miles: Path) -> Plan:
    return load_plan(miles / "nightly.json")


def lanes(text: str, known: set[str] | None = None, base: Path = Path(".")) -> dict[tuple[str, str], ObservedLane]:
    out: dict[tuple[str, str], ObservedLane] = {}
    parse_record(text, "run.txt", base, out, known or set())
    return out


GOOD = """\
== stage=stage-a-cpu shard=0/2 runs_on=ubuntu-latest ==
===== Suite stage-a-cpu =====
  - tests/fast/test_utils_fast.py
== stage=stage-a-cpu shard=1/2 runs_on=ubuntu-latest ==
== stage=stage-c-4-gpu-h200 runs_on=h200,4gpu ==
tests/e2e/test_train.py
"""


def test_a_record_is_read_lane_by_lane() -> None:
    got = lanes(GOOD + "Skipped 1 test(s):\n  - tests/e2e/test_other.py (disabled)\n")
    cpu, gpu = got[("stage-a-cpu", "")], got[("stage-c-4-gpu-h200", "")]
    assert (cpu.files, cpu.shards, cpu.runs_on) == ({"tests/fast/test_utils_fast.py"}, 2,
                                                    ("ubuntu-latest",))
    assert (gpu.files, gpu.shards, gpu.runs_on) == ({"tests/e2e/test_train.py"}, None, ("4gpu", "h200"))


@pytest.mark.parametrize("text, said", [
    ("tests/x.py\n== stage=a ==\n", "run.txt:1: text before the first"),
    ("== stage=a colour=red ==\n", "run.txt:1: 'colour=red' is not a header key"),
    ("== stage=a shard=2/2 ==\n", "run.txt:1: shard='2/2': expected I/N"),
    ("== stage=a shard=0/2 ==\n== stage=a shard=0/2 ==\n", "run.txt:2: shard 0 of a is given twice"),
    ("== stage=a shard=0/2 ==\n== stage=a shard=1/3 ==\n", "run.txt:2: shard=1/3 says 3 partitions"),
    ("== stage=a shard=0/2 ==\n== stage=a ==\n", "run.txt:2: a has blocks with and without shard="),
    ("== stage=a runs_on=x ==\n== stage=a runs_on=y ==\n", "run.txt:2: runs_on=y differs"),
    ("== stage=a stage=b ==\n", "run.txt:1: stage= is given twice"),
    ("== stage=a/b ==\n", "run.txt:1: stage='a/b' is not a stage name"),
    ("== stage=a ==\nx.py\n== stag=b ==\n", "run.txt:3: expected '== stage=<stage>"),
    ("== stage= ==\n", "run.txt:1: stage='' is not a stage name"),
    ("== stage=a junit=missing.xml ==\n", "run.txt:1: junit=missing.xml: cannot read it"),
])
def test_a_bad_record_names_its_file_and_line(text: str, said: str) -> None:
    with pytest.raises(UsageError) as info:
        lanes(text)
    assert said in str(info.value)


def test_junit_blocks_take_the_files_of_their_testcases(tmp_path: Path) -> None:
    (tmp_path / "r.xml").write_text(
        '<testsuites><testsuite name="s">'
        '<testcase classname="tests.e2e.test_train.TestTrain" name="t1"/>'
        '<testcase classname="x" name="t2" file="./tests/fast/test_utils_fast.py"/>'
        "</testsuite></testsuites>")
    known = {"tests/e2e/test_train.py", "tests/fast/test_utils_fast.py"}
    got = lanes("== stage=s junit=r.xml ==\n", known, tmp_path)
    assert got[("s", "")].files == known
    with pytest.raises(UsageError, match=r"run\.txt:2: a block with junit= holds no listing text"):
        lanes("== stage=s junit=r.xml ==\ntests/a.py\n", known, tmp_path)
    (tmp_path / "u.xml").write_text('<testsuite><testcase classname="other.Mod" name="t"/></testsuite>')
    with pytest.raises(UsageError, match=r"1 testcase\(s\) match no test file: other.Mod"):
        lanes("== stage=s junit=u.xml ==\n", known, tmp_path)
    (tmp_path / "bad.xml").write_text("<testsuite><testcase")
    with pytest.raises(UsageError, match=r"junit=bad\.xml: not well-formed XML"):
        lanes("== stage=s junit=bad.xml ==\n", known, tmp_path)
    (tmp_path / "dtd.xml").write_text('<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>')
    with pytest.raises(UsageError, match="DTD or entity"):
        lanes("== stage=s junit=dtd.xml ==\n", known, tmp_path)


def test_the_same_run_has_no_difference(nightly: Plan) -> None:
    doc = compare(nightly, lanes(GOOD), run_id="7")
    assert doc["same"] and doc["event"] == "schedule" and doc["run_id"] == "7"
    assert [lane["differences"] for lane in doc["lanes"]] == [[], []]
    # one block without shard= is one job: one shard, compared
    assert doc["notes"] == [] and doc["lanes"][1]["shards_observed"] == 1
    repeated = GOOD + "== stage=stage-c-4-gpu-h200 runs_on=h200,4gpu ==\n"
    assert compare(nightly, lanes(repeated))["notes"] == [
        "shard counts not compared (the record has no shard=I/N): stage-c-4-gpu-h200"]


def test_files_hardware_and_parallelism_differences_are_each_said(nightly: Plan) -> None:
    """#38 item 4: the labels and the partition count the old CI used, against the plan's."""
    record = """\
== stage=stage-a-cpu shard=0/4 runs_on=ubuntu-22.04 ==
tests/fast/test_utils_fast.py
tests/fast/test_gone.py
== stage=stage-c-4-gpu-mi350 runs_on=mi350 ==
tests/e2e/test_train.py
"""
    doc = compare(nightly, lanes(record))
    by = {lane["stage"]: lane for lane in doc["lanes"]}
    cpu = by["stage-a-cpu"]
    assert cpu["differences"] == ["files", "runs-on", "shards"]
    assert cpu["only_observed"] == [{"file": "tests/fast/test_gone.py", "why": "not in the plan"}]
    assert (cpu["runs_on_observed"], cpu["runs_on_planned"]) == (["ubuntu-22.04"], ["ubuntu-latest"])
    assert (cpu["shards_observed"], cpu["shards_planned"]) == (4, 2)
    # the nightly plan has no job for the MI350 stage (its workflow has no cron): the file's fate
    mi350 = by["stage-c-4-gpu-mi350"]
    assert mi350["differences"] == ["only-observed"]
    assert mi350["only_observed"][0]["file"] == "tests/e2e/test_train.py"
    # the H200 stage the plan runs and the record does not have
    h200 = by["stage-c-4-gpu-h200"]
    assert h200["differences"] == ["only-planned"]
    assert h200["only_planned"] == [{"file": "tests/e2e/test_train.py", "why": "not run by the existing CI"}]
    assert not doc["same"]
    text = render_markdown(doc)
    assert "## testfleet shadow: 3 lane(s) differ" in text
    assert "| `stage-a-cpu` | 2 | 1 | ubuntu-22.04 / ubuntu-latest | 4 / 2 | files, runs-on, shards |" in text
    assert "- `tests/fast/test_gone.py`: only the existing CI ran it -- not in the plan" in text


def test_a_file_only_the_old_ci_ran_carries_the_plans_fate(miles: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "-C", str(miles), "plan", "--event", "pull_request",
                           "--format", "json", "-o", str(miles / "pr.json"))
    assert code == 0, err
    pr = load_plan(miles / "pr.json")
    doc = compare(pr, lanes("== stage=stage-c-4-gpu-h200 ==\ntests/e2e/test_train.py\n"),
                  stages=("stage-c-4-gpu-h200",))
    (lane,) = doc["lanes"]
    assert lane["only_observed"][0]["why"].startswith("not-selected-by-labels")
    assert "compared only the stages this workflow runs: stage-c-4-gpu-h200" in doc["notes"]
    with pytest.raises(UsageError, match="outside --stage: stage-a-cpu"):
        compare(pr, lanes(GOOD), stages=("stage-c-4-gpu-h200",))
    assert "tests/e2e/test_train.py" in plan_files(pr)


def test_the_verdict_counts_the_newest_clean_runs(nightly: Plan, tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    history = load_history(path)
    clean, dirty = compare(nightly, lanes(GOOD)), compare(nightly, lanes("== stage=x ==\na.py\n"))
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i, doc in enumerate((clean, dirty, clean, clean)):
        history = add_run(history, {**doc, "run_id": str(i)}, now)
    assert verdict(history, 2)["safe"] and not verdict(history, 3)["safe"]
    assert verdict(history, 3)["message"] == ("not yet: 2 of 3 consecutive recorded run(s) "
                                              "without a difference (4 recorded)")
    # a re-run of run 1 (now clean) replaces it rather than counting twice
    history = add_run(history, {**clean, "run_id": "1"}, now)
    assert [r["run_id"] for r in history["runs"]] == ["0", "2", "3", "1"]
    assert verdict(history, 4)["clean_streak"] == 4
    path.write_text(json.dumps({**history, "runs": [{**history["runs"][0], "same": "yes"}]}))
    with pytest.raises(UsageError, match=r"h.json: runs.0.same"):
        load_history(path)
    path.write_text("{}")
    with pytest.raises(UsageError, match="not a shadow history"):
        load_history(path)


def test_the_command_never_fails_the_run_but_refuses_bad_input(
        miles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "records" / "a.txt"
    record.parent.mkdir()
    record.write_text("== stage=stage-a-cpu shard=0/4 ==\ntests/fast/test_utils_fast.py\n")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    args = ["-C", str(miles), "shadow", "compare", "--plan", "nightly.json", "--observed",
            str(record.parent)]
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "stage-a-cpu: shards" in out
    assert "::notice title=testfleet shadow::2 stage(s) differ" in out + err
    assert "## testfleet shadow: 2 lane(s) differ" in summary.read_text()
    assert "run 4242" in summary.read_text()
    code, out, err = run_cli(capsys, *args, "--fail-on-difference")
    assert code == 1
    code, out, err = run_cli(capsys, *args, "--record")
    assert code == 2 and "--record adds this run to the shadow history: add --history FILE" in err
    record.write_text("== stage=stage-a-cpu shard=9 ==\n")
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and f"{record}:1: shard='9'" in err
    code, out, err = run_cli(capsys, "-C", str(miles), "shadow", "compare", "--plan", "nope.json",
                             "--observed", str(record))
    assert code == 2 and "nope.json does not exist" in err
    code, out, err = run_cli(capsys, "-C", str(miles), "shadow", "compare", "--plan", "nightly.json",
                             "--observed", str(tmp_path / "none.txt"))
    assert code == 2 and "none.txt: no such file" in err
