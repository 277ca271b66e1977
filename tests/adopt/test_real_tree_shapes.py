"""Adoption of the CI shapes that broke on SGLang's real tree (tests/fixtures/real_trees/
sglang-ci, reconstructed from modal-projects/sglang; CI has no copy of the tree itself):
a test file's catch-all stand-in for the marker in an except branch, suite="" files a
cron runs by path, a suite named through the job's matrix, a job that calls the runner
twice, a reusable PR gate that reads the live pull request, the same suite on two images
in two workflows, a nightly that also runs on pushes touching version.py, waits that apply
to pull requests only, and a manual-only --nightly job. After ``init --from-existing``
with no hand edit: 0 findings, the registry is the project's own collector's, and for every
suite run the workflows dispatch the plan selects the files the project's runner lists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from integrations.gha_calls import expanded_file
from support import run_cli
from testfleet.adopt.derive import derive
from testfleet.adopt.scan import scan
from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "sglang-ci"
COLLECT = ("import glob, json; from sglang.test.ci.ci_register import collect_tests; "
           "files = [f for f in glob.glob('test/registered/**/*.py', recursive=True) "
           "if not f.endswith(('/__init__.py', '/conftest.py'))]; "
           "print(json.dumps(sorted([t.filename, t.backend.name.lower(), str(t.effective_suite), "
           "t.nightly, t.disabled is not None] for t in collect_tests(files))))")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    dest = tmp_path / "sglang"
    shutil.copytree(FIXTURE, dest)
    return dest


def project_code(tree: Path, *args: str) -> str:
    """The tree's own code in a Python of its own, writing no bytecode (adoption never runs
    it; this test does, as the reference)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "python"), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def listed(tree: Path, hw: str, suite: str, nightly: bool) -> set[str]:
    out = project_code(tree, "test/run_suite.py", "--hw", hw, "--suite", suite, "--list-only",
                       *(["--nightly"] if nightly else []))
    return {line.strip() for line in out.splitlines() if line.strip()}


def test_the_marker_module_is_the_one_the_registrations_import(tree: Path) -> None:
    """test_mmmu_eval_utils.py defines ``register_cpu_ci(*args, **kwargs)`` in an except
    branch; the module the registrations import defines the real signature."""
    result = scan(tree)
    assert result.signatures_source == "python/sglang/test/ci/ci_register.py"
    assert result.signatures["register_cuda_ci"].suite_template == "{stage}-test-{runner_config}"
    adoption = derive(result)
    assert [f for f in adoption.findings if f.severity == "error"] == []
    assert adoption.data["markers"]["*"]["allow_empty_suite"] is True
    stand_in = [c for c in result.calls if c.file.endswith("test_mmmu_eval_utils.py")]
    assert [(c.backend, c.suite) for c in stand_in] == [("cpu", "base-a-test-cpu")]


def test_the_stages_run_when_and_how_their_jobs_do(tree: Path) -> None:
    data = derive(scan(tree)).data
    stages, policy = data["stages"], data["policy"]
    assert (policy["required_label"], policy["required_label_scope"], policy["drafts"]) == (
        "run-ci", "all", "skip")  # through the reusable pr-gate.yml every stage job needs
    # a workflow without push: the stage has no push event
    assert stages["base-a-test-cpu"]["events"] == ["pull_request", "schedule", "workflow_dispatch"]
    assert stages["base-a-test-cpu"]["cadences"] == ["regular"]  # its cron runs per-commit suites
    # the suite of a matrix entry, and both suites of a job that calls the runner twice, run
    assert stages["base-b-test-cpu"]["runs_on"] == ["xeon-gnr"]
    for name in ("nightly-amd-accuracy-8-gpu-grok", "nightly-perf-8-gpu-grok"):
        # its tests run inside the container amd_ci_exec.sh enters: dormant, with the reason,
        # and its triggers kept for when the container is carried and the line removed
        assert "its tests run through scripts/ci/amd/amd_ci_exec.sh" in stages[name]["disabled"]
        assert stages[name]["registrations"] == "nightly"
        assert stages[name]["run_on_changes"] == [{"event": "push",
                                                   "paths": ["python/sglang/version.py"]}]
    assert stages["nightly-amd-accuracy-8-gpu-grok"]["file_timeout"] == 3600
    assert stages["nightly-perf-8-gpu-grok"]["file_timeout"] == 5400  # its own call's flag
    # the wait for base-a exists on pull requests only
    assert stages["base-b-test-1-gpu-small"]["needs_on"] == {
        "pull_request": ["base-a-test-1-gpu-small", "base-a-test-cpu"]}
    assert "needs" not in stages["base-b-test-1-gpu-small"]
    # one suite, two images, two workflows: the PR one is the stage's, the cron one a variant
    amd = stages["stage-b-test-1-gpu-small-amd"]
    assert amd["runs_on"] == ["linux-mi325-1gpu-sglang"]  # inputs.runner_arch empty: 'mi325'
    assert amd["variants"]["pr-test-amd"]["run_on_changes"] == [
        {"event": "pull_request", "paths": ["python/**", "test/**"]}]
    assert amd["variants"]["rocm720"]["events"] == ["schedule", "workflow_dispatch"]
    assert amd["variants"]["rocm720"]["setup"] == [
        "bash scripts/ci/amd/amd_ci_start_container.sh --rocm-version rocm720"]
    # started by hand only, with --nightly
    assert (stages["full-1-npu-a3"]["events"], stages["full-1-npu-a3"]["registrations"]) == (
        ["workflow_dispatch"], "nightly")
    # the cron that runs suite="" files by path
    npu = stages["nightly-poc-single-node-tests"]
    assert npu["files"] == ["test/registered/ascend/perf/test_npu_glm_perf.py",
                            "test/registered/ascend/perf/test_npu_qwen_perf.py"]
    assert (npu["backend"], npu["registrations"], npu["runs_on"]) == (
        "npu", "nightly", ["linux-aarch64-a3-2"])


