"""Benchmark: testfleet against a real project's own collector and runner, on its unmodified tree.

    python benchmarks/real_trees.py [--miles /work/trees/miles] [--repeat 5]

The tree's ``tests/`` is copied into a temporary directory beside
``benchmarks/real_trees/miles.toml`` (configuration only: no test file is edited).
Then, in the same run:

* the project's own collector (``tests/ci/ci_register.py``: ``discover_ci_files`` +
  ``collect_tests``) runs in a subprocess from the project's checkout, without
  writing bytecode, and its registrations are compared with ``testfleet list``;
* for every CI run the project's workflows dispatch (each ``run_suite.py --hw H
  --suite S`` in ``.github/workflows/*.yml``) under each trigger below, the files the
  project's runner would run (``run_suite.filter_tests`` with ``ci_policy.resolve_policy``)
  are compared with the files of that stage in ``testfleet plan``;
* collection time: the project's collector vs ``testfleet list`` (cold and warm cache),
  medians of ``--repeat`` runs, whole-process wall time.

Prints a Markdown section for BENCHMARKS.md; exits 1 if anything differs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "real_trees" / "miles.toml"

# (miles cadence, miles raw PR labels) and the same trigger as testfleet plan arguments.
TRIGGERS: list[tuple[str, list[str], list[str]]] = [
    ("regular", [], ["--event", "pull_request"]),
    ("regular", ["run-ci-megatron"], ["--event", "pull_request", "--labels", "run-ci-megatron"]),
    ("regular", ["run-ci-fsdp", "run-ci-amd"], ["--event", "pull_request", "--labels", "run-ci-fsdp,run-ci-amd"]),
    ("regular", ["run-ci-image"], ["--event", "pull_request", "--labels", "run-ci-image"]),
    ("regular", ["run-ci-all"], ["--event", "pull_request", "--labels", "run-ci-all"]),
    ("nightly", [], ["--cadence", "nightly"]),
    ("weekly", [], ["--cadence", "weekly"]),
    ("release", [], ["--cadence", "release"]),
]

# Runs in the project's checkout: its own collector and selection, printed as JSON.
PROJECT_SIDE = r"""
import json, sys, time
t0 = time.perf_counter()
from tests.ci.ci_register import collect_tests, discover_ci_files
regs = collect_tests(discover_ci_files(), sanity_check=True)
elapsed = time.perf_counter() - t0
out = {"seconds": elapsed, "registrations": sorted(
    [r.filename, r.backend.name.lower(), r.suite, r.nightly, r.disabled is not None, sorted(r.labels)]
    for r in regs)}
if len(sys.argv) > 1:
    from tests.ci.ci_policy import resolve_policy
    from tests.ci.run_suite import HW_MAPPING, filter_tests
    runs, selections = json.loads(sys.argv[1])
    for cadence, labels in runs:
        policy = resolve_policy(cadence, set(labels))
        for hw, suite in selections:
            enabled, _ = filter_tests(regs, HW_MAPPING[hw], suite, policy.admit_nightly_tests,
                                      labels=set(policy.include_labels))
            out.setdefault("selected", []).append([cadence, labels, hw, suite,
                                                   sorted(t.filename for t in enabled)])
print(json.dumps(out))
"""

_DISPATCH = re.compile(r"run_suite\.py\s+--hw\s+(\w+)\s+--suite\s+([\w.-]+)")


def _rows(listed: str) -> list[dict[str, object]]:
    """``testfleet list --format json`` rows (a ``testfleet.list/1`` document, or a bare list before it)."""
    doc = json.loads(listed)
    return doc["registrations"] if isinstance(doc, dict) else doc  # type: ignore[no-any-return]


def dispatched(tree: Path) -> list[tuple[str, str]]:
    """Every (hw, suite) the project's workflows run, read from the workflow files."""
    found: set[tuple[str, str]] = set()
    for wf in sorted((tree / ".github" / "workflows").glob("*.y*ml")):
        found.update(_DISPATCH.findall(wf.read_text(encoding="utf-8")))
    return sorted(found)


