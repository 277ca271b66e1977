"""A registration disabled on one runner class only: a project keyword
(``disabled_on_runners=["*mi35*"]``) declared through ``[markers]`` narrows ``disabled``
to the lanes whose runner labels match; it is read from the tree (cached like any
registration), runs elsewhere, and the disabled ledger says on which runners."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from support import run_cli
from testfleet.schemas.outputs import validate_output

CONFIG = '''
roots = ["tests"]
[markers."*"]
keywords = { disabled_on_runners = "list[str]" }
disabled_on_runners = "disabled_on_runners"

[backends.rocm]
markers = ["register_amd_ci"]
labels_required = false

[stages.stage-b-amd]
backend = "rocm"
[stages.stage-b-amd.variants.mi325]
runs_on = ["linux-mi325-gpu-1"]
[stages.stage-b-amd.variants.mi35x]
runs_on = ["linux-mi35x-gpu-1"]
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "testfleet.toml").write_text(CONFIG)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_oom.py").write_text(textwrap.dedent('''
        from ci import register_amd_ci
        register_amd_ci(est_time=60, suite="stage-b-amd", disabled="OOM on MI35x, see #2301",
                        disabled_on_runners=["*mi35*"])
        def test_x():
            pass
        '''))
    (tmp_path / "tests" / "test_ok.py").write_text(
        'from ci import register_amd_ci\nregister_amd_ci(est_time=60, suite="stage-b-amd")\n'
        "def test_y():\n    pass\n")
    return tmp_path


def test_it_runs_on_the_other_runner_class_and_the_ledger_names_the_runners(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):  # the second time from the registry cache
        code, out, err = run_cli(capsys, "-C", str(tree), "list", "--format", "json")
        assert code == 0, err
        listed = json.loads(out)
        validate_output("list", listed)  # disabled_on is part of the published schema
        rows = {r["file"]: r for r in listed["registrations"]}
        assert rows["tests/test_oom.py"]["disabled_on"] == ["*mi35*"]
        assert "disabled_on" not in rows["tests/test_ok.py"]
    code, out, err = run_cli(capsys, "-C", str(tree), "plan", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    validate_output("plan", plan)
    ran = {(t["file"], j["variant"]) for j in plan["jobs"] for t in j["tests"]}
    assert ("tests/test_oom.py", "mi325") in ran and ("tests/test_oom.py", "mi35x") not in ran
    skip = next(s for s in plan["skipped"] if s["file"] == "tests/test_oom.py")
    assert (skip["reason"], skip["variant"]) == ("disabled", "mi35x")
    code, out, err = run_cli(capsys, "-C", str(tree), "report", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("report", report)  # and so is the ledger's runners
    entry = next(e for e in report["ledger"] if e["file"] == "tests/test_oom.py")
    assert entry["runners"] == ["*mi35*"]
    assert entry["reason"] == "OOM on MI35x, see #2301 (only on runners matching *mi35*)"
    assert [r["number"] for r in entry["references"]] == [2301]


def test_patterns_without_a_reason_are_an_error(tree: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "tests" / "test_oom.py").write_text(
        'from ci import register_amd_ci\n'
        'register_amd_ci(est_time=60, suite="stage-b-amd", disabled_on_runners=["*mi35*"])\n'
        "def test_x():\n    pass\n")
    code, out, _err = run_cli(capsys, "-C", str(tree), "check")
    assert code == 1
    assert "tests/test_oom.py" in out and "2:71" in out and "give the reason too" in out


OWN = '''
roots = ["tests"]
[markers."*"]
keywords = { disabled_on_runners = "list[str]", disabled_on_runners_reason = "str" }
disabled_on_runners = "disabled_on_runners"
disabled_on_runners_reason = "disabled_on_runners_reason"
disabled_on_runners_default = "disabled on runner matching '{pattern}'"

[backends.rocm]
markers = ["register_amd_ci"]
labels_required = false

[stages.stage-b]
backend = "rocm"
[stages.stage-b.variants.mi325]
runs_on = ["linux-mi325-gpu-1"]
[stages.stage-b.variants.h100]
runs_on = ["h100-gpu-1"]
[stages.stage-b.variants.amd]
runs_on = ["amd-mi35x"]
'''


def test_a_per_runner_disable_of_its_own_needs_no_disabled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A signature that names the reason keyword and a default reason makes the runner
    patterns a disable of their own: without ``disabled`` the file runs on every lane but
    the matching ones, with the default reason there; ``disabled`` still switches the whole
    registration off, on every lane."""
    (tmp_path / "testfleet.toml").write_text(OWN)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_narrow.py").write_text(
        'register_amd_ci(est_time=60, suite="stage-b", disabled_on_runners=["amd-*", "h100-*"])\n'
        "def test_x():\n    pass\n")
    (tmp_path / "tests/test_told.py").write_text(
        'register_amd_ci(est_time=60, suite="stage-b", disabled_on_runners=["h100-*"],\n'
        '                disabled_on_runners_reason="NCCL hang on H100, see #41")\n'
        "def test_x():\n    pass\n")
    (tmp_path / "tests/test_off.py").write_text(
        'register_amd_ci(est_time=60, suite="stage-b", disabled="broken, see #40",\n'
        '                disabled_on_runners=["h100-*"])\n'
        "def test_x():\n    pass\n")
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "check")
    assert code == 0, out + err
    for _ in range(2):  # the second time from the registry cache
        code, out, err = run_cli(capsys, "-C", str(tmp_path), "list", "--format", "json")
        assert code == 0, err
        listed = json.loads(out)
        validate_output("list", listed)
        rows = {r["file"]: r for r in listed["registrations"]}
        assert (rows["tests/test_narrow.py"]["disabled"],
                rows["tests/test_narrow.py"]["disabled_on_reason"]) == (
            None, "disabled on runner matching '{pattern}'")
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "plan", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    validate_output("plan", plan)
    ran = {(t["file"], j["variant"]) for j in plan["jobs"] for t in j["tests"]}
    assert ran == {("tests/test_narrow.py", "mi325"),
                   ("tests/test_told.py", "mi325"), ("tests/test_told.py", "amd")}
    fates = {(s["file"], s["variant"]): s["detail"] for s in plan["skipped"]
             if s["reason"] == "disabled"}
    assert fates[("tests/test_narrow.py", "amd")] == \
        "disabled on runner matching 'amd-*' (runner label amd-mi35x)"
    assert fates[("tests/test_narrow.py", "h100")] == \
        "disabled on runner matching 'h100-*' (runner label h100-gpu-1)"
    assert fates[("tests/test_told.py", "h100")] == "NCCL hang on H100, see #41 (runner label h100-gpu-1)"
    assert ("tests/test_off.py", "mi325") in fates or any(
        s["file"] == "tests/test_off.py" and s["reason"] == "disabled" for s in plan["skipped"])
    assert not any(f == "tests/test_off.py" for f, _ in ran)
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "report", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("report", report)
    ledger = {e["file"]: e for e in report["ledger"]}
    assert ledger["tests/test_narrow.py"]["reason"] == (
        "disabled on runner matching 'amd-*, h100-*' (only on runners matching amd-*, h100-*)")
    assert ledger["tests/test_told.py"]["runners"] == ["h100-*"]
    assert (ledger["tests/test_off.py"]["reason"], ledger["tests/test_off.py"].get("runners", [])) == (
        "broken, see #40", [])


def test_the_reason_keyword_must_be_a_declared_str() -> None:
    from testfleet.config import MarkerSignature

    with pytest.raises(ValueError, match="disabled_on_runners_reason names 'why'"):
        MarkerSignature(keywords={"on": "list[str]"}, disabled_on_runners="on",
                        disabled_on_runners_reason="why")
    with pytest.raises(ValueError, match="need disabled_on_runners"):
        MarkerSignature(disabled_on_runners_default="x {pattern}")
