"""The incidents that lead a job's step summary (GitHub's ``$GITHUB_STEP_SUMMARY``).

One line per stage that says it all (``stage-c-4-gpu-mi300x: 8 failed files, 1
infrastructure incident: `hipErrorNoDevice```), one table row per incident, and for an
infrastructure incident that took the whole stage the one config line that makes it
dormant. Text from test output goes through the project's Markdown escaper (``md``) or
a code span that cannot be broken out of.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from testfleet.incidents.dormancy import dormant_line, dormant_reason
from testfleet.incidents.group import Incident
from testfleet.mdtext import md
from testfleet.runner.model import JobResult

ICON = {"infrastructure": "🏗️", "test": "🧪"}
MAX_ROWS = 20


def code(text: str) -> str:
    """``text`` as a Markdown code span on one line, whatever backticks it holds."""
    flat = " ".join(text.split()).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in flat.split("`")[1::2]), default=0) + 1
                   if "`" in flat else 1)
    while fence in flat:
        fence += "`"
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def headline(lane: str, incidents: Sequence[Incident]) -> str:
    """``<lane>: N failed files, 1 infrastructure incident: `X`; 2 test incidents: `A`, `B```."""
    files = len({f for i in incidents for f in i.files})
    parts = []
    for category in ("infrastructure", "test"):
        group = [i for i in incidents if i.category == category]
        if group:
            names = ", ".join(code(i.signature.short) for i in group[:5])
            more = f" and {len(group) - 5} more" if len(group) > 5 else ""
            parts.append(f"{len(group)} {category} incident{'s' if len(group) != 1 else ''}: "
                         f"{names}{more}")
    return f"**{md(lane)}**: {files} failed file{'s' if files != 1 else ''}, " + "; ".join(parts)


PROBE_REASON = "probe of dormant stage "  # how the planner marks a probe job's files


def probe_lines(job: JobResult) -> list[str]:
    """A probe job's verdict on its dormant stage ([] for any other job): the recovery is
    announced where the runners' owners look, and counted in ``testfleet results``."""
    items = [r.item for r in job.results]
    if not items or not all(i.quarantined.startswith(PROBE_REASON) for i in items):
        return []
    lane = job.spec.settings.stage
    ran = [r for r in job.results if r.attempts]
    clean = [r for r in ran if r.outcome.ok and r.attempts[-1].number == 1]
    if ran and len(clean) == len(items):
        return [f"**Probe of dormant stage {md(lane)}: healthy this run**: all {len(items)} probed "
                f"file(s) passed on their first attempt. `testfleet results` says when the "
                "stage has passed enough probes in a row to be restored.", ""]
    return [f"**Probe of dormant stage {md(lane)}: not healthy this run** ({len(clean)} of "
            f"{len(items)} probed file(s) passed first time); the stage stays dormant.", ""]


def incident_lines(job: JobResult, incidents: Sequence[Incident],
                   environ: Mapping[str, str] | None = None) -> list[str]:
    """The summary's incident block ([] when nothing failed)."""
    if not incidents:
        return []
    env = os.environ if environ is None else environ
    lane = job.spec.settings.stage
    lines = [headline(lane, incidents), "",
             "| incident | kind | files | tests | signature | why |", "|---|---|---:|---:|---|---|"]
    for i in incidents[:MAX_ROWS]:
        lines.append(f"| `{i.id}` | {ICON[i.category]} {i.category} | {len(i.files)} | "
                     f"{len(i.tests) or '-'} | {code(i.signature.text)} | {md(i.why)} |")
    if len(incidents) > MAX_ROWS:
        lines.append(f"\n_{len(incidents) - MAX_ROWS} more incidents: see `testfleet incident list`._")
    lines += _dormancy(job, incidents, env)
    return [*lines, ""]


def _dormancy(job: JobResult, incidents: Sequence[Incident], env: Mapping[str, str]) -> list[str]:
    from testfleet.results.links import linker

    whole = next(((i, s) for i in incidents for s in i.whole_lanes if s.files >= 2), None)
    if whole is None or any(r.item.quarantined for r in job.results):
        return []  # a probe or quarantined files: the stage is not what failed
    incident, share = whole
    run_id = env.get("GITHUB_RUN_ID") or env.get("BUILDKITE_BUILD_NUMBER") or None
    url = linker(None, None, None, env).url(run_id) if run_id else None
    described = Incident(incident.run, incident.signature, incident.category, incident.why,
                         incident.lanes, incident.failures, incident.ts, incident.commit, run_id)
    table = job.spec.options.config_table or f"stages.{share.lane}"
    line = dormant_line(dormant_reason(described, share, url=url))
    cmd = f"testfleet incident dormant {share.lane}" + (f" --run {run_id}" if run_id else "")
    return ["", f"Every file of **{md(share.lane)}** that ran failed with infrastructure incident "
                f"`{incident.id}`. One line makes the stage dormant until its runners are back "
                f"(in `[{md(table)}]`; `{md(cmd)}` writes it, editing only that line):", "",
            "```toml", line, "```"]
