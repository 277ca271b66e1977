"""``testfleet check``: one ``disabled=`` reason pasted into many files is one incident.

The seed of this project: a broken runner class, and ``disabled="Disable due to
failure"`` in eight files. Eight arguments to restore one by one, one reason for what
may be eight causes, and nothing that says when the runners are back. When at least
:data:`REPEAT_MIN` registrations carry the same reason, each gets a warning that names
the incident history recorded for those files (an infrastructure incident that took
half of them or more) and the one config line that replaces them. Without such an
incident the warning is given only when the reason speaks of a failure ("Disable due
to failure", "runners broken"): a reason shared on purpose ("performance testcase",
"standalone benchmark" on 31 files of SGLang's tree) is a category, not an incident.

History is read only when such a reason exists, read-only, and never required: an
unreadable or absent history leaves the finding without the incident's name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from testfleet.findings import Finding

REPEAT_MIN = 3
CODE = "disabled-reason-repeated"
_FAILURE_WORDS = re.compile(r"\b(?:fail\w*|broken|break\w*|error\w*|crash\w*|hang\w*|flak\w*|"
                            r"timeouts?|timed out|runners?|not work\w*|doesn't work|does not work)\b",
                            re.IGNORECASE)


def repeated_reasons(registrations: Sequence[Any]) -> dict[str, list[Any]]:
    """Normalized reason -> the registrations that carry it (three or more). Pure."""
    groups: dict[str, list[Any]] = {}
    for reg in registrations:
        if reg.disabled:
            groups.setdefault(" ".join(reg.disabled.split()).lower(), []).append(reg)
    return {reason: regs for reason, regs in groups.items() if len(regs) >= REPEAT_MIN}


def findings(project: Any, registry: Any) -> list[Finding]:
    groups = repeated_reasons(registry.registrations)
    if not groups:
        return []
    incidents = _infrastructure_incidents(project)
    out = []
    for regs in groups.values():
        files = {r.file for r in regs}
        stages = sorted({r.suite for r in regs})
        named = _best(incidents, files)
        if named is None and not _FAILURE_WORDS.search(regs[0].disabled):
            continue
        if named is not None:
            share = max(named.lanes, key=lambda s: s.files)
            cause = (f"history records infrastructure incident {named.id} "
                     f"({named.signature.label or named.signature.text}) on {share.files} of "
                     f"{share.ran} files of {share.lane} in run {named.ci_run_id or named.run}; "
                     f"make that stage dormant with one line instead: testfleet incident dormant "
                     f"{share.lane}")
        else:
            cause = ("if they fail for one cause it is one incident, not "
                     f"{len(regs)} failures: see 'testfleet incident list', and make a broken "
                     f"stage dormant with one config line (testfleet incident dormant "
                     f"{stages[0]})")
        reason = regs[0].disabled
        short = reason if len(reason) <= 60 else reason[:59] + "…"
        for reg in regs:
            out.append(Finding(reg.file, reg.line, 0, "warning", CODE,
                               f"the disabled reason {short!r} is on {len(regs)} registrations "
                               f"({', '.join(stages)}); {cause}"))
    return out


def _infrastructure_incidents(project: Any) -> list[Any]:
    from testfleet.store import StoreError, open_store
    from testfleet.store.engine import resolve_target

    try:
        target = resolve_target(project, None)
        if target.path is not None and not target.path.is_file():
            return []
        from sqlalchemy.exc import SQLAlchemyError

        from testfleet.incidents.history import recent_incidents

        with open_store(project, readonly=True) as store:
            return [i for i in recent_incidents(store, runs=50) if i.infrastructure]
    except (StoreError, SQLAlchemyError, OSError, ValueError):
        return []


def _best(incidents: Sequence[Any], files: set[str]) -> Any:
    """The newest infrastructure incident that took most of these files."""
    best = None
    for incident in incidents:  # newest first
        covered = len(files & set(incident.files))
        if covered * 2 >= len(files) and (best is None or covered > best[0]):
            best = (covered, incident)
    return best[1] if best is not None else None
