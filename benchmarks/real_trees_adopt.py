"""Benchmark: ``testfleet init --from-existing`` on the unmodified SGLang and miles trees.

    python benchmarks/real_trees_adopt.py [--sglang /work/trees/sglang] [--miles /work/trees/miles]
        [--repeat 5] [--before /work/main/src]

In the same run:

* adoption time: ``init --from-existing --dry-run`` on each tree as it is (nothing is
  written), whole-process wall time, median of ``--repeat`` runs, with its exit status and
  the number of problems it reports;
* SGLang, adopted for real in a copy of the tree: ``testfleet list`` against SGLang's own
  collector (``python/sglang/test/ci/ci_register.py`` ``collect_tests`` over the files
  ``test/run_suite.py`` globs), run in a subprocess from the checkout without writing
  bytecode (the marker module and ``run_suite.py`` are loaded by path; ``sglang``'s
  package ``__init__`` would import torch);
* SGLang's dispatched suite runs: every ``run_suite.py --hw H --suite S [--nightly]`` call
  in ``.github/workflows/*.yml`` (``--suite ${{ matrix.suite }}`` expanded from the job's
  matrix, ``${{ inputs.self_name }}`` from the callers' ``with:``), compared file by file:
  SGLang's own ``filter_tests`` against the files of that stage and backend in
  ``testfleet plan`` for a trigger that starts the run (a pull request carrying SGLang's
  gate labels and touching ``python/`` and ``test/`` for a run a PR workflow makes, the
  workflow's cron for a scheduled one, a push, else a manual dispatch);
* the plan for an unlabelled pull request (jobs) and the length of ``plan --labels run-ci``;
* runs of stages adopted dormant because their job's set-up cannot be carried are counted
  apart, and compared as they select with that ``disabled`` line removed (a second copy).

Prints a Markdown section; exits 1 when the registries differ or fewer than 128 runs agree
(dormant-for-set-up stages counted with their line removed).
"""

from __future__ import annotations

import argparse
import collections
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

# Runs in SGLang's checkout: its collector and filter_tests, printed as JSON.
SGLANG_SIDE = r"""
import contextlib, glob, importlib.util, io, json, os, sys, types
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod); return mod
for pkg in ("sglang", "sglang.test", "sglang.test.ci"):
    sys.modules.setdefault(pkg, types.ModuleType(pkg))
reg = load("sglang.test.ci.ci_register", "python/sglang/test/ci/ci_register.py")
utils = types.ModuleType("sglang.test.ci.ci_utils"); utils.run_unittest_files = None
sys.modules["sglang.test.ci.ci_utils"] = utils
sys.modules.setdefault("tabulate", types.ModuleType("tabulate"))
run_suite = load("_run_suite", "test/run_suite.py")
files = [f for f in glob.glob(os.path.join("test", "registered", "**", "*.py"), recursive=True)
         if not f.endswith("/conftest.py") and not f.endswith("/__init__.py") and not f.endswith("/cpu/utils.py")]
regs = reg.collect_tests(files, sanity_check=True)
run_suite.validate_all_suites(regs)
out = {"registrations": sorted([r.filename, r.backend.name.lower(), r.effective_suite, r.nightly,
                                r.disabled is not None] for r in regs), "selected": []}
for hw, suite, nightly in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        enabled, _ = run_suite.filter_tests(regs, run_suite.HW_MAPPING[hw], suite, nightly)
    out["selected"].append(sorted(t.filename for t in enabled))
print(json.dumps(out))
"""

_RUN = re.compile(r"(?:^|[\s/])run_suite\.py\b(.*)")
#: a pull request that touches library code and tests, as most do
PR_DIFF = b"M\0python/sglang/srt/server_args.py\0M\0test/registered/core/test_basic_sanity.py\0"


