"""Adoption that loses nothing: a multi-stage tree with its own collector, label
registry, schedule table, gate defaults and GitHub workflows (the shape of the
public RL-training project of issue 13, in small). Each test reproduces one of the
issue's failures; the last one checks the adopted tree end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import run_cli
from testfleet.adopt.derive import derive
from testfleet.adopt.scan import scan
from testfleet.adopt.toml_text import render_toml
from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

COLLECTOR = '''
import ast
import glob
from dataclasses import dataclass
from enum import Enum, auto

class HWBackend(Enum):
    CPU = auto()
    CUDA = auto()

@dataclass
class CIRegistry:
    backend: HWBackend
    filename: str
    est_time: float
    suite: str
    implicit: bool = False
    labels: tuple = ()
    nightly: bool = False
    disabled: str = None

def register_cpu_ci(est_time, suite, *, labels=None, nightly=False, disabled=None):
    return None

def register_cuda_ci(est_time, suite, *, labels, nightly=False, disabled=None):
    return None

_DISCOVERY_ROOTS = ("tests/fast", "tests/e2e")

def discover_ci_files():
    files = []
    for root in _DISCOVERY_ROOTS:
        files.extend(glob.glob(f"{root}/**/test_*.py", recursive=True))
    return sorted(files)

def _is_implicit(filename):
    return filename.startswith("tests/fast/")

def _implicit(filename):
    return CIRegistry(backend=HWBackend.CPU, filename=filename, est_time=2.0,
                      suite="stage-a-cpu", implicit=True)

def _markers(filename):
    with open(filename) as f:
        tree = ast.parse(f.read())
    for stmt in tree.body:
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id.endswith("_ci")
                and stmt.value.func.id != "register_ci_gate"):
            kw = {k.arg: ast.literal_eval(k.value) for k in stmt.value.keywords}
            backend = HWBackend[stmt.value.func.id.split("_")[1].upper()]
            yield CIRegistry(backend, filename, float(kw["est_time"]), kw["suite"],
                             labels=tuple(kw.get("labels") or ()), nightly=kw.get("nightly", False),
                             disabled=kw.get("disabled"))

def collect_tests(files):
    out = []
    for filename in files:
        found = list(_markers(filename))
        if not found and _is_implicit(filename):
            found = [_implicit(filename)]
        out.extend(found)
    return out
'''

RUN_SUITE = '''
"""The project's own runner: --list-only prints what a job of the stage would run."""
import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.ci.ci_policy import resolve_policy  # noqa: E402
from tests.ci.ci_register import collect_tests, discover_ci_files  # noqa: E402

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hw", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--cadence", default="regular")
    parser.add_argument("--labels", nargs="*", default=[])
    parser.add_argument("--list-only", action="store_true")
    parser.add_argument("--timeout-per-file", type=int, default=900)
    parser.add_argument("--enable-retry", action="store_true")
    parser.add_argument("--max-attempts", type=int, default=2)
    parser.add_argument("--retry-wait-seconds", type=int, default=60)
    parser.add_argument("--retry-timeout-increase", type=int, default=600)
    args, _ = parser.parse_known_args()
    include, admit_nightly = resolve_policy(args.cadence, args.labels)
    chosen, skipped = [], []
    for t in collect_tests(discover_ci_files()):
        if t.backend.name.lower() != args.hw or t.suite != args.suite:
            continue
        if t.disabled or (t.nightly and not admit_nightly) or (t.labels and not set(t.labels) & include):
            skipped.append(t)
        else:
            chosen.append(t)
    print(f"Policy: cadence={args.cadence} include_labels={sorted(include)}")
    if skipped:
        print(f"Skipped {len(skipped)} test(s):")
        for t in skipped:
            print(f"  - {t.filename} (reason: labels {list(t.labels)} / nightly={t.nightly})")
        print()
    print(f"Enabled {len(chosen)} test(s):")
    for t in chosen:
        print(f"  - {t.filename} (est_time={t.est_time}s)")
    if args.list_only or not chosen:
        return 0
    if args.hw == "cpu":
        return subprocess.call([sys.executable, "-m", "pytest", *[t.filename for t in chosen]])
    return max(subprocess.call([sys.executable, t.filename]) for t in chosen)

if __name__ == "__main__":
    sys.exit(main())
