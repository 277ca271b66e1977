"""Plan emitters: one function per format, each ``Plan -> str``.

``FORMATS`` is the whole dispatch table of ``testfleet plan --format``; another
CI engine is one more entry. Every format shows the coverage holes, because a
backend that silently stopped being tested is the failure this tool exists to
prevent. Untrusted text (labels in warnings, reasons) is escaped per format.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from testfleet.documents.vocabulary import StageCount
from testfleet.mdtext import md
from testfleet.planning.lanes import job_matrices
from testfleet.planning.model import REASONS, Job, Plan, plan_bytes

# -- json -----------------------------------------------------------------------


def render_json(plan: Plan) -> str:
    """The canonical plan file (what ``load_plan`` reads)."""
    return plan_bytes(plan).decode("utf-8")


# -- github -----------------------------------------------------------------------

_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:-]*$")


def github_outputs(plan: Plan, groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """The step outputs a workflow consumes: one matrix for all jobs and one per wave.
    ``groups``: the workflow's jobs that run several lanes (key -> lanes); their lanes'
    matrices are one, under the key (:mod:`.github_groups`)."""
    policy = plan.policy

    def flag(value: object) -> str:
        return "true" if value else "false"

    def matrix(jobs: list[Job]) -> str:
        return json.dumps({"include": [j.matrix_entry() for j in jobs]}, sort_keys=True,
                          separators=(",", ":"))

    out = {
        "matrix": matrix(list(plan.jobs)),
        "has_jobs": flag(plan.jobs),
        "cadence": str(policy.get("cadence", "")),
        "bypass_fastfail": flag(policy.get("bypass_fastfail")),
        "write_baseline": flag(policy.get("write_baseline")),
        "coverage_holes": str(len(plan.holes)),
        "coverage_hole_stages": json.dumps([s.lane for s in plan.holes], separators=(",", ":")),
        "digest": plan.digest,
        "waves": str(plan.waves),
        # rejected registrations: the plan runs every valid test; the final check fails on it
        "tree_errors": flag(any(s.reason == "invalid" for s in plan.skipped)),
        # a fork's pull request without an authorizing label: the trusted workflow gives
        # its jobs no secret
        "authorized": flag(policy.get("authorized", True)),
    }
    for wave in range(plan.waves):
        jobs = [j for j in plan.jobs if j.wave == wave]
        out[f"matrix_{wave}"] = matrix(jobs)
        out[f"has_jobs_{wave}"] = flag(jobs)
    # One job per stage in the generated stages workflow (#11), one per variant of a stage
    # with variants (#12): each reads its own matrix from here, passed to it as its
    # ``stages`` input, by the lane's key: fromJSON(inputs.stages)['<lane>'].matrix.
    stages = job_matrices({s.lane: [j.matrix_entry() for j in plan.jobs if j.lane == s.lane]
                           for s in plan.stages}, groups)
    out["stages"] = json.dumps(stages, sort_keys=True, separators=(",", ":"))
    return out


def github_output_text(outputs: dict[str, str]) -> str:
    """``$GITHUB_OUTPUT`` syntax. Anything but a plain token goes in a heredoc with
    a random delimiter that does not occur in the value, so no value can end its
    own block early and inject another output."""
    lines: list[str] = []
    for name, value in outputs.items():
        if _SAFE_VALUE.match(value):
            lines.append(f"{name}={value}")
            continue
        delimiter = "ghadelimiter_" + secrets.token_hex(16)
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = "ghadelimiter_" + secrets.token_hex(16)
        lines.extend([f"{name}<<{delimiter}", value, delimiter])
    return "\n".join(lines) + "\n"


def render_github(plan: Plan, groups: Mapping[str, Sequence[str]] | None = None) -> str:
    return github_output_text(github_outputs(plan, groups))



def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def _percent(share: float) -> str:
    """Whole percent, except that a share that is neither none nor all never rounds to
    0 % or 100 % (one test in 300 from history is not "0 %")."""
    pct = share * 100
    if 0 < pct < 1:
        return "<1%"
    if 99 < pct < 100:
        return ">99%"
    return f"{pct:.0f}%"


SHARDING_HEADER = ("stage", "shards", "makespan min", "bound min", "ratio", "history")
SHARDING_LEGEND = ("makespan = the slowest shard; bound = max(longest test, total / shards), "
                   "which no split can beat; ratio = makespan / bound; history = share of "
                   "tests estimated from recorded durations (the rest from est_time literals)")


def sharding_rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    """How well each scheduled stage split, as people read it: makespan and lower
    bound in minutes, their ratio to three decimals (1.003 = 0.3 % above the best
    any split could do) and the share of its tests estimated from history. Stages
    that run nothing have no split and no row (a 0.0 or 1.000 would claim one)."""
    return [(s.lane, str(s.shards), _split_minutes(s.makespan), _split_minutes(s.lower_bound),
             f"{s.ratio:.3f}", _percent(s.history_share))
            for s in plan.stages if s.shards > 0]


def _split_minutes(seconds: float) -> str:
    """Minutes with two decimals below ten minutes, so a short stage's makespan and
    bound do not both read 0.2 beside a ratio of 1.200."""
    minutes = seconds / 60
    return f"{minutes:.2f}" if minutes < 10 else f"{minutes:.1f}"


def skipped_by_reason(plan: Plan) -> Counter[str]:
    return Counter(s.reason for s in plan.skipped)


def _fork(plan: Plan) -> str:
    """A fork's PR is planned differently (no trusted_only stages): the header says so."""
    return " from a fork" if plan.trigger is not None and plan.trigger["fork"] else ""