def dispatched_runs(root: Path) -> list[tuple[str, str, bool, list[str]]]:
    """(hw, suite, nightly, testfleet plan arguments) for each distinct runner call of
    SGLang's workflows (test/run_suite.py only)."""
    import yaml

    wfdir = root / ".github" / "workflows"
    docs = {p.name: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(wfdir.glob("*.yml"))}

    def on(doc: dict) -> dict:
        o = doc.get(True, doc.get("on"))
        return o if isinstance(o, dict) else {e: None for e in ([o] if isinstance(o, str) else o or [])}

    callers: dict[str, list[tuple[str, dict]]] = collections.defaultdict(list)
    for wf, doc in docs.items():
        for job in (doc.get("jobs") or {}).values():
            uses = job.get("uses")
            if isinstance(uses, str) and uses.startswith("./.github/workflows/"):
                callers[uses.rsplit("/", 1)[1]].append((wf, job.get("with") or {}))

    def events(wf: str, seen: tuple[str, ...] = ()) -> dict:
        found = {e: v for e, v in on(docs[wf]).items() if e != "workflow_call"}
        for caller, _ in callers.get(wf, []):
            if caller not in seen:
                for e, v in events(caller, (*seen, wf)).items():
                    found.setdefault(e, v)
        return found

    runs: dict[tuple[str, str, bool], set[str]] = {}
    for wf, doc in docs.items():
        for job in (doc.get("jobs") or {}).values():
            matrix = (job.get("strategy") or {}).get("matrix") or {}
            for step in job.get("steps") or []:
                text = step.get("run") if isinstance(step, dict) else None
                for line in (text or "").replace("\\\n", " ").splitlines():
                    if "multimodal_gen" in line or "tests/ci/run_suite" in line:
                        continue
                    m = _RUN.search(line)
                    hw = re.search(r"--hw[= ]+([\w-]+)", m.group(1)) if m else None
                    su = re.search(r"--suite[= ]+(\$\{\{[^}]*\}\}|[\w.-]+)", m.group(1)) if m else None
                    if not m or not hw or not su:
                        continue
                    ref, suites = su.group(1), []
                    if ref.startswith("${{"):
                        expr = ref[3:-2].strip()
                        if expr.startswith("matrix."):
                            key = expr[7:]
                            suites += [v for v in matrix.get(key) or [] if isinstance(matrix.get(key), list)]
                            suites += [e[key] for e in matrix.get("include") or [] if key in e]
                        elif expr.startswith("inputs."):
                            suites += [w[expr[7:]] for _, w in callers.get(wf, []) if expr[7:] in w]
                    else:
                        suites = [ref]
                    for suite in suites:
                        runs.setdefault((hw.group(1), str(suite), "--nightly" in m.group(1)), set()).add(wf)
    out = []
    for (hw, suite, nightly), wfs in sorted(runs.items()):
        ev: dict = {}
        for wf in sorted(wfs):
            for e, v in events(wf).items():
                ev.setdefault(e, v)
        if "pull_request" in ev and not nightly:
            trig = ["--event", "pull_request", "--labels", "run-ci,run-ci-extra", "--changed-files", "{diff}"]
        elif "schedule" in ev:
            trig = ["--schedule", " ".join(ev["schedule"][0]["cron"].split())]
        elif "push" in ev:
            trig = ["--event", "push"]
        else:
            trig = ["--event", "workflow_dispatch", "--match-all-labels"]
        out.append((hw, suite, nightly, trig))
    return out


def testfleet_cmd() -> list[str]:
    exe = shutil.which("testfleet", path=str(Path(sys.executable).parent)) or shutil.which("testfleet")
    return [exe] if exe else [sys.executable, "-m", "testfleet"]


def timed(argv: list[str], cwd: Path | None = None,
          src: Path | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **({"PYTHONPATH": str(src)} if src else {})}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def adoption_time(tf: list[str], tree: Path, repeat: int,
                  src: Path | None = None) -> tuple[float, int, int]:
    """Median seconds of ``init --from-existing --dry-run`` on the tree as it is, its exit
    status, and the problems it reports; with ``src``, of the testfleet whose sources are
    there (a reference, e.g. main's checkout)."""
    times, code, problems = [], 0, 0
    argv = [sys.executable, "-m", "testfleet"] if src else tf
    for _ in range(repeat):
        seconds, proc = timed([*argv, "-C", str(tree), "init", "--from-existing", "--dry-run"], src=src)
        times.append(seconds)
        code = proc.returncode
        problems = sum(1 for line in proc.stderr.splitlines() if ": error: " in line)
    return statistics.median(times), code, problems


