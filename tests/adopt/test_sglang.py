"""Adoption of an SGLang-shaped tree, unmodified: its marker module with the real
``register_<hw>_ci`` signature, its runner ``test/run_suite.py`` (``--nightly`` keeps
nightly and per-commit registrations apart; ``ci_utils.run_unittest_files`` starts each
file as ``python3 FILE -f``) and per-stage workflow jobs whose ``runs-on`` is partly
computed. After ``init --from-existing`` with no hand edits, ``check`` is clean, the
registry is the tree's own collector's and the plan selects what the tree's runner
lists (``--list-only``, run as a subprocess) for per-commit and nightly triggers."""

from __future__ import annotations

import json
import os
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

# python/sglang/test/ci/ci_register.py, reduced: the real signature (positional est_time,
# suite, nightly, disabled; keyword-only stage/runner_config/in_process_group), the
# effective suite f"{stage}-test-{runner_config}", and an ast collector.
CI_REGISTER = '''
import ast
from dataclasses import dataclass
from enum import Enum, auto
from typing import List, Optional

_PARAM_ORDER = ("est_time", "suite", "nightly", "disabled")


class HWBackend(Enum):
    CPU = auto()
    CUDA = auto()
    AMD = auto()
    NPU = auto()


@dataclass
class CIRegistry:
    backend: HWBackend
    filename: str
    est_time: float
    suite: Optional[str] = None
    nightly: bool = False
    disabled: Optional[str] = None
    stage: Optional[str] = None
    runner_config: Optional[str] = None

    @property
    def effective_suite(self) -> Optional[str]:
        if self.stage is not None and self.runner_config is not None:
            return f"{self.stage}-test-{self.runner_config}"
        return self.suite


def register_cpu_ci(est_time: float, suite: Optional[str] = None, nightly: bool = False,
                    disabled: Optional[str] = None, *, stage: Optional[str] = None,
                    runner_config: Optional[str] = None, in_process_group: Optional[str] = None):
    return None


def register_cuda_ci(est_time: float, suite: Optional[str] = None, nightly: bool = False,
                     disabled: Optional[str] = None, *, stage: Optional[str] = None,
                     runner_config: Optional[str] = None, in_process_group: Optional[str] = None):
    return None


def register_amd_ci(est_time: float, suite: Optional[str] = None, nightly: bool = False,
                    disabled: Optional[str] = None, *, stage: Optional[str] = None,
                    runner_config: Optional[str] = None, in_process_group: Optional[str] = None):
    return None


def register_npu_ci(est_time: float, suite: Optional[str] = None, nightly: bool = False,
                    disabled: Optional[str] = None, *, stage: Optional[str] = None,
                    runner_config: Optional[str] = None, in_process_group: Optional[str] = None):
    return None


REGISTER_MAPPING = {"register_cpu_ci": HWBackend.CPU, "register_cuda_ci": HWBackend.CUDA,
                    "register_amd_ci": HWBackend.AMD, "register_npu_ci": HWBackend.NPU}


def _value(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None  # in_process_group=GROUP: a name, which the collector ignores


def collect_tests(files: List[str], sanity_check: bool = True) -> List[CIRegistry]:
    out = []
    for filename in files:
        with open(filename) as f:
            tree = ast.parse(f.read())
        found = 0
        for stmt in tree.body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id in REGISTER_MAPPING):
                continue
            kw = dict(zip(_PARAM_ORDER, [_value(a) for a in call.args]))
            kw.update({k.arg: _value(k.value) for k in call.keywords if k.arg != "in_process_group"})
            out.append(CIRegistry(REGISTER_MAPPING[call.func.id], filename, **kw))
            found += 1
        if sanity_check and not found:
            raise ValueError(f"{filename}: no CI registration")
    return out
'''

# python/sglang/test/ci/ci_utils.py, reduced: how the runner starts a file (and a fork
# worker whose argv is not a test file's).
CI_UTILS = '''
import os
import subprocess


class _ForkTestWorker:
    def __init__(self, fd):
        worker_path = os.path.join(os.path.dirname(__file__), "fork_test_worker.py")
        self.process = subprocess.Popen(["python3", worker_path, "--result-fd", str(fd)])


def run_unittest_files(files, timeout_per_file=None, continue_on_error=False,
                       enable_retry=False, max_attempts=2, retry_wait_seconds=60):
    for file in files:
        full_path = os.path.join(os.getcwd(), file.filename)

        def run_one_file(filename):
            cmd = ["python3", full_path, "-f"]
            process = subprocess.Popen(cmd, stdout=None, stderr=None)
            return process.wait()

        if run_one_file(file.filename) != 0 and not continue_on_error:
            return -1
    return 0
'''

