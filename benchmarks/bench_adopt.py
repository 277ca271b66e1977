"""Adoption figures on a real tree (miles): registrations kept, hand edits needed, and the
selection difference per trigger between the project's own runner and the adopted plan.

    python benchmarks/bench_adopt.py [TREE]      # default /work/trees/miles (copied, never written)

It also feeds the adoption report the runner's real ``run_suite.py --list-only`` output
(``init --report --runner-selection``) and counts the report's file-by-file comparison.

The tree is copied to a temporary directory and adopted there with
``testfleet init --from-existing --allow-findings --report``. The project's side comes from
its own modules, run by *this script* in a separate ``python3`` (adoption itself never
runs project code): ``collect_tests(discover_ci_files())`` for the registry and, per stage
and trigger, ``resolve_policy`` + ``filter_tests`` -- exactly what ``run_suite.py
--list-only`` prints, in one process instead of one per stage.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

DEFAULT_TREE = Path("/work/trees/miles")

# What the project's runner computes for one stage: run_suite.run_a_suite up to --list-only.
PROJECT_SIDE = r"""
import json, sys
from tests.ci.ci_register import collect_tests, discover_ci_files, HWBackend
from tests.ci.ci_policy import resolve_policy
from tests.ci.run_suite import HW_MAPPING, filter_tests
from tests.ci.labels import KNOWN_LABELS
regs = collect_tests(discover_ci_files(), sanity_check=True)
out = {"registry": sorted([r.filename, r.backend.name.lower(), r.suite] for r in regs), "selected": []}
cases, stages = json.loads(sys.argv[1])
for name, cadence, labels, match_all_gpu in cases:
    policy = resolve_policy(cadence, set(labels))
    for hw, suite in stages:
        include = set(policy.include_labels)
        if match_all_gpu and hw != "cpu":
            include |= set(KNOWN_LABELS)
        enabled, _ = filter_tests(regs, HW_MAPPING[hw], suite, policy.admit_nightly_tests, labels=include)
        out["selected"].append([name, suite, sorted(t.filename for t in enabled)])
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Case:
    """One trigger, as the project's workflow resolves it and as testfleet plans it."""

    name: str
    cadence: str
    labels: tuple[str, ...]
    match_all_gpu: bool  # pr-test.yml passes --match-all-labels to GPU stages on dispatch
    trigger: Trigger


CASES = [
    Case("PR, no labels", "regular", (), False, Trigger(event="pull_request")),
    Case("PR, run-ci-megatron", "regular", ("run-ci-megatron",), False,
         Trigger(event="pull_request", labels=("run-ci-megatron",))),
    Case("PR, run-ci-amd run-ci-fsdp", "regular", ("run-ci-amd", "run-ci-fsdp"), False,
         Trigger(event="pull_request", labels=("run-ci-amd", "run-ci-fsdp"))),
    Case("PR, run-ci-image", "regular", ("run-ci-image",), False,
         Trigger(event="pull_request", labels=("run-ci-image",))),
    Case("PR, run-ci-all", "regular", ("run-ci-all",), False,
         Trigger(event="pull_request", labels=("run-ci-all",))),
    Case("PR, nightly label", "nightly", ("nightly",), False,
         Trigger(event="pull_request", labels=("nightly",))),
    Case("nightly schedule", "nightly", (), False, Trigger(event="schedule", cadence="nightly")),
    Case("weekly schedule", "weekly", (), False, Trigger(event="schedule", cadence="weekly")),
    Case("release", "release", (), False, Trigger(event="workflow_dispatch", cadence="release")),
    Case("manual dispatch", "regular", (), True,
         Trigger(event="workflow_dispatch", match_all_labels=True)),
]


def adopt(tree: Path, work: Path) -> tuple[Path, int, str]:
    copy = work / "tree"
    shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    report = work / "adoption.md"
    run = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(copy), "init",
                          "--from-existing", "--allow-findings", "--report", str(report)],
                         capture_output=True, text=True, check=False)
    # init prints a summary; the long list of notes is the report's
    text = report.read_text(encoding="utf-8") if report.is_file() else ""
    return copy, run.returncode, run.stdout + run.stderr + text


def project_side(copy: Path, stages: list[tuple[str, str]]) -> dict[str, object]:
    cases = [[c.name, c.cadence, list(c.labels), c.match_all_gpu] for c in CASES]
    run = subprocess.run(["python3", "-c", PROJECT_SIDE, json.dumps([cases, stages])], cwd=copy,
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(copy),
                                                                           "PATH": "/usr/bin:/bin"})
    result: dict[str, object] = json.loads(run.stdout)
    return result


