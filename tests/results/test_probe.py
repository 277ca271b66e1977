"""Dormant-stage probes: planned only for their cadence, on the stage's runners, never
blocking, recorded, and "ready to restore" after K clean probes in a row."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import as_json, cli

CONFIG = """\
roots = ["tests"]

[stages.s-py]
backend = "cpu"
command = "python"

[stages.s-amd]
backend = "cpu"
command = "python"
runs_on = ["self-hosted", "mi300x"]
disabled = "MI300X runners fail at start-up, see #2230"
probe = {probe}
"""
HEAD = "from testfleet import register_cpu_ci\nimport os, sys\n"
FILES = {
    "test_ok.py": HEAD + "register_cpu_ci(1, 's-py')\n",
    "test_p1.py": HEAD + "register_cpu_ci(1, 's-amd')\n"
                  "if os.environ.get('PROBE_FAIL'):\n    print('HIP error: no device')\n    sys.exit(1)\n",
    "test_p2.py": HEAD + "register_cpu_ci(50, 's-amd')\n",
}


def project(tmp_path: Path, probe: str) -> Path:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "testfleet.toml").write_text(CONFIG.format(probe=probe))
    for name, body in FILES.items():
        (root / "tests" / name).write_text(body)
    return root


def plan(root: Path, *args: str) -> dict:
    return as_json(cli(root, "plan", "--format", "json", *args))


def test_probe_job_only_on_its_cadence_on_the_stage_runners(tmp_path: Path) -> None:
    root = project(tmp_path, '{ files = ["tests/test_p1.py"], cadence = "nightly", restore_after = 2 }')
    nightly = plan(root, "--cadence", "nightly")
    probes = [j for j in nightly["jobs"] if j.get("probe")]
    assert [(j["id"], j["stage"], j["runs_on"], [t["file"] for t in j["tests"]], j["needs"])
            for j in probes] == [("s-amd-probe", "s-amd", ["self-hosted", "mi300x"],
                                  ["tests/test_p1.py"], [])]
    assert probes[0]["tests"][0]["quarantined"].startswith("probe of dormant stage s-amd")
    assert {s["name"]: s["status"] for s in nightly["stages"]}["s-amd"] == "dormant"
    assert {(s["file"], s["reason"]) for s in nightly["skipped"]} >= {
        ("tests/test_p1.py", "stage-dormant"), ("tests/test_p2.py", "stage-dormant")}
    for cadence in ("regular", "weekly"):
        assert not [j for j in plan(root, "--cadence", cadence)["jobs"] if j.get("probe")]
    (tmp_path / "plan.json").write_text(json.dumps(nightly))

    # a failing probe is recorded and never fails its job
    failing = cli(root, "run", "--plan", str(tmp_path / "plan.json"), "--job", "s-amd-probe",
                  "--display", "plain", env={"PROBE_FAIL": "1", "GITHUB_RUN_ID": "1"})
    assert failing.returncode == 0, failing.stdout + failing.stderr
    report = as_json(cli(root, "report", "--format", "json"))["results"]
    assert report["probes"] == [{"stage": "s-amd", "reason": "MI300X runners fail at start-up, "
                                 "see #2230", "restore_after": 2, "clean_streak": 0, "ready": False,
                                 "files": [{"file": "tests/test_p1.py", "strip": "F"}]}]
    for run_id in ("2", "3"):
        ok = cli(root, "run", "--plan", str(tmp_path / "plan.json"), "--job", "s-amd-probe",
                 env={"GITHUB_RUN_ID": run_id})
        assert ok.returncode == 0
    ready = as_json(cli(root, "report", "--format", "json"))["results"]["probes"][0]
    assert ready["ready"] and ready["clean_streak"] == 2 and ready["files"][0]["strip"] == "FPP"
    md = cli(root, "report", "--format", "markdown").stdout
    assert "Probes of dormant stage `s-amd`: READY TO RESTORE: 2 clean probe\\(s\\) in a row" in md


def test_default_probe_picks_the_shortest_files(tmp_path: Path) -> None:
    root = project(tmp_path, "{ shortest = 1 }")
    jobs = plan(root, "--cadence", "nightly")["jobs"]
    assert [[t["file"] for t in j["tests"]] for j in jobs if j.get("probe")] == [["tests/test_p1.py"]]


def test_probe_config_errors(tmp_path: Path) -> None:
    root = project(tmp_path, '{ cadence = "nitely" }')
    bad = cli(root, "check")
    assert bad.returncode == 1 and "stages.s-amd.probe.cadence" in bad.stdout + bad.stderr
    assert "did you mean 'nightly'" in bad.stdout + bad.stderr
    text = (root / "testfleet.toml").read_text().replace('disabled = "MI300X runners fail at '
                                                          'start-up, see #2230"\n', "")
    (root / "testfleet.toml").write_text(text.replace('"nitely"', '"nightly"'))
    active = cli(root, "check")
    assert active.returncode == 1 and "applies to a dormant stage (one with 'disabled') or to a stage with 'breaker'" in active.stdout + active.stderr


def test_probe_of_an_unregistered_file_is_a_check_error(tmp_path: Path) -> None:
    root = project(tmp_path, '{ files = ["tests/test_p1.py", "tests/test_p3.py", "tests/test_ok.py"] }')
    r = cli(root, "check", "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "probe-unregistered"]
    by_key = {f["key"]: f for f in found}
    assert sorted(by_key) == ["stages.s-amd.probe.files[1]", "stages.s-amd.probe.files[2]"]
    assert {(f["file"], f["line"], f["severity"]) for f in found} == {("testfleet.toml", 12, "error")}
    assert ("'tests/test_p3.py' is not registered in s-amd (did you mean 'tests/test_p"
            in by_key["stages.s-amd.probe.files[1]"]["message"])
    # registered in another stage is not registered in this one
    assert "'tests/test_ok.py' is not registered in s-amd" in (
        by_key["stages.s-amd.probe.files[2]"]["message"])
    good = project(tmp_path / "good", '{ files = ["tests/test_p2.py"] }')
    assert cli(good, "check").returncode == 0
