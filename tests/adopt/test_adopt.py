"""Adopting an existing tree: the derived config makes `testfleet check` pass on the
tree as it is, and `testfleet plan` keeps the tree's selection semantics."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from support import run_cli
from testfleet.adopt.derive import derive
from testfleet.adopt.roots import detect_roots
from testfleet.adopt.scaffold import scaffold
from testfleet.adopt.scan import scan
from testfleet.adopt.toml_text import render_toml
from testfleet.config import load_project, validate_config
from testfleet.planning import make_plan
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

MI300X = "stage-c-4-gpu-mi300x"


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def strip_config(project: Path) -> None:
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text[: text.index("[tool.testfleet]")])


def make_gate_explicit(project: Path) -> None:
    """The example's grad_norm gate leans on a config default; spell it out so the
    tree stands on its own (what an adopted tree must do, see the finding test)."""
    path = project / "tests" / "unit" / "test_train_curve_grad_norm.py"
    text = path.read_text()
    new = text.replace('register_ci_gate(metric_key="train/grad_norm", hard_max=100.0)',
                       'register_ci_gate(metric_key="train/grad_norm", hard_max=100.0, '
                       'steps="all", constraint={"rel_up": 0.02, "rel_down": 0.02})')
    assert new != text
    path.write_text(new)


@pytest.fixture
def adopted(tmp_path: Path, example_project: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    import shutil

    copy = tmp_path / "adopted"
    shutil.copytree(example_project, copy)
    strip_config(copy)
    make_gate_explicit(copy)
    code, out, err = run_cli(capsys, "-C", str(copy), "init", "--from-existing")
    assert code == 0, out + err
    return copy


def test_check_passes_on_the_adopted_tree_unchanged(adopted: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(adopted), "check", "--format", "json")
    assert code == 0, out + err
    config = load_project(adopted).config
    assert set(config.stages) == {"stage-b-cpu", "stage-c-4-gpu-h200", "stage-c-8-gpu-h100", MI300X}
    assert config.stages["stage-b-cpu"].command == "python"  # script-style files
    assert config.stages["stage-c-4-gpu-h200"].backend == "cuda"
    assert config.stages[MI300X].backend == "rocm"  # register_rocm_ci and register_amd_ci
    assert {"megatron", "amd", "fsdp", "long", "ft-long"} <= set(config.labels)
    # excludes are files, never a directory glob that would swallow the next new test
    assert "tests/manual/test_profile_by_hand.py" in config.exclude
    assert not any("*" in e for e in config.exclude)


TRIGGERS = [
    Trigger(event="push"),
    Trigger(event="pull_request", labels=("run-ci-megatron",)),
    Trigger(event="pull_request", labels=("run-ci-amd", "run-ci-fsdp", "run-ci-nope")),
    Trigger(event="pull_request", labels=("run-ci-image",)),
    Trigger(event="pull_request", labels=("run-ci-all", "nightly")),
    Trigger(event="schedule", cadence="nightly"),
    Trigger(event="schedule", cadence="weekly"),
    Trigger(event="workflow_dispatch", cadence="release"),
    Trigger(event="workflow_dispatch", match_all_labels=True),
]


def fates(project_dir: Path, trigger: Trigger) -> dict[tuple[str, str], str]:
    project = load_project(project_dir)
    plan = make_plan(project, collect(project), PlanRequest(trigger=trigger))
    out = {(t.file, j.backend): "run" for j in plan.jobs for t in j.tests}
    out.update({(s.file, s.backend): s.reason for s in plan.skipped})
    return out


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: f"{t.event}-{t.cadence}-{'+'.join(t.labels)}")
def test_plan_keeps_the_tree_selection_semantics(trigger: Trigger, adopted: Path,
                                                 example_project: Path) -> None:
    """Every marker registration gets the same fate under the adopted config as under
    the hand-written one -- except where the hand-written config itself decides
    (the dormant stage) and the implicit directory the tree cannot know about."""
    make_gate_explicit(example_project)
    original = fates(example_project, trigger)
    derived = fates(adopted, trigger)
    compared = 0
    for key, fate in derived.items():
        if original[key] == "stage-dormant":
            continue
        assert fate == original[key], key
        compared += 1
    assert compared >= 20
    implicit = {k for k in original if k[0].startswith("tests/fast/")}
    assert implicit and not implicit & set(derived)


def test_adopted_gpu_stages_need_authorization_on_fork_prs(adopted: Path) -> None:
    result = fates(adopted, Trigger(event="pull_request", fork=True))
    gpu = {k: v for k, v in result.items() if k[1] != "cpu"}
    assert gpu and set(gpu.values()) <= {"unauthorized", "disabled"}


TREE = {
    "pyproject.toml": """
        [project]
        name = "legacy"
        version = "1.0"
        """,
    "tests/ci/ci_register.py": """
        def register_cuda_ci(est_time, suite, *, labels=None, nightly=False, disabled=None):
            pass
        register_npu_ci = register_cuda_ci
        """,
    "tests/conftest.py": "import pytest\n",
    "tests/gpu/test_a.py": """
        from tests.ci.ci_register import register_cuda_ci
        register_cuda_ci(est_time=600, suite="gpu-h100", labels=["moe"])
        def test_a(): pass
        """,
    "tests/gpu/test_b.py": """
        from tests.ci.ci_register import register_cuda_ci, register_amd_ci
        register_cuda_ci(300, "gpu-h100")
        register_amd_ci(300, "gpu-mi300", labels=["moe", "amd"], disabled="flaky, see #12")
        def test_b(): pass
        """,
    "tests/npu/test_c.py": """
        from vendor.ascend.ci import register_npu_ci
        register_npu_ci(est_time=120, suite="npu-910b", labels=["ascend"], nightly=True)
        def test_c(): pass
        """,
    "tests/cpu/test_d.py": """
        from testfleet import register_cpu_ci
        register_cpu_ci(5, "cpu-fast")
        def test_d(): pass
        """,
    "tests/cpu/test_unregistered.py": "def test_e(): pass\n",
    "tests/plain/test_f.py": "def test_f(): pass\n",
    "tests/plain/deeper/test_g.py": "def test_g(): pass\n",
}


def test_markers_imported_from_anywhere_and_custom_backends(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "legacy", TREE)
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--from-existing")
    assert code == 0, out + err
    config = load_project(root).config
    assert config.backends["npu"].markers == ["register_npu_ci"]
    assert config.backends["npu"].labels_required is True
    # one label-less CUDA registration: labels become optional for cuda, as the tree has it
    assert config.backends["cuda"].labels_required is False
    assert config.stages["gpu-mi300"].backend == "rocm"
    assert config.stages["npu-910b"].trusted_only is True
    assert config.stages["cpu-fast"].runs_on == ["ubuntu-latest"]
    assert set(config.labels) == {"moe", "amd", "ascend"}
    assert config.exclude == ["tests/cpu/test_unregistered.py", "tests/plain/deeper/test_g.py",
                              "tests/plain/test_f.py"]
    code, out, err = run_cli(capsys, "-C", str(root), "check")
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--cadence", "nightly",
                             "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert {"gpu-h100", "npu-910b", "cpu-fast"} <= {j["stage"] for j in plan["jobs"]}
    assert any(s["reason"] == "disabled" and s["suite"] == "gpu-mi300" for s in plan["skipped"])


BROKEN = {
    "tests/test_ok.py": """
        from testfleet import register_cuda_ci
        register_cuda_ci(est_time=60, suite="gpu", labels=["ok"])
        """,
    "tests/test_nonliteral.py": """
        from testfleet import register_cuda_ci
        MINUTES = 5
        register_cuda_ci(est_time=MINUTES * 60, suite="gpu", labels=["ok"])
        """,
    "tests/test_attribute.py": """
        import ci
        ci.register_cuda_ci(est_time=60, suite="gpu", labels=["ok"])
        """,
    "tests/test_indented.py": """
        from testfleet import register_cuda_ci
        if True:
            register_cuda_ci(est_time=60, suite="gpu", labels=["ok"])
        """,
    "tests/test_alias.py": """
        from testfleet import register_cuda_ci as reg
        reg(est_time=60, suite="gpu", labels=["ok"])
        """,
    "tests/test_duplicate.py": """
        from testfleet import register_cuda_ci
        register_cuda_ci(est_time=60, suite="gpu", labels=["ok"])
        register_cuda_ci(est_time=90, suite="gpu", labels=["ok"])
        """,
    "tests/test_badlabel.py": """
        from testfleet import register_cuda_ci
        register_cuda_ci(est_time=60, suite="gpu", labels=["has space"])
        """,
    "tests/test_conflict.py": """
        from testfleet import register_rocm_ci
        register_rocm_ci(est_time=60, suite="gpu", labels=["ok"])
        """,
    "tests/test_keyword.py": """
        from testfleet import register_cuda_ci
        register_cuda_ci(est_time=60, suite="gpu", labels=["ok"], num_gpus=8)
        """,
    "tests/test_gate.py": """
        from testfleet import register_ci_gate, register_cpu_ci
        register_cpu_ci(est_time=5, suite="cpu")
        register_ci_gate(metric_key="train/loss")
        """,
    "tests/test_estzero.py": """
        from testfleet import register_cpu_ci
        register_cpu_ci(est_time=0, suite="cpu")
        """,
    "tests/test_unclosed.py": """
        from testfleet import register_cpu_ci
        register_cpu_ci(est_time=5, suite="cpu"
        """,
    "tests/test_syntax_later.py": """
        from testfleet import register_cpu_ci
        register_cpu_ci(est_time=5, suite="cpu")
        def broken(:
            pass
        """,
    "tests/unregistered/test_broken.py": "def test_x(:\n    pass\n",
}

EXPECTED = {
    ("tests/test_nonliteral.py", 3, "adopt-call", "argument est_time is not a literal"),
    ("tests/test_attribute.py", 2, "adopt-unread", "called as an attribute (ci.register_cuda_ci)"),
    ("tests/test_indented.py", 3, "adopt-unread", "called inside `if True:`"),
    ("tests/test_alias.py", 1, "adopt-unread", "imported under another name (reg)"),
    ("tests/test_duplicate.py", 3, "adopt-duplicate", "second registration of this file to stage 'gpu' (first at line 2)"),
    ("tests/test_badlabel.py", 2, "adopt-label", "label 'has space' is not a valid label name"),
    ("tests/test_keyword.py", 2, "adopt-call", "unknown keyword 'num_gpus'"),
    ("tests/test_gate.py", 3, "adopt-gate-default", "register_ci_gate(metric_key='train/loss') omits steps and constraint"),
    ("tests/test_estzero.py", 2, "adopt-call", "est_time must be a number > 0, got 0"),
    ("tests/test_unclosed.py", 2, "adopt-syntax", "is never closed"),
    ("tests/test_syntax_later.py", 3, "adopt-file-syntax", "syntax error: "),
}


def test_what_cannot_be_adopted_is_reported_with_its_place(tmp_path: Path) -> None:
    root = write(tmp_path / "broken", BROKEN)
    (root / "tests" / "test_latin1.py").write_bytes(
        b"# caf\xe9\nfrom testfleet import register_cpu_ci\nregister_cpu_ci(5, 'cpu')\n")
    scanned = scan(root)
    result = derive(scanned)
    got = {(f.file, f.line, f.code, f.message) for f in result.findings}
    for file, line, code, fragment in EXPECTED:
        assert any(g[0] == file and g[1] == line and g[2] == code and fragment in g[3]
                   for g in got), (file, line, code, fragment, sorted(got))
    assert any(g[0] == "tests/test_latin1.py" and g[2] == "adopt-encoding" for g in got)
    # an unregistered file is excluded, so its syntax is not 'check's business
    assert not any(g[0] == "tests/unregistered/test_broken.py" for g in got)
    assert "tests/unregistered/test_broken.py" in result.data["exclude"]
    # a file whose registration could not be read is a finding, never an exclude
    unread = {"tests/test_nonliteral.py", "tests/test_attribute.py", "tests/test_indented.py",
              "tests/test_alias.py", "tests/test_unclosed.py", "tests/test_latin1.py"}
    assert unread <= scanned.marked
    assert not unread & set(result.data["exclude"])
    # the valid calls are still adopted, and the config derived from them is valid
    adopted_files = {c.file for c in scanned.calls}
    assert {"tests/test_ok.py", "tests/test_duplicate.py", "tests/test_gate.py"} <= adopted_files
    config = validate_config(result.data)
    assert config.stages["gpu"].backend == "cuda"
    # one suite name under two backends: a variant per backend, not a finding
    assert not any(g[0] == "tests/test_conflict.py" for g in got)
    assert config.stages["gpu"].accepted_backends() == {"cuda", "rocm"}
    assert set(config.labels) == {"ok"}


def test_init_exits_1_and_says_so_when_something_could_not_be_adopted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "broken", BROKEN)
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--from-existing")
    assert code == 1
    assert "tests/test_nonliteral.py:3:1: error: register_cuda_ci(...): argument est_time" in err
    assert "problem(s) in the tree stand between it and a clean 'testfleet check'" in err
    assert not (root / "testfleet.toml").exists()  # a command that fails writes nothing
    # --dry-run says the same things with the same status
    dry_code, dry_out, dry_err = run_cli(capsys, "-C", str(root), "init", "--from-existing",
                                         "--dry-run")
    assert dry_code == 1 and "--- testfleet.toml" in dry_out
    assert [ln for ln in dry_err.splitlines() if ": error: " in ln] == \
        [ln for ln in err.splitlines() if ": error: " in ln]
    assert not (root / "testfleet.toml").exists()
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--from-existing", "--allow-findings")
    assert code == 0 and "problem(s) remain" in err
    assert (root / "testfleet.toml").is_file()  # the part that could be adopted is written


def test_example_gate_without_config_default_is_reported(tmp_path: Path,
                                                         example_project: Path) -> None:
    strip_config(example_project)
    result = derive(scan(example_project))
    (finding,) = [f for f in result.findings if f.code == "adopt-gate-default"]
    assert finding.file == "tests/unit/test_train_curve_grad_norm.py"
    assert '[tool.testfleet.gate.defaults."train/grad_norm"]' in finding.message


def test_pattern_widens_only_as_far_as_the_registered_files_need(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "scripts", {
        "tests/e2e/run_fsdp.py": """
            from testfleet import register_cuda_ci
            register_cuda_ci(600, "gpu", labels=["fsdp"])
            if __name__ == "__main__":
                print("ran")
            """,
        "tests/e2e/utils.py": "X = 1\n",
        "tests/__init__.py": "",
    })
    result = derive(scan(root))
    assert result.data["pattern"] == "*.py"
    assert result.data["exclude"] == ["tests/__init__.py", "tests/e2e/utils.py"]
    assert result.data["stages"]["gpu"]["command"] == "python"
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--from-existing")
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "-C", str(root), "check")
    assert code == 0, out + err


def test_roots_are_detected_where_the_markers_are(tmp_path: Path) -> None:
    root = write(tmp_path / "r", {
        "test/test_a.py": "def test_a(): pass\n",
        "integration/gpu/test_b.py": "from x import register_cuda_ci\n"
                                     "register_cuda_ci(5, 's', labels=['l'])\n",
        "src/pkg/mod.py": "register_thing = 1\n",
        ".venv/lib/test_c.py": "from x import register_cuda_ci\nregister_cuda_ci(5, 's')\n",
    })
    assert detect_roots(root) == ["integration", "test"]


def test_crons_come_only_from_workflows_that_run_tests(tmp_path: Path) -> None:
    """An image-build workflow's cron is not a test cadence (it was taken as the nightly);
    the test workflow's crons are, with the cadence the project's schedule table gives."""
    root = write(tmp_path / "w", {
        ".github/workflows/docker.yml": """
            on:
              schedule:
                - cron: '0 0,12 * * *'
            jobs:
              build:
                runs-on: ubuntu-latest
                steps:
                  - run: docker build -t img .
            """,
        ".github/workflows/tests.yml": """
            on:
              pull_request:
              schedule:
                - cron: '0 2 * * *'
                - cron: "30 4 * * 0"   # weekly
                - cron: '0 5 * * 1'
            jobs:
              cpu:
                runs-on: ubuntu-latest
                steps:
                  - run: python -m pytest tests --suite=cpu
            """,
        ".github/workflows/testfleet.yml": "# Generated by 'testfleet init --github' (x)\n"
                                           "on:\n  schedule:\n    - cron: '1 1 * * *'\n",
        "tests/ci/ci_register.py": """
            NIGHTLY = "nightly"
            SCHEDULES = {"0 2 * * *": (NIGHTLY, ()), "0 5 * * 1": "release"}
            def register_cpu_ci(est_time, suite): pass
            """,
        "tests/test_a.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(5, 'cpu')\n",
    })
    result = derive(scan(root))
    assert result.data["policy"]["schedules"] == {"0 2 * * *": "nightly", "30 4 * * 0": "weekly",
                                                  "0 5 * * 1": "release"}
    ignored = [n.render() for n in result.not_carried if "cron" in n.what]
    assert ignored == [".github/workflows/docker.yml: cron '0 0,12 * * *' -- this workflow runs "
                       "no tests, so its schedule is not a test cadence"]


@pytest.mark.parametrize("prefix", ["", "tool.testfleet"])
def test_toml_rendering_round_trips(prefix: str) -> None:
    data = {
        "roots": ["tests", "other dir"],
        "pattern": "test_*.py",
        "exclude": ['a "quoted"/**', "uni\u00e7ode/x\n.py"],
        "implicit": [{"path": "tests/fast", "backend": "cpu", "suite": "s.a", "est_time": 2.5}],
        "labels": {"a.b": "it's \"quoted\"\nand multi-line", "x_y": "\\backslash\t"},
        "backends": {"npu": {"markers": ["register_npu_ci"], "labels_required": False, "gpu": True}},
        "stages": {"s.a": {"backend": "cpu", "shards": 3, "needs": []},
                   "gpu": {"backend": "npu", "runs_on": ["self-hosted", "npu"], "target_minutes": 7.5}},
        "policy": {"schedules": {"0 3 * * 1-6": "nightly"}},
    }
    text = render_toml(data, prefix, "a header\n\nwith a blank line")
    loaded = tomllib.loads(text)
    if prefix:
        loaded = loaded["tool"]["testfleet"]
    assert loaded == data
    validate_config(loaded)


def test_scaffold_is_valid_and_registers_everything(tmp_path: Path) -> None:
    data = scaffold(tmp_path)
    config = validate_config(data)
    assert config.implicit[0].path == "tests" and config.implicit[0].suite == "stage-cpu"
    assert set(config.policy.schedules.values()) == {"nightly", "weekly"}
    assert re.fullmatch(r"[\d *,-]+", next(iter(config.policy.schedules)))


def test_setup_scripts_are_multi_line_strings_and_long_values_wrap() -> None:
    """A setup step is written as the script it is (a multi-line string, backslashes as
    written), a long one-line value wraps under the width, a long inline table becomes a
    table of its own; every value reads back exactly."""
    wait = ("for i in $(seq 1 60); do\n  if nvidia-smi -L >/dev/null 2>&1; then\n"
            "    exit 0\n  fi\n  sleep 2\ndone\necho \"not ready\" >&2\nexit 1")
    options = " ".join(["--gpus all --ipc=host --shm-size=32g --ulimit memlock=-1"] * 6)
    data = {"stages": {"gpu": {"backend": "cuda", "setup": [wait, "pip install -r requirements.txt",
                                                            'printf "a\\\\tb\\n"'],
                               "container": {"image": "org/img:dev", "options": options}}}}
    text = render_toml(data, "tool.testfleet")
    assert tomllib.loads(text)["tool"]["testfleet"] == data
    assert "'''\nfor i in $(seq 1 60); do\n  if nvidia-smi -L" in text
    assert "[tool.testfleet.stages.gpu.container]" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_any_string_round_trips_through_the_toml_writer() -> None:
    import random

    from testfleet.adopt.toml_text import _string

    rng = random.Random(7)
    alphabet = "ab \\\"'\n\t\x01\x1f\x0b$"
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 220)))
        for block in (True, False):
            assert tomllib.loads("x = " + _string(s, block))["x"] == s, repr(s)
