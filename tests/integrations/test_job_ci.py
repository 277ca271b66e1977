"""Per-stage CI job settings (#11): validated in the config like every key, carried by
the plan's jobs (and back through its JSON), honoured by the Buildkite pipeline."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError, UsageError
from testfleet.integrations.buildkite import docker_plugin_options, pipeline
from testfleet.planning.jobci import (
    DEFAULT_JOB_TIMEOUT_MINUTES,
    JOB_OVERHEAD_MINUTES,
    MAX_JOB_TIMEOUT_MINUTES,
    Container,
    JobCI,
    job_ci,
    job_timeout,
)
from testfleet.planning.model import Job, Plan, PlannedTest, load_plan, plan_bytes, seal
from testfleet.planning.policy import Trigger, resolve_policy

from .test_buildkite import validate
from .test_github_workflow import GPU_CI, ci_config


def stage_errors(**keys: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"gpu": {"backend": "cuda", **keys}}}, "pyproject.toml",
                        "tool.testfleet.")
    return [(f.key, f.message) for f in info.value.findings]


@pytest.mark.parametrize(("keys", "where", "says"), [
    ({"container": {"options": "--gpus all"}}, "stages.gpu.container.image", "Field required"),
    ({"container": {"image": "x", "volumez": []}}, "stages.gpu.container", "unknown key"),
    ({"container": "rocm/x:1 --privileged"}, "stages.gpu.container", "whitespace"),
    ({"container": {"image": "x", "options": "--env T=${{ secrets.T }}"}},
     "stages.gpu.container", "evaluate it as an expression"),
    ({"container": {"image": "x", "volumes": ["/a b:/c"]}}, "stages.gpu.container", "without spaces"),
    ({"setup": ["pip install .", "  "]}, "stages.gpu.setup", "empty"),
    ({"setup": ["echo ${{ github.event.pull_request.title }}"]}, "stages.gpu.setup", "expression"),
    ({"setup": "pip install ."}, "stages.gpu.setup", "list"),
    ({"secrets": ["HF-TOKEN"]}, "stages.gpu.secrets", "not a secret name"),
    ({"secrets": ["GITHUB_TOKEN"]}, "stages.gpu.secrets", "GITHUB_"),
    ({"secrets": ["A", "A"]}, "stages.gpu.secrets", "more than once"),
    ({"env": {"BAD NAME": "x"}}, "stages.gpu.env", "environment variable name"),
    ({"env": {"X": "a\x1bb"}}, "stages.gpu.env", "control character"),
    ({"fail_fast": "maybe"}, "stages.gpu.fail_fast", "boolean"),
    ({"max_parallel": 0}, "stages.gpu.max_parallel", "greater than or equal to 1"),
    ({"job_timeout_minutes": 5000}, "stages.gpu.job_timeout_minutes", "4320"),
    ({"job_timeout_factor": 0}, "stages.gpu.job_timeout_factor", "greater than 0"),
    ({"job_timeout_minutes": 60, "job_timeout_factor": 2}, "stages.gpu", "not both"),
])
def test_bad_ci_settings_name_the_key(keys: dict[str, Any], where: str, says: str) -> None:
    errors = stage_errors(**keys)
    assert any(key.startswith(f"tool.testfleet.{where}") and says in msg
               for key, msg in errors), errors


def test_all_bad_ci_settings_are_reported_at_once() -> None:
    errors = stage_errors(secrets=["1X"], max_parallel=0, setup=[""])
    assert {k for k, _ in errors} >= {"tool.testfleet.stages.gpu.secrets",
                                      "tool.testfleet.stages.gpu.max_parallel",
                                      "tool.testfleet.stages.gpu.setup"}


def test_a_stage_table_becomes_its_job_settings() -> None:
    ci = job_ci(ci_config().stages["gpu.h200"])
    assert ci.container == Container("nvcr.io/nvidia/pytorch:24.05-py3",
                                      GPU_CI["container"]["options"],
                                      tuple(GPU_CI["container"]["volumes"]))
    assert ci.setup == ("pip install -e .", "nvidia-smi")
    assert ci.secrets == ("HF_TOKEN", "WANDB_API_KEY")
    assert (ci.fail_fast, ci.max_parallel, ci.timeout_factor) == (False, 2, 2.0)
    plain = validate_config({"stages": {"s": {"backend": "cpu", "container": "rocm/x:1"}}})
    assert job_ci(plain.stages["s"]) == JobCI(container=Container("rocm/x:1"))
    assert plain.stages["s"].container_image == "rocm/x:1"
    # a variant (another runner class of the same stage) overrides fields of its stage's
    assert replace(ci, container=Container("rocm/y:2")).secrets == ci.secrets


@pytest.mark.parametrize(("ci", "estimate", "minutes"), [
    (JobCI(), 10_000.0, DEFAULT_JOB_TIMEOUT_MINUTES),          # today's default
    (JobCI(timeout_minutes=45), 10_000.0, 45),                  # fixed minutes win
    (JobCI(timeout_factor=2.0), 1800.0, 60 + JOB_OVERHEAD_MINUTES),
    (JobCI(timeout_factor=2.0), 1.0, 1 + JOB_OVERHEAD_MINUTES),  # a tiny shard still gets start-up time
    (JobCI(timeout_factor=100.0), 1e7, MAX_JOB_TIMEOUT_MINUTES),  # GitHub's cap
])
def test_job_timeout(ci: JobCI, estimate: float, minutes: int) -> None:
    assert job_timeout(ci, estimate) == minutes


def _plan(ci: JobCI, *, estimate: float = 600.0, stage: str = "gpu") -> Plan:
    job = Job(f"{stage}-1-of-1", stage, "cuda", ("self-hosted", "gpu"),
              ci.container.image if ci.container else None, "pytest", 1, 1, 0, (), estimate,
              (PlannedTest("tests/test_gpu.py", estimate),), env=ci.env, ci=ci,
              timeout_minutes=job_timeout(ci, estimate))
    # a plan file holds the whole policy it was made under (it is read back strictly)
    policy, _ = resolve_policy(ci_config(), Trigger())
    assert policy.to_json()["bypass_fastfail"] is False
    return seal(Plan(policy=policy.to_json(), jobs=(job,), stages=(), skipped=(), warnings=()))


def test_the_plan_file_carries_the_settings_and_reads_them_back(tmp_path: Path) -> None:
    ci = job_ci(ci_config().stages["gpu.h200"])
    plan = _plan(ci)
    path = tmp_path / "plan.json"
    path.write_bytes(plan_bytes(plan))
    (job,) = load_plan(path).jobs
    assert job.ci == ci and job.timeout_minutes == 20 + JOB_OVERHEAD_MINUTES  # 10 min x 2
    data = json.loads(path.read_text())["jobs"][0]
    assert data["ci"]["container"]["volumes"] == GPU_CI["container"]["volumes"]
    assert data["timeout_minutes"] == job.timeout_minutes


def test_a_plan_from_before_ci_settings_still_loads(tmp_path: Path) -> None:
    from testfleet.planning.model import content_digest

    data = json.loads(plan_bytes(_plan(JobCI())))
    for j in data["jobs"]:
        del j["ci"], j["timeout_minutes"]
    data["digest"] = content_digest(data)
    (tmp_path / "old.json").write_text(json.dumps(data))
    (job,) = load_plan(tmp_path / "old.json").jobs
    assert job.ci == JobCI() and job.timeout_minutes == DEFAULT_JOB_TIMEOUT_MINUTES


@pytest.mark.parametrize(("field", "value", "says"), [
    ("ci", [], "jobs[0].ci: expected an object"),
    ("ci", {"secrets": "HF_TOKEN"}, "jobs[0].ci.secrets: expected a list, got 'HF_TOKEN'"),
    ("ci", {"fail_fast": 1}, "jobs[0].ci.fail_fast: expected true or false"),
    ("ci", {"max_parallel": True}, "jobs[0].ci.max_parallel"),
    ("ci", {"container": {"options": "x"}}, "jobs[0].ci.container: missing field 'image'"),
    ("ci", {"timeout_minutes": 0}, "jobs[0].ci.timeout_minutes"),
    ("timeout_minutes", 0, "jobs[0].timeout_minutes: expected an integer >= 1"),
])
def test_a_damaged_ci_object_is_named(field: str, value: Any, says: str, tmp_path: Path) -> None:
    from testfleet.planning.model import content_digest

    data = json.loads(plan_bytes(_plan(JobCI())))
    data["jobs"][0][field] = value
    data["digest"] = content_digest(data)
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=None) as info:
        load_plan(tmp_path / "p.json")
    assert says in str(info.value)


# -- Buildkite ---------------------------------------------------------------------


def test_buildkite_steps_honour_the_stage_settings(tmp_path: Path) -> None:
    ci = job_ci(ci_config(container={"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                     "options": "--ipc=host --shm-size 32g --privileged "
                                                "--device /dev/infiniband -e NCCL_DEBUG=INFO",
                                     "volumes": ["/models:/models:ro"]},
                          fail_fast=True).stages["gpu.h200"])
    data = pipeline(_plan(ci, estimate=1800.0))
    validate(tmp_path, json.dumps(data))
    step = _test_step(data)
    commands = step["commands"]
    run = next(i for i, c in enumerate(commands) if c.startswith("testfleet run --plan"))
    setup = commands.index("bash -eo pipefail -c 'pip install -e .'")
    # setup, each item in a shell of its own, then run
    assert commands[setup:setup + 2] == ["bash -eo pipefail -c 'pip install -e .'",
                                         "bash -eo pipefail -c nvidia-smi"]
    assert setup < run
    assert step["secrets"] == ["HF_TOKEN", "WANDB_API_KEY"]
    assert step["timeout_in_minutes"] == 60 + JOB_OVERHEAD_MINUTES
    assert step["cancel_on_build_failing"] is True
    assert step["concurrency"] == 2
    assert step["concurrency_group"] == "${BUILDKITE_BUILD_ID}/testfleet/gpu"
    assert step["env"]["HF_HOME"] == "/root/.cache/huggingface"
    (plugin,) = step["plugins"][0].values()
    assert plugin["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert plugin["gpus"] == "all" and plugin["ipc"] == "host" and plugin["shm-size"] == "32g"
    assert plugin["privileged"] is True and plugin["devices"] == ["/dev/infiniband"]
    assert plugin["environment"] == ["NCCL_DEBUG=INFO"]
    assert plugin["volumes"] == ["/models:/models:ro"]


def _test_step(data: dict[str, Any]) -> dict[str, Any]:
    """The plan's one test step (a default-branch build also waits and merges history)."""
    (step,) = [s for s in data["steps"] if isinstance(s, dict) and s.get("key") == "gpu-1-of-1"]
    return step


