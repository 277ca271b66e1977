"""`testfleet plan --format buildkite`: valid against Buildkite's pipeline schema
(as shipped in check-jsonschema), one step per job, and faithful to the plan."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import run_cli
from testfleet.config import load_project
from testfleet.integrations.buildkite import (
    ANNOTATION_CONTEXT,
    HISTORY_KEY,
    MAX_NOTICE_CHARS,
    MAX_WARNING_CHARS,
    NOTICE_KEY,
    RECONCILE_KEY,
    TREE_ERRORS_KEY,
    agents_for,
    emit,
    escape,
    pipeline,
    step_key,
)
from testfleet.planning import make_plan
from testfleet.planning.model import Job, Plan, PlannedTest, StageSummary, seal
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

from .conftest import MI300X, run_tool, tool

TRIGGERS = {
    "push": Trigger(event="push"),
    "pr-megatron": Trigger(event="pull_request", labels=("run-ci-megatron",)),
    "nightly": Trigger(event="schedule", schedule="0 15 * * 0-5"),
    "weekly": Trigger(event="schedule", schedule="0 15 * * 6"),
}


def plan_for(project_dir: Path, trigger: Trigger) -> Plan:
    project = load_project(project_dir)
    return make_plan(project, collect(project), PlanRequest(trigger=trigger))


@functools.cache
def _validator() -> Any:
    """Buildkite's pipeline schema exactly as check-jsonschema ships it (in-process:
    one check-jsonschema start-up costs a second; the CLI test runs the real tool)."""
    from importlib.resources import files

    import jsonschema

    schema = json.loads(files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("buildkite.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def validate(tmp_path: Path, text: str, *, cli: bool = False) -> None:
    errors = [e.message for e in _validator().iter_errors(json.loads(text))]
    assert not errors, errors
    if cli:
        path = tmp_path / "pipeline.json"
        path.write_text(text)
        result = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.buildkite",
                          str(path))
        assert result.returncode == 0, result.stdout + result.stderr


def job(job_id: str, stage: str, *, wave: int = 0, needs: tuple[str, ...] = (),
        backend: str = "cpu", runs_on: tuple[str, ...] = ("ubuntu-latest",),
        container: str | None = None, shard: int = 1, shards: int = 1) -> Job:
    return Job(job_id, stage, backend, runs_on, container, "pytest", shard, shards, wave, needs,
               10.0, (PlannedTest(f"tests/{job_id}.py", 10.0),))


def stage(name: str, wave: int, status: str = "scheduled", *, reason: str = "",
          hole: bool = False, backend: str = "cpu") -> StageSummary:
    return StageSummary(name, backend, status, reason, wave, {}, hole=hole)


@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
def test_example_pipelines_validate_and_mirror_the_plan(trigger: str, example_project: Path,
                                                        tmp_path: Path) -> None:
    plan = plan_for(example_project, TRIGGERS[trigger])
    text = emit(plan)
    validate(tmp_path, text)
    data = json.loads(text)
    # the example's MI300X stage is dormant: a coverage hole under every trigger, so
    # the first step posts it as an annotation and the pipeline env names it
    assert [s.name for s in plan.holes] == [MI300X]
    assert data["env"]["TESTFLEET_COVERAGE_HOLES"] == MI300X
    notice, *steps = data["steps"]
    assert notice["key"] == NOTICE_KEY and "coverage hole" in notice["label"]
    assert MI300X in notice["env"]["TESTFLEET_ANNOTATION"]
    steps, tail = steps[:len(plan.jobs)], steps[len(plan.jobs):]
    assert len(steps) == len(plan.jobs) > 0
    # after every job, failed ones too: history (not for a PR) and the reconciliation
    assert tail[0] == {"wait": None, "continue_on_failure": True}
    if plan.policy["event"] == "pull_request":  # a PR's build never writes history
        assert [t["key"] for t in tail[1:]] == [RECONCILE_KEY] and "history export" not in text
    else:
        assert [t["key"] for t in tail[1:]] == [HISTORY_KEY, RECONCILE_KEY]
        assert all(any("history export" in c for c in step["commands"]) for step in steps)
    keys = [s["key"] for s in steps]
    assert len(set(keys)) == len(keys)
    by_key = {s["key"]: s for s in steps}
    for j in plan.jobs:
        step = by_key[j.id]  # example ids are already valid keys
        assert step["env"]["TESTFLEET_JOB_ID"] == j.id
        assert step["label"] == f"{j.stage} {j.shard}/{j.shards}"
        assert any("testfleet run --plan plan.json --job" in c for c in step["commands"])
        assert any(plan.digest in c for c in step["commands"])
        assert step["artifact_paths"] == ["testfleet-junit/*.xml", "testfleet-status/*.json"]
        needed = {k.id for k in plan.jobs if k.stage in j.needs}
        assert set(step.get("depends_on", [])) == needed
        assert step.get("allow_dependency_failure", False) == (
            bool(needed) and plan.policy["bypass_fastfail"])
        if j.container:
            (plugin,) = step["plugins"]
            (config,) = plugin.values()
            assert config["image"] == j.container
            assert config.get("gpus") == ("all" if j.backend == "cuda" else None)
        if j.backend == "cuda":
            assert step["agents"] == {lbl: "true" for lbl in j.runs_on if lbl != "self-hosted"}
        else:
            assert "agents" not in step  # ubuntu-latest: the default queue
    assert emit(plan) == text


def test_cli_writes_pipeline_and_plan_in_one_run(example_project: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = tmp_path / "plan.json"
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--schedule",
                             "0 15 * * 0-5", "--format", "buildkite", "--plan-file", str(plan_file))
    assert code == 0, err
    validate(tmp_path, out, cli=True)
    digest = json.loads(plan_file.read_text())["digest"]
    assert json.loads(out)["env"]["TESTFLEET_PLAN_DIGEST"] == digest
    notice, *job_steps = [s for s in json.loads(out)["steps"] if s.get("key") != HISTORY_KEY
                          and "wait" not in s]
    assert notice["key"] == NOTICE_KEY  # the dormant MI300X stage is a hole
    assert job_steps and all(any(digest in c for c in s["commands"]) for s in job_steps)


def test_a_needed_stage_without_jobs_still_orders_later_waves(tmp_path: Path) -> None:
    """gpu needs 'unit' which has no jobs under this trigger: gpu waits for every job of
    the waves before 'unit' would have finished (here: wave 0's 'lint')."""
    plan = seal(Plan(
        policy={"bypass_fastfail": False},
        jobs=(job("lint-1", "lint"), job("gpu-1", "gpu", wave=1, needs=("unit",)),
              job("soak-1", "soak", wave=2, needs=("gpu",))),
        stages=(stage("lint", 0), stage("unit", 1, "empty"), stage("gpu", 1), stage("soak", 2)),
        skipped=(), warnings=()))
    steps = {s["key"]: s for s in pipeline(plan)["steps"] if "key" in s}
    assert steps["gpu-1"]["depends_on"] == ["lint-1"]
    assert steps["soak-1"]["depends_on"] == ["gpu-1"]
    assert "depends_on" not in steps["lint-1"]
    assert "allow_dependency_failure" not in steps["gpu-1"]
    validate(tmp_path, emit(plan))


def test_hostile_strings_cannot_interpolate_at_upload(tmp_path: Path) -> None:
    plan = seal(Plan(
        policy={"bypass_fastfail": True},
        jobs=(job("a.b/c d", "st.age", runs_on=("self-hosted", "queue=gpu-$BUILDKITE_AGENT_TOKEN"),
                  container="img:${SECRET}", backend="rocm"),
              job("a_b_c_d", "st.age", shard=2, shards=2)),
        stages=(stage("st.age", 0),), skipped=(), warnings=()))
    text = emit(plan)
    validate(tmp_path, text)
    data = json.loads(text)
    keys = [s["key"] for s in data["steps"] if "key" in s]
    assert keys == ["a_b_c_d", "a_b_c_d-2", HISTORY_KEY, RECONCILE_KEY]
    first = data["steps"][0]
    assert first["agents"] == {"queue": "gpu-$$BUILDKITE_AGENT_TOKEN"}
    (plugin,) = first["plugins"]
    assert plugin["docker#v5.12.0"]["image"] == "img:$${SECRET}"
    assert plugin["docker#v5.12.0"]["devices"] == ["/dev/kfd", "/dev/dri"]
    assert first["env"]["TESTFLEET_JOB_ID"] == "a.b/c d"
    # every '$' that reaches Buildkite is doubled: nothing expands at upload time, but
    # the pipeline's slug that names the history step's concurrency group
    for s in _strings(data):
        assert "$" not in s.replace("$$", "").replace("${BUILDKITE_PIPELINE_SLUG}/", "")


# -- coverage holes and warnings on the build page ------------------------------------

NOTICE_COMMANDS = [
    "printf '%s\\n' \"$$TESTFLEET_NOTICE\"",
    "printf '%s\\n' \"$$TESTFLEET_ANNOTATION\" | buildkite-agent annotate --style warning "
    "--context testfleet-holes",
]


def hole_plan(reason: str = "runners down", warnings: tuple[str, ...] = (),
              jobs: tuple[Job, ...] | None = None) -> Plan:
    hole_warning = f"coverage hole: stage gpu (rocm) has no enabled registrations: {reason}"
    return seal(Plan(
        policy={"bypass_fastfail": False},
        jobs=(job("unit-1", "unit"),) if jobs is None else jobs,
        stages=(stage("unit", 0), stage("gpu", 1, "dormant", reason=reason, hole=True,
                                        backend="rocm")),
        skipped=(), warnings=(*warnings, hole_warning)))


def uploaded(value: Any) -> Any:
    """What Buildkite's upload-time interpolation leaves: with every '$' doubled
    (asserted wherever this is used), interpolation is exactly '$$' -> '$'."""
    if isinstance(value, str):
        assert "$" not in value.replace("$$", ""), value
        return value.replace("$$", "$")
    if isinstance(value, list):
        return [uploaded(v) for v in value]
    if isinstance(value, dict):
        return {uploaded(k): uploaded(v) for k, v in value.items()}
    return value


def test_a_hole_is_annotated_on_the_build_page(tmp_path: Path) -> None:
    plan = hole_plan(warnings=("no history database yet; all estimates are est_time literals",))
    text = emit(plan)
    validate(tmp_path, text, cli=True)
    data = json.loads(text)
    assert data["env"]["TESTFLEET_COVERAGE_HOLES"] == "gpu"
    notice, unit, _wait, _history, _reconcile = data["steps"]
    assert notice["key"] == NOTICE_KEY
    assert notice["label"] == ":warning: testfleet: 1 coverage hole(s), 1 warning(s)"
    assert notice["commands"] == NOTICE_COMMANDS  # constants: the text is only in env
    assert ANNOTATION_CONTEXT == "testfleet-holes"
    assert notice["soft_fail"] is True and "agents" not in notice  # default queue
    assert "depends_on" not in notice and "depends_on" not in unit  # blocks nothing
    assert notice["env"]["TESTFLEET_NOTICE"].splitlines() == [
        "coverage hole: gpu (rocm): dormant: runners down",
        "warning: no history database yet; all estimates are est_time literals",
    ]
    body = notice["env"]["TESTFLEET_ANNOTATION"]
    assert body.startswith("**testfleet: 1 coverage hole(s)**")
    assert "- gpu (rocm): dormant: runners down" in body
    assert r"est\_time literals" in body  # Markdown-escaped
    assert unit["key"] == "unit-1"


def test_no_holes_no_warnings_no_notice_step() -> None:
    plan = seal(Plan(policy={}, jobs=(job("unit-1", "unit"),), stages=(stage("unit", 0),),
                     skipped=(), warnings=()))
    data = pipeline(plan)
    assert [s.get("key") for s in data["steps"]] == ["unit-1", None, HISTORY_KEY, RECONCILE_KEY]
    assert data["env"]["TESTFLEET_COVERAGE_HOLES"] == ""


def test_a_plan_with_no_jobs_still_shows_its_hole(tmp_path: Path) -> None:
    plan = hole_plan(jobs=(), warnings=("no jobs: nothing selected",))
    data = json.loads(emit(plan))
    validate(tmp_path, emit(plan))
    (notice,) = data["steps"]  # no wait step needed: the notice is a real step
    assert notice["key"] == NOTICE_KEY and "gpu" in notice["env"]["TESTFLEET_ANNOTATION"]


def test_a_job_cannot_take_the_notice_key() -> None:
    plan = hole_plan(jobs=(job(NOTICE_KEY, "unit"),))
    keys = [s["key"] for s in pipeline(plan)["steps"] if "key" in s]
    assert keys == [NOTICE_KEY, f"{NOTICE_KEY}-2", HISTORY_KEY, RECONCILE_KEY]
    plan = hole_plan(jobs=(job(HISTORY_KEY, "unit"), job(TREE_ERRORS_KEY, "unit", shard=2)))
    keys = [s["key"] for s in pipeline(plan)["steps"] if "key" in s]
    assert keys == [NOTICE_KEY, f"{HISTORY_KEY}-2", f"{TREE_ERRORS_KEY}-2", HISTORY_KEY,
                    RECONCILE_KEY]


def test_history_and_tree_errors_steps(tmp_path: Path) -> None:
    """A default-branch build records and merges; a PR's pipeline neither; rejected
    registrations add a last step that fails the build (every job before it ran)."""
    from testfleet.planning.model import Skipped

    base = {"jobs": (job("unit-1", "unit"),), "stages": (stage("unit", 0),), "warnings": ()}
    invalid = (Skipped("tests/test_bad.py", "cpu", "nope", "invalid", "unknown suite"),)
    for event, skipped, tail in [
        ("push", (), [HISTORY_KEY, RECONCILE_KEY]),
        ("schedule", invalid, [HISTORY_KEY, RECONCILE_KEY, TREE_ERRORS_KEY]),
        ("pull_request", invalid, [RECONCILE_KEY, TREE_ERRORS_KEY]),
        ("pull_request", (), [RECONCILE_KEY]),
    ]:
        plan = seal(Plan(policy={"event": event}, skipped=skipped, **base))
        text = emit(plan)
        validate(tmp_path, text)
        steps = json.loads(text)["steps"]
        assert [s.get("key") for s in steps] == ["unit-1", *([None] if tail else []), *tail]
        run = steps[0]["commands"]
        if event == "pull_request":
            assert run[-1].startswith("testfleet run") and "history" not in "\n".join(run)
        else:  # recorded whatever the outcome, and the tests' outcome is the step's
            assert any(c.startswith("testfleet run") and c.endswith("|| status=$$?") for c in run)
            assert "history export" in "\n".join(run) and run[-1] == 'exit "$$status"'
        if TREE_ERRORS_KEY in tail:
            last = steps[-1]
            assert last["commands"][-1] == "exit 1" and "1 registration(s)" in last["commands"][0]


HOSTILE = ("label 'x'\n- forged: `touch pwned-backtick` $(touch pwned-subst) "
           "${{ secrets.TOKEN }} ${HOME} $BUILDKITE_AGENT_ACCESS_TOKEN <img src=x> [a](http://evil)"
           "\n--style error")


def test_hostile_warning_text_is_never_executed(tmp_path: Path) -> None:
    """The notice step run by bash exactly as an agent would after upload: hostile
    text (newlines, '$', backticks, '${{ }}', a leading '--') reaches the annotation
    as data, runs nothing, changes no option and is Markdown-escaped."""
    plan = hole_plan(reason=HOSTILE, warnings=(HOSTILE, "--context other"))
    text = emit(plan)
    validate(tmp_path, text)
    notice = uploaded(json.loads(text)["steps"][0])
    assert notice["commands"] == [c.replace("$$", "$") for c in NOTICE_COMMANDS]
    for command in notice["commands"]:
        assert "pwned" not in command and "secrets" not in command

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "buildkite-agent"
    agent.write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" > "$OUT/args"\ncat > "$OUT/body"\n')
    agent.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "OUT": str(tmp_path), "BUILDKITE_AGENT_ACCESS_TOKEN": "not-for-you",
           **notice["env"]}
    result = subprocess.run(["bash", "-e", "-c", "\n".join(notice["commands"])], cwd=work,
                            env=env, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert not list(work.iterdir()) and not list(tmp_path.glob("pwned*"))
    assert (tmp_path / "args").read_text().splitlines() == [
        "annotate", "--style", "warning", "--context", "testfleet-holes"]
    body = (tmp_path / "body").read_text()
    assert "not-for-you" not in body + result.stdout and str(tmp_path / "home") not in body
    # printed to the log literally, one line per item (a newline cannot forge a line)
    log = result.stdout.splitlines()
    assert log[0].startswith("coverage hole: gpu (rocm): dormant: label 'x' - forged: `touch")
    assert "${{ secrets.TOKEN }} ${HOME} $BUILDKITE_AGENT_ACCESS_TOKEN" in log[0]
    assert len(log) == 3 and log[2] == "warning: --context other"
    # in the annotation, Markdown-escaped: no HTML, no link, no code span
    for special in ("<", ">", "`", "[", "]", "$"):
        assert re.search(r"(?<!\\)" + re.escape(special), body) is None, special
    assert r"\`touch pwned-backtick\`" in body and r"\$\{\{ secrets.TOKEN \}\}" in body


def test_long_warnings_are_capped_not_dropped(tmp_path: Path) -> None:
    many = tuple(f"warning {i}: " + "x" * 5_000 for i in range(100))
    notice = pipeline(hole_plan(warnings=many))["steps"][0]
    for name in ("TESTFLEET_NOTICE", "TESTFLEET_ANNOTATION"):
        value = notice["env"][name]
        assert len(value) <= MAX_NOTICE_CHARS + 100  # far below one env string's 128 KiB
        assert value.splitlines()[-1].startswith("… and ")  # says how many were left out
        assert all(len(line) <= MAX_WARNING_CHARS + 10 for line in value.splitlines())
    assert "coverage hole" in notice["env"]["TESTFLEET_NOTICE"].splitlines()[0]
    validate(tmp_path, emit(hole_plan(warnings=many)))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value.keys(), *(x for v in value.values() for x in _strings(v))]
    if isinstance(value, list):
        return [x for v in value for x in _strings(v)]
    return []


