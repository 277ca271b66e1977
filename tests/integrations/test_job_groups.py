"""Lanes with the same CI settings share one job of the generated workflow (#39), and only
when no stage is promised less: its runners, its fail-fast, the stages that wait for it.
Through the real commands: init writes the workflow, plan --fits-workflow reads it back and
keys the matrix of a shared job by its first lane, and refuses a plan the job was not
written for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support import run_cli
from testfleet.config import validate_config
from testfleet.integrations.github_groups import JobGroup, job_groups

GPU = {"backend": "cuda", "container": {"image": "img:1"}, "secrets": ["HF_TOKEN"],
       "setup": ["pip install -e ."], "fail_fast": False}


def _groups(stages: dict[str, Any]) -> list[JobGroup]:
    config = validate_config({"stages": stages})
    return job_groups(config, sorted(stages))


def test_the_same_settings_share_a_job_and_what_differs_does_not() -> None:
    groups = _groups({
        "a-h200": {**GPU, "runs_on": ["h200"]},
        "b-h100": {**GPU, "runs_on": ["h100"]},
        "c-env": {**GPU, "runs_on": ["h100"], "env": {"X": "1"}},     # other settings
        "d-ff": {**GPU, "runs_on": ["h100"], "fail_fast": None, "shards": 3},  # fails fast
        "e-one": {**GPU, "runs_on": ["b200"], "fail_fast": None},     # one job: nothing to cancel
        "f-one": {**GPU, "runs_on": ["b300"], "fail_fast": None, "shards": 1},
        "g-par": {**GPU, "runs_on": ["h100"], "max_parallel": 2},     # max-parallel is per job
    })
    assert [(g.key, g.lanes, g.one_job_each) for g in groups] == [
        ("a-h200", ("a-h200", "b-h100"), False), ("c-env", ("c-env",), False),
        ("d-ff", ("d-ff",), False), ("e-one", ("e-one", "f-one"), True),
        ("g-par", ("g-par",), False)]


def test_only_lanes_the_same_stages_wait_for_share_a_job() -> None:
    """A stage that waits for one lane of a job waits for all of them: lanes share a job
    only when the same stages wait for them."""
    groups = _groups({
        "a": {**GPU, "runs_on": ["h200"]}, "b": {**GPU, "runs_on": ["h100"]},
        "c": {**GPU, "runs_on": ["h100"]},
        "d": {**GPU, "runs_on": ["h100"], "needs": ["a", "b"]},
        "e": {**GPU, "runs_on": ["b200"], "needs": ["a", "b"]},
        "f": {**GPU, "runs_on": ["b200"], "needs": ["c"]}})
    assert [g.lanes for g in groups] == [("a", "b"), ("c",), ("d", "e"), ("f",)]


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    stages = {
        "cpu": '{backend = "cpu", runs_on = ["ubuntu-latest"]}',
        "gpu-h200": '{backend = "cuda", runs_on = ["self-hosted", "h200"], fail_fast = false, '
                    'container = {image = "img:1"}, setup = ["nvidia-smi"], shards = 2}',
        "gpu-h100": '{backend = "cuda", runs_on = ["self-hosted", "h100"], fail_fast = false, '
                    'container = {image = "img:1"}, setup = ["nvidia-smi"]}',
        "nightly-a": '{backend = "cuda", runs_on = ["self-hosted", "b200"]}',
        "nightly-b": '{backend = "cuda", runs_on = ["self-hosted", "b200"]}',
    }
    (root / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n\n[tool.testfleet]\nroots = ["tests"]\n\n'
        '[tool.testfleet.labels]\nmodel = "model tests"\n\n'
        + "".join(f"[tool.testfleet.stages.{name}]\n" + "\n".join(
            f"{k.strip()} = {v.strip()}" for k, v in _pairs(body)) + "\n\n"
            for name, body in stages.items()))
    for i, (name, backend) in enumerate([("cpu", "cpu"), ("gpu-h200", "cuda"), ("gpu-h200", "cuda"),
                                          ("gpu-h100", "cuda"), ("nightly-a", "cuda"),
                                          ("nightly-b", "cuda")]):
        (root / "tests" / f"test_{i}.py").write_text(
            f"from testfleet import register_{backend}_ci\n\n"
            f'register_{backend}_ci(est_time=60, suite="{name}"{_LABEL[backend]})\n\n\n'
            'def test_x():\n    pass\n')
    return root


_LABEL = {"cpu": "", "cuda": ', labels=["model"]'}


def _pairs(body: str) -> list[tuple[str, str]]:
    """``{k = v, ...}`` of the table above as (key, value), values kept as TOML text."""
    out, depth, cur = [], 0, ""
    for ch in body.strip()[1:-1] + ",":
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            key, _, value = cur.partition("=")
            out.append((key, value))
            cur = ""
        else:
            cur += ch
    return out


def _outputs(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` as GitHub reads it: ``name=value`` or a heredoc block."""
    lines, out = iter(path.read_text().splitlines()), {}
    for line in lines:
        if "<<" in line and "=" not in line.split("<<")[0]:
            name, delim = line.split("<<", 1)
            out[name] = "\n".join(iter(lambda: next(lines), delim))
        else:
            name, _, value = line.partition("=")
            out[name] = value
    return out