#: (hw, suite, --nightly, trigger, changed paths, lane) for every runner call the fixture's
#: workflows make, on a trigger that starts it
RUNS = [
    ("cpu", "base-a-test-cpu", False, Trigger(event="pull_request", labels=("run-ci",)), None, ""),
    ("cuda", "base-a-test-1-gpu-small", False, Trigger(event="pull_request", labels=("run-ci",)), None, ""),
    ("cuda", "base-b-test-1-gpu-small", False, Trigger(event="pull_request", labels=("run-ci",)), None, ""),
    ("cpu", "base-b-test-cpu", False, Trigger(event="pull_request", labels=("run-ci",)), None, ""),
    ("amd", "stage-b-test-1-gpu-small-amd", False, Trigger(event="pull_request", labels=("run-ci",)),
     ("python/sglang/srt/server.py",), "pr-test-amd"),
    ("amd", "stage-b-test-1-gpu-small-amd", False, Trigger(event="schedule", schedule="30 17 * * *"),
     None, "rocm720"),
    ("amd", "nightly-amd-accuracy-8-gpu-grok", True, Trigger(event="schedule", schedule="30 17 * * *"), None, ""),
    ("amd", "nightly-perf-8-gpu-grok", True, Trigger(event="schedule", schedule="30 17 * * *"), None, ""),
    ("amd", "nightly-perf-8-gpu-grok", True, Trigger(event="push"), ("python/sglang/version.py",), ""),
    ("cuda", "nightly-1-gpu", True, Trigger(event="schedule", schedule="0 14 */2 * *"), None, ""),
    ("npu", "full-1-npu-a3", True, Trigger(event="workflow_dispatch"), None, ""),
]


