"""Derive a configuration from a scan of the tree and its existing CI, as plain data that
makes the tree's calls valid as written; what cannot be adopted is a finding, a note, or
a line of what the existing CI does that the configuration does not carry.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from testfleet.adopt.calls import FoundCall
from testfleet.adopt.ci_model import CIRead, CIStage, NotCarried
from testfleet.adopt.implicit import location_implicit, run_command_implicit
from testfleet.adopt.markers import marker_tables
from testfleet.adopt.policy import adopted_schedules, every_job, pr_gate_policy
from testfleet.adopt.project import ProjectCI, read_project
from testfleet.adopt.scan import Scan, search_roots
from testfleet.adopt.stage_events import apply_triggers
from testfleet.adopt.stages import adopted_stages, path_stages
from testfleet.adopt.vocabulary import adopted_backends, adopted_labels
from testfleet.adopt.workflows import read_workflows
from testfleet.findings import Finding

PATTERNS = ("test_*.py", "*_test.py", "test*.py", "*.py")


@dataclass
class Adoption:
    """The derived configuration (as plain data) and what could not be adopted."""

    data: dict[str, Any]
    findings: list[Finding]
    notes: list[str]
    registrations: int
    #: what the existing CI does that the configuration does not carry (read at the end)
    not_carried: list[NotCarried] = field(default_factory=list)
    ci: CIRead = field(default_factory=CIRead)
    project: ProjectCI = field(default_factory=ProjectCI)
    #: stage -> why it is dormant (no job of the existing CI runs it)
    dormant: dict[str, str] = field(default_factory=dict)
    #: (stage, variant or "") -> the job of the existing CI that lane was adopted from
    lane_jobs: dict[tuple[str, str], CIStage] = field(default_factory=dict)


def pattern_for(files: set[str]) -> str:
    for pattern in PATTERNS:
        if all(fnmatch.fnmatch(f.rsplit("/", 1)[-1], pattern) for f in files):
            return pattern
    return "*.py"


def _excludes(candidates: list[str], registered: set[str], marked: set[str]) -> list[str]:
    """Unregistered files, listed one by one and sorted.

    Never a ``dir/**`` glob: a glob would also swallow the next test file added to
    that directory, which then passes ``check`` and never runs. Never a file that
    holds a marker (``marked``): a registration adoption could not read is a finding
    to fix, not a file to drop.
    """
    return sorted(f for f in candidates if f not in registered and f not in marked)


def _outside_excludes(scan_result: Scan, pattern: str) -> list[str]:
    """Excludes for test files outside every root (so ``check`` does not warn about
    files the project never ran): a whole directory (``dir/**``) when it lies outside
    every root and holds no root, else the file itself."""
    roots = [r.rstrip("/") for r in scan_result.roots]
    out: set[str] = set()
    for rel in scan_result.outside:
        if not fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern):
            continue
        parts = rel.split("/")[:-1]
        chosen = rel
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if not any(r == d or r.startswith(d + "/") for r in roots):
                chosen = d + "/**"
                break
        out.add(chosen)
    return sorted(out)


def derive(scan_result: Scan, *, schedules: dict[str, str] | None = None) -> Adoption:
    """Turn a scan into configuration data that makes the tree's calls valid as written."""
    notes: list[str] = []
    calls = scan_result.calls

    registered = scan_result.registered_files
    pattern = pattern_for(registered) if registered else "test_*.py"
    # A file the registry will not discover (a helper that defines the markers,
    # a module outside the pattern) cannot break 'testfleet check'.
    findings = [f for f in scan_result.findings
                if f.code in ("adopt-root", "adopt-symlink")
                or fnmatch.fnmatch(f.file.rsplit("/", 1)[-1], pattern)]
    # a file may register once per stage (several stages of one backend are fine);
    # twice to the same stage is the registry's duplicate-stage error
    seen: dict[tuple[str, str], FoundCall] = {}
    for c in calls:
        key = (c.file, c.suite)
        if key in seen:
            findings.append(Finding(c.file, c.line, c.col, "error", "adopt-duplicate",
                                    f"second registration of this file to stage {c.suite!r} "
                                    f"(first at line {seen[key].line})"))
        else:
            seen[key] = c

    candidates = [f for f in scan_result.test_files
                  if fnmatch.fnmatch(f.rsplit("/", 1)[-1], pattern)]
    data: dict[str, Any] = {"roots": list(scan_result.roots), "pattern": pattern}
    exclude = _excludes(candidates, registered, scan_result.marked)
    outside = _outside_excludes(scan_result, pattern)
    # an excluded file is never compiled by 'check'; a marker it fails to make still matters
    findings = [f for f in findings
                if not (f.code == "adopt-file-syntax" and f.file in exclude)]

    project = ProjectCI()
    ci = CIRead()
    if scan_result.repo is not None:
        project = read_project(scan_result.repo, search_roots(scan_result),
                               {label for c in calls for label in c.labels})
    implicit, implicit_notes = location_implicit(project, scan_result, calls, candidates)
    notes += implicit_notes
    if implicit:
        data["implicit"] = implicit
        under = [f for f in exclude if any(f.startswith(i["path"] + "/") for i in implicit)]
        exclude = [f for f in exclude if f not in under]
        data.pop("exclude", None)
        notes.append(f"{len(under)} file(s) registered by location ({', '.join(i['path'] for i in implicit)}, "
                     f"read from {project.collector}) are [[implicit]], not excluded")
    if exclude:
        notes.append(f"{len(exclude)} test file(s) without a registration are listed in exclude, "
                     "one per line; register them or declare their directory [[implicit]] to "
                     "run them (a new file there is not excluded)")
    if exclude or outside:
        data["exclude"] = sorted(exclude) + outside
    if outside:
        notes.append(f"test files outside every root are excluded ({', '.join(outside[:4])}"
                     f"{', ...' if len(outside) > 4 else ''}): the project's CI does not run them")
    suites = {c.suite for c in calls if c.suite} | {i["suite"] for i in implicit}
    if scan_result.repo is not None:
        by_path = {c.file for c in calls if c.suite == ""}
        ci = read_workflows(scan_result.repo, suites, by_path)
        ran = run_command_implicit(scan_result, ci, calls, candidates, implicit, notes)
        if ran:
            implicit += ran
            data["implicit"] = implicit
            covered = [f for f in data.get("exclude", [])
                       if any(f.startswith(i["path"] + "/") for i in ran)]
            rest = [f for f in data.get("exclude", []) if f not in covered]
            data.pop("exclude", None)
            if rest:
                data["exclude"] = rest
            ci = read_workflows(scan_result.repo, suites | {i["suite"] for i in ran}, by_path)
        findings += ci.findings

    data["labels"] = adopted_labels(calls, project, findings, notes)
    backends = adopted_backends(calls, notes)
    if backends:
        data["backends"] = backends
    markers = marker_tables(scan_result, notes)
    if markers:
        data["markers"] = markers
    lane_jobs: dict[tuple[str, str], CIStage] = {}
    stages, dormant, not_carried = adopted_stages(calls, implicit, scan_result, ci, findings, notes,
                                                  lane_jobs)
    not_carried += path_stages(calls, scan_result, ci, stages, notes, lane_jobs)
    data["stages"] = stages
    data["policy"] = {}
    pr_gate_policy(stages, ci, data["policy"], notes)
    exact = sorted({j.runner.script for st in ci.stages.values() for j in every_job(st)
                    if j.runner is not None and j.runner.exact_nightly})
    sched = dict(schedules) if schedules is not None else adopted_schedules(project, ci, notes, bool(exact))
    data["policy"] = {"schedules": sched, **data.get("policy", {})}
    if exact:
        notes.append(f"{', '.join(exact)} keeps nightly and per-commit registrations apart "
                     "(--nightly selects only nightly=True, a run without it only nightly=False): "
                     "each stage its jobs run that way takes their side, registrations = "
                     "\"nightly\" (with --nightly) or \"per-commit\" (without), whatever starts it")
    from testfleet.config import PolicyConfig

    apply_triggers(stages, lane_jobs, sched, set(PolicyConfig().cadences), notes)
    from testfleet.adopt.shellcheck import mark_findings

    mark_findings(stages, notes)
    ignores = _per_file_ignores(findings, data.get("exclude", []), pattern, notes)
    if ignores:
        data["check"] = {"per-file-ignores": ignores}
        findings = [f for f in findings if not (f.code == "adopt-in-function" and f.file in ignores)]
    if project.gate_defaults:
        data["gate"] = {"defaults": dict(sorted(project.gate_defaults.items()))}
        notes.append(f"{len(project.gate_defaults)} metric gate default(s) from "
                     f"{project.gate_defaults_source}")
        findings = [f for f in findings if not (f.code == "adopt-gate-default"
                                                and _gate_metric(f.message) in project.gate_defaults)]
    # one job reached from several workflows says the same thing once per route: once here
    told = list(dict.fromkeys([*not_carried, *ci.not_carried, *ci.ignored_crons]))
    return Adoption(data=data, findings=findings, notes=notes, registrations=len(calls),
                    not_carried=told, ci=ci,
                    project=project, dormant=dormant, lane_jobs=lane_jobs)


def _per_file_ignores(findings: list[Finding], exclude: list[str], pattern: str,
                      notes: list[str]) -> dict[str, list[str]]:
    """A marker called inside a test function is a unit test of the marker itself:
    ``check`` warns about it (``marker-in-function``); adoption records that the project
    lives with it, per file, so the adopted tree checks clean and a new case elsewhere
    still warns."""
    files = sorted({f.file for f in findings if f.code == "adopt-in-function"
                    and f.file not in exclude and fnmatch.fnmatch(f.file.rsplit("/", 1)[-1], pattern)})
    if files:
        notes.append(f"marker calls inside test functions (unit tests of the markers) are "
                     f"suppressed per file in [check] per-file-ignores: {', '.join(files)}")
    return {f: ["marker-in-function"] for f in files}


def _gate_metric(message: str) -> str | None:
    m = re.match(r"register_ci_gate\(metric_key='([^']*)'\)", message)
    return m.group(1) if m else None