def test_init_groups_and_plan_reads_the_groups_back(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--github")
    assert code == 0, out + err
    workflow = root / ".github/workflows/testfleet.yml"
    from .gha_calls import expanded_file

    jobs = expanded_file(workflow)["jobs"]
    # the GPU lanes share a job, runners from a map written here; the nightly lanes (one
    # job each) share one that cannot fail fast across them; the CPU stage is alone
    gpu = jobs["gpu-h100"]
    assert gpu["env"]["TESTFLEET_LANES"] == "gpu-h100 gpu-h200"
    table = re.fullmatch(r"\$\{\{ fromJSON\('(.*)'\)\[matrix\.lane\] \}\}", gpu["runs-on"])
    assert table and json.loads(table.group(1)) == {"gpu-h100": ["self-hosted", "h100"],
                                                    "gpu-h200": ["self-hosted", "h200"]}
    nightly = jobs["nightly-a"]
    assert nightly["strategy"]["fail-fast"] is False
    assert nightly["runs-on"] == ["self-hosted", "b200"]
    assert "gpu-h200" not in jobs and "nightly-b" not in jobs
    assert {"plan", "cpu", "gpu-h100", "nightly-a", "history", "reconcile", "testfleet",
            "rescued", "cpu-rescue", "gpu-h100-rescue", "nightly-a-rescue"} == set(jobs)
    assert jobs["gpu-h100-rescue"]["runs-on"] == gpu["runs-on"]

    github_output = tmp_path / "out.txt"
    monkeypatch.setenv("GITHUB_OUTPUT", str(github_output))
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--cadence",
                             "nightly", "--format", "github", "--fits-workflow",
                             ".github/workflows/testfleet.yml")
    assert code == 0, out + err
    stages = json.loads(_outputs(github_output)["stages"])
    assert set(stages) == {"cpu", "gpu-h100", "nightly-a"}
    entries = stages["gpu-h100"]["matrix"]["include"]
    assert sorted(e["lane"] for e in entries) == ["gpu-h100", "gpu-h200", "gpu-h200"]
    # each entry's runners, as the job's runs-on map gives them, are the plan's
    assert all(json.loads(table.group(1))[e["lane"]] == e["runs_on"] for e in entries)
    assert [e["lane"] for e in stages["nightly-a"]["matrix"]["include"]] == ["nightly-a", "nightly-b"]

    # a lane written into a job for one-job stages that now has two: the plan is refused
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        '[tool.testfleet.stages.nightly-b]\n', '[tool.testfleet.stages.nightly-b]\nshards = 2\n'))
    (root / "tests" / "test_9.py").write_text(
        'from testfleet import register_cuda_ci\n\n'
        'register_cuda_ci(est_time=60, suite="nightly-b", labels=["model"])\n')
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--cadence",
                             "nightly", "--format", "json", "--fits-workflow",
                             ".github/workflows/testfleet.yml")
    assert code == 2, out + err
    assert "stage nightly-b has 2 jobs but shares a job written for stages that run one job " \
           "each; regenerate it with 'testfleet init --github --force'" in err


def test_a_workflow_that_cannot_be_read_is_named(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--fits-workflow (plan) and --workflow (reconcile's rescue matrix): a missing file or
    one that is not YAML is exit 2 naming the option and the file, never a traceback."""
    root = _project(tmp_path)
    (root / "broken.yml").write_text("jobs: [unclosed\n")
    for name, said in (("missing.yml", "cannot read"), ("broken.yml", "not YAML")):
        for fmt in ("json", "github"):
            code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push",
                                     "--format", fmt, "--fits-workflow", name)
            assert code == 2 and f"--fits-workflow: cannot read {root / name}" in err, err
            assert said in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--format",
                             "json", "-o", "plan.json")
    assert code == 0, err
    (root / "statuses").mkdir()
    for name, said in (("missing.yml", "cannot read"), ("broken.yml", "not YAML")):
        code, _, err = run_cli(capsys, "-C", str(root), "reconcile", "--plan", "plan.json",
                                 "--rescue-out", "rescue.json", "--workflow", name, "statuses")
        assert code == 2 and f"--workflow: cannot read {root / name}" in err, err
        assert said in err and "Traceback" not in err


def test_a_stages_workflow_that_cannot_be_read_is_named(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The stage jobs are in the stages workflow the generated one calls: when that file is
    missing or not YAML, --fits-workflow and --workflow are exit 2 naming it, and the plan
    is never taken as fitting a workflow whose stage jobs were not read."""
    root = _project(tmp_path)
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--github")
    assert code == 0, out + err
    workflows = root / ".github" / "workflows"
    stages = workflows / "testfleet-stages.yml"
    text = stages.read_text()
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--format",
                           "json", "-o", "plan.json")
    assert code == 0, err
    (root / "statuses").mkdir()
    for broken, said in ((None, "No such file"), ("jobs: [unclosed\n", "not YAML")):
        if broken is None:
            stages.unlink()
        else:
            stages.write_text(broken)
        code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--format",
                               "json", "--fits-workflow", ".github/workflows/testfleet.yml")
        assert code == 2 and "--fits-workflow: cannot read" in err and said in err, err
        assert f"the workflow it calls, {stages}" in err and "Traceback" not in err
        code, _, err = run_cli(capsys, "-C", str(root), "reconcile", "--plan", "plan.json",
                               "--rescue-out", "rescue.json", "--workflow",
                               ".github/workflows/testfleet.yml", "statuses")
        assert code == 2 and "--workflow: cannot read" in err and said in err, err
        assert f"the workflow it calls, {stages}" in err
    stages.write_text(text)
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--format",
                           "json", "--fits-workflow", ".github/workflows/testfleet.yml")
    assert code == 0, err
