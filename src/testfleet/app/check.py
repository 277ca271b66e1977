"""What ``testfleet check`` adds to the registry's findings: the ``[tool.testfleet.check]``
rules, on the same report the dashboard shows, with git consulted (``git blame``) only
when ``max_disabled_days`` is set. The git reads happen here; the rules are pure."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.findings import Finding
    from testfleet.registry.model import Registry


#: Where ``check`` keeps the lines of each disabled file's ``disabled=`` keywords, by digest.
SPANS_KIND = "testfleet-disabled-spans"
SPANS_NAME = "disabled-spans.json"


def check_rules(project: Project, registry: Registry, *, now: dt.datetime | None = None,
                use_cache: bool = True, partial: bool = False) -> list[Finding]:
    """All rule findings for the project; git is consulted only when ``max_disabled_days`` is set.

    ``partial``: a ``check FILES`` run, which keeps the other files' kept spans too."""
    from testfleet.app.gitage import disabled_ages
    from testfleet.registry import cache
    from testfleet.report.collect import build_report
    from testfleet.report.rules import (
        _config_name,
        evaluate_rules,
        git_findings,
        invalid_by_stage,
    )

    cfg = project.config
    now = now or dt.datetime.now(dt.timezone.utc)
    regs = registry.registrations
    needs_git = cfg.check.max_disabled_days is not None
    spans = cache.DigestCache(project.root, project.root / cfg.cache_dir / SPANS_NAME,
                              SPANS_KIND, use_cache)
    ages, info = disabled_ages(project.root, regs, use_git=needs_git, spans=spans,
                               digests=registry.digests)
    spans.save(partial=partial)
    from testfleet.app.breaker import breaker_findings, read_breakers

    breakers, _ = read_breakers(project, None)
    report = build_report(project=project.root.name, config=cfg, registrations=regs,
                          now=now, ages=ages, invalid=invalid_by_stage(registry),
                          breakers=breakers)
    findings = evaluate_rules(report, cfg, _config_name(project), project.raw_config_text)
    findings += breaker_findings(project, breakers, now.timestamp())
    if needs_git:
        findings += git_findings(project, report, info)
    return findings
