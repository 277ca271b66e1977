"""Check rules from ``[tool.testfleet.check]``, enforced by ``testfleet check``.

The rules read the same :class:`~testfleet.report.model.Report` the dashboard shows,
so ``check`` and ``report`` can never disagree about what is a hole or how old a
disabled test is.

- ``disabled_requires_reference``: a disabled reason must cite an issue, PR or URL.
- ``max_disabled_days``: a ``disabled=`` line older than this (git history) is an error.
- ``dormant_requires_reference``: a dormant stage's reason must cite one too.
- ``coverage_holes``: each hole is a warning, an error, or ``off``.
- ``disabled_expiry``: a reason's ``until YYYY-MM-DD`` that has passed, or that is not a
  real date, is a warning, an error, or ``off``.
"""

from __future__ import annotations

import datetime as dt

from testfleet.config import Config, Project
from testfleet.findings import Finding
from testfleet.registry.model import Registry
from testfleet.report import fmt
from testfleet.report.configloc import config_line
from testfleet.report.gitage import RepoInfo
from testfleet.report.model import Report

#: Where ``check`` keeps the lines of each disabled file's ``disabled=`` keywords, by digest.
SPANS_KIND = "testfleet-disabled-spans"
SPANS_NAME = "disabled-spans.json"


def check_rules(project: Project, registry: Registry, *, now: dt.datetime | None = None,
                use_cache: bool = True, partial: bool = False) -> list[Finding]:
    """All rule findings for the project; git is consulted only when ``max_disabled_days`` is set.

    ``partial``: a ``check FILES`` run, which keeps the other files' kept spans too."""
    from testfleet.registry import cache
    from testfleet.report.collect import build_report
    from testfleet.report.gitage import disabled_ages

    cfg = project.config
    now = now or dt.datetime.now(dt.timezone.utc)
    regs = registry.registrations
    needs_git = cfg.check.max_disabled_days is not None
    spans = cache.DigestCache(project.root, project.root / cfg.cache_dir / SPANS_NAME,
                              SPANS_KIND, use_cache)
    ages, info = disabled_ages(project.root, regs, use_git=needs_git, spans=spans,
                               digests=registry.digests)
    spans.save(partial=partial)
    report = build_report(project=project.root.name, config=cfg, registrations=regs,
                          now=now, ages=ages, invalid=invalid_by_stage(registry))
    findings = evaluate_rules(report, cfg, _config_name(project), project.raw_config_text)
    if needs_git:
        findings += git_findings(project, report, info)
    return findings


def git_findings(project: Project, report: Report, info: RepoInfo) -> list[Finding]:
    """Say so when ``max_disabled_days`` cannot be enforced exactly (no git, shallow clone)."""
    if project.config.check.max_disabled_days is None or not report.ledger:
        return []
    key = ("tool.testfleet." if _is_pyproject(project) else "") + "check.max_disabled_days"
    if not info.is_repo:
        return [Finding(_config_name(project), 0, 0, "warning", "disabled-age-unknown",
                        f"check.max_disabled_days is set but disabled ages are unknown: {info.note}",
                        key)]
    if info.shallow:
        return [Finding(_config_name(project), 0, 0, "warning", "disabled-age-shallow",
                        "shallow clone: disabled ages are lower bounds, so max_disabled_days may "
                        "miss old ones (check out full history, e.g. fetch-depth: 0)", key)]
    return []


def evaluate_rules(report: Report, cfg: Config, config_file: str = "pyproject.toml",
                   config_text: str = "") -> list[Finding]:
    """Pure: the rule findings for an already built report."""
    rules = cfg.check
    prefix = "tool.testfleet." if config_file.endswith("pyproject.toml") else ""
    out: list[Finding] = []
    for e in report.ledger:
        line = e.reason_line or e.line
        if rules.disabled_requires_reference and not e.references:
            out.append(Finding(e.file, line, 0, "error", "disabled-no-reference",
                               f"disabled {e.backend} registration for {e.suite} cites no issue "
                               f"or URL (reason: {_short(e.reason)!r}); add e.g. '#123' or a link"))
        if (rules.max_disabled_days is not None and e.age_days is not None
                and e.age_days > rules.max_disabled_days):
            since = f" since {e.changed}" if e.changed else ""
            out.append(Finding(e.file, line, 0, "error", "disabled-too-old",
                               f"disabled for {e.age_days} days{since} (limit "
                               f"{rules.max_disabled_days}): restore it or re-justify the reason"))
        if rules.disabled_expiry != "off":
            if e.expired:
                out.append(Finding(e.file, line, 0, rules.disabled_expiry, "disabled-expired",
                                   f"the reason says it is disabled until {e.expiry}, which has "
                                   f"passed: restore it or update the reason"))
            elif e.expiry_error:
                out.append(Finding(e.file, line, 0, rules.disabled_expiry, "disabled-expiry-invalid",
                                   f"cannot read the expiry in the reason: {e.expiry_error}"))
    for stage in report.dormant:
        if rules.dormant_requires_reference and not stage.references:
            out.append(Finding(config_file, config_line(config_text, stage.name, "disabled"), 0,
                               "error", "dormant-no-reference",
                               f"dormant stage {stage.name} cites no issue or URL "
                               f"(reason: {_short(stage.reason or '')!r})",
                               f"{prefix}{stage.config_key or 'stages.' + stage.name}.disabled"))
    if rules.coverage_holes != "off":
        for hole in report.holes:
            if hole.kind == "stage":
                key = next((s.config_key for s in report.stages if s.name == hole.name), "")
                where = (config_file, config_line(config_text, hole.name),
                         f"{prefix}{key or 'stages.' + hole.name}")
            else:
                where = (config_file, 0, "")
            lost = f"; {fmt.lost(hole.lost)}" if hole.lost else ""
            out.append(Finding(where[0], where[1], 0, rules.coverage_holes, "coverage-hole",
                               f"coverage hole: {hole.kind} {hole.name} has no registration that "
                               f"can run ({hole.cause}: {_short(hole.detail, 160)}){lost}",
                               where[2]))
    return out


def invalid_by_stage(registry: Registry) -> dict[str, int]:
    """How many rejected registrations name each stage (a hole's real cause, #12)."""
    counts: dict[str, int] = {}
    for bad in registry.invalid:
        counts[bad.suite] = counts.get(bad.suite, 0) + 1
    return counts


def _config_name(project: Project) -> str:
    try:
        return project.relpath(project.config_path)
    except ValueError:
        return project.config_path.name


def _is_pyproject(project: Project) -> bool:
    return project.config_path.name == "pyproject.toml"


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