def test_adopted_tree_selects_what_the_workflows_dispatch(tree: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    # the stages whose tests run through a wrapper script (amd_ci_exec.sh, docker exec) are
    # dormant until their container is carried; with that done (the line removed) each
    # selects what the project's runner lists
    import tomlkit

    config = tree / "testfleet.toml"
    doc = tomlkit.parse(config.read_text())
    wrapped = sorted(n for n, t in doc["stages"].items()
                     if str(t.get("disabled", "")).startswith("adoption incomplete"))
    assert wrapped == ["base-b-test-cpu", "nightly-amd-accuracy-8-gpu-grok",
                       "nightly-perf-8-gpu-grok", "stage-b-test-1-gpu-small-amd"]
    for name in wrapped:
        del doc["stages"][name]["disabled"]
    config.write_text(tomlkit.dumps(doc))
    code, out, err = run_cli(capsys, "-C", str(tree), "check", "--format", "json")
    assert code == 0, out + err
    checked = json.loads(out)
    assert checked["errors"] == 0
    # the stage that runs suite="" files by path is theirs, not an unused stage or a hole;
    # what check does say is true of SGLang's CI: its pull_request workflow reaches the
    # 5090s through _pr-test-stage.yml, and a fork edits both files (#36 item 3)
    assert [(f["code"], f["file"], f["line"]) for f in checked["findings"]] == [
        ("fork-self-hosted", ".github/workflows/pr-test.yml", 25),
        ("fork-self-hosted", ".github/workflows/pr-test.yml", 44)]
    code, out, err = run_cli(capsys, "-C", str(tree), "list", "--format", "json")
    ours = sorted([r["file"], {"rocm": "amd"}.get(r["backend"], r["backend"]), r["suite"],
                   r["nightly"], r["disabled"] is not None] for r in json.loads(out)["registrations"])
    assert ours == json.loads(project_code(tree, "-c", COLLECT))
    project = load_project(tree)
    registry = collect(project, use_cache=False)
    for hw, suite, nightly, trigger, changed, lane in RUNS:
        changes = ChangeSet(paths=changed, source="test") if changed is not None else None
        plan = make_plan(project, registry, PlanRequest(trigger=trigger, changes=changes))
        planned = {t.file for j in plan.jobs if j.stage == suite and j.variant == lane
                   for t in j.tests}
        assert planned == listed(tree, hw, suite, nightly), (hw, suite, trigger)
    # no push of anything but version.py runs the nightlies; the cron of suite="" files runs
    # the one that is not disabled
    push = make_plan(project, registry, PlanRequest(trigger=Trigger(event="push")))
    assert {j.stage for j in push.jobs} == {"base-b-test-cpu"}
    cron = make_plan(project, registry, PlanRequest(trigger=Trigger(event="schedule",
                                                                    schedule="0 18 * * *")))
    assert [t.file for j in cron.jobs if j.stage == "nightly-poc-single-node-tests"
            for t in j.tests] == ["test/registered/ascend/perf/test_npu_qwen_perf.py"]
    # a pull request without run-ci, or a draft, runs nothing, as the gate has it
    for trigger in (Trigger(event="pull_request"),
                    Trigger(event="pull_request", labels=("run-ci",), draft=True)):
        assert make_plan(project, registry, PlanRequest(trigger=trigger)).jobs == ()


def test_the_report_describes_the_workflow_it_writes(tree: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--github",
                             "--dry-run", "--report", str(report))
    assert code == 0, out + err
    text = report.read_text()
    push = text.split("### push")[1].split("###")[0]
    assert "testfleet runs 0 file(s) in 0 job(s)" in push
    assert "The generated workflow has no `push:` trigger (`init --push-branch BRANCH` adds one)" in push
    assert "| `base-b-test-cpu` | yes | no | the generated workflow has no trigger for this event |" in push
    assert "### release" not in text  # no job of the existing CI takes a cadence by hand
    assert "1 of its 2 file(s) register disabled ('performance testcase'), and the job runs them " \
           "by path anyway" in text


MILES = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "miles-ci"


@pytest.fixture
def miles(tmp_path: Path) -> Path:
    dest = tmp_path / "miles"
    shutil.copytree(MILES, dest)
    return dest


def _steps_before_tests(workflow: Path) -> list[str]:
    import yaml

    (job,) = yaml.safe_load(workflow.read_text())["jobs"].values()
    names = []
    for step in job["steps"]:
        if step.get("name") == "Run tests":
            break
        names.append(step.get("name") or step["uses"])
    return names


def test_every_setup_step_checkout_and_secret_of_miles_is_carried_or_said(
        miles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step is its own setup item (the GPU wait's exit 0 ends that item only), in the
    order the job runs them; setup-python, setup-uv and the other repositories' checkouts
    are python/uv/checkouts; the tests' HF_TOKEN is a secret; the ROCm stage gets the image
    its resolve job chooses; the runner's one pytest call per CPU shard is batch = true.
    Every step before the tests is somewhere: in the stage or in what is not carried."""
    import testfleet.adopt.job_settings as job_settings

    monkeypatch.setattr(job_settings, "job_keys_supported", lambda: True)
    result = derive(scan(miles))
    stages = result.data["stages"]
    cpu = stages["stage-a-cpu"]
    assert (cpu["python"], cpu["uv"]) == ("3.11", True)
    assert cpu["checkouts"] == [{"repository": "sgl-project/sglang", "path": "sglang"},
                                {"repository": "radixark/Megatron-LM", "path": "Megatron-LM"}]
    assert cpu["secrets"] == ["HF_TOKEN"]
    assert cpu["setup"] == [
        'echo "SGLANG_SOURCE_ROOT=$GITHUB_WORKSPACE/sglang/python" >> "$GITHUB_ENV"',
        'echo "MEGATRON_SOURCE_ROOT=$GITHUB_WORKSPACE/Megatron-LM" >> "$GITHUB_ENV"',
        "sudo rm -rf /usr/share/dotnet /usr/local/lib/android /opt/ghc\ndf -h",
        'echo "PYTHONPATH=$GITHUB_WORKSPACE:$SGLANG_SOURCE_ROOT:$MEGATRON_SOURCE_ROOT" >> "$GITHUB_ENV"',
        "export UV_SYSTEM_PYTHON=1\nuv pip install -r requirements.txt -r "
        "tests/ci/requirements-ci-cpu.txt\npython tests/ci/verify_source_resolution.py"]
    assert (cpu["command"], cpu["batch"], cpu["extra_args"]) == ("pytest", True, ["-v", "-x"])
    gpu = stages["stage-c-4-gpu-h200"]
    assert gpu["setup"][0].startswith("for i in $(seq 1 60); do") and "exit 0" in gpu["setup"][0]
    assert gpu["setup"][1:] == [
        'python -m pip install -r "$GITHUB_WORKSPACE/requirements.txt" --break-system-packages',
        "python tests/ci/verify_source_resolution.py"]
    rocm = stages["stage-c-4-gpu-mi350"]
    assert rocm["container"]["image"] == "rocm/sgl-dev:miles-rocm720-mi35x"
    # miles' own script, verbatim, under the directive for the finding shellcheck reports in it
    assert rocm["setup"] == ["# shellcheck disable=SC2086  # the project's own script, carried "
                             "verbatim\ncd $GITHUB_WORKSPACE && pip install -e . --no-deps "
                             "--break-system-packages"]
    assert any("setup item 1 ('cd $GITHUB_WORKSPACE" in n and "SC2086" in n for n in result.notes)
    # no push trigger anywhere: no stage runs on a push
    assert all("push" not in s["events"] for s in stages.values())
    told = "\n".join(n.render() for n in result.not_carried)
    # a step's own words, to find it among the stage's setup items
    scripts = {"Free disk space": "sudo rm -rf", "Configure source paths": "PYTHONPATH=",
               "Install dependencies": "uv pip install", "Wait for GPU ready": "nvidia-smi -L",
               "Install requirements": "python -m pip install -r",
               "Verify source resolution": "verify_source_resolution.py",
               "Install (miles only)": "pip install -e ."}
    for wf, stage in (("_run-cpu-ci.yml", cpu), ("_run-ci.yml", gpu), ("_run-ci-rocm.yml", rocm)):
        setup = "\n".join(stage["setup"])
        for name in _steps_before_tests(miles / ".github/workflows" / wf):
            somewhere = (f"step '{name}'" in told or scripts.get(name, "\0") in setup
                         or name in ("actions/checkout@v4", "Checkout miles")  # the job's own
                         or (name == "Set up Python" and stage.get("python") == "3.11")
                         or (name == "Install uv" and stage.get("uv") is True)
                         or (name.startswith("Checkout ") and any(
                             c["path"] == name.split()[-1] for c in stage.get("checkouts", []))))
            assert somewhere, (wf, name)
    for said in ("step 'Resolve dependency refs' -- its env PR_BODY is computed at run time",
                 "checkout of sgl-project/sglang: ref '${{ steps.resolve-refs.outputs.ci_sglang_pr }}'",
                 "step 'Install Helm' (uses: azure/setup-helm@v4) -- an action step",
                 "step 'Install dependencies' -- never runs in this job",
                 "step 'Resolve suite plan' -- a listing preflight"):
        assert said in told, said


def test_without_the_job_keys_they_are_listed_and_the_config_is_valid(
        miles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from testfleet.adopt.job_settings import job_keys_supported

    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--from-existing")
    assert code == 0, out + err
    text = (miles / "testfleet.toml").read_text()
    assert "'''\nfor i in $(seq 1 60); do\n" in text  # the script as it runs, one step
    assert max(len(line) for line in text.splitlines()) <= 100
    if not job_keys_supported():
        assert "python = '3.11' -- this testfleet has no stage key 'python' yet" in out
    else:
        assert 'python = "3.11"' in text and "uv = true" in text


#: #39 item 2: all the workflow and action files adoption writes or changes, together
#: (testfleet-stages.yml included). miles-ci was 796 lines before the rescue wave (#40) gave
#: each stage job a rescue job; with every stage job written once, in testfleet-stages.yml,
#: and called for the plan and for the rescue wave, it is 725 (sglang-ci 754): #39's 800.
LINE_BUDGET = {"miles-ci": 800, "sglang-ci": 3000}
IGNORE = re.compile(r"zizmor: ignore\[[^\]]+\](.*)$")


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("fixture", sorted(LINE_BUDGET))
def test_the_ci_written_for_a_real_tree_is_short_and_lint_clean(
        fixture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#39: adopting miles' / SGLang's real CI writes workflows and actions a maintainer can
    review: under the line budget, 0 actionlint findings (its shellcheck included), 0 zizmor
    findings in the auditor persona over every workflow and action written, every ignore
    with its reason on its line, the setup scripts shellcheck-clean as files, and no path
    of this machine anywhere (this testfleet is an editable install)."""
    for name in ("shellcheck", "actionlint", "zizmor"):
        assert shutil.which(name), f"{name} is not installed: pip install -e '.[test]'"
    tree = tmp_path / fixture
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / fixture, tree)
    before = _snapshot(tree)
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--github",
                             "--allow-findings")
    assert code == 0, out + err
    after = _snapshot(tree)
    written = sorted(p for p in after if before.get(p) != after[p])
    ci = [p for p in written if p.startswith(".github/") and p.endswith((".yml", ".yaml"))]
    assert {".github/workflows/testfleet.yml", ".github/workflows/testfleet-stages.yml",
            ".github/actions/testfleet/action.yml",
            ".github/actions/testfleet-job/action.yml"} <= set(ci)
    lines = sum(after[p].count(b"\n") for p in ci)
    assert lines < LINE_BUDGET[fixture], (lines, ci)
    workflows = [str(tree / p) for p in ci if p.startswith(".github/workflows/")]
    lint = subprocess.run([shutil.which("actionlint") or "", "-no-color", "-config-file",
                           str(tree / ".github/actionlint.yaml"), *workflows],
                          capture_output=True, text=True, timeout=120, cwd=tree, check=False)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
    audit = subprocess.run([shutil.which("zizmor") or "", "--offline", "--persona", "auditor",
                            "--no-progress", *[str(tree / p) for p in ci if "actionlint" not in p]],
                           capture_output=True, text=True, timeout=120, check=False)
    assert audit.returncode == 0 and "No findings" in audit.stdout + audit.stderr, \
        audit.stdout + audit.stderr
    ignores = [(p, m.group(1).strip()) for p in ci for line in after[p].decode().splitlines()
               if (m := IGNORE.search(line))]
    assert ignores and all(reason for _, reason in ignores), ignores
    scripts = [str(tree / p) for p in written if p.startswith(".github/testfleet/")]
    assert scripts and all(p.endswith(".sh") for p in scripts)
    check = subprocess.run([shutil.which("shellcheck") or "", *scripts], capture_output=True,
                           text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    for path in written:
        assert b"file://" not in after[path], path
    from testfleet import __version__

    assert f"python3 -m pip install 'testfleet[runner]=={__version__}'" in \
        after[".github/actions/testfleet-job/action.yml"].decode() or \
        "install:" not in after[".github/actions/testfleet-job/action.yml"].decode()


def test_the_workflows_written_for_miles_pass_actionlint_and_zizmor(
        miles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#28: miles' own setup script has a shellcheck finding: it is named, not edited, and
    the directive comes with it into its script file; #39: init --github --force checks the
    scripts again when it writes them, so a script adopted without shellcheck still gets it."""
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--from-existing", "--github",
                             "--allow-findings", "--install", "pip install testfleet")
    assert code == 0, out + err
    assert "has shellcheck finding(s) SC2086 in the project's own script" in out + err
    script = miles / ".github/testfleet/stage-c-4-gpu-mi350/setup-1.sh"
    text = script.read_text()
    assert "# shellcheck disable=SC2086" in text and text.endswith(
        "cd $GITHUB_WORKSPACE && pip install -e . --no-deps --break-system-packages\n")
    # the stage job, in testfleet-stages.yml, runs the script; testfleet.yml calls that job
    assert "run: bash .github/testfleet/stage-c-4-gpu-mi350/setup-1.sh" in \
        (miles / ".github/workflows/testfleet-stages.yml").read_text()
    called = expanded_file(miles / ".github/workflows/testfleet.yml")["jobs"]
    assert any(step.get("run") == "bash .github/testfleet/stage-c-4-gpu-mi350/setup-1.sh"
               for step in called["stage-c-4-gpu-mi350"]["steps"])
    # the configuration as a first adoption without shellcheck left it: no directive
    config = miles / "testfleet.toml"
    config.write_text("\n".join(line for line in config.read_text().splitlines()
                                if not line.startswith("# shellcheck disable=")) + "\n")
    assert "shellcheck disable" not in config.read_text()
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--github", "--force")
    assert code == 0, out + err
    assert "setup-1.sh: shellcheck finding(s) SC2086" in out
    text = script.read_text()
    assert text.splitlines()[3] == ("# shellcheck disable=SC2086  # the project's own script, "
                                    "carried verbatim")
    check = subprocess.run([shutil.which("shellcheck") or "", str(script)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout
