"""The issue's simulation, run for real (``testfleet run`` on every night):

- nights 1-3: the MI300X runner class fails at start-up (a real ROCm failure text, with a
  different host, PID, temporary path and frame addresses in every file): each night is
  ONE infrastructure incident, not eight failures; the step summary leads with it and
  prints the dormancy line, ``incident dormant`` writes that line and nothing else;
- nights 4-6: the runners are back; the stage is dormant and its probe passes: after
  ``restore_after`` clean probes ``results`` says the stage can be restored;
- night 4 also has two real test failures on the healthy CPU stage: two test incidents.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from tests.incidents import real_texts as rt
from tests.results.conftest import as_json, cli

CONFIG = """\
roots = ["tests"]

[labels]
amd = "AMD ROCm tests"

[stages.stage-a-cpu]
backend = "cpu"
command = "python"

[stages.stage-c-4-gpu-mi300x]
backend = "rocm"
command = "python"
runs_on = ["self-hosted", "amd", "mi300x", "4gpu"]

[results]
github_repository = "octo/fleet"
"""
AMD_HEAD = ("from testfleet import register_rocm_ci\n"
            "register_rocm_ci(est_time={est}, suite='stage-c-4-gpu-mi300x', labels=['amd'])\n"
            "import os, random, sys\n")
# What a test process prints when its runner has no usable GPU: the ROCm lines from the
# issue threads, behind the noise a real runner adds (host, PID, temporary directory).
START_UP_FAILURE = """
if os.environ.get("RUNNER_BROKEN"):
    rng = random.Random()
    print(f"[mi300x-runner-{rng.randint(1, 40):02d}] pid {rng.randint(1000, 99999)} "
          f"workdir /tmp/tmp{rng.getrandbits(32):08x}", file=sys.stderr)
    print(LINES.replace("0x42", hex(rng.getrandbits(12))).replace(
        "0x7f9eff1e7212", hex(rng.getrandbits(47))), file=sys.stderr)
    sys.exit(1)