'''

LABELS = '''
KNOWN_LABELS: dict[str, str] = {
    "megatron": "Megatron-LM training tests",
    "fsdp": "FSDP training tests",
    "long": "Long-running training tests",
    "unused": "A label no test carries yet",
}
'''

POLICY = '''
from tests.ci.labels import KNOWN_LABELS

NIGHTLY_CADENCE = "nightly"
WEEKLY_CADENCE = "weekly"
SCHEDULE_POLICIES = {
    "0 15 * * 0-5": (NIGHTLY_CADENCE, ()),
    "0 15 * * 6": (WEEKLY_CADENCE, ()),
}
NIGHTLY_LABELS = ("megatron", "fsdp", "unused")

def resolve_policy(cadence, labels):
    """(labels included, whether nightly-only tests run) for a run."""
    include = {label.removeprefix("run-ci-") for label in labels}
    if "run-ci-all" in labels or cadence == WEEKLY_CADENCE:
        include |= set(KNOWN_LABELS)
    elif cadence == NIGHTLY_CADENCE:
        include |= set(NIGHTLY_LABELS)
    return include, cadence in (NIGHTLY_CADENCE, WEEKLY_CADENCE)
'''

GATES = '''
GATE_DEFAULTS: dict[str, dict] = {
    "train/grad_norm": {"steps": "all", "constraint": {"rel_up": 0.5, "rel_down": 0.8}},
}
'''

PR_TEST = '''
name: PR Test
on:
  pull_request:
  schedule:
    - cron: '0 15 * * 0-5'
    - cron: '0 15 * * 6'
  workflow_dispatch:
jobs:
  resolve-policy:
    runs-on: ubuntu-latest
    steps:
      - run: python -m tests.ci.ci_policy
  stage-a-cpu:
    needs: [resolve-policy]
    strategy:
      matrix:
        partition_id: [0, 1, 2]
    uses: ./.github/workflows/_run-cpu.yml
    with:
      execute_command: >-
        python tests/ci/run_suite.py --hw cpu --suite stage-a-cpu
        --auto-partition-id ${{ matrix.partition_id }}
    secrets: inherit
  stage-b-cpu:
    needs: [resolve-policy]
    uses: ./.github/workflows/_run-cpu.yml
    with:
      execute_command: python tests/ci/run_suite.py --hw cpu --suite stage-b-cpu
  docker-build:
    needs: [stage-a-cpu]
    runs-on: ubuntu-latest
    steps:
      - run: docker build .
  stage-c-4-gpu-h200:
    needs: [resolve-policy, docker-build]
    strategy:
      fail-fast: false
      max-parallel: 1
      matrix:
        partition_id: [0, 1]
    uses: ./.github/workflows/_run-gpu.yml
    with:
      runs_on: '["h200", "4gpu"]'
      container_image: ${{ needs.docker-build.outputs.image }}
      execute_command: >-
        python tests/ci/run_suite.py --hw cuda --suite stage-c-4-gpu-h200
        --auto-partition-id ${{ matrix.partition_id }} --auto-partition-size 2
        --enable-retry --max-attempts 3 --retry-wait-seconds 30
    secrets: inherit
'''

RUN_GPU = '''
name: GPU job
on:
  workflow_call:
    inputs:
      execute_command: {type: string, required: true}
      runs_on: {type: string, required: false}
      container_image: {type: string, required: false, default: 'org/img:dev'}
    secrets:
      WANDB_API_KEY: {required: false}
jobs:
  run:
    runs-on: ${{ fromJSON(inputs.runs_on) }}
    timeout-minutes: 120
    container:
      image: ${{ inputs.container_image }}
      options: --gpus all --ipc=host
      volumes:
        - /models:/models:ro
    env:
      HF_HOME: /root/.cache/huggingface
      WANDB_API_KEY: ${{ secrets.WANDB_API_KEY }}
      HF_TOKEN: ${{ secrets.HUGGINGFACE_TOKEN }}
      COMMIT: ${{ github.sha }}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
      - name: install
        id: install
        shell: bash
        run: pip install -e .
      - run: ./wait-for-gpus.sh
        shell: pwsh
      - run: nvidia-smi
        if: runner.os == 'Linux'
      - run: ${{ inputs.execute_command }}
      - uses: actions/upload-artifact@v4
        with: {name: logs, path: logs}