def test_buildkite_defaults_stay_as_before() -> None:
    step = _test_step(pipeline(_plan(JobCI())))
    assert step["timeout_in_minutes"] == DEFAULT_JOB_TIMEOUT_MINUTES
    for key in ("secrets", "cancel_on_build_failing", "concurrency", "concurrency_group",
                "plugins"):
        assert key not in step


def test_a_docker_option_the_plugin_lacks_is_an_error_not_dropped() -> None:
    ci = job_ci(ci_config().stages["gpu.h200"])  # GPU_CI has --ulimit memlock=-1
    with pytest.raises(UsageError) as info:
        pipeline(_plan(ci, stage="gpu.h200"))
    assert "stages.gpu.h200.container.options: --ulimit" in str(info.value)


@pytest.mark.parametrize(("options", "keys", "unsupported"), [
    ("--gpus all --ipc=host", {"gpus": "all", "ipc": "host"}, []),
    ("-v /a:/b --volume=/c:/d", {"volumes": ["/a:/b", "/c:/d"]}, []),
    ("--cap-add SYS_PTRACE --init", {"init": True}, ["--cap-add", "SYS_PTRACE"]),
    ("--shm-size", {}, ["--shm-size (no value)"]),
    ("'unbalanced", {}, ["\"'unbalanced\" (No closing quotation)"]),
])
def test_docker_options_map_to_plugin_keys(options: str, keys: dict[str, Any],
                                           unsupported: list[str]) -> None:
    assert docker_plugin_options(options) == (keys, unsupported)