# test/run_suite.py, reduced; --list-only prints the selection and stops.
RUN_SUITE = '''
import argparse
import glob
import os
import sys

from sglang.test.ci.ci_register import HWBackend, collect_tests
from sglang.test.ci.ci_utils import run_unittest_files

HW_MAPPING = {"cpu": HWBackend.CPU, "cuda": HWBackend.CUDA, "amd": HWBackend.AMD, "npu": HWBackend.NPU}


def filter_tests(ci_tests, hw, suite, nightly=False):
    ci_tests = [t for t in ci_tests
                if t.backend == hw and t.effective_suite == suite and t.nightly == nightly]
    return [t for t in ci_tests if t.disabled is None], [t for t in ci_tests if t.disabled is not None]


def run_a_suite(args):
    script_dir = os.path.dirname(os.path.abspath(__file__))
    files = [f for f in glob.glob(os.path.join(script_dir, "registered", "**", "*.py"), recursive=True)
             if not f.endswith("/__init__.py")]
    ci_tests, skipped = filter_tests(collect_tests(files), HW_MAPPING[args.hw], args.suite, args.nightly)
    if skipped:
        print(f"Skipped {len(skipped)} test(s):")
        for t in skipped:
            print(f"  - {t.filename} (reason: {t.disabled})")
        print()
    print(f"Enabled {len(ci_tests)} test(s):")
    for t in ci_tests:
        print(f"  - {t.filename} (est_time={t.est_time})")
    if args.list_only:
        return 0
    timeout = args.timeout_per_file
    if args.enable_retry:
        timeout += args.retry_timeout_increase
    return run_unittest_files(ci_tests, timeout_per_file=timeout,
                              continue_on_error=args.continue_on_error)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hw", type=str, choices=HW_MAPPING.keys(), required=True)
    parser.add_argument("--suite", type=str, required=True)
    parser.add_argument("--nightly", action="store_true", help="Run nightly tests instead of per-commit tests.")
    parser.add_argument("--timeout-per-file", type=int, default=1200)
    parser.add_argument("--continue-on-error", action="store_true", default=False)
    parser.add_argument("--auto-partition-id", type=int)
    parser.add_argument("--auto-partition-size", type=int)
    parser.add_argument("--enable-retry", action="store_true", default=False)
    parser.add_argument("--max-attempts", type=int, default=2)
    parser.add_argument("--retry-wait-seconds", type=int, default=60)
    parser.add_argument("--retry-timeout-increase", type=int, default=600)
    parser.add_argument("--list-only", action="store_true")
    sys.exit(run_a_suite(parser.parse_args()))


if __name__ == "__main__":
    main()
'''

PR_TEST = '''
name: PR Test
on:
  push:
    branches: [main]
  pull_request:
    branches: [main]
  workflow_dispatch:
jobs:
  check-changes:
    runs-on: ubuntu-latest
    outputs:
      runs_on_map: ${{ steps.runner-map.outputs.runs_on_map }}
      partitions: ${{ steps.partitions.outputs.partitions }}
    steps:
      - name: Fail if the PR does not have the 'run-ci' label
        if: github.event_name == 'pull_request' && !contains(github.event.pull_request.labels.*.name, 'run-ci')
        run: |
          echo "This pull request does not have the 'run-ci' label. Failing the workflow."
          exit 1
      - name: Fail if the PR is a draft
        if: github.event_name == 'pull_request' && github.event.pull_request.draft == true
        run: |
          exit 1
      - id: partitions
        run: python3 scripts/ci/utils/compute_partitions.py >> "$GITHUB_OUTPUT"
      - id: runner-map
        run: python3 scripts/ci/runner_configs.py --map >> "$GITHUB_OUTPUT"
  base-a-test-cpu:
    needs: [check-changes]
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e "python[dev]"
      - name: Run test
        timeout-minutes: 20
        run: |
          cd test
          python3 run_suite.py --hw cpu --suite base-a-test-cpu
  base-b-test-1-gpu-small:
    needs: [check-changes]
    uses: ./.github/workflows/_pr-test-stage.yml
    with:
      self_name: base-b-test-1-gpu-small
      runner_config: 1-gpu-small
      check_changes: ${{ toJson(needs.check-changes.outputs) }}
      partitions: ${{ needs.check-changes.outputs.partitions }}
      run_timeout_minutes: '30'
  base-c-test-4-gpu-h100:
    needs: [check-changes, base-b-test-1-gpu-small]
    runs-on: ${{ github.repository == 'sgl-project/sglang' && '4-gpu-h100' || 'ubuntu-latest' }}
    strategy:
      fail-fast: false
      matrix:
        part: [0, 1]
    steps:
      - uses: actions/checkout@v4
      - name: Run test
        run: |
          cd test
          python3 run_suite.py --hw cuda --suite base-c-test-4-gpu-h100 --auto-partition-id ${{ matrix.part }} --auto-partition-size 2
  stage-a-test-1-gpu-small-amd:
    needs: [check-changes]
    strategy:
      matrix:
        include:
          - runner: linux-mi325-gpu-1
            part: 0
          - runner: linux-mi325-gpu-1
            part: 1
    runs-on: ${{ matrix.runner }}
    steps:
      - uses: actions/checkout@v4
      - name: Run test
        run: |
          cd test
          python3 run_suite.py --hw amd --suite stage-a-test-1-gpu-small-amd --auto-partition-id ${{ matrix.part }} --auto-partition-size 2
'''