def project_side(tree: Path, runs: list[tuple[str, list[str]]] | None,
                 selections: list[tuple[str, str]] | None) -> dict[str, object]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", PROJECT_SIDE]
    if runs is not None:
        argv.append(json.dumps([runs, selections]))
    out = subprocess.run(argv, cwd=tree, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def timed(argv: list[str], cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def testfleet_cmd() -> list[str]:
    exe = shutil.which("testfleet", path=str(Path(sys.executable).parent)) or shutil.which("testfleet")
    return [exe] if exe else [sys.executable, "-m", "testfleet"]


SGLANG_TREE = HERE.parent / "tests" / "fixtures" / "real_trees" / "sglang"
_SGLANG_BACKENDS = {"register_cpu_ci": "cpu", "register_cuda_ci": "cuda", "register_amd_ci": "rocm",
                    "register_npu_ci": "npu", "register_xpu_ci": "xpu", "register_musa_ci": "musa",
                    "register_mlx_ci": "mlx"}


def sglang_reference(root: Path) -> tuple[set[tuple[str, str, str]], dict[str, str]]:
    """SGLang's collection rules, re-stated (ci_register.ut_parse_one_file/collect_tests and the
    file glob of run_suite.py): (file, backend, effective suite) and, per refused file, why.
    ``SGLANG_DETAIL`` keeps (nightly, enabled) per registration for the selection.

    SGLang's own collector raises on the first refused file; here every file is tried so
    the two sides can be compared file by file.
    """
    import ast

    regs: set[tuple[str, str, str]] = set()
    refused: dict[str, str] = {}
    base = root / "test" / "registered"
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if path.name in ("conftest.py", "__init__.py") or rel.endswith("/cpu/utils.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: list[tuple[str, str, str, bool]] = []
        has_main = False
        try:
            for stmt in tree.body:
                if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
                    has_main = any(isinstance(n, ast.Call) for n in ast.walk(stmt))
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                        and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in _SGLANG_BACKENDS):
                    continue
                call = stmt.value
                args = dict(zip(("est_time", "suite", "nightly", "disabled"),
                                (a.value if isinstance(a, ast.Constant) else None for a in call.args), strict=False))
                for kw in call.keywords:
                    args[kw.arg or "**"] = kw.value.value if isinstance(kw.value, ast.Constant) else None
                stage, runner, suite = args.get("stage"), args.get("runner_config"), args.get("suite")
                if ("stage" in args) != ("runner_config" in args) or (("stage" in args) == ("suite" in args)):
                    raise ValueError("must specify exactly one of (stage, runner_config) pair or suite")
                effective = f"{stage}-test-{runner}" if "stage" in args else str(suite)
                found.append((rel, _SGLANG_BACKENDS[call.func.id], effective, args.get("disabled") is None))
                SGLANG_DETAIL[(rel, _SGLANG_BACKENDS[call.func.id], effective)] = (
                    bool(args.get("nightly", False)), args.get("disabled") is None)
            if not found:
                raise ValueError("No CI registry found")
            if any(enabled for *_, enabled in found) and not has_main:
                raise ValueError('missing `if __name__ == "__main__":` entry')
        except ValueError as exc:
            refused[rel] = str(exc)
            continue
        regs.update(r[:3] for r in found)
    return regs, refused


SGLANG_DETAIL: dict[tuple[str, str, str], tuple[bool, bool]] = {}

# The CI runs run_suite.py makes for the suites the corpus configures: (--hw, --suite, --nightly),
# from its PER_COMMIT_SUITES and NIGHTLY_SUITES (base-a-test-1-gpu-small is listed for CUDA
# and for NPU). --hw amd is the rocm backend here.
SGLANG_RUNS = [
    ("cpu", "base-a-test-cpu", False),
    ("cuda", "base-a-test-1-gpu-small", False),
    ("npu", "base-a-test-1-gpu-small", False),
    ("cuda", "base-b-test-1-gpu-small", False),
    ("cuda", "base-b-test-1-gpu-large", False),
    ("cuda", "base-b-kernel-unit-test-1-gpu-large", False),
    ("cuda", "extra-b-test-8-gpu-h200", False),
    ("amd", "jit-kernel-unit-test-amd", False),
    ("cuda", "nightly-kernel-1-gpu", True),
    ("cuda", "nightly-1-gpu", True),
    ("npu", "nightly-4-npu-a3", True),
    ("npu", "nightly-1-npu-a3", True),
]


def sglang_filter(hw: str, suite: str, nightly: bool, refused: dict[str, str]) -> list[str]:
    """run_suite.filter_tests re-stated: backend == hw, effective suite == suite,
    nightly == --nightly, not disabled (over the files its collector accepts)."""
    backend = {"amd": "rocm"}.get(hw, hw)
    return sorted(f for (f, b, s), (n, enabled) in SGLANG_DETAIL.items()
                  if b == backend and s == suite and n == nightly and enabled and f not in refused)


def sglang_runs(tf: list[str], work: Path, refused: dict[str, str]) -> list[str]:
    """Per CI run: run_suite.py's selection vs testfleet's plan for that stage and backend
    (a pull request for per-commit runs, the nightly cadence for --nightly runs)."""
    plans = {}
    for nightly, args in ((False, ["--event", "pull_request"]), (True, ["--cadence", "nightly"])):
        out = work / f"plan-{nightly}.json"
        done = subprocess.run([*tf, "-C", str(work), "plan", "--format", "json", "--output", str(out),
                               *args], capture_output=True, text=True)
        plans[nightly] = (json.loads(out.read_text()), done.returncode)
    lines = ["", "Selection per CI run (`run_suite.py --hw H --suite S [--nightly]` vs the files of "
             "that stage and backend in `testfleet plan`; per-commit runs planned as a pull request, "
             "`--nightly` runs on the nightly cadence):", "",
             "| run_suite.py run | run_suite.py selects | testfleet selects | same (refused files aside) | testfleet only |",
             "|---|---|---|---|---|"]
    same = 0
    for hw, suite, nightly in SGLANG_RUNS:
        plan, _ = plans[nightly]
        backend = {"amd": "rocm"}.get(hw, hw)
        ours = sorted(t["file"] for j in plan["jobs"] if j["stage"] == suite and j["backend"] == backend
                      for t in j["tests"])
        theirs = sglang_filter(hw, suite, nightly, refused)
        extra = [f for f in ours if f not in theirs]
        # a file SGLang's collector refuses stops its whole run; testfleet runs it (see above)
        agree = set(ours) - {f for f in extra if f in refused} == set(theirs)
        same += agree
        run = f"`--hw {hw} --suite {suite}{' --nightly' if nightly else ''}`"
        lines.append(f"| {run} | {len(theirs)} | {len(ours)} | {'yes' if agree else 'NO'} | "
                     + (", ".join(f"`{f.rsplit('/', 1)[-1]}` (refused by SGLang)" if f in refused
                                  else f"`{f}`" for f in extra) or "-") + " |")
    lines += ["", f"{same} of {len(SGLANG_RUNS)} runs select the same files (plan exit status: "
              f"{plans[False][1]} per-commit, {plans[True][1]} nightly: the corpus carries its "
              "negative cases)."]
    return lines


def sglang_section(tf: list[str]) -> list[str]:
    """The SGLang-shaped corpus tree: testfleet vs SGLang's rules, file by file."""
    with tempfile.TemporaryDirectory(prefix="tf-sgl-") as tmp:
        work = Path(tmp) / "sglang"
        shutil.copytree(SGLANG_TREE, work)
        listed = subprocess.run([*tf, "-C", str(work), "list", "--format", "json"], capture_output=True,
                                text=True)
        checked = json.loads(subprocess.run([*tf, "-C", str(work), "check", "--format", "json"],
                                            capture_output=True, text=True).stdout)
        ours = {(r["file"], r["backend"], r["suite"]) for r in _rows(listed.stdout)}
        theirs, refused = sglang_reference(work)
        runs = sglang_runs(tf, work, refused)
    files = {r[0] for r in ours} | set(refused)
    agree = sum(1 for f in files if f not in refused and {r for r in ours if r[0] == f} == {r for r in theirs if r[0] == f})
    by_file: dict[str, list[str]] = {}
    for f in checked["findings"]:
        by_file.setdefault(f["file"], []).append(f"{f['severity']} {f['code']}")
    lines = ["### SGLang-shaped corpus (`tests/fixtures/real_trees/sglang`, 14 files reconstructed "
             "from sgl-project/sglang)", "",
             "| figure | SGLang's rules (re-stated in the script) | testfleet |", "|---|---|---|",
             f"| registrations | {len(theirs)} (refuses {len(refused)} files) | {len(ours)} |",
             f"| files read the same | {agree} of {len(files) - len(refused)} accepted files | |"]
    for f, why in sorted(refused.items()):
        lines.append(f"| refused: `{f}` | {why} | {'; '.join(by_file.get(f, ['listed, no finding']))} |")
    return lines + runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--miles", type=Path, default=Path("/work/trees/miles"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tree = args.miles.resolve()
    tf = testfleet_cmd()
    selections = [d for d in dispatched(tree)]
    runs = [(cadence, labels) for cadence, labels, _ in TRIGGERS]
    with tempfile.TemporaryDirectory(prefix="tf-real-") as tmp:
        work = Path(tmp) / "miles"
        shutil.copytree(tree / "tests", work / "tests",
                        ignore=shutil.ignore_patterns("__pycache__", ".testfleet"))
        shutil.copy(CONFIG, work / "testfleet.toml")

        ref = project_side(tree, runs, selections)
        _, listed = timed([*tf, "-C", str(work), "list", "--format", "json"])
        ours = sorted([r["file"], r["backend"], r["suite"], r["nightly"], r["disabled"] is not None,
                       sorted(r["labels"])] for r in _rows(listed.stdout))
        theirs = ref["registrations"]
        missing = [r for r in theirs if r not in ours]
        extra = [r for r in ours if r not in theirs]
        _, checked = timed([*tf, "-C", str(work), "check", "--format", "json"])
        check_doc = json.loads(checked.stdout)

        selected = {(c, tuple(lb), hw, s): files for c, lb, hw, s, files in ref["selected"]}  # type: ignore[union-attr]
        rows = []
        bad_runs = []
        for cadence, labels, plan_args in TRIGGERS:
            plan_path = work / "plan.json"
            _, planned = timed([*tf, "-C", str(work), "plan", "--format", "json", "--output", str(plan_path),
                                *plan_args])
            plan = json.loads(plan_path.read_text())
            by_stage: dict[str, list[str]] = {}
            for job in plan["jobs"]:
                by_stage.setdefault(job["stage"], []).extend(t["file"] for t in job["tests"])
            same = 0
            for hw, suite in selections:
                want = selected[(cadence, tuple(labels), hw, suite)]
                got = sorted(by_stage.get(suite, []))
                if got == want:
                    same += 1
                else:
                    bad_runs.append((cadence, labels, suite, sorted(set(want) - set(got)),
                                     sorted(set(got) - set(want))))
            files = sum(len(selected[(cadence, tuple(labels), hw, s)]) for hw, s in selections)
            rows.append((f"{cadence} {' '.join(labels) or '(no labels)'}", len(selections), same, files,
                         planned.returncode))

        t_ref, t_cold, t_warm = [], [], []
        for _ in range(args.repeat):
            t_ref.append(timed([sys.executable, "-c", PROJECT_SIDE], cwd=tree)[0])
            shutil.rmtree(work / ".testfleet", ignore_errors=True)
            t_cold.append(timed([*tf, "-C", str(work), "list", "--format", "json"])[0])
            t_warm.append(timed([*tf, "-C", str(work), "list", "--format", "json"])[0])

    med = statistics.median
    print("### miles (`/work/trees/miles`, unmodified; config `benchmarks/real_trees/miles.toml`)\n")
    print("| figure | project's collector | testfleet |")
    print("|---|---|---|")
    print(f"| registrations | {len(theirs)} | {len(ours)} |")
    print(f"| files | {len({r[0] for r in theirs})} | {check_doc['files']} (discovered; "
          f"{len({r[0] for r in ours})} with a registration) |")
    print(f"| registrations only one side finds | - | {len(missing)} missing, {len(extra)} extra |")
    print(f"| `testfleet check` | - | {check_doc['errors']} errors, {check_doc['warnings']} warnings |")
    print(f"| collection, whole process (median of {args.repeat}) | {med(t_ref):.3f} s "
          f"| {med(t_cold):.3f} s cold, {med(t_warm):.3f} s warm |")
    print()
    print(f"Selection per dispatched CI run ({len(selections)} `run_suite.py` jobs in the workflows: "
          f"{', '.join(s for _, s in selections)}):\n")
    print("| trigger | runs compared | same files as run_suite.py | files selected | plan exit |")
    print("|---|---|---|---|---|")
    for name, n, same, files, rc in rows:
        print(f"| {name} | {n} | {same} | {files} | {rc} |")
    for cadence, labels, suite, lost, more in bad_runs:
        print(f"\nDIFF {cadence} {labels} {suite}: missing {lost} extra {more}")
    for r in missing[:10]:
        print(f"MISSING {r}")
    for r in extra[:10]:
        print(f"EXTRA {r}")
    print()
    print("\n".join(sglang_section(tf)))
    return 1 if missing or extra or bad_runs else 0


if __name__ == "__main__":
    sys.exit(main())
