"""Benchmark: ``testfleet list --format json`` on a generated tree, cold and warm cache,
against a reference collector that fully ``ast.parse``-s every file (what existing
tools do), all measured in the same run as whole-command wall time (subprocesses).

    python benchmarks/bench_collect.py [--files 10000] [--repeat 5] [--seed 0] [--keep DIR]
        [--profile synthetic|real|both]

"cold" = the cache directory removed before the run (the files themselves are in
the OS page cache, as they are on a CI runner after checkout); "warm" = run again
with the cache in place. Each repetition runs reference, cold, warm in turn;
medians are reported. The reference's output is checked against testfleet's.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_tree import PROFILES, generate

MARKERS = {"register_cpu_ci": "cpu", "register_cuda_ci": "cuda", "register_rocm_ci": "rocm",
           "register_amd_ci": "rocm"}


def reference(root: Path) -> list[dict[str, object]]:
    """Full parse of every file, top-level walk: the approach testfleet replaces."""
    rows: list[dict[str, object]] = []
    tests = root / "tests"
    for dirpath, dirnames, filenames in os.walk(tests):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        if rel_dir.startswith("tests/manual"):
            continue
        for name in sorted(filenames):
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            rel = f"{rel_dir}/{name}"
            tree = ast.parse((root / rel).read_bytes(), rel)
            found = []
            for node in tree.body:
                if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name) and node.value.func.id in MARKERS):
                    call = node.value
                    args = [ast.literal_eval(a) for a in call.args]
                    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                    found.append({
                        "file": rel, "line": node.lineno, "backend": MARKERS[call.func.id],
                        "suite": kw.get("suite", args[1] if len(args) > 1 else None),
                        "est_time": float(kw.get("est_time", args[0] if args else 0)),
                        "labels": list(kw.get("labels") or []), "nightly": bool(kw.get("nightly", False)),
                        "disabled": kw.get("disabled"), "implicit": False,
                    })
            if rel.startswith("tests/fast/") and not any(f["backend"] == "cpu" for f in found):
                found.append({"file": rel, "line": 0, "backend": "cpu", "suite": "stage-a-cpu", "est_time": 5.0,
                              "labels": [], "nightly": False, "disabled": None, "implicit": True})
            rows.extend(found)
    rows.sort(key=lambda r: (r["file"], r["backend"]))
    return rows


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and everything it waited for, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, proc.stdout


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    parser.add_argument("--reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the full-parse reference (minutes on a loaded machine)")
    parser.add_argument("--profile", choices=[*PROFILES, "both"], default="both",
                        help="tree shape (gen_tree.py); both = one table per profile")
    args = parser.parse_args(argv)
    if args.reference is not None:
        sys.stdout.write(json.dumps(reference(args.reference)))
        return
    for profile in PROFILES if args.profile == "both" else (args.profile,):
        run_profile(args, profile)


def run_profile(args: argparse.Namespace, profile: str) -> None:
    root = args.keep or Path(tempfile.mkdtemp(prefix="testfleet-bench-")) / "fleet"
    generate(root, args.files, args.seed, profile)
    for path in (root / "tests").rglob("*.py"):  # warm the page cache for every contender alike
        path.read_bytes()
    cache_dir = root / ".testfleet"
    tf = [sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "list", "--format", "json"]
    ref = [sys.executable, __file__, "--reference", str(root)]
    base = [sys.executable, "-c", "pass"]
    names = tuple(n for n in ("python -c pass", "reference", "cold", "warm")
                  if n != "reference" or not args.no_reference)
    times: dict[str, list[float]] = {k: [] for k in names}
    cpus: dict[str, list[float]] = {k: [] for k in names}
    loads = []
    n_rows = 0
    for rep in range(args.repeat):
        loads.append(os.getloadavg()[0])
        outputs = {}
        for name in names:
            if name == "cold":
                shutil.rmtree(cache_dir, ignore_errors=True)
            cmd = base if name == "python -c pass" else ref if name == "reference" else tf
            wall, cpu, outputs[name] = timed(cmd)
            times[name].append(wall)
            cpus[name].append(cpu)
        if rep == 0:
            rows_cold, rows_warm = (json.loads(outputs[k])["registrations"] for k in ("cold", "warm"))
            rows_ref = json.loads(outputs["reference"]) if "reference" in outputs else rows_cold
            if not rows_ref == rows_cold == rows_warm:
                raise SystemExit("testfleet's registrations differ from the reference collector's")
            n_rows = len(rows_cold)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"tree: {args.files} files, profile {profile} (seed {args.seed}), {n_rows} registrations ("
          f"{'cold and warm identical' if args.no_reference else 'identical to the reference' + chr(39) + 's'}); "
          f"{args.repeat} repetitions; 1-min load average during the runs: "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    print()
    print("| run | median wall | min wall | median CPU (user+sys) | wall, all runs | vs reference (median wall) |")
    print("|---|---:|---:|---:|---|---:|")
    for name in names:
        ratio = ("" if name in ("python -c pass", "reference") or args.no_reference
                 else f"{med['reference'] / med[name]:.1f}x faster")
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"| {name} | {med[name]:.3f} s | {min(times[name]):.3f} s | {med_cpu[name]:.3f} s | {runs} | {ratio} |")
    if args.keep is None:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