"""
CPU_HEAD = "from testfleet import register_cpu_ci\nregister_cpu_ci(1, 'stage-a-cpu')\nimport os, sys\n"
BUGS = {
    # night 4: two different real failures on the healthy stage
    "test_tokenizer.py": "if os.environ.get('NIGHT') == '4':\n"
                         "    raise KeyError('max_new_tokens')\n",
    "test_sampling.py": "if os.environ.get('NIGHT') == '4':\n"
                        "    assert 0.58 >= 0.62, 'gsm8k accuracy 0.58 below 0.62'\n",
    "test_config.py": "",
    "test_utils.py": "",
}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    (root / "tests" / "amd").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG)
    lines = "\n".join(rt.HIP_NO_DEVICE_LINES)
    for i in range(8):
        (root / "tests" / "amd" / f"test_mi300x_{i}.py").write_text(
            AMD_HEAD.format(est=10 + i) + f"LINES = {lines!r}\n" + START_UP_FAILURE
            + "print('ok')\n")
    for name, body in BUGS.items():
        (root / "tests" / name).write_text(CPU_HEAD + body)
    return root


def _night(root: Path, night: int, stage: str, *, broken: bool = False,
           summary: Path | None = None) -> None:
    env = {"GITHUB_RUN_ID": str(1000 + night), "GITHUB_SHA": f"{night:040x}", "NIGHT": str(night),
           **({"RUNNER_BROKEN": "1"} if broken else {}),
           **({"GITHUB_STEP_SUMMARY": str(summary)} if summary else {})}
    proc = cli(root, "run", "--stage", stage, "--cadence", "nightly", "--continue-on-error",
               "--display", "plain", env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback (most recent call last)" not in proc.stderr


def _probe(root: Path, tmp_path: Path, night: int) -> str:
    plan = as_json(cli(root, "plan", "--cadence", "nightly", "--format", "json"))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    summary = tmp_path / f"probe-{night}.md"
    env = {"GITHUB_RUN_ID": str(1000 + night), "GITHUB_SHA": f"{night:040x}",
           "GITHUB_STEP_SUMMARY": str(summary)}
    proc = cli(root, "run", "--plan", str(tmp_path / "plan.json"), "--job",
               "stage-c-4-gpu-mi300x-probe", "--display", "plain", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return summary.read_text()


def _incidents(root: Path) -> dict[str, list[dict]]:
    doc = as_json(cli(root, "incident", "list", "--runs", "20", "--format", "json"))
    out: dict[str, list[dict]] = {}
    for i in doc["incidents"]:
        out.setdefault(i["ci_run_id"], []).append(i)
    return out


def test_three_broken_nights_a_recovery_and_a_night_of_real_failures(tmp_path: Path) -> None:
    root = _project(tmp_path)
    summary = tmp_path / "summary.md"
    for night in (1, 2, 3):
        _night(root, night, "stage-a-cpu")
        _night(root, night, "stage-c-4-gpu-mi300x", broken=True,
               summary=summary if night == 1 else None)

    by_run = _incidents(root)
    for night in (1, 2, 3):
        (incident,) = by_run[str(1000 + night)]  # one incident, not eight failures
        assert incident["category"] == "infrastructure" and incident["kind"] == "infra"
        assert incident["label"] == "hipErrorNoDevice" and len(incident["files"]) == 8
        assert incident["lanes"] == [{"stage": "stage-c-4-gpu-mi300x", "backend": "rocm",
                                      "files": 8, "ran": 8}]
        assert incident["dormancy"]["table"] == "[stages.stage-c-4-gpu-mi300x]"
    assert len({tuple(by_run[str(1000 + n)][0]["signature"] for n in (1, 2, 3))}) == 1

    # the night's step summary leads with the incident and the line that ends it
    text = summary.read_text()
    lead = text.split("Stage **")[0]
    assert ("**stage-c-4-gpu-mi300x**: 8 failed files, 1 infrastructure incident: "
            "`hipErrorNoDevice`") in lead
    assert 'disabled = "infrastructure incident ' in lead and text.count("<details>") == 1
    results = cli(root, "results")
    assert results.returncode == 0 and "infrastructure" in results.stdout
    flaky = as_json(cli(root, "flaky", "--format", "json"))
    (group,) = flaky["incidents"]
    assert group["state"] == "broken" and len(group["files"]) == 8

    # a pasted reason on three files: check names the incident instead
    for i in range(3):
        path = root / "tests" / "amd" / f"test_mi300x_{i}.py"
        path.write_text(path.read_text().replace(
            "labels=['amd'])", "labels=['amd'], disabled='Disable due to failure')"))
    check = cli(root, "check", "--format", "json")
    pasted = [f for f in json.loads(check.stdout)["findings"]
              if f["code"] == "disabled-reason-repeated"]
    assert len(pasted) == 3 and all("infrastructure incident" in f["message"]
                                    and "(hipErrorNoDevice)" in f["message"] for f in pasted)
    for i in range(3):
        path = root / "tests" / "amd" / f"test_mi300x_{i}.py"
        path.write_text(path.read_text().replace(", disabled='Disable due to failure'", ""))

    # one command makes the stage dormant: exactly one line of the config changes
    before = (root / "testfleet.toml").read_text()
    inode = (root / "testfleet.toml").stat().st_ino
    dormant = cli(root, "incident", "dormant", "stage-c-4-gpu-mi300x", "--run", "1003",
                  "--ref", "#2230")
    assert dormant.returncode == 0, dormant.stderr
    after = (root / "testfleet.toml").read_text()
    assert (root / "testfleet.toml").stat().st_ino == inode  # edited in place, not replaced
    changed = [d for d in difflib.ndiff(before.splitlines(), after.splitlines())
               if d.startswith(("+", "-"))]
    assert len(changed) == 1 and changed[0].startswith('+ disabled = "infrastructure incident ')
    assert "see #2230, https://github.com/octo/fleet/actions/runs/1003" in changed[0]
    again = cli(root, "incident", "dormant", "stage-c-4-gpu-mi300x", "--run", "1003")
    assert again.returncode == 2 and "dormant already" in again.stderr
    (root / "testfleet.toml").write_text(
        after + "\n[stages.stage-c-4-gpu-mi300x.probe]\nrestore_after = 3\n")

    # nights 4-6: the runners are back; night 4 also breaks two CPU tests for real
    for night in (4, 5, 6):
        _night(root, night, "stage-a-cpu")
        assert "Probe of dormant stage stage-c-4-gpu-mi300x: healthy this run" in _probe(
            root, tmp_path, night)
        probes = as_json(cli(root, "results", "--format", "json"))["probes"]
        assert [(p["stage"], p["clean_streak"], p["ready"]) for p in probes] == [
            ("stage-c-4-gpu-mi300x", night - 3, night == 6)]
    announced = cli(root, "results")
    assert "the stage can be restored" in announced.stdout.replace("\n", " ")

    night4 = _incidents(root)["1004"]
    assert sorted((i["category"], i["label"], tuple(i["files"])) for i in night4) == [
        ("test", "AssertionError", ("tests/test_sampling.py",)),
        ("test", "KeyError", ("tests/test_tokenizer.py",))]