PR_TEST_STAGE = '''
name: PR Test Stage
on:
  workflow_call:
    inputs:
      self_name: {type: string, required: true}
      runner_config: {type: string, required: true}
      check_changes: {type: string, required: true}
      partitions: {type: string, required: true}
      run_timeout_minutes: {type: string, required: true}
      timeout_per_file: {type: string, default: ''}
jobs:
  run:
    runs-on: ${{ fromJson(fromJson(inputs.check_changes).runs_on_map)[inputs.runner_config] }}
    timeout-minutes: 240
    strategy:
      fail-fast: false
      max-parallel: ${{ fromJson(inputs.partitions)[inputs.self_name].max_parallel }}
      matrix:
        partition: ${{ fromJson(inputs.partitions)[inputs.self_name].arr }}
    steps:
      - uses: actions/checkout@v4
      - name: Resolve runner_config
        id: rc
        run: python3 scripts/ci/runner_configs.py '${{ inputs.runner_config }}' >> "$GITHUB_OUTPUT"
      - name: Install dependencies
        timeout-minutes: ${{ fromJson(steps.rc.outputs.install_timeout) }}
        run: |
          bash ${{ steps.rc.outputs.install }}
      - name: Run test
        timeout-minutes: ${{ fromJson(inputs.run_timeout_minutes) }}
        run: |
          cd test
          python3 run_suite.py --hw cuda --suite ${{ inputs.self_name }} \\
            --auto-partition-size ${{ fromJson(inputs.partitions)[inputs.self_name].size }} \\
            ${{ inputs.timeout_per_file && format('--timeout-per-file {0}', inputs.timeout_per_file) || '' }}
'''

# scripts/ci/runner_configs.yml, .py and utils/compute_partitions.py, reduced: the data a
# stage's runs-on and install are looked up in, and the partition rule (0.75 x the stage's
# run timeout per shard, size // 3 at once, base-a pinned)
RUNNER_CONFIGS_YML = '''
_anchors:
  default_install: &default scripts/ci/cuda/ci_install_dependency.sh
runner_configs:
  1-gpu-small: { install: *default, install_timeout: "20", runs_on: 1-gpu-5090 }
  4-gpu-h100:  { install: *default, install_timeout: "20", runs_on: 4-gpu-h100 }
'''

RUNNER_CONFIGS_PY = '''
import json, os, sys
import yaml

_YAML_PATH = os.path.join(os.path.dirname(__file__), "runner_configs.yml")


def load():
    with open(_YAML_PATH) as f:
        return yaml.safe_load(f)["runner_configs"]


if __name__ == "__main__":
    if sys.argv[1] == "--map":
        print("runs_on_map=" + json.dumps({k: v["runs_on"] for k, v in load().items()}))
    else:
        for key, value in load()[sys.argv[1]].items():
            print(f"{key}={value}")
'''

COMPUTE_PARTITIONS = '''
import math

_BASE_A_OVERRIDES = {"base-a-test-cpu": 2}


def per_shard_target_seconds(suite, run_timeouts):
    return 0.75 * run_timeouts[suite] * 60


def compute_max_parallel(size):
    return max(size // 3, 1)


def compute_partitions(suites, run_timeouts):
    out = {}
    for suite, total in suites.items():
        size = _BASE_A_OVERRIDES.get(suite) or math.ceil(total / per_shard_target_seconds(suite, run_timeouts))
        out[suite] = {"size": size, "arr": list(range(size)), "max_parallel": compute_max_parallel(size)}
    return out
'''

NIGHTLY = '''
name: Nightly Test
on:
  schedule:
    - cron: '0 0 * * *'
  workflow_dispatch:
jobs:
  nightly-test-1-gpu:
    runs-on: 1-gpu-runner
    steps:
      - uses: actions/checkout@v4
      - name: Run test
        timeout-minutes: 240
        run: |
          cd test
          python3 run_suite.py --hw cuda --suite nightly-1-gpu --nightly --continue-on-error --timeout-per-file 3600
'''

PR_TEST_NPU = '''
name: PR Test (NPU)
on:
  pull_request:
    branches: [main]
jobs:
  base-b-test-1-gpu-small-npu:
    runs-on: linux-aarch64-a2-1
    steps:
      - name: Fail if the PR does not have the 'run-ci' label
        if: "!contains(github.event.pull_request.labels.*.name, 'run-ci')"
        run: exit 1
      - name: Fail if the PR is a draft
        if: github.event.pull_request.draft == true
        run: exit 1
      - uses: actions/checkout@v4
      - name: Run test
        run: |
          cd test
          python3 run_suite.py --hw npu --suite base-b-test-1-gpu-small
'''