'''

RUN_CPU = '''
name: CPU job
on:
  workflow_call:
    inputs:
      execute_command: {type: string, required: true}
jobs:
  run:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ${{ inputs.execute_command }}
'''

IMAGE = '''
name: image
on:
  schedule:
    - cron: '0 0,12 * * *'
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: docker build -t org/img:dev .
'''

SCRIPT = '''
from tests.ci.ci_register import register_cuda_ci
register_cuda_ci(est_time={est}, suite="{suite}", labels={labels})
register_ci_gate(metric_key="train/grad_norm")

def main():
    print("training")

if __name__ == "__main__":
    main()
'''


def realistic_tree(root: Path) -> Path:
    files = {
        "pyproject.toml": '[project]\nname = "rl"\nversion = "1.0"\n\n[tool.black]  # style\nline_length = 119\n',
        "tests/__init__.py": "",
        "tests/ci/__init__.py": "",
        "tests/ci/ci_register.py": COLLECTOR,
        "tests/ci/labels.py": LABELS,
        "tests/ci/ci_policy.py": POLICY,
        "tests/ci/run_suite.py": RUN_SUITE,
        "tests/ci/gates/register.py": GATES,
        "tests/test_top_level_manual.py": "def test_x(): pass\n",
        "tests/manual/test_by_hand.py": "def test_y(): pass\n",
        ".github/workflows/pr-test.yml": PR_TEST,
        ".github/workflows/_run-gpu.yml": RUN_GPU,
        ".github/workflows/_run-cpu.yml": RUN_CPU,
        ".github/workflows/image.yml": IMAGE,
    }
    for i in range(12):  # registered by location: no marker at all
        files[f"tests/fast/sub{i % 3}/test_fast_{i}.py"] = f"def test_{i}():\n    assert {i} == {i}\n"
    files["tests/fast/test_cpu_marked.py"] = (
        "from tests.ci.ci_register import register_cpu_ci\n"
        "register_cpu_ci(est_time=30, suite='stage-a-cpu', labels=['fsdp'])\n"
        "def test_m(): pass\n")
    for i, (suite, labels) in enumerate([
            ("stage-c-4-gpu-h200", ["megatron"]), ("stage-c-4-gpu-h200", ["fsdp"]),
            ("stage-c-4-gpu-h200", ["megatron", "long"]), ("stage-c-4-gpu-h200", ["fsdp"]),
            ("nightly-stage-c-8-gpu-b200", ["megatron"])]):
        files[f"tests/e2e/test_train_{i}.py"] = SCRIPT.format(est=600 + 60 * i, suite=suite,
                                                             labels=labels)
    files["tests/e2e/test_unit_style.py"] = (
        "from tests.ci.ci_register import register_cpu_ci\n"
        "register_cpu_ci(est_time=60, suite='stage-b-cpu')\n"
        "def test_u(): pass\n")
    files["tests/e2e/test_nightly_cpu.py"] = (
        "from tests.ci.ci_register import register_cpu_ci\n"
        "register_cpu_ci(est_time=60, suite='stage-b-cpu', nightly=True)\n"
        "def test_n(): pass\n")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return realistic_tree(tmp_path / "rl")


def test_directory_registered_by_location_becomes_implicit(tree: Path) -> None:
    """239 tests/fast files went into exclude; the collector says they are stage-a-cpu."""
    result = derive(scan(tree))
    assert result.data["roots"] == ["tests/fast", "tests/e2e"]  # the collector's discovery roots
    assert result.data["implicit"] == [{"path": "tests/fast", "backend": "cpu",
                                        "suite": "stage-a-cpu", "est_time": 2.0}]
    assert not [e for e in result.data.get("exclude", []) if e.startswith("tests/fast")]


def test_excludes_are_sorted_files_one_per_line(tree: Path) -> None:
    (tree / "tests" / "e2e" / "helpers").mkdir()
    for name in ("test_zeta.py", "test_alpha.py"):
        (tree / "tests" / "e2e" / "helpers" / name).write_text("def test_h(): pass\n")
    result = derive(scan(tree))
    inside = [e for e in result.data["exclude"] if e.startswith("tests/e2e")]
    assert inside == ["tests/e2e/helpers/test_alpha.py", "tests/e2e/helpers/test_zeta.py"]
    # outside every root a whole directory may be folded, a file next to a root may not
    assert "tests/manual/**" in result.data["exclude"]
    assert "tests/test_top_level_manual.py" in result.data["exclude"]
    text = render_toml(result.data, "tool.testfleet")
    assert '    "tests/e2e/helpers/test_alpha.py",\n    "tests/e2e/helpers/test_zeta.py",\n' in text
    assert max(len(line) for line in text.splitlines()) < 200


def test_stage_settings_are_read_from_the_workflows(tree: Path) -> None:
    result = derive(scan(tree))
    gpu = result.data["stages"]["stage-c-4-gpu-h200"]
    assert gpu["runs_on"] == ["h200", "4gpu"]  # the caller's input, through fromJSON
    assert gpu["container"]["image"] == "org/img:dev"  # computed at run time: the default, and a note
    assert gpu["shards"] == 2 and result.data["stages"]["stage-a-cpu"]["shards"] == 3
    assert gpu["needs"] == ["stage-a-cpu"]  # through docker-build, which is not a stage
    assert gpu["env"] == {"HF_HOME": "/root/.cache/huggingface"}
    for stage in result.data["stages"].values():  # never invented
        assert "target_minutes" not in stage and "max_shards" not in stage
    told = "\n".join(n.render() for n in result.not_carried)
    assert "container image '${{ needs.docker-build.outputs.image }}'" in told
    # the runner flags of the job become the stage's runner settings; those it does not
    # pass are the runner script's defaults: 900 s per file, plus 600 s with retries enabled
    assert (gpu["max_attempts"], gpu["retry_wait"], gpu["file_timeout"]) == (3, 30, 1500)
    assert "retry_timeout_factor" not in gpu and "retry timeout increase" not in told
    assert ("stage stage-c-4-gpu-h200: --timeout-per-file 900, --retry-timeout-increase 600 are "
            "the defaults of tests/ci/run_suite.py, which .github/workflows/pr-test.yml job "
            "stage-c-4-gpu-h200 runs without passing them") in "\n".join(result.notes)
    # a CPU stage the runner hands to pytest has no per-file timeout of the runner's
    assert "file_timeout" not in result.data["stages"]["stage-a-cpu"]
    # COMMIT: ${{ github.sha }} is $GITHUB_SHA to a shell: set for the steps after it
    assert gpu["setup"][0] == 'echo "COMMIT=$GITHUB_SHA" >> "$GITHUB_ENV"'
    assert "env COMMIT" not in told
    # the job's CI settings become the stage's CI job settings
    assert gpu["container"] == {"image": "org/img:dev", "options": "--gpus all --ipc=host",
                                "volumes": ["/models:/models:ro"]}
    assert gpu["job_timeout_minutes"] == 120 and "timeout-minutes" not in told
    assert gpu["secrets"] == ["WANDB_API_KEY"]
    assert "secret HUGGINGFACE_TOKEN -- exposed as 'HF_TOKEN'" in told
    assert (gpu["fail_fast"], gpu["max_parallel"]) == (False, 1)
    assert gpu["setup"] == ['echo "COMMIT=$GITHUB_SHA" >> "$GITHUB_ENV"', "pip install -e ."]
    assert "step uses: actions/setup-python@v5 -- it names no python-version" in told
    assert "step 'nvidia-smi' -- runs only when \"runner.os == 'Linux'\", known at run time" in told
    assert "step './wait-for-gpus.sh' -- the step's shell cannot be carried" in told
    assert "step 'actions/upload-artifact@v4' after the tests" in told
    assert "actions/checkout" not in told


def test_command_follows_how_files_run(tree: Path) -> None:
    """Script-style GPU files (only a __main__ block) got command = "pytest"."""
    stages = derive(scan(tree)).data["stages"]
    assert stages["stage-c-4-gpu-h200"]["command"] == "python"
    assert stages["stage-b-cpu"]["command"] == "pytest"
    assert stages["stage-a-cpu"]["command"] == "pytest"


def test_label_descriptions_come_from_the_label_registry(tree: Path) -> None:
    labels = derive(scan(tree)).data["labels"]
    assert labels["megatron"] == "Megatron-LM training tests"
    assert labels["unused"] == "A label no test carries yet"
    assert not any("used by" in d for d in labels.values())


def test_schedules_and_gate_defaults_come_from_the_project(tree: Path) -> None:
    result = derive(scan(tree))
    assert result.data["policy"]["schedules"] == {"0 15 * * 0-5": "nightly", "0 15 * * 6": "weekly"}
    assert result.data["gate"]["defaults"]["train/grad_norm"]["steps"] == "all"
    assert not [f for f in result.findings if f.code == "adopt-gate-default"]


def test_a_stage_no_job_runs_is_dormant_with_its_reason(tree: Path) -> None:
    result = derive(scan(tree))
    b200 = result.data["stages"]["nightly-stage-c-8-gpu-b200"]
    assert b200["disabled"] == ("no job of the existing CI (pr-test.yml) runs this stage; "
                                "remove this line to schedule it")
    assert "nightly-stage-c-8-gpu-b200" in result.dormant


TRIGGERS = [
    Trigger(event="pull_request"),
    Trigger(event="pull_request", labels=("run-ci-megatron",)),
    Trigger(event="pull_request", labels=("run-ci-all",)),
    Trigger(event="pull_request", labels=("run-ci-fsdp", "run-ci-long", "run-ci-megatron", "run-ci-unused")),
    Trigger(event="schedule", cadence="nightly"),
    Trigger(event="schedule", cadence="weekly"),
    Trigger(event="workflow_dispatch"),
]


def runner_args(trigger: Trigger) -> list[str]:
    """The project's runner flags for a trigger (as its workflow passes them)."""
    args = ["--cadence", trigger.cadence] if trigger.cadence else []
    return args + (["--labels", *trigger.labels] if trigger.labels else [])


def run_project(tree: Path, *args: str) -> str:
    """The tree's own code, in a python3 of its own (adoption never runs it; this test does)."""
    done = subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def project_runner(tree: Path, stage: str, backend: str, trigger: Trigger) -> set[str]:
    """What the tree's own runner selects for one stage: its --list-only output."""
    out = run_project(tree, "tests/ci/run_suite.py", "--hw", backend, "--suite", stage,
                      "--list-only", *runner_args(trigger))
    listed = out.split("Enabled ")[1].splitlines()[1:]
    return {line.split("- ", 1)[1].split(" (", 1)[0] for line in listed if line.startswith("  - ")}


COLLECT = ("import json; from tests.ci.ci_register import collect_tests, discover_ci_files; "
           "print(json.dumps(sorted([t.filename, t.backend.name.lower(), t.suite] "
           "for t in collect_tests(discover_ci_files()))))")


def test_adopted_tree_end_to_end(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    # what cannot be adopted is a list the user reads at the end
    tail = out.split("not carried over from the existing CI (")[1]
    assert "  - .github/workflows/pr-test.yml job stage-c-4-gpu-h200: step uses: actions/setup-python@v5" in tail
    code, out, err = run_cli(capsys, "-C", str(tree), "check", "--format", "json")
    assert code == 0, out + err
    assert json.loads(out)["errors"] == 0
    project = load_project(tree)
    registry = collect(project, use_cache=False)
    # the registry is the collector's (run as the project runs it): every discovered file,
    # the implicit ones included
    theirs = json.loads(run_project(tree, "-c", COLLECT))
    ours = sorted([r.file, r.backend, r.suite] for r in registry.registrations)
    assert ours == theirs and len(ours) == 12 + 1 + 5 + 2
    implicit = {r.file for r in registry.registrations if r.implicit}
    assert implicit == {p.relative_to(tree).as_posix() for p in (tree / "tests" / "fast").rglob("test_fast_*.py")}
    # every trigger the workflows deliver: the plan selects the runner's files, stage by stage
    for trigger in TRIGGERS:
        plan = make_plan(project, registry, PlanRequest(trigger=trigger))
        for stage in ("stage-a-cpu", "stage-b-cpu", "stage-c-4-gpu-h200"):
            backend = project.config.stages[stage].backend
            planned = {t.file for j in plan.jobs if j.stage == stage for t in j.tests}
            assert planned == project_runner(tree, stage, backend, trigger), (stage, trigger)
        assert plan.jobs
        assert not [j for j in plan.jobs if j.stage == "nightly-stage-c-8-gpu-b200"]
    # the README's regeneration command keeps all of it
    before = (tree / "pyproject.toml").read_text()
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--github", "--force")
    assert code == 0, out + err
    assert (tree / "pyproject.toml").read_text() == before
    assert "[tool.black]  # style" in before


def test_report_counts_stages_and_explains_every_difference(tree: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--dry-run",
                             "--report", str(report))
    assert code == 0, out + err
    assert not (tree / "testfleet.toml").exists()
    assert "[tool.testfleet]" not in (tree / "pyproject.toml").read_text()  # dry run
    text = report.read_text()
    assert "- registrations kept: **20 / 20** (0 could not be read, see Findings)" in text
    assert ("| `stage-a-cpu` | cpu | 13 | 13 | 13 | 13 | `.github/workflows/pr-test.yml` / "
            "`stage-a-cpu` |") in text
    assert "| `nightly-stage-c-8-gpu-b200` | cuda | 1 | 1 | 1 | 1 | none (dormant) |" in text
    # a PR without labels: the GPU job starts and finds nothing; testfleet asks for no runner
    pr = text.split("### PR, no labels")[1].split("###")[0]
    assert "| `stage-c-4-gpu-h200` | yes | no | the existing job starts and finds nothing" in pr
    # the workflow has no push: trigger, and the adopted stages have no push event either
    push = text.split("### push")[1].split("###")[0]
    assert "Same stages on both sides." in push
    assert "testfleet runs 0 file(s)" in push
    assert "job stage-c-4-gpu-h200: secret HUGGINGFACE_TOKEN" in text.split("## Not carried over")[1]
    assert "cron '0 0,12 * * *' -- this workflow runs no tests" in text


def test_directory_a_job_hands_to_pytest_becomes_implicit(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """No collector rule, but the workflow runs 'pytest tests/unit' in one CPU job: those
    files run there today without markers, so they are [[implicit]] in that job's stage."""
    root = tmp_path / "plain"
    files = {
        ".github/workflows/ci.yml": """
            on: [pull_request]
            jobs:
              unit:
                runs-on: ubuntu-22.04
                steps:
                  - uses: actions/checkout@v4
                  - run: python -m pytest tests/unit -x -k "not slow" --junitxml=out.xml && echo done
              gpu:
                runs-on: [self-hosted, a100]
                steps:
                  - run: python tests/run.py --suite gpu-a100
            """,
        "tests/unit/test_a.py": "def test_a(): pass\n",
        "tests/unit/deep/test_b.py": "def test_b(): pass\n",
        "tests/gpu/test_g.py": "from x import register_cuda_ci\n"
                               "register_cuda_ci(est_time=300, suite='gpu-a100', labels=['llm'])\n"
                               "def test_g(): pass\n",
        "tests/other/test_o.py": "def test_o(): pass\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    result = derive(scan(root))
    assert result.data["implicit"] == [{"path": "tests/unit", "backend": "cpu", "suite": "unit",
                                        "est_time": 60.0}]
    assert result.data["exclude"] == ["tests/other/test_o.py"]
    assert result.data["stages"]["unit"]["runs_on"] == ["ubuntu-22.04"]
    # the job's pytest options run with every file; the runner writes its own JUnit
    assert result.data["stages"]["unit"]["extra_args"] == ["-x", "-k", "not slow"]
    assert "pytest --junitxml=out.xml -- testfleet's runner sets it" in \
        "\n".join(n.render() for n in result.not_carried)
    assert result.data["stages"]["gpu-a100"]["runs_on"] == ["self-hosted", "a100"]
    assert any("est_time 60 s assumed" in n for n in result.notes)
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--from-existing")
    assert code == 0, out + err
    project = load_project(root)
    plan = make_plan(project, collect(project, use_cache=False),
                     PlanRequest(trigger=Trigger(event="pull_request")))
    assert {t.file for j in plan.jobs if j.stage == "unit" for t in j.tests} == \
        {"tests/unit/test_a.py", "tests/unit/deep/test_b.py"}


def test_scripts_beside_pytest_files_run_each_by_its_style(tree: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """One command cannot run a script-only file and a file without a __main__ block:
    the stage gets command = "auto", so neither would 'collect no tests'."""
    (tree / "tests" / "e2e" / "test_script_cpu.py").write_text(
        "from tests.ci.ci_register import register_cpu_ci\n"
        "register_cpu_ci(est_time=60, suite='stage-b-cpu')\n"
        "if __name__ == '__main__':\n    print('ran')\n")
    result = derive(scan(tree))
    assert result.data["stages"]["stage-b-cpu"]["command"] == "auto"
    assert result.data["stages"]["stage-a-cpu"]["command"] == "pytest"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "-C", str(tree), "plan", "--schedule", "0 15 * * 0-5",
                             "--format", "json")
    assert code == 0, err
    commands = {t["file"]: t["command"] for j in json.loads(out)["jobs"] if j["stage"] == "stage-b-cpu"
                for t in j["tests"]}
    assert commands == {"tests/e2e/test_script_cpu.py": "python",
                        "tests/e2e/test_unit_style.py": "pytest",
                        "tests/e2e/test_nightly_cpu.py": "pytest"}


def test_hostile_workflows_are_read_in_bounded_time(tree: Path) -> None:
    """Nested YAML aliases ("billion laughs") in a workflow and a called workflow, a file
    that is not YAML, one that is too large: adoption reads each once, reports the bad
    ones and goes on."""
    import time

    levels = ["a0: &a0 ['python -m pytest tests/fast']"]
    levels += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(levels) + "\n"
    wf = tree / ".github" / "workflows"
    (wf / "bomb.yml").write_text(
        bomb + "on: [pull_request]\njobs:\n  stage-b-cpu:\n    runs-on: ubuntu-latest\n"
               "    steps: *a8\n  called:\n    uses: ./.github/workflows/bomb-called.yml\n")
    (wf / "bomb-called.yml").write_text(
        bomb + "on: {workflow_call: {}}\njobs:\n  run:\n    runs-on: ubuntu-latest\n"
               "    env: {X: *a8}\n    steps: *a8\n")
    (wf / "broken.yml").write_text("on: [push\njobs: {\n")
    (wf / "huge.yml").write_bytes(b"# " + b"x" * (3 << 20) + b"\n")
    started = time.perf_counter()
    result = derive(scan(tree))
    assert time.perf_counter() - started < 30
    bad = {f.file: f.message for f in result.findings if f.code == "adopt-workflow"}
    assert "not valid YAML" in bad[".github/workflows/broken.yml"]
    assert "larger than 2 MiB" in bad[".github/workflows/huge.yml"]
    assert result.data["stages"]["stage-c-4-gpu-h200"]["runs_on"] == ["h200", "4gpu"]


RUNNER_CASES = {
    "pr": Trigger(event="pull_request"),
    "pr-labels": Trigger(event="pull_request", labels=("run-ci-fsdp", "run-ci-long", "run-ci-megatron",
                                                       "run-ci-unused")),
    "pr-all": Trigger(event="pull_request", labels=("run-ci-all",)),
    "nightly": Trigger(event="schedule", cadence="nightly"),
    "weekly": Trigger(event="schedule", cadence="weekly"),
}
STAGES = (("stage-a-cpu", "cpu"), ("stage-b-cpu", "cpu"), ("stage-c-4-gpu-h200", "cuda"))


def test_report_compares_files_with_the_runners_saved_list(tree: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The project's runner can list its selection (--list-only): the report compares with
    that, file by file, instead of only with the workflows' stage lists."""
    blocks = []
    for case, trigger in RUNNER_CASES.items():
        for stage, backend in STAGES:
            out = run_project(tree, "tests/ci/run_suite.py", "--hw", backend, "--suite", stage,
                              "--list-only", *runner_args(trigger))
            blocks.append(f"== trigger={case} stage={stage} ==\n{out}")
    saved = tmp_path / "selection.txt"
    saved.write_text("\n".join(blocks))
    assert "Skipped 4 test(s):" in saved.read_text()  # listed, but not selected
    report = tmp_path / "adoption.md"
    args = ["-C", str(tree), "init", "--from-existing", "--dry-run", "--report", str(report),
            "--runner-selection", str(saved)]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, out + err
    text = report.read_text()
    assert "the files are compared with it one by one" in text
    assert text.count("Compared with the runner's list: 3 stage(s) select the same files.") == 5
    # a file only the runner selects is listed with the reason testfleet has for it
    saved.write_text(saved.read_text().replace(
        "== trigger=pr stage=stage-c-4-gpu-h200 ==\n",
        "== trigger=pr stage=stage-c-4-gpu-h200 ==\n  - tests/e2e/test_train_0.py (est_time=600s)\n"))
    code, out, err = run_cli(capsys, *args)
    assert code == 0, out + err
    pr = report.read_text().split("### PR, no labels")[1].split("###")[0]
    assert "2 stage(s) select the same files, 1 file difference(s):" in pr
    assert ("| `stage-c-4-gpu-h200` | `tests/e2e/test_train_0.py` | runner only | testfleet's fate: "
            "not-selected-by-labels") in pr
    # a malformed file stops before anything is done, naming its line
    saved.write_text("== trigger=pr stage=stage-a-cpu ==\n  - tests/fast/x.py\n== trigger=tuesday stage=x ==\n")
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and f"{saved}:3: unknown trigger 'tuesday'; valid: push, pr," in err
    assert not report.exists() or "tuesday" not in report.read_text()
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--dry-run",
                             "--runner-selection", str(saved))
    assert code == 2 and "add --report FILE" in err


def test_runner_list_format() -> None:
    from testfleet.adopt.runner_selection import parse_runner_selection

    text = ("== trigger=nightly stage=s ==\n"
            "============================================================\n"
            "Policy: cadence=nightly\n"
            "Skipped 1 test(s):\n"
            "  - tests/a/test_skip.py (reason: disabled)\n"
            "\n"
            "Enabled 2 test(s):\n"
            "  - tests/a/test_one.py (est_time=5s)\n"
            "  * ./tests/a/test_two.py\n"
            "Running: pytest tests/a/test_three.py -x\n")
    got = parse_runner_selection(text, "sel.txt")
    assert got == {("nightly", "s"): {"tests/a/test_one.py", "tests/a/test_two.py", "tests/a/test_three.py"}}
    from testfleet.errors import UsageError

    for bad, message in [("tests/x.py\n", "sel.txt:1: text before the first"),
                         ("== trigger=pr ==\n", "sel.txt:1: expected '== trigger=<id> stage=<stage> =='"),
                         ("== trigger=pr stage=s ==\n== trigger=tuesday stage=s ==\n",
                          "sel.txt:2: unknown trigger 'tuesday'"),
                         ("== trigger=pr stage=s ==\n== trigger=pr stage=s ==\n", "sel.txt:2: trigger=pr stage=s is given twice")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            parse_runner_selection(bad, "sel.txt")


def test_container_options_buildkite_cannot_carry(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'--ulimit' has no Buildkite Docker plugin key: for a Buildkite pipeline alone it is
    left out and listed (the plan then emits); with the GitHub workflow too it is a finding."""
    gpu = tree / ".github/workflows/_run-gpu.yml"
    gpu.write_text(gpu.read_text().replace("options: --gpus all --ipc=host",
                                           "options: --gpus all --ulimit memlock=-1 --ipc=host"))
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--github",
                             "--buildkite", "--dry-run")
    assert code == 1
    assert "adopt-buildkite-options" in out + err and "'--ulimit memlock=-1'" in out + err
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--buildkite")
    assert code == 0, out + err
    assert ("job stage-c-4-gpu-h200: container options '--ulimit memlock=-1' -- the Buildkite "
            "Docker plugin has no key for them") in out
    stage = load_project(tree).config.stages["stage-c-4-gpu-h200"]
    assert stage.container is not None and stage.container.options == "--gpus all --ipc=host"
    code, out, err = run_cli(capsys, "-C", str(tree), "plan", "--event", "schedule", "--cadence",
                             "weekly", "--format", "buildkite")
    assert code == 0, err
    assert '"ipc": "host"' in out


def test_a_runner_flag_computed_at_run_time_takes_no_default(tree: Path) -> None:
    """SGLang passes '--timeout-per-file' only when an input is set: the runner's default
    is not the stage's timeout then, and the flag is listed."""
    pr = tree / ".github/workflows/pr-test.yml"
    pr.write_text(pr.read_text().replace(
        "--enable-retry --max-attempts 3 --retry-wait-seconds 30",
        "--enable-retry --max-attempts 3 --retry-wait-seconds 30 "
        "${{ inputs.t && format('--timeout-per-file {0}', inputs.t) || '' }}"))
    result = derive(scan(tree))
    gpu = result.data["stages"]["stage-c-4-gpu-h200"]
    assert "file_timeout" not in gpu and gpu["max_attempts"] == 3
    told = "\n".join(n.render() for n in result.not_carried)
    assert "job stage-c-4-gpu-h200: --timeout-per-file -- its value is computed at run time" in told