def test_empty_plan_is_a_valid_pipeline_that_asks_for_no_agent(tmp_path: Path) -> None:
    plan = seal(Plan(policy={}, jobs=(), stages=(stage("unit", 0, "empty"),), skipped=(),
                     warnings=()))
    data = pipeline(plan)
    assert data["steps"] == [{"wait": None}]
    validate(tmp_path, emit(plan))


@pytest.mark.parametrize(("runs_on", "agents"), [
    (["ubuntu-latest"], {}),
    (["ubuntu-22.04", "self-hosted", "linux", "x64"], {}),
    (["self-hosted", "nvidia", "h200"], {"nvidia": "true", "h200": "true"}),
    (["queue=gpu", "gpu=h100 "], {"queue": "gpu", "gpu": "h100"}),
    (["=bad"], {}),
])
def test_agents_from_runs_on(runs_on: list[str], agents: dict[str, str]) -> None:
    assert agents_for(runs_on) == agents


def test_step_keys_are_valid_and_unique() -> None:
    taken: set[str] = set()
    assert step_key("stage-a-cpu-1", taken) == "stage-a-cpu-1"
    assert step_key("stage-a-cpu-1", taken) == "stage-a-cpu-1-2"
    uuid = "123e4567-e89b-12d3-a456-426614174000"
    assert step_key(uuid, taken).startswith("job-")
    assert len(step_key("x" * 500, taken)) <= 100
    assert escape("a$b$$c") == "a$$b$$$$c"


def test_the_schema_check_is_not_vacuous() -> None:
    bad = {"steps": [{"key": "has space", "command": "true", "agents": 3}]}
    assert list(_validator().iter_errors(bad))


def test_bootstrap_pipeline_validates_and_leaves_variables_to_run_time(tmp_path: Path) -> None:
    import yaml

    from testfleet.integrations.buildkite import bootstrap

    text = bootstrap(install="pip install 'testfleet==0.1.0'")
    data = yaml.safe_load(text)
    validate(tmp_path, json.dumps(data), cli=False)
    (step,) = data["steps"]
    command = step["command"]
    assert command.splitlines()[:2] == ["set -euo pipefail", "pip install 'testfleet==0.1.0'"]
    assert "$" not in command.replace("$$", "")
    assert '--labels "$$labels"' in command and "--format buildkite --plan-file plan.json" in command


def test_generated_shell_passes_shellcheck(example_project: Path, tmp_path: Path) -> None:
    """What Buildkite runs (after its upload-time '$$' -> '$') is clean shell."""
    import yaml

    from testfleet.integrations.buildkite import bootstrap

    plan = plan_for(example_project, TRIGGERS["nightly"])
    notice, first_job = pipeline(plan)["steps"][:2]
    assert notice["key"] == NOTICE_KEY
    history, reconcile = pipeline(plan)["steps"][-2:]
    assert history["key"] == HISTORY_KEY and reconcile["key"] == RECONCILE_KEY
    scripts = {
        "bootstrap.sh": yaml.safe_load(bootstrap())["steps"][0]["command"],
        "notice.sh": "\n".join(notice["commands"]),
        "step.sh": "\n".join(first_job["commands"]),
        "history.sh": "\n".join(history["commands"]),
        "reconcile.sh": "\n".join(reconcile["commands"]),
    }
    for name, body in scripts.items():
        path = tmp_path / name
        path.write_text("#!/bin/bash\nset -e\n" + body.replace("$$", "$") + "\n")
        result = run_tool(tool("shellcheck"), "--severity=info", str(path))
        assert result.returncode == 0, result.stdout


def test_a_job_checks_its_plan_files_own_digest_exactly(example_project: Path,
                                                        tmp_path: Path) -> None:
    """Each job compared the digest with a substring grep of the plan file (#27): a file
    merely mentioning it, or whose digest only starts with it, passed."""
    plan = plan_for(example_project, Trigger(event="push"))
    digest = plan.digest or plan.to_json()["digest"]
    steps = json.loads(emit(plan))["steps"]
    check = next(c for s in steps for c in s.get("commands", []) if c.startswith("head -c"))
    for body, ok in ((f'{{"digest":"{digest}","jobs":[]}}', True),
                     (f'{{"digest":"{digest}0","jobs":[]}}', False),
                     (f'{{"digest":"sha256:0","note":"{digest}"}}', False),
                     (f'{{"digest":"{digest}"', False), ("", False)):
        (tmp_path / "plan.json").write_text(body)
        res = subprocess.run(["sh", "-c", check],
                             cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert (res.returncode == 0) is ok, (body, res.stderr)


def _machine_job() -> Job:
    from dataclasses import replace

    from testfleet.planning.jobci import Checkout, JobCI

    ci = JobCI(setup=("echo first > first.txt\nexit 0", "echo second > second.txt"),
               secrets=("HF_TOKEN",), python="3", uv=True,
               checkouts=(Checkout("NVIDIA/Megatron-LM", "Megatron-LM", "core_v0.12.0"),
                          Checkout("sgl-project/sglang", "sglang", "v0.4.9", "GH_PAT")))
    return replace(job("gpu-1-of-1", "gpu", backend="cuda", runs_on=("gpu",)), ci=ci)


def test_each_setup_item_runs_even_after_an_exit_0(tmp_path: Path) -> None:
    """miles' GPU-wait loop ends with `exit 0`: on Buildkite it ends only its own item, and
    the next setup item (pip install -r requirements.txt in miles) still runs."""
    from testfleet.integrations.buildkite import setup_commands

    commands = setup_commands(_machine_job())
    script = "\n".join(commands).replace("$$", "$")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "first.txt").exists() and (tmp_path / "second.txt").exists()
    # the same items run inline (the way they were emitted before) stop at the exit 0
    inline = subprocess.run(["bash", "-e", "-c", "\n".join(_machine_job().ci.setup)],
                            cwd=tmp_path / ".." , capture_output=True, text=True, timeout=30,
                            check=False)
    assert inline.returncode == 0 and not (tmp_path.parent / "second.txt").exists()