IMPORT = "from sglang.test.ci.ci_register import (\n    register_amd_ci,\n    register_cuda_ci,\n)\n"
CUDA = "from sglang.test.ci.ci_register import register_cuda_ci\n"
CPU = "from sglang.test.ci.ci_register import register_cpu_ci\n"
NPU = "from sglang.test.ci.ci_register import register_npu_ci\n"
BODY = ("import unittest\n\n\nclass TestX(unittest.TestCase):\n    def test_x(self):\n        pass\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n')
REGISTERED = {
    # one file for a per-commit suite (composed), a nightly suite and an AMD suite
    "test/registered/attention/test_attention.py": IMPORT + (
        'register_cuda_ci(est_time=120, stage="base-b", runner_config="1-gpu-small")\n'
        'register_cuda_ci(est_time=900, suite="nightly-1-gpu", nightly=True)\n'
        'register_amd_ci(est_time=150, suite="stage-a-test-1-gpu-small-amd")\n'),
    "test/registered/attention/test_mla.py": CUDA + (
        'register_cuda_ci(est_time=0, stage="base-b", runner_config="1-gpu-small",\n'
        '                 in_process_group=GROUP)\n'),
    "test/registered/models/test_llama.py": CUDA + (
        'register_cuda_ci(est_time=300, stage="base-c", runner_config="4-gpu-h100")\n'
        'register_cuda_ci(1800, "nightly-1-gpu", True)\n'),
    "test/registered/models/test_qwen.py": CUDA + (
        'register_cuda_ci(est_time=300, stage="base-c", runner_config="4-gpu-h100",\n'
        '                 disabled="flaky on H100, see #123")\n'),
    "test/registered/models/test_deepseek.py": CUDA + 'register_cuda_ci(2400, "nightly-1-gpu", True)\n',
    "test/registered/models/test_gemma.py": IMPORT + (
        'register_cuda_ci(est_time=200, stage="base-c", runner_config="4-gpu-h100")\n'
        'register_amd_ci(est_time=250, suite="stage-a-test-1-gpu-small-amd")\n'),
    "test/registered/cpu/test_utils_cpu.py": CPU + 'register_cpu_ci(5, "base-a-test-cpu")\n',
    "test/registered/cpu/test_tokenizer.py": CPU + 'register_cpu_ci(est_time=8, suite="base-a-test-cpu")\n',
    # one suite name under two backends: the runner selects by --hw and suite
    "test/registered/npu/test_npu_basic.py": NPU + (
        'register_npu_ci(est_time=60, stage="base-b", runner_config="1-gpu-small")\n'),
}
FILES = {
    "python/pyproject.toml": '[project]\nname = "sglang"\nversion = "0"\n',
    "python/sglang/__init__.py": "",
    "python/sglang/test/__init__.py": "",
    "python/sglang/test/ci/__init__.py": "",
    "python/sglang/test/ci/ci_register.py": CI_REGISTER,
    "python/sglang/test/ci/ci_utils.py": CI_UTILS,
    "test/run_suite.py": RUN_SUITE,
    "test/srt/test_legacy.py": "import unittest\n",  # not the runner's: never discovered
    ".github/workflows/pr-test.yml": PR_TEST,
    "scripts/ci/runner_configs.yml": RUNNER_CONFIGS_YML,
    "scripts/ci/runner_configs.py": RUNNER_CONFIGS_PY,
    "scripts/ci/utils/compute_partitions.py": COMPUTE_PARTITIONS,
    ".github/workflows/_pr-test-stage.yml": PR_TEST_STAGE,
    ".github/workflows/nightly-test.yml": NIGHTLY,
    ".github/workflows/pr-test-npu.yml": PR_TEST_NPU,
    **{rel: text + BODY for rel, text in REGISTERED.items()},
}


def sglang_tree(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return sglang_tree(tmp_path / "sglang")


def run_tree(tree: Path, *args: str) -> str:
    """The tree's own code, in a Python of its own (adoption never runs it; this test does)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "python")}
    done = subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def runner_list(tree: Path, hw: str, suite: str, nightly: bool) -> set[str]:
    out = run_tree(tree, "test/run_suite.py", "--hw", hw, "--suite", suite, "--list-only",
                   *(["--nightly"] if nightly else []))
    listed = out.split("Enabled ")[1].splitlines()[1:]
    prefix = str(tree.resolve()) + "/"
    return {line.split("- ", 1)[1].split(" (", 1)[0].removeprefix(prefix)
            for line in listed if line.startswith("  - ")}


def test_files_run_as_the_runner_starts_them(tree: Path) -> None:
    """run_unittest_files starts each file as ``python3 FILE -f``: the stages whose jobs run
    the runner take that command, and the runner's per-file timeout default with it."""
    result = derive(scan(tree))
    stages = result.data["stages"]
    for name in ("base-b-test-1-gpu-small", "base-c-test-4-gpu-h100", "nightly-1-gpu",
                 "base-a-test-cpu", "stage-a-test-1-gpu-small-amd"):
        assert stages[name]["command"] == "python3 {file} -f", name
    assert stages["base-c-test-4-gpu-h100"]["file_timeout"] == 1200  # the runner's default
    assert stages["nightly-1-gpu"]["file_timeout"] == 3600  # the job's own flag
    assert any("as test/run_suite.py starts each file (python/sglang/test/ci/ci_utils.py:" in n
               for n in result.notes)
    assert any(n.startswith("keyword(s) the configuration does not read, accepted and ignored: "
                            "in_process_group (1 call(s))") for n in result.notes)


def test_a_runner_that_starts_files_two_ways_adopts_neither(tree: Path) -> None:
    utils = tree / "python/sglang/test/ci/ci_utils.py"
    utils.write_text(utils.read_text().replace(
        'cmd = ["python3", full_path, "-f"]',
        'cmd = ["python3", full_path, "-f"] if enable_retry else ["python3", full_path, "-v"]'))
    result = derive(scan(tree))
    assert result.data["stages"]["nightly-1-gpu"]["command"] == "python"
    assert any("starts files in more than one way" in n for n in result.notes)


def test_the_runners_nightly_switch_splits_per_stage(tree: Path) -> None:
    """``t.nightly == nightly``: a run without --nightly takes only per-commit registrations,
    one with it only nightly ones, whatever starts the job. Each stage takes the side its
    job's runner call does (registrations = "nightly" / "per-commit"); no cadence-wide split
    is written. A runner whose --nightly only widens the run sets no side."""
    result = derive(scan(tree))
    stages = result.data["stages"]
    assert stages["nightly-1-gpu"]["registrations"] == "nightly"
    for name in ("base-a-test-cpu", "base-b-test-1-gpu-small", "base-c-test-4-gpu-h100"):
        assert stages[name]["registrations"] == "per-commit", name
    assert "cadences" not in result.data["policy"]
    assert result.data["policy"]["schedules"] == {"0 0 * * *": "nightly"}
    # the nightly job runs on its cron and by hand, and only there
    assert (stages["nightly-1-gpu"]["events"], stages["nightly-1-gpu"]["cadences"]) == (
        ["schedule", "workflow_dispatch"], ["nightly", "regular"])
    text = render_toml(result.data, "tool.testfleet")
    assert '[tool.testfleet.stages.nightly-1-gpu]' in text and 'registrations = "nightly"' in text
    # the same flag as a mere alias that widens the run: no side pinned
    runner = tree / "test/run_suite.py"
    runner.write_text(runner.read_text().replace("and t.nightly == nightly", "and (nightly or not t.nightly)"))
    assert not any("registrations" in s for s in derive(scan(tree)).data["stages"].values())


TRIGGERS = {
    "pr": (Trigger(event="pull_request", labels=("run-ci",)), False),
    "pr-unlabelled": (Trigger(event="pull_request"), False),
    "pr-draft": (Trigger(event="pull_request", labels=("run-ci",), draft=True), False),
    "push": (Trigger(event="push"), False),
    "nightly": (Trigger(event="schedule", cadence="nightly"), True),
}
COLLECT = ("import glob, json; from sglang.test.ci.ci_register import collect_tests; "
           "files = [f for f in glob.glob('test/registered/**/*.py', recursive=True)]; "
           "print(json.dumps(sorted([t.filename, t.backend.name.lower(), t.effective_suite] "
           "for t in collect_tests(files))))")


def test_sglang_shaped_tree_end_to_end(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "-C", str(tree), "check", "--format", "json")
    assert code == 0, out + err
    assert json.loads(out)["errors"] == 0
    project = load_project(tree)
    registry = collect(project, use_cache=False)
    theirs = sorted([f, "rocm" if b == "amd" else b, s] for f, b, s in json.loads(run_tree(tree, "-c", COLLECT)))
    ours = sorted([r.file, r.backend, r.suite] for r in registry.registrations)
    assert ours == theirs and len(ours) == 13
    # which stage (and variant) a workflow job runs, for which --hw, with which runner flag
    jobs = [("base-a-test-cpu", "", "cpu", False, ("push", "pr")),
            ("base-b-test-1-gpu-small", "cuda", "cuda", False, ("push", "pr")),
            ("base-b-test-1-gpu-small", "npu", "npu", False, ("pr",)),
            ("base-c-test-4-gpu-h100", "", "cuda", False, ("push", "pr")),
            ("stage-a-test-1-gpu-small-amd", "", "amd", False, ("push", "pr")),
            ("nightly-1-gpu", "", "cuda", True, ("nightly",))]
    for case, (trigger, _) in TRIGGERS.items():
        plan = make_plan(project, registry, PlanRequest(trigger=trigger))
        for stage, variant, hw, nightly_job, cases in jobs:
            planned = {t.file for j in plan.jobs if j.stage == stage and j.variant == variant
                       for t in j.tests}
            # the project runs a stage on this trigger only through its workflow's job; a PR
            # without run-ci, or a draft, fails the job every stage job needs
            expected = runner_list(tree, hw, stage, nightly_job) if case in cases else set()
            if case in ("pr-unlabelled", "pr-draft"):
                assert planned == set(), (case, stage, variant)
                continue
            assert planned == expected, (case, stage, variant)
            for job in plan.jobs:
                if job.stage == stage:
                    assert {t.command for t in job.tests} <= {"python3 {file} -f", None}
        assert bool(plan.jobs) == (case not in ("pr-unlabelled", "pr-draft")), case
    assert (project.config.policy.required_label, project.config.policy.required_label_scope,
            project.config.policy.drafts) == ("run-ci", "all", "skip")


def test_computed_runs_on_is_adopted_when_it_is_literal_after_all(tree: Path) -> None:
    """A fork guard's ternary of literals and a matrix include list resolve to labels, and
    so does a label the job looks up in the repository's data (runner_configs.yml)."""
    result = derive(scan(tree))
    stages = result.data["stages"]
    assert stages["base-c-test-4-gpu-h100"]["runs_on"] == ["4-gpu-h100"]
    assert stages["stage-a-test-1-gpu-small-amd"]["runs_on"] == ["linux-mi325-gpu-1"]
    assert "variants" not in stages["stage-a-test-1-gpu-small-amd"]
    assert any("taking github.repository == 'sgl-project/sglang'" in n for n in result.notes)
    told = "\n".join(n.render() for n in result.not_carried)
    assert "runs_on needs literal labels" not in told
    assert "partition count" not in told
    assert ("job base-b-test-1-gpu-small: step 'Resolve runner_config' -- its outputs were read "
            "from scripts/ci/runner_configs.yml") in told
    small = stages["base-b-test-1-gpu-small"]
    assert small["runs_on"] == ["1-gpu-5090"]
    assert any("runs-on '${{ fromJson(fromJson(inputs.check_changes).runs_on_map)" in n
               and "read from scripts/ci/runner_configs.yml with the job's own key: [\"1-gpu-5090\"]"
               in n for n in result.notes)
    # the install step the same entry names, with its time limit
    assert small["setup"] == ["timeout 20m bash scripts/ci/cuda/ci_install_dependency.sh"]
    # the partition count computed at run time: 0.75 x the stage's 30-minute run timeout per
    # shard, and the size // 3 throttle
    assert (small["target_minutes"], small["max_parallel"]) == (22.5, 1)
    assert "shards" not in small
    # the suite is registered for CUDA and NPU, each run by its own job (--hw): a variant each
    # ... each on the events of its own workflow (the NPU one runs on pull requests only), the
    # NPU one without the CUDA install
    assert small["variants"] == {
        "cuda": {"runs_on": ["1-gpu-5090"],
                 "events": ["pull_request", "push", "workflow_dispatch"]},
        "npu": {"backend": "npu", "runs_on": ["linux-aarch64-a2-1"], "setup": [],
                "events": ["pull_request"]}}
    assert stages["base-b-test-1-gpu-small"]["command"] == "python3 {file} -f"
    assert "${{" not in render_toml(result.data, "tool.testfleet")
    # a ternary on the event is not one runner: listed, with what it depends on
    pr = tree / ".github/workflows/pr-test.yml"
    pr.write_text(pr.read_text().replace("github.repository == 'sgl-project/sglang'",
                                         "github.event_name == 'schedule'"))
    result = derive(scan(tree))
    told = "\n".join(n.render() for n in result.not_carried)
    assert ("one of '4-gpu-h100', 'ubuntu-latest', depending on github.event_name; "
            "runs_on needs literal labels") in told


def test_a_runner_label_no_data_settles_stops_adoption(tree: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Without the data file the lookup indexes, the label cannot be known without running
    code: a finding naming the stage and the expression, and never a placeholder label set
    any runner of the backend would take (the stage is dormant with the reason)."""
    (tree / "scripts/ci/runner_configs.yml").unlink()
    result = derive(scan(tree))
    (finding,) = [f for f in result.findings if f.code == "adopt-runs-on"]
    assert finding.severity == "error"
    assert finding.message.startswith(
        "stage base-b-test-1-gpu-small: job base-b-test-1-gpu-small's runs-on "
        "'${{ fromJson(fromJson(inputs.check_changes).runs_on_map)")
    small = result.data["stages"]["base-b-test-1-gpu-small"]
    assert "runs_on" not in small and "runs_on" not in small["variants"]["cuda"]
    assert small["disabled"].startswith("adoption incomplete (.github/workflows/pr-test.yml job "
                                        "base-b-test-1-gpu-small): its runs-on")
    assert "self-hosted" not in render_toml(result.data, "tool.testfleet")
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 1 and "(adopt-runs-on)" in out + err
    assert not (tree / "testfleet.toml").exists() and not (tree / "pyproject.toml").exists()


def test_a_stage_whose_set_up_cannot_be_carried_is_dormant(tree: Path) -> None:
    """An install computed at run time, or tests run through a wrapper script: the stage is
    adopted dormant with the reason, never as a job that runs its tests without them; its
    triggers stay, so removing the line gives the old CI's events. A partition count
    computed at run time with no timeout to bound a shard is never one job either."""
    stage_wf = tree / ".github/workflows/_pr-test-stage.yml"
    stage_wf.write_text(stage_wf.read_text().replace(
        "bash ${{ steps.rc.outputs.install }}", "bash ${{ steps.rc.outputs.installer }}").replace(
        "        timeout-minutes: ${{ fromJson(inputs.run_timeout_minutes) }}\n", ""))
    pr = tree / ".github/workflows/pr-test.yml"
    pr.write_text(pr.read_text().replace(
        "          python3 run_suite.py --hw cuda --suite base-c-test-4-gpu-h100",
        "          bash scripts/ci/amd/amd_ci_exec.sh -w /x python3 run_suite.py --hw cuda "
        "--suite base-c-test-4-gpu-h100"))
    stages = derive(scan(tree)).data["stages"]
    small = stages["base-b-test-1-gpu-small"]
    assert small["disabled"] == (
        "adoption incomplete (.github/workflows/pr-test.yml job base-b-test-1-gpu-small): its "
        "partition count is computed at run time (scripts/ci/utils/compute_partitions.py) and no "
        "timeout of its test step bounds a shard: set shards or target_minutes; its step 'Install "
        "dependencies' (computed at run time (a ${{ }} expression)): carry it into setup; then "
        "remove this line")
    h100 = stages["base-c-test-4-gpu-h100"]
    assert "its tests run through scripts/ci/amd/amd_ci_exec.sh" in h100["disabled"]
    assert h100["events"] == ["pull_request", "push", "workflow_dispatch"]
    # no script to read the count from at all: still never one job
    (tree / "scripts/ci/utils/compute_partitions.py").unlink()
    small = derive(scan(tree)).data["stages"]["base-b-test-1-gpu-small"]
    assert ("its partition count is computed at run time and no script adoption can read "
            "decides it: set shards or target_minutes") in small["disabled"]


def test_a_matrix_over_runner_classes_becomes_variants(tree: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pr = tree / ".github/workflows/pr-test.yml"
    pr.write_text(pr.read_text().replace(
        "      matrix:\n        include:\n          - runner: linux-mi325-gpu-1\n            part: 0\n"
        "          - runner: linux-mi325-gpu-1\n            part: 1\n",
        "      matrix:\n        runner: [linux-mi300-gpu-1, linux-mi325-gpu-1]\n        part: [0, 1]\n"))
    result = derive(scan(tree))
    amd = result.data["stages"]["stage-a-test-1-gpu-small-amd"]
    assert amd["variants"] == {"linux-mi300-gpu-1": {"runs_on": ["linux-mi300-gpu-1"]},
                               "linux-mi325-gpu-1": {"runs_on": ["linux-mi325-gpu-1"]}}
    assert amd["shards"] == 2
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    assert "[stages.stage-a-test-1-gpu-small-amd.variants.linux-mi300-gpu-1]" in \
        (tree / "testfleet.toml").read_text()
    project = load_project(tree)
    plan = make_plan(project, collect(project, use_cache=False),
                     PlanRequest(trigger=Trigger(event="pull_request", labels=("run-ci",))))
    expected = runner_list(tree, "amd", "stage-a-test-1-gpu-small-amd", False)
    for variant in ("linux-mi300-gpu-1", "linux-mi325-gpu-1"):
        jobs = [j for j in plan.jobs if j.stage == "stage-a-test-1-gpu-small-amd" and j.variant == variant]
        assert {t.file for j in jobs for t in j.tests} == expected
        assert {tuple(j.runs_on) for j in jobs} == {(variant,)}


def test_report_compares_each_stage_on_the_triggers_its_job_has(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A per-commit workflow that also runs on a schedule keeps running per-commit suites
    (its cron is regular) and the nightly workflow's job runs nightly ones also when started
    by hand: each stage takes its job's side and triggers, so both sides agree on every
    trigger. The generated workflow has no push trigger: the report says so."""
    pr = tree / ".github/workflows/pr-test.yml"
    pr.write_text(pr.read_text().replace("  workflow_dispatch:\n",
                                         "  workflow_dispatch:\n  schedule:\n    - cron: '0 12 * * *'\n", 1))
    report = tmp_path / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--github",
                             "--dry-run", "--report", str(report))
    assert code == 0, out + err
    text = report.read_text()
    result = derive(scan(tree))
    assert result.data["policy"]["schedules"] == {"0 0 * * *": "nightly", "0 12 * * *": "regular"}
    assert result.data["stages"]["base-c-test-4-gpu-h100"]["cadences"] == ["regular"]
    nightly = text.split("### nightly (schedule)")[1].split("###")[0]
    manual = text.split("### manual run")[1].split("##")[0]
    assert "Same stages on both sides." in nightly and "Same stages on both sides." in manual
    assert "testfleet runs 3 file(s)" in nightly  # nightly-1-gpu's three nightly files
    push = text.split("### push")[1].split("###")[0]
    assert "The generated workflow has no `push:` trigger (`init --push-branch BRANCH` adds one)" in push
    assert "| `base-a-test-cpu` | yes | no | the generated workflow has no trigger for this event |" in push
    # a PR without run-ci fails the job every stage job needs: nothing runs on either side
    assert "### PR, no labels: testfleet runs 0 file(s) in 0 job(s)\n\nSame stages on both sides." in text
    assert "### PR, run-ci-all and run-ci: testfleet runs 9 file(s)" in text


def test_pull_request_gates_of_the_existing_ci(tree: Path) -> None:
    """SGLang's check-changes job fails a PR without 'run-ci' (and a draft); every stage job
    needs it. Gating only the GPU jobs is the policy's "gpu" scope; gating only some stages
    is those stages' requires_labels."""
    result = derive(scan(tree))
    assert {k: result.data["policy"][k] for k in ("required_label", "required_label_scope", "drafts")} \
        == {"required_label": "run-ci", "required_label_scope": "all", "drafts": "skip"}
    # the same gates as the job's own if: (the NPU job skipped, not failed)
    npu = tree / ".github/workflows/pr-test-npu.yml"
    kept = npu.read_text()
    npu.write_text(kept.split("    steps:")[0].replace(
        "    runs-on: linux-aarch64-a2-1\n",
        "    if: github.event.pull_request.draft == false && contains(github.event.pull_request.labels.*.name, 'run-ci')\n"
        "    runs-on: linux-aarch64-a2-1\n") + "    steps:\n      - run: |\n          cd test\n"
        "          python3 run_suite.py --hw npu --suite base-b-test-1-gpu-small\n")
    policy = derive(scan(tree)).data["policy"]
    assert (policy["required_label"], policy["required_label_scope"], policy["drafts"]) == ("run-ci", "all", "skip")
    npu.write_text(npu.read_text().replace("github.event.pull_request.draft == false && ", "")
                   .replace("contains(", "github.event_name != 'pull_request' || contains("))
    policy = derive(scan(tree)).data["policy"]
    assert policy["required_label"] == "run-ci" and "drafts" not in policy  # NPU runs on drafts
    npu.write_text(kept)
    pr = tree / ".github/workflows/pr-test.yml"
    text = pr.read_text()
    pr.write_text(text.replace("  base-a-test-cpu:\n    needs: [check-changes]\n", "  base-a-test-cpu:\n"))
    policy = derive(scan(tree)).data["policy"]
    assert (policy["required_label"], policy["drafts"]) == ("run-ci", "skip-gpu")
    assert "required_label_scope" not in policy  # "gpu" is the default
    npu.write_text(npu.read_text().replace("'run-ci'", "'run-ci-npu'").replace(
        "draft == true", "draft == 'never'"))
    result = derive(scan(tree))
    assert "required_label" not in result.data["policy"] and "drafts" not in result.data["policy"]
    stages = result.data["stages"]
    assert stages["base-c-test-4-gpu-h100"]["requires_labels"] == ["run-ci"]
    assert "requires_labels" not in stages["base-a-test-cpu"]
    assert "requires_labels" not in stages["base-b-test-1-gpu-small"]  # its jobs want different labels
    assert any("on a draft pull request but not the others" in n for n in result.notes)


def test_plan_warns_when_a_shard_outlasts_its_jobs_timeout(tree: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A shard estimated longer than its job's timeout would be cancelled before its tests
    end: the plan says so, once per stage, with the way out."""
    attention = tree / "test/registered/attention/test_attention.py"
    attention.write_text(attention.read_text().replace(
        'register_cuda_ci(est_time=120, stage="base-b"', 'register_cuda_ci(est_time=15000, stage="base-b"'))
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    project = load_project(tree)
    plan = make_plan(project, collect(project, use_cache=False),
                     PlanRequest(trigger=Trigger(event="push")))
    over = [w for w in plan.warnings if "longer than the job's" in w]
    assert over == ["stage base-b-test-1-gpu-small variant cuda: 1 of 1 shard(s) are estimated "
                    "longer than the job's 240-minute timeout (longest 250.0 min): set "
                    "target_minutes or raise job_timeout_minutes"]
    attention.write_text(attention.read_text().replace("est_time=15000", "est_time=120"))
    plan = make_plan(project, collect(project, use_cache=False),
                     PlanRequest(trigger=Trigger(event="push")))
    assert not [w for w in plan.warnings if "longer than the job's" in w]