def _trust_line(plan: Plan) -> str:
    """Where a fork's trust settings came from (the base commit, or nowhere: fail closed)."""
    from testfleet.planning.trust import describe

    return describe(plan.trust or {})


def dormant_groups(plan: Plan) -> list[tuple[str, list[str]]]:
    """The dormant lanes by their reason, each reason once (first-seen order): a reason
    shared by many stages is printed once with their names, not once per stage."""
    groups: dict[str, list[str]] = {}
    for s in plan.stages:
        if s.status == "dormant":
            groups.setdefault(s.reason, []).append(s.lane)
    return list(groups.items())


def render_markdown(plan: Plan, max_skipped: int = 50) -> str:
    p = plan.policy
    lines = ["## testfleet plan", ""]
    lines.append(
        f"**{md(p.get('event'))}**{_fork(plan)} · cadence **{md(p.get('cadence'))}** · "
        f"{len(plan.jobs)} job(s) · labels: "
        + (md(", ".join(p.get("include_labels", []))) or "none")
        + f" · bypass fast-fail: {'yes' if p.get('bypass_fastfail') else 'no'}"
        + f" · write baselines: {'yes' if p.get('write_baseline') else 'no'}"
    )
    lines.append("")
    if plan.trust:
        lines += [f"**Trust:** {md(_trust_line(plan))}", ""]
    if plan.holes:
        lines.append("### ⚠️ Coverage holes")
        lines.append("")
        for s in plan.holes:
            if s.status != "dormant":
                lines.append(f"- **{md(s.lane)}** ({md(s.backend)}): {md(s.status)}"
                             + (f" — {md(s.reason)}" if s.reason else ""))
        for reason, lanes in dormant_groups(plan):
            lines.append(f"- dormant ({len(lanes)}): {md(', '.join(lanes))} — {md(reason)}")
        lines.append("")
    lines += ["| stage | backend | status | wave | shards | est. min (makespan) | scheduled / registered | reason |",
              "|---|---|---|---|---|---|---|---|"]
    for s in plan.stages:
        if s.status == "dormant":
            continue  # listed once per reason above
        lines.append(
            f"| {md(s.lane)} | {md(s.backend)} | {md(s.status)}{' ⚠️' if s.hole else ''} | {s.wave} "
            f"| {s.shards} | {_minutes(s.makespan)} | {s.counts.get('scheduled', 0)} / "
            f"{s.counts.get('registered', 0)}{_at_risk(s.counts)} | {md(s.reason)} |"
        )
    lines.append("")
    split = sharding_rows(plan)
    if split:
        lines += ["### Sharding", "", "| " + " | ".join(SHARDING_HEADER) + " |",
                  "|---|" + "---:|" * (len(SHARDING_HEADER) - 1)]
        lines += [f"| {md(row[0])} | " + " | ".join(row[1:]) + " |" for row in split]
        lines += ["", f"<sub>{md(SHARDING_LEGEND)}</sub>", ""]
    counts = skipped_by_reason(plan)
    if counts:
        lines += ["| skipped because | registrations |", "|---|---|"]
        lines += [f"| {r} | {counts[r]} |" for r in REASONS if counts.get(r)]
        lines.append("")
    if plan.warnings:
        lines.append("### Warnings")
        lines.append("")
        lines += [f"- {md(w)}" for w in plan.warnings]
        lines.append("")
    if plan.jobs:
        lines += ["<details><summary>Jobs</summary>", "",
                  "| job | runs on | tests | est. min |", "|---|---|---|---|"]
        lines += [f"| {md(j.id)} | {md(', '.join(j.runs_on))} | {len(j.tests)} | "
                  f"{_minutes(j.estimate)} |" for j in plan.jobs]
        lines += ["", "</details>", ""]
    if plan.skipped:
        lines += ["<details><summary>Skipped registrations</summary>", "",
                  "| file | stage | reason | detail |", "|---|---|---|---|"]
        for sk in plan.skipped[:max_skipped]:
            # a dormant stage's reason is given once, with the holes above
            detail = "(the stage's reason is above)" if sk.reason == "stage-dormant" else sk.detail
            lines.append(f"| {md(sk.file)} | {md(sk.lane)} | {sk.reason} | {md(detail)} |")
        if len(plan.skipped) > max_skipped:
            lines.append(f"| … and {len(plan.skipped) - max_skipped} more | | | |")
        lines += ["", "</details>", ""]
    lines.append(f"<sub>{md(plan.digest)}</sub>")
    return "\n".join(lines) + "\n"