def test_checkouts_python_and_uv_become_commands(tmp_path: Path) -> None:
    from testfleet.integrations.buildkite import machine_commands

    plan = seal(Plan(policy={}, jobs=(_machine_job(),), stages=(stage("gpu", 0, backend="cuda"),),
                     skipped=(), warnings=()))
    step = next(s for s in pipeline(plan)["steps"] if s.get("key") == "gpu-1-of-1")
    commands = machine_commands(_machine_job())
    assert commands[0] == ("rm -rf Megatron-LM && git clone --quiet "
                           "https://github.com/NVIDIA/Megatron-LM.git Megatron-LM")
    assert commands[1] == "git -C Megatron-LM checkout --quiet core_v0.12.0"
    assert "GIT_CONFIG_VALUE_0" in commands[2] and '"$GH_PAT"' in commands[2]
    assert "GH_PAT" not in commands[2].split("git clone")[1]  # never in git's arguments
    assert step["secrets"] == ["HF_TOKEN", "GH_PAT"]
    # python is checked (Buildkite has no setup-python): this interpreter's major version
    check = next(c for c in commands if c.startswith("python3 -c"))
    assert subprocess.run(["bash", "-c", check.replace("$$", "$")], capture_output=True,
                          timeout=30, check=False).returncode == 0
    wrong = check.replace(" 3 ||", " 2.7 ||")
    failed = subprocess.run(["bash", "-c", wrong.replace("$$", "$")], capture_output=True,
                            text=True, timeout=30, check=False)
    assert failed.returncode == 2 and "does not have the stage's python 3" in failed.stderr
    assert commands[-1].startswith("command -v uv")
    body = "\n".join(step["commands"]).replace("$$", "$")
    path = tmp_path / "step.sh"
    path.write_text("#!/bin/bash\nset -e\n" + body + "\n")
    result = run_tool(tool("shellcheck"), "--severity=info", str(path))
    assert result.returncode == 0, result.stdout