def compare(tree: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        copy, code, output = adopt(tree, Path(tmp))
        project = load_project(copy)
        registry = collect(project, use_cache=False)
        stages = [(s.backend, name) for name, s in sorted(project.config.stages.items())
                  if not s.dormant]
        theirs = project_side(copy, stages)
        ours_registry = sorted([r.file, r.backend, r.suite] for r in registry.registrations)
        errors = [f for f in registry.findings if f.severity == "error"]
        selected = {(n, s): set(files) for n, s, files in theirs["selected"]}  # type: ignore[attr-defined]
        per_case = []
        for case in CASES:
            plan = make_plan(project, registry, PlanRequest(trigger=case.trigger))
            only_theirs: list[str] = []
            only_ours: list[str] = []
            for _, stage in stages:
                ours = {t.file for j in plan.jobs if j.stage == stage for t in j.tests}
                only_theirs += sorted(f"{stage}:{f}" for f in selected[(case.name, stage)] - ours)
                only_ours += sorted(f"{stage}:{f}" for f in ours - selected[(case.name, stage)])
            per_case.append({"trigger": case.name,
                             "files": sum(len(selected[(case.name, s)]) for _, s in stages),
                             "only_project": only_theirs, "only_testfleet": only_ours})
        return {
            "init_exit": code, "init_output": output,
            "registrations_project": len(theirs["registry"]),  # type: ignore[arg-type]
            "registrations_testfleet": len(ours_registry),
            "registry_equal": ours_registry == theirs["registry"],
            "check_errors": len(errors), "check_error_codes": sorted({f.code for f in errors}),
            "check_warning_codes": sorted({f.code for f in registry.findings if f.severity == "warning"}),
            "triggers": per_case,
        }


#: the report's trigger ids (docs/adopt.md) and the runner flags that give the same run
RUNNER_CASES = {
    "pr": [],
    "pr-all": ["--labels", "run-ci-all"],
    "nightly": ["--cadence", "nightly"],
    "weekly": ["--cadence", "weekly"],
    "release": ["--cadence", "release"],
}


def runner_list_report(tree: Path) -> dict[str, object]:
    """``init --report --runner-selection`` fed with the project's runner's real
    ``run_suite.py --list-only`` output, one process per (trigger, stage) as a maintainer
    would save it; the report's file-by-file comparison, counted."""
    import re

    with tempfile.TemporaryDirectory() as tmp:
        copy, _, _ = adopt(tree, Path(tmp))
        project = load_project(copy)
        stages = [(s.backend, name) for name, s in sorted(project.config.stages.items())
                  if not s.dormant]
        blocks = []
        for case, flags in RUNNER_CASES.items():
            for backend, stage in stages:
                run = subprocess.run(["python3", "tests/ci/run_suite.py", "--hw", backend, "--suite",
                                      stage, "--list-only", *flags], cwd=copy, capture_output=True,
                                     text=True, check=True,
                                     env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
                blocks.append(f"== trigger={case} stage={stage} ==\n{run.stdout}")
        saved = Path(tmp) / "selection.txt"
        saved.write_text("\n".join(blocks))
        report = Path(tmp) / "report.md"
        run = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(copy), "init",
                              "--from-existing", "--rederive-config", "--dry-run", "--report",
                              str(report), "--runner-selection", str(saved)],
                             capture_output=True, text=True, check=False)
        text = report.read_text() if report.exists() else ""
        same = sum(int(n) for n in re.findall(r"Compared with the runner's list: (\d+) stage", text))
        differences = len(re.findall(r"^\| `[^`]+` \| `[^`]+` \| (?:runner|testfleet) only \|", text,
                                     re.MULTILINE))
        return {"exit": run.returncode, "output": run.stdout + run.stderr, "blocks": len(blocks),
                "same": same, "differences": differences}


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TREE
    listed = runner_list_report(tree)
    print(f"report vs the runner's saved --list-only output: {listed['blocks']} (trigger, stage) "
          f"blocks, {listed['same']} select the same files, {listed['differences']} file "
          f"difference(s) (init exit {listed['exit']})")
    result = compare(tree)
    print(f"tree: {tree}")
    print(f"registrations: project collector {result['registrations_project']}, "
          f"adopted registry {result['registrations_testfleet']}, "
          f"equal: {result['registry_equal']}")
    print(f"init exit {result['init_exit']}; check errors after adoption: {result['check_errors']} "
          f"{result['check_error_codes']}; warnings: {result['check_warning_codes']}")
    print(f"{'trigger':32} {'files (project)':>16} {'only project':>13} {'only testfleet':>15}")
    for row in result["triggers"]:  # type: ignore[attr-defined]
        print(f"{row['trigger']:32} {row['files']:>16} {len(row['only_project']):>13} "
              f"{len(row['only_testfleet']):>15}")
        for f in row["only_project"][:5] + row["only_testfleet"][:5]:
            print(f"    {f}")


if __name__ == "__main__":
    main()
