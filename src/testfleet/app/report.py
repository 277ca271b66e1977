"""Gather the report's inputs (registry, git, plan, history) and build it.

The report's I/O happens on the application floor: the history is opened once
(:mod:`testfleet.app.report_history`) and ``report/`` derives its sections from the
values read. Every input that is unavailable becomes a note in the report instead of
an error, except an explicitly requested plan file, which must be readable.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from testfleet.config import Project
from testfleet.errors import UsageError
from testfleet.registry.model import Registry
from testfleet.report.model import HistorySection, PlanSection, Report


def collect_registry(project: Project) -> Registry:
    from testfleet.registry import collect

    return collect(project)


def gather(project: Project, *, plan_path: Path | None = None, database: str | None = None,
           history: bool = True, now: dt.datetime | None = None,
           registry: Registry | None = None) -> Report:
    from testfleet.app.gitage import disabled_ages
    from testfleet.report.collect import build_report
    from testfleet.report.rules import evaluate_rules, git_findings

    now = now or report_time()
    registry = registry if registry is not None else collect_registry(project)
    regs = registry.registrations
    plan = None
    if plan_path is not None:
        plan = load_plan_section(plan_path)
    ages, info = disabled_ages(project.root, regs)
    if info.is_repo:
        git = "shallow clone, ages are lower bounds" if info.shallow else "full history"
    else:
        git = f"ages unknown: {info.note}"
    results = None
    quarantined: set[tuple[str, str]] = set()
    breakers: dict[str, Any] = {}
    if history:
        from testfleet.app.breaker import read_breakers
        from testfleet.app.report_history import read_report_history

        read = read_report_history(project, registry, database)
        hist, results, quarantined = read.history, read.results, read.quarantined
        breakers, _ = read_breakers(project, database)
    else:
        hist = HistorySection(False, "history not requested (--no-history)")
    notes = []
    n_err = sum(1 for f in registry.findings if f.severity == "error")
    if n_err:
        rejected = (f", {len(registry.invalid)} invalid registration(s) (fate 'invalid')"
                    if registry.invalid else "")
        notes.append(f"the registry has {n_err} error(s){rejected}; the numbers above leave out what could "
                     "not be read — run 'testfleet check'")
    from testfleet.report.rules import invalid_by_stage

    report = build_report(invalid=invalid_by_stage(registry),
                          project=_name(project), config=project.config, registrations=regs,
                          now=now, ages=ages, git=git, history=hist, plan=plan, notes=notes,
                          config_file=_config_name(project), config_text=project.raw_config_text,
                          quarantined=quarantined, breakers=breakers)
    findings = evaluate_rules(report, project.config, _config_name(project),
                              project.raw_config_text)
    findings += git_findings(project, report, info)
    # the holes section names each hole; its check finding would say it a second time
    findings = [f for f in findings if f.code != "coverage-hole"]
    from dataclasses import replace

    from testfleet.report.links import github_links

    report = replace(report, findings=tuple(f.render() for f in sorted(findings)),
                     links=github_links(os.environ, project.root), results=results)
    if results is not None and results.available:
        report = with_results(report, registry)
    return report


def with_results(report: Report, registry: Registry) -> Report:
    """Each stage's health, and the gate table's verdicts from the same results that
    "Failing now" shows (#26): one source of truth for what failed."""
    from dataclasses import replace

    from testfleet.report.gate_verdicts import with_run_verdicts
    from testfleet.report.health import stage_health

    results = report.results
    assert results is not None
    health = stage_health(results.files, results.failing, results.url)
    metrics: dict[str, list[str]] = {}
    for g in registry.gates:
        key = g.kwargs.get("metric_key")
        if isinstance(key, str):
            metrics.setdefault(g.file, []).append(key)
    backends = {(r.suite, r.file): r.backend for r in registry.registrations}
    stages = {s.name: s.backend for s in report.stages}
    gates = with_run_verdicts(report.history.gates, results.files, results.links.url, metrics,
                              lambda stage, file: backends.get((stage, file),
                                                               stages.get(stage, "?")))
    return replace(report, health=health, history=replace(report.history, gates=gates))


def load_plan_section(path: Path) -> PlanSection:
    """Read and verify ``path`` with the planner's own loader (digest, schema, fields).

    Every problem is a :class:`UsageError` naming the file, exactly as ``testfleet run``
    would report it.
    """
    from testfleet.planning.model import load_plan
    from testfleet.report.planview import plan_section

    plan = load_plan(path)
    return plan_section(plan.to_json(), str(path))


def report_time() -> dt.datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` when set, so a report can be reproduced byte for byte."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch:
        try:
            return dt.datetime.fromtimestamp(int(epoch), tz=dt.timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"SOURCE_DATE_EPOCH={epoch!r} is not a POSIX timestamp") from None
    return dt.datetime.now(dt.timezone.utc)


def _name(project: Project) -> str:
    from testfleet.app.project_name import project_name

    return project_name(project)


def _config_name(project: Project) -> str:
    try:
        return project.relpath(project.config_path)
    except ValueError:
        return project.config_path.name
