"""Real-tree shapes (#12): small copies of how miles and SGLang write their test files,
read with configuration only. Each feature appears positive and negative; the expected
registrations, rejected calls, findings and fates are written out here by hand from
the projects' own collectors (tests/ci/ci_register.py in miles,
python/sglang/test/ci/ci_register.py + test/run_suite.py in SGLang)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from testfleet.config import load_project
from testfleet.registry import collect

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees"


@pytest.fixture
def copy(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(TREES / name, dest)
        return dest

    return make


MILES_REGISTRATIONS = {
    # implicit tests/fast file
    ("tests/fast/test_utils_fast.py", "cpu", "stage-a-cpu"),
    # an explicit marker in tests/fast replaces the implicit registration
    ("tests/fast/test_moved_to_b.py", "cpu", "stage-b-cpu"),
    ("tests/fast-gpu/test_kernel_quick.py", "cuda", "stage-c-2-gpu-h200"),
    ("tests/e2e/megatron/test_qwen3_train.py", "cuda", "stage-c-4-gpu-h200"),
    ("tests/e2e/megatron/test_qwen3_train.py", "rocm", "stage-c-4-gpu-mi350"),
    ("tests/e2e/megatron/test_long_soak.py", "cuda", "stage-c-4-gpu-h200"),
    ("tests/e2e/amd/test_mi350_nightly.py", "rocm", "nightly-stage-c-8-gpu-mi350"),
    # two CPU stages from one file
    ("tests/e2e/test_two_cpu_stages.py", "cpu", "stage-a-cpu"),
    ("tests/e2e/test_two_cpu_stages.py", "cpu", "stage-b-cpu"),
    # the first of two registrations to one stage stays valid
    ("tests/e2e/test_dup_stage.py", "cuda", "stage-c-4-gpu-h200"),
    ("tests/ci/test/test_metric_selection.py", "cpu", "stage-a-cpu"),
}
MILES_INVALID = {
    ("tests/e2e/test_dup_stage.py", 4, "stage-c-4-gpu-h200", "duplicate-stage"),
    ("tests/e2e/test_bad_label.py", 3, "stage-c-2-gpu-h200", "unknown-label"),
}
MILES_FINDINGS = {
    ("tests/e2e/test_dup_stage.py", 4, "error", "duplicate-stage"),
    ("tests/e2e/test_bad_label.py", 3, "error", "unknown-label"),
    ("tests/manual/test_launch_manual.py", 0, "warning", "outside-roots"),
    ("testfleet.toml", 35, "warning", "coverage-hole"),  # stage-c-2-gpu-h200: disabled + invalid
    ("testfleet.toml", 39, "warning", "coverage-hole"),  # stage-c-4-gpu-mi350: all disabled
    # not here: the register_ci_gate calls inside unit tests of tests/ci/test (per-file-ignores),
    # tests/manual/helpers.py (does not look like a test)
}

SGLANG_REGISTRATIONS = {
    ("test/registered/kernels/test_tree_mask.py", "cuda", "base-b-kernel-unit-test-1-gpu-large"),
    ("test/registered/kernels/test_tree_mask.py", "rocm", "jit-kernel-unit-test-amd"),
    # three registrations, two for one backend (per-commit + nightly kernel suite)
    ("test/registered/kernels/test_jit_sweep.py", "cuda", "base-b-kernel-unit-test-1-gpu-large"),
    ("test/registered/kernels/test_jit_sweep.py", "cuda", "nightly-kernel-1-gpu"),
    ("test/registered/kernels/test_jit_sweep.py", "rocm", "jit-kernel-unit-test-amd"),
    ("test/registered/npu/test_janus_pro.py", "npu", "nightly-4-npu-a3"),
    ("test/registered/cpu/test_mm_input.py", "cuda", "base-b-test-1-gpu-large"),
    ("test/registered/cpu/test_mm_input.py", "cpu", "base-a-test-cpu"),
    # est_time 0 and disabled given positionally
    ("test/registered/misc/test_helper_zero.py", "cpu", "base-a-test-cpu"),
    # in_process_group is declared ignored: not even a literal
    ("test/registered/misc/test_grouped.py", "cuda", "base-b-test-1-gpu-small"),
    ("test/registered/misc/test_pd_parity.py", "cuda", "extra-b-test-8-gpu-h200"),
    # the invalid stage-only call does not hide its valid positional sibling
    ("test/registered/misc/test_bad_shape.py", "cuda", "nightly-1-gpu"),
    ("test/registered/misc/test_register_unit.py", "cuda", "base-b-test-1-gpu-small"),
    ("test/registered/misc/test_disabled_no_main.py", "cuda", "base-b-test-1-gpu-small"),
    ("test/registered/misc/test_no_main.py", "cuda", "base-b-test-1-gpu-small"),
    # one suite name under two backends (the stage opts in with a variant per backend)
    ("test/registered/misc/test_small_model.py", "cuda", "base-a-test-1-gpu-small"),
    ("test/registered/npu/test_npu_small_model.py", "npu", "base-a-test-1-gpu-small"),
}
SGLANG_INVALID = {("test/registered/misc/test_bad_shape.py", 5, "", "missing-argument")}
SGLANG_FINDINGS = {
    ("test/registered/misc/test_bad_shape.py", 5, "error", "missing-argument"),
    # SGLang's collector refuses a file without a registration; so does testfleet
    ("test/registered/npu/test_kimi_vl_commented.py", 0, "error", "unregistered"),
    # enabled and no main block: `python3 FILE` would pass without running anything
    ("test/registered/misc/test_no_main.py", 3, "warning", "no-main-call"),
    # a unit test of the marker: a warning, not an error
    ("test/registered/misc/test_register_unit.py", 10, "warning", "marker-in-function"),
    ("testfleet.toml", 70, "warning", "coverage-hole"),
    ("testfleet.toml", 70, "warning", "unused-stage"),
    # outside the root with pattern "*.py": only files that look like tests or name a marker,
    # at most 5 per directory and a summary (8 in test/srt); python/sglang/srt/*.py are not
    # tests (layer.py's register_buffer is not a marker)
    ("test/srt", 0, "warning", "outside-roots"),
    ("test/srt/legacy_check.py", 0, "warning", "outside-roots"),
    *{(f"test/srt/test_old_{i}.py", 0, "warning", "outside-roots") for i in range(1, 5)},
    # not here: test_disabled_no_main.py (disabled, so no-main-call is silent), conftest.py,
    # __init__.py and cpu/utils.py (excluded like run_suite.py does)
}


@pytest.mark.parametrize(("name", "regs", "invalid", "findings"), [
    ("miles", MILES_REGISTRATIONS, MILES_INVALID, MILES_FINDINGS),
    ("sglang", SGLANG_REGISTRATIONS, SGLANG_INVALID, SGLANG_FINDINGS),
])
def test_tree_reads_as_its_project_collector_does(copy, run_cli, name, regs, invalid, findings) -> None:
    root = copy(name)
    registry = collect(load_project(root), use_cache=False, thorough=True)
    assert {(r.file, r.backend, r.suite) for r in registry.registrations} == regs
    assert {(i.file, i.line, i.suite, i.code) for i in registry.invalid} == invalid
    code, out, _ = run_cli("-C", str(root), "check", "--format", "json")
    got = {(f["file"], f["line"], f["severity"], f["code"]) for f in json.loads(out)["findings"]}
    assert got == findings
    assert code == 1  # each tree carries its negative cases
    # a warm (cached) run agrees with the cold one
    warm = collect(load_project(root))
    assert {(r.file, r.backend, r.suite) for r in warm.registrations} == regs
    assert {(i.file, i.line, i.suite, i.code) for i in warm.invalid} == invalid


def _fates(run_cli, root: Path, *args: str) -> tuple[int, dict[tuple[str, str], str]]:  # type: ignore[no-untyped-def]
    out_file = root / "plan.json"
    code, _, _ = run_cli("-C", str(root), "plan", "--format", "json", "--output", str(out_file), *args)
    plan = json.loads(out_file.read_text())
    fates = {(t["file"], j["stage"]): "job" for j in plan["jobs"] for t in j["tests"]}
    fates.update({(s["file"], s["suite"]): s["reason"] for s in plan["skipped"]})
    return code, fates


def test_miles_nightly_plan_keeps_every_valid_test(copy, run_cli) -> None:
    code, fates = _fates(run_cli, copy("miles"), "--cadence", "nightly")
    assert code == 1  # planned, but the tree has errors
    assert fates == {
        ("tests/fast/test_utils_fast.py", "stage-a-cpu"): "job",
        ("tests/fast/test_moved_to_b.py", "stage-b-cpu"): "job",
        ("tests/fast-gpu/test_kernel_quick.py", "stage-c-2-gpu-h200"): "disabled",
        ("tests/e2e/megatron/test_qwen3_train.py", "stage-c-4-gpu-h200"): "job",
        ("tests/e2e/megatron/test_qwen3_train.py", "stage-c-4-gpu-mi350"): "disabled",
        # labels megatron + long: nightly excludes long, but megatron still selects it (as in miles)
        ("tests/e2e/megatron/test_long_soak.py", "stage-c-4-gpu-h200"): "job",
        ("tests/e2e/amd/test_mi350_nightly.py", "nightly-stage-c-8-gpu-mi350"): "job",
        ("tests/e2e/test_two_cpu_stages.py", "stage-a-cpu"): "job",
        ("tests/e2e/test_two_cpu_stages.py", "stage-b-cpu"): "job",
        ("tests/e2e/test_dup_stage.py", "stage-c-4-gpu-h200"): "invalid",
        ("tests/e2e/test_bad_label.py", "stage-c-2-gpu-h200"): "invalid",
        ("tests/ci/test/test_metric_selection.py", "stage-a-cpu"): "job",
    }


def test_miles_pr_plan_selects_by_label(copy, run_cli) -> None:
    code, fates = _fates(run_cli, copy("miles"), "--event", "pull_request", "--labels", "run-ci-fsdp")
    assert code == 1
    assert fates[("tests/e2e/test_two_cpu_stages.py", "stage-b-cpu")] == "job"  # fsdp requested
    assert fates[("tests/e2e/megatron/test_qwen3_train.py", "stage-c-4-gpu-h200")] == "not-selected-by-labels"
    assert fates[("tests/e2e/amd/test_mi350_nightly.py", "nightly-stage-c-8-gpu-mi350")] == "nightly-only"
    assert fates[("tests/e2e/test_bad_label.py", "stage-c-2-gpu-h200")] == "invalid"


def test_fixing_the_errors_makes_the_plan_exit_0(copy, run_cli) -> None:
    root = copy("miles")
    (root / "tests/e2e/test_bad_label.py").write_text(
        (root / "tests/e2e/test_bad_label.py").read_text().replace("megatorn", "megatron"))
    dup = root / "tests/e2e/test_dup_stage.py"
    dup.write_text(dup.read_text().replace(
        'register_cuda_ci(est_time=900, suite="stage-c-4-gpu-h200", labels=["fsdp"])\n', ""))
    code, fates = _fates(run_cli, root, "--cadence", "nightly")
    assert code == 0 and "invalid" not in fates.values()
    assert fates[("tests/e2e/test_bad_label.py", "stage-c-2-gpu-h200")] == "job"


def _lanes(run_cli, root: Path, *args: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    out_file = root / "plan.json"
    run_cli("-C", str(root), "plan", "--format", "json", "--output", str(out_file), *args)
    plan = json.loads(out_file.read_text())
    lanes: dict[str, list[str]] = {}
    for job in plan["jobs"]:
        key = job["stage"] + (f".{job['variant']}" if job.get("variant") else "")
        lanes.setdefault(key, []).extend(t["file"] for t in job["tests"])
    return {k: sorted(v) for k, v in lanes.items()}


def test_sglang_runs_select_what_run_suite_selects(copy, run_cli) -> None:
    """Per CI run, the files run_suite.py's filter_tests picks (backend == hw, effective
    suite == suite, nightly == --nightly, not disabled), by hand; plus the file SGLang's
    collector refuses outright (test_no_main.py: enabled without a main block), which
    testfleet runs with a warning, and the refused test_bad_shape.py's valid sibling."""
    root = copy("sglang")
    reg = "test/registered/"
    per_commit = _lanes(run_cli, root, "--event", "pull_request")
    assert per_commit == {
        "base-a-test-cpu": [reg + "cpu/test_mm_input.py"],
        "base-a-test-1-gpu-small.cuda": [reg + "misc/test_small_model.py"],
        "base-a-test-1-gpu-small.npu": [reg + "npu/test_npu_small_model.py"],
        "base-b-test-1-gpu-small": [reg + "misc/test_grouped.py", reg + "misc/test_no_main.py",
                                    reg + "misc/test_register_unit.py"],
        "base-b-test-1-gpu-large": [reg + "cpu/test_mm_input.py"],
        "base-b-kernel-unit-test-1-gpu-large": [reg + "kernels/test_jit_sweep.py",
                                                reg + "kernels/test_tree_mask.py"],
        "extra-b-test-8-gpu-h200": [reg + "misc/test_pd_parity.py"],
        "jit-kernel-unit-test-amd": [reg + "kernels/test_jit_sweep.py",
                                     reg + "kernels/test_tree_mask.py"],
    }
    nightly = _lanes(run_cli, root, "--cadence", "nightly")
    assert nightly == {  # the exact split: nightly=True registrations only
        "nightly-kernel-1-gpu": [reg + "kernels/test_jit_sweep.py"],
        "nightly-1-gpu": [reg + "misc/test_bad_shape.py"],
        "nightly-4-npu-a3": [reg + "npu/test_janus_pro.py"],
    }
