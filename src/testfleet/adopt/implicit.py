"""``[[implicit]]`` entries: directories the project's collector registers by location,
and directories a workflow job hands whole to ``pytest`` without a marker.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from testfleet.adopt.calls import NAME, FoundCall
from testfleet.adopt.ci_model import CIRead
from testfleet.adopt.project import ProjectCI
from testfleet.adopt.scan import Scan


def location_implicit(project: ProjectCI, scan_result: Scan, calls: list[FoundCall],
              candidates: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """``[[implicit]]`` entries for the directories the project's collector registers by
    location. A directory qualifies only if every marker in it is a CPU one (a GPU
    marker there would be an error) and it holds unregistered files to cover."""
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for rule in project.implicit:
        inside = [f for f in candidates if f.startswith(rule.path + "/")]
        gpu = sorted({c.file for c in calls if c.file.startswith(rule.path + "/") and c.backend != "cpu"})
        if not inside:
            continue
        if gpu or rule.backend != "cpu" or not NAME.match(rule.suite):
            notes.append(f"{rule.path}: the collector registers it by location, but "
                         f"{'it holds GPU markers (' + ', '.join(gpu[:3]) + ')' if gpu else 'its rule is not a CPU one'}; "
                         "its files stay explicit")
            continue
        out.append({"path": rule.path, "backend": rule.backend, "suite": rule.suite,
                    "est_time": rule.est_time})
    return out, notes


_SHELL_END = re.compile(r"\s(?:&&|\|\||;|\|)\s")


def _pytest_dirs(line: str) -> list[str]:
    """Directory arguments of a ``pytest`` command line (options and expressions skipped)."""
    m = re.search(r"\bpytest\b(.*)", line)
    if not m:
        return []
    args = _SHELL_END.split(m.group(1))[0].split()
    out = []
    for word in args:
        word = word.strip("'\"").rstrip("/")
        if not word or word.startswith("-") or "$" in word or "{" in word or word.startswith("/"):
            continue
        if ".." not in word.split("/") and not word.endswith(".py") and "::" not in word:
            out.append(word.removeprefix("./"))
    return out


def run_command_implicit(scan_result: Scan, ci: CIRead, calls: list[FoundCall],
                          candidates: list[str], implicit: list[dict[str, Any]],
                          notes: list[str]) -> list[dict[str, Any]]:
    """``[[implicit]]`` entries for directories a workflow job hands to ``pytest`` whole
    (``pytest tests/unit``) when no file in them carries a marker: the job is the stage
    (the stage it runs, or one named after the job)."""
    assert scan_result.repo is not None
    taken = {i["path"] for i in implicit}
    by_suite: dict[str, list[float]] = defaultdict(list)
    for c in calls:
        by_suite[c.suite].append(c.est_time)
    out: list[dict[str, Any]] = []
    for workflow, job, line in ci.test_commands:
        for d in _pytest_dirs(line):
            if d in taken or any(d.startswith(t + "/") or t.startswith(d + "/") for t in taken):
                continue
            if not (scan_result.repo / d).is_dir():
                continue
            inside = [f for f in candidates if f.startswith(d + "/")]
            if not inside or any(f in scan_result.marked or f in scan_result.registered_files
                                 for f in inside):
                continue
            stage = next((name for name, st in ci.stages.items()
                          if st.workflow == workflow and st.job == job), job)
            if not NAME.match(stage) or any(c.suite == stage and c.backend != "cpu" for c in calls):
                notes.append(f"{workflow} job {job} runs pytest on {d}, but no CPU stage can be "
                             "named after it; its files stay in exclude")
                continue
            known = sorted(by_suite.get(stage, []))
            est = known[len(known) // 2] if known else 60.0
            out.append({"path": d, "backend": "cpu", "suite": stage, "est_time": est})
            taken.add(d)
            notes.append(f"{d}: every file runs in {workflow} job {job} ('{line[:80]}') without a "
                         f"marker; declared [[implicit]] in stage {stage}"
                         + ("" if known else " (est_time 60 s assumed until history exists)"))
    return out