def _set_stage_keys(project: Path, stage: str, text: str) -> None:
    cfg = project / "pyproject.toml"
    body = cfg.read_text(encoding="utf-8")
    header = f"[tool.testfleet.stages.{stage}]\n"
    assert header in body
    cfg.write_text(body.replace(header, header + text, 1), encoding="utf-8")


def _testfleet(project: Path, *argv: str) -> Any:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "250"
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(project), *argv],
                          capture_output=True, text=True, env=env, timeout=120)


def test_retries_travel_in_the_plan_and_run_honours_them(example_project: Path) -> None:
    """The issue lists max_attempts and retry_wait among the settings a plan job carries:
    `run --plan` retries exactly as planned, even if the checkout's config says otherwise
    by the time the job starts; the command line still wins."""
    _set_stage_keys(example_project, "stage-b-cpu", "max_attempts = 3\nretry_wait = 7.5\n")
    plan = _testfleet(example_project, "plan", "--event", "push", "--format", "json",
                      "--output", "plan.json")
    assert plan.returncode in (0, 1), plan.stderr
    doc = json.loads((example_project / "plan.json").read_text())
    job = next(j for j in doc["jobs"] if j["stage"] == "stage-b-cpu")
    assert (job["ci"]["max_attempts"], job["ci"]["retry_wait"]) == (3, 7.5)
    other = next(j for j in doc["jobs"] if j["stage"] == "stage-a-cpu")
    assert (other["ci"]["max_attempts"], other["ci"]["retry_wait"]) == (None, None)

    # the checkout's config changes after planning; the plan decides
    body = (example_project / "pyproject.toml").read_text()
    (example_project / "pyproject.toml").write_text(
        body.replace("max_attempts = 3\nretry_wait = 7.5\n", "max_attempts = 1\n"))
    dry = _testfleet(example_project, "run", "--plan", "plan.json", "--job", job["id"], "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "max 3 attempt(s)" in dry.stdout
    forced = _testfleet(example_project, "run", "--plan", "plan.json", "--job", job["id"],
                        "--dry-run", "--max-attempts", "2")
    assert "max 2 attempt(s)" in forced.stdout


def test_retry_settings_never_ask_for_the_workflow_to_be_regenerated() -> None:
    """They act inside `testfleet run`, not in the YAML: the workflow's guard fingerprint
    (what says "regenerate it") ignores them, as it ignores the per-job timeout."""
    base = JobCI(container=Container("img:1"), secrets=("HF_TOKEN",))
    assert replace(base, max_attempts=3, retry_wait=10.0).fingerprint() == base.fingerprint()
    assert replace(base, secrets=("HF_TOKEN", "WANDB_API_KEY")).fingerprint() != base.fingerprint()


@pytest.mark.parametrize(("key", "value", "message"), [
    ("python", "3.11; rm -rf /", "not a version for setup-python"),
    ("python", "${{ x }}", "not a version for setup-python"),
    ("checkouts", [{"repository": "not a repo", "path": "x"}], "is not 'owner/name'"),
    ("checkouts", [{"repository": "a/b", "path": "../escape"}], "relative directory"),
    ("checkouts", [{"repository": "a/b", "path": "/abs"}], "relative directory"),
    ("checkouts", [{"repository": "a/b", "path": "p", "ref": "--upload-pack=x"}], "not a branch"),
    ("checkouts", [{"repository": "a/b", "path": "p", "ref": "v1${{ x }}"}], "contains '${{'"),
    ("checkouts", [{"repository": "a/b", "path": "p", "token_secret": "GITHUB_TOKEN"}],
     "not a secret name"),
    ("checkouts", [{"repository": "a/b", "path": "p"}, {"repository": "c/d", "path": "p/"}],
     "same path"),
    ("checkouts", [{"repository": "a/b", "path": "p", "branch": "x"}], "branch"),
    ("uv", "yes", "uv"),
])
def test_new_ci_keys_refuse_bad_values_naming_the_key(key: str, value: Any, message: str) -> None:
    """INTERFACES.md section 2: python, uv and checkouts are validated with their key path."""
    from testfleet.config import validate_config
    from testfleet.errors import ConfigError

    for table in ({"stages": {"gpu": {"backend": "cuda", key: value}}},
                  {"stages": {"gpu": {"backend": "cuda", "variants": {"v": {key: value}}}}}):
        with pytest.raises(ConfigError) as info:
            validate_config(table)
        text = str(info.value)
        assert message in text and "stages.gpu." in text and key in text, text


def test_a_variant_overrides_the_stage_keys() -> None:
    from testfleet.config import validate_config
    from testfleet.planning.jobci import Checkout
    from testfleet.planning.lanes import all_lanes

    config = validate_config({"stages": {"gpu": {
        "backend": "cuda", "python": "3.11", "uv": True,
        "checkouts": [{"repository": "NVIDIA/Megatron-LM", "ref": "core_v0.12.0",
                       "path": "Megatron-LM"}],
        "variants": {"a": {}, "b": {"python": "", "uv": False, "checkouts": []}}}}})
    lanes = all_lanes(config)
    a, b = job_ci(lanes["gpu.a"].config), job_ci(lanes["gpu.b"].config)
    assert (a.python, a.uv, a.checkouts) == ("3.11", True, (
        Checkout("NVIDIA/Megatron-LM", "Megatron-LM", "core_v0.12.0"),))
    assert (b.python, b.uv, b.checkouts) == ("", False, ())
    # unset, they are not written to a plan (its digest is what it was before they existed)
    assert "python" not in job_ci(config.stages["gpu"].model_copy(
        update={"python": None, "uv": False, "checkouts": []})).to_json()