# -- table ------------------------------------------------------------------------

_STATUS_STYLE = {
    "scheduled": "green", "dormant": "bold yellow", "unauthorized": "bold red",
    "excluded": "cyan", "unaffected": "cyan", "empty": "dim",
    "runner-broken": "bold red", "no-runner-online": "bold red",
}


def queue_lines(plan: Plan) -> list[str]:
    """Queue lanes (#40): their jobs are runners of one queue, not a partition."""
    runners = Counter(job.lane for job in plan.jobs if job.queue is not None)
    out: dict[str, str] = {}
    for job in plan.jobs:
        if job.queue is not None and job.lane not in out:
            out[job.lane] = (f"queue: {job.lane}: {runners[job.lane]} runner(s) pull its "
                             f"{job.queue['files']} file(s) from one queue (a capacity, not a "
                             f"partition; lease {job.queue['lease_seconds']:g}s)")
    return list(out.values())


def render_table(plan: Plan, color: bool = False, width: int = 120) -> str:
    """Stages with status, shards, estimated minutes, skipped counts by reason, warnings."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color,
                      color_system="standard" if color else None, highlight=False)
    p = plan.policy
    head = Text(f"event {p.get('event')}{_fork(plan)} · cadence {p.get('cadence')} · "
                f"{len(plan.jobs)} job(s) · labels "
                f"{', '.join(p.get('include_labels', [])) or 'none'} · bypass fast-fail "
                f"{'yes' if p.get('bypass_fastfail') else 'no'} · write baselines "
                f"{'yes' if p.get('write_baseline') else 'no'}")
    console.print(head)
    if plan.trust:
        # soft_wrap: a hard-wrapped line would split the commit id from its words
        console.print(Text(_trust_line(plan), style="bold"), soft_wrap=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col, justify in [("stage", "left"), ("backend", "left"), ("status", "left"),
                         ("wave", "right"), ("shards", "right"), ("est. min", "right"),
                         ("sched/reg", "right"), ("reason", "left")]:
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for s in plan.stages:
        if s.status == "dormant":
            continue  # grouped by reason below
        status = Text(s.status + (" (hole)" if s.hole else ""),
                      style=_STATUS_STYLE.get(s.status, ""))
        table.add_row(Text(s.lane), Text(s.backend), status, str(s.wave), str(s.shards),
                      _minutes(s.makespan),
                      f"{s.counts.get('scheduled', 0)}/{s.counts.get('registered', 0)}"
                      f"{_at_risk(s.counts)}", Text(s.reason))
    console.print(table)
    split = sharding_rows(plan)
    if split:
        # A second, narrow table: the split figures fit an 80-column terminal here,
        # where six more columns in the stage table would squeeze them unreadable.
        sharding = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
                         title="sharding", title_justify="left", title_style="bold")
        for col in SHARDING_HEADER:
            sharding.add_column(col, justify="left" if col == "stage" else "right",
                                no_wrap=col != "stage", overflow="fold")
        for row in split:
            sharding.add_row(Text(row[0]), *row[1:])
        console.print(sharding)
        console.print(Text(SHARDING_LEGEND, style="dim"))
    for line in queue_lines(plan):
        console.print(Text(line))
    counts = skipped_by_reason(plan)
    if counts:
        console.print(Text("skipped: " + ", ".join(f"{counts[r]} {r}" for r in REASONS
                                                   if counts.get(r))))
    for reason, lanes in dormant_groups(plan):
        console.print(Text(f"dormant ({len(lanes)}, nothing scheduled, each a coverage hole): "
                           f"{', '.join(lanes)}", style="bold yellow"))
        console.print(Text(f"  reason: {reason}"))
    for s in plan.holes:
        if s.status == "dormant":
            continue
        console.print(Text(f"coverage hole: {s.lane} ({s.backend}) — {s.status}"
                           + (f": {s.reason}" if s.reason else ""), style="bold yellow"))
    for w in plan.warnings:
        if not w.startswith("coverage hole:"):
            console.print(Text(f"warning: {w}", style="yellow"))
    return buf.getvalue()


def _at_risk(counts: Mapping[StageCount, int]) -> str:
    """Quarantined files are scheduled but their failure does not block: at risk (#14)."""
    n = counts.get("quarantined", 0)
    return f" ({n} at risk)" if n else ""


def render_buildkite(plan: Plan) -> str:
    """A Buildkite pipeline, one step per job (see :mod:`testfleet.integrations.buildkite`)."""
    from testfleet.integrations.buildkite import emit

    return emit(plan)


FORMATS: dict[str, Callable[[Plan], str]] = {
    "table": render_table,
    "json": render_json,
    "markdown": render_markdown,
    "github": render_github,
    "buildkite": render_buildkite,
}