def sglang_section(tf: list[str], tree: Path, repeat: int,
                   before: Path | None = None) -> tuple[list[str], bool]:
    runs = dispatched_runs(tree)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    ref = json.loads(subprocess.run(
        [sys.executable, "-c", SGLANG_SIDE, json.dumps([[h, s, n] for h, s, n, _ in runs])],
        cwd=tree, env=env, capture_output=True, text=True, check=True).stdout)
    t_adopt, adopt_code, adopt_problems = adoption_time(tf, tree, repeat)
    reference = adoption_time(tf, tree, repeat, before) if before else None
    with tempfile.TemporaryDirectory(prefix="tf-sgl-adopt-") as tmp:
        work = Path(tmp) / "sglang"
        shutil.copytree(tree, work, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        diff = Path(tmp) / "pr.diff"
        diff.write_bytes(PR_DIFF)
        init = subprocess.run([*tf, "-C", str(work), "init", "--from-existing"], capture_output=True, text=True)
        check = json.loads(subprocess.run([*tf, "-C", str(work), "check", "--format", "json"],
                                          capture_output=True, text=True).stdout)
        listed = json.loads(subprocess.run([*tf, "-C", str(work), "list", "--format", "json"],
                                           capture_output=True, text=True).stdout)["registrations"]
        ours = sorted([r["file"], {"rocm": "amd"}.get(r["backend"], r["backend"]), r["suite"], r["nightly"],
                       r["disabled"] is not None] for r in listed)
        theirs = ref["registrations"]
        # stages adopted dormant because their job's set-up cannot be carried (#38: a
        # wrapper script, an install computed at run time): counted apart, and compared as
        # they select once that line is removed, in a second copy
        import tomlkit

        awake = Path(tmp) / "awake"
        shutil.copytree(work, awake, symlinks=True)
        doc = tomlkit.parse((awake / "testfleet.toml").read_text())
        waiting = {n for n, t in doc["stages"].items()
                   if str(t.get("disabled", "")).startswith("adoption incomplete")}
        for name in waiting:
            del doc["stages"][name]["disabled"]
        (awake / "testfleet.toml").write_text(tomlkit.dumps(doc))
        plans: dict[tuple[str, ...], dict] = {}
        rows, same, dormant, same_awake = [], 0, 0, 0
        for (hw, suite, nightly, trig), want in zip(runs, ref["selected"], strict=True):
            args = tuple(a.replace("{diff}", str(diff)) for a in trig)
            root = awake if suite in waiting else work
            if (str(root), *args) not in plans:
                out = Path(tmp) / "plan.json"
                subprocess.run([*tf, "-C", str(root), "plan", "--format", "json", "--output", str(out), *args],
                               capture_output=True, text=True)
                plans[(str(root), *args)] = json.loads(out.read_text())
            backend = {"amd": "rocm"}.get(hw, hw)
            got = sorted({t["file"] for j in plans[(str(root), *args)]["jobs"]
                          if j["stage"] == suite and j["backend"] == backend for t in j["tests"]})
            dormant += suite in waiting
            if got == want:
                same += suite not in waiting
                same_awake += 1
            else:
                rows.append(f"| `--hw {hw} --suite {suite}{' --nightly' if nightly else ''}` | "
                            f"`{' '.join(trig).replace('{diff}', 'DIFF')}` | {len(want)} | {len(got)} |")
        pr = Path(tmp) / "pr.json"
        subprocess.run([*tf, "-C", str(work), "plan", "--event", "pull_request", "--format", "json",
                        "--output", str(pr)], capture_output=True, text=True)
        unlabelled = len(json.loads(pr.read_text())["jobs"])
        table = subprocess.run([*tf, "-C", str(work), "plan", "--labels", "run-ci"], capture_output=True, text=True)
    lines = [f"### SGLang (`{tree}`, unmodified; adopted by `init --from-existing`, no hand edit)", "",
             "| figure | SGLang | testfleet |", "|---|---|---|",
             f"| registrations (SGLang's `collect_tests` vs `testfleet list`) | {len(theirs)} | {len(ours)} "
             f"({'equal' if ours == theirs else 'DIFFERENT'}) |",
             f"| `init --from-existing` | - | exit {init.returncode}; `check`: {check['errors']} errors, "
             f"{check['warnings']} warnings |",
             f"| dispatched suite runs whose files the plan selects | {len(runs)} | {same} |",
             f"| ... of them in stages adopted dormant for want of their set-up (a wrapper "
             f"script, an install computed at run time) | - | {dormant} |",
             f"| dispatched suite runs selected, those stages' dormant line removed | {len(runs)} | "
             f"{same_awake} |",
             f"| jobs for a pull request without labels | 0 (the run-ci gate) | {unlabelled} |",
             f"| lines of `plan --labels run-ci` | - | {len(table.stdout.splitlines())} |",
             f"| adoption, `init --from-existing --dry-run`, median of {repeat} | - | {t_adopt:.2f} s "
             f"(exit {adopt_code}, {adopt_problems} problems) |"]
    if reference is not None:
        lines.append(f"| the same, testfleet of `{before}` (before) | - | {reference[0]:.2f} s "
                     f"(exit {reference[1]}, {reference[2]} problems) |")
    lines.append("")
    if rows:
        lines += ["Runs that differ:", "", "| run | plan | SGLang files | testfleet files |",
                  "|---|---|---:|---:|", *rows, ""]
    ok = ours == theirs and same_awake >= 128
    return lines, ok


def miles_section(tf: list[str], tree: Path, repeat: int, before: Path | None = None) -> list[str]:
    t_adopt, code, problems = adoption_time(tf, tree, repeat)
    lines = [f"### miles (`{tree}`, unmodified)", "", "| figure | testfleet |", "|---|---|",
             f"| adoption, `init --from-existing --dry-run`, median of {repeat} | {t_adopt:.2f} s "
             f"(exit {code}, {problems} problems) |"]
    if before is not None:
        ref = adoption_time(tf, tree, repeat, before)
        lines.append(f"| the same, testfleet of `{before}` (before) | {ref[0]:.2f} s "
                     f"(exit {ref[1]}, {ref[2]} problems) |")
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sglang", type=Path, default=Path("/work/trees/sglang"))
    parser.add_argument("--miles", type=Path, default=Path("/work/trees/miles"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, default=None, metavar="SRC",
                        help="also time the testfleet whose sources are in SRC (e.g. /work/main/src)")
    args = parser.parse_args()
    tf = testfleet_cmd()
    lines, ok = sglang_section(tf, args.sglang.resolve(), args.repeat, args.before)
    lines += miles_section(tf, args.miles.resolve(), args.repeat, args.before)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
