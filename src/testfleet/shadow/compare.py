"""The comparison itself: the plan testfleet made for a CI event against what the existing
CI ran in that run (:mod:`.observed`), lane by lane -- the files, the runner labels, the
shard count. Pure: values in, a ``testfleet.shadow/1`` document out; nothing is run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from testfleet.errors import UsageError
from testfleet.shadow.observed import ObservedLane

if TYPE_CHECKING:
    from testfleet.documents.shadow import Difference, FileDiffDoc, LaneDoc, ShadowDoc, VerdictDoc
    from testfleet.planning.model import Plan


@dataclass
class PlannedLane:
    stage: str
    variant: str
    files: set[str] = field(default_factory=set)
    runs_on: tuple[str, ...] = ()
    shards: int = 0


def planned_lanes(plan: Plan) -> dict[tuple[str, str], PlannedLane]:
    """``(stage, variant) -> lane`` for the plan's test jobs (a dormant stage's probe runs
    no test of the project and is not a lane the old CI had)."""
    out: dict[tuple[str, str], PlannedLane] = {}
    for job in plan.jobs:
        if job.probe:
            continue
        lane = out.setdefault((job.stage, job.variant), PlannedLane(job.stage, job.variant))
        lane.files |= {t.file for t in job.tests}
        lane.runs_on = tuple(sorted(job.runs_on))
        lane.shards = max(lane.shards, job.shards)
    return out


def plan_files(plan: Plan) -> set[str]:
    """Every file the plan names (in a job or with a fate): what a JUnit classname may be."""
    return {t.file for j in plan.jobs for t in j.tests} | {s.file for s in plan.skipped}


def compare(plan: Plan, observed: dict[tuple[str, str], ObservedLane], *, run_id: str = "",
            commit: str = "", stages: tuple[str, ...] = ()) -> ShadowDoc:
    """Every lane either side has, with what differs: a lane only one side ran, a file only
    one side ran in it (with the plan's fate for a file only the old CI ran), other runner
    labels (compared as sets: GitHub matches labels in any order), another shard count.
    A record that does not say its labels or partitions is a note, not a difference; so
    is an old job that ran no file where the plan has no job (the same nothing, run on one
    runner fewer). ``stages``: only these stages are compared (one workflow of several
    records its own run: the stages of the others are not its to say)."""
    planned = planned_lanes(plan)
    if stages:
        planned = {k: v for k, v in planned.items() if k[0] in stages}
        outside = sorted({k[0] for k in observed if k[0] not in stages})
        if outside:
            raise UsageError(f"the records name stage(s) outside --stage: {', '.join(outside)}")
    fates: dict[tuple[str, str], str] = {}
    for s in plan.skipped:
        fates.setdefault((s.suite, s.file), f"{s.reason} ({s.detail})" if s.detail else s.reason)
    lanes: list[LaneDoc] = []
    notes: list[str] = []
    missing_runs_on: list[str] = []
    missing_shards: list[str] = []
    idle: list[str] = []
    for key in sorted(set(planned) | set(observed)):
        ours, theirs = planned.get(key), observed.get(key)
        name = key[0] + (f" ({key[1]})" if key[1] else "")
        diffs: list[Difference] = []
        if ours is None and theirs is not None and not theirs.files:
            idle.append(name)  # the same nothing on both sides, one runner fewer
        elif ours is None:
            diffs.append("only-observed")
        if theirs is None:
            diffs.append("only-planned")
        ours_files = ours.files if ours else set()
        theirs_files = theirs.files if theirs else set()
        only_observed: list[FileDiffDoc] = [
            {"file": f, "why": fates.get((key[0], f), "not in the plan")}
            for f in sorted(theirs_files - ours_files)]
        only_planned: list[FileDiffDoc] = [
            {"file": f, "why": "not run by the existing CI"} for f in sorted(ours_files - theirs_files)]
        if ours is not None and theirs is not None:
            if only_observed or only_planned:
                diffs.append("files")
            if theirs.runs_on is None:
                missing_runs_on.append(name)
            elif theirs.runs_on != ours.runs_on:
                diffs.append("runs-on")
            shards = _observed_shards(theirs)
            if shards is None:
                missing_shards.append(name)
            elif shards != ours.shards:
                diffs.append("shards")
        lanes.append({
            "stage": key[0], "variant": key[1], "differences": diffs,
            "planned_files": len(ours_files), "observed_files": len(theirs_files),
            "only_planned": only_planned, "only_observed": only_observed,
            "runs_on_planned": list(ours.runs_on) if ours else None,
            "runs_on_observed": list(theirs.runs_on) if theirs and theirs.runs_on else None,
            "shards_planned": ours.shards if ours else 0,
            "shards_observed": _observed_shards(theirs) if theirs else None,
        })
    if stages:
        notes.append(f"compared only the stages this workflow runs: {', '.join(sorted(stages))}")
    if idle:
        notes.append(f"the existing CI started job(s) that ran no file, where testfleet asks for "
                     f"no runner: {', '.join(idle)}")
    if missing_runs_on:
        notes.append(f"runner labels not compared (the record has no runs_on=): "
                     f"{', '.join(missing_runs_on)}")
    if missing_shards:
        notes.append(f"shard counts not compared (the record has no shard=I/N): "
                     f"{', '.join(missing_shards)}")
    event = str(plan.trigger["event"]) if plan.trigger else ""
    return {"schema": "testfleet.shadow/1", "same": not any(lane["differences"] for lane in lanes),
            "event": event, "plan_digest": plan.digest, "run_id": run_id, "commit": commit,
            "lanes": lanes, "notes": notes, "recorded": False, "verdict": None}


def _observed_shards(lane: ObservedLane) -> int | None:
    """The partition count the jobs said; without ``shard=``, one block is one job of one
    shard, and several such blocks say nothing certain (a listing may be repeated)."""
    if lane.shards is not None:
        return lane.shards
    return 1 if lane.unpartitioned == 1 else None


def _cell(labels: list[str] | None) -> str:
    return ", ".join(labels) if labels else "-"


def render_markdown(doc: ShadowDoc) -> str:
    """The step summary: one line of verdict, a table of the lanes, then each difference."""
    head = ("no difference" if doc["same"]
            else f"{sum(1 for lane in doc['lanes'] if lane['differences'])} lane(s) differ")
    lines = [f"## testfleet shadow: {head}", "",
             f"Event `{doc['event'] or '?'}`"
             + (f", run {doc['run_id']}" if doc["run_id"] else "")
             + (f", commit `{doc['commit'][:12]}`" if doc["commit"] else "")
             + ". Nothing was run by testfleet; this compares its plan with what the existing "
               "CI ran.", "",
             "| stage | existing CI: files | testfleet: files | runner labels (CI / testfleet) "
             "| shards (CI / testfleet) | differs in |",
             "|---|---:|---:|---|---|---|"]
    for lane in doc["lanes"]:
        name = lane["stage"] + (f" ({lane['variant']})" if lane["variant"] else "")
        shards_ci = "-" if lane["shards_observed"] is None else str(lane["shards_observed"])
        lines.append(f"| `{name}` | {lane['observed_files']} | {lane['planned_files']} | "
                     f"{_cell(lane['runs_on_observed'])} / {_cell(lane['runs_on_planned'])} | "
                     f"{shards_ci} / {lane['shards_planned'] or '-'} | "
                     f"{', '.join(lane['differences']) or 'same'} |")
    lines.append("")
    for lane in doc["lanes"]:
        rows = [f"- `{d['file']}`: only the existing CI ran it -- {d['why']}" for d in lane["only_observed"]]
        rows += [f"- `{d['file']}`: only testfleet would run it -- {d['why']}" for d in lane["only_planned"]]
        if rows:
            lines += [f"### `{lane['stage']}`" + (f" ({lane['variant']})" if lane["variant"] else ""),
                      "", *rows, ""]
    lines += [f"- {n}" for n in doc["notes"]]
    if doc["notes"]:
        lines.append("")
    if doc["verdict"] is not None:
        lines += [f"**{doc['verdict']['message']}**", ""]
    return "\n".join(lines)


def render_text(doc: ShadowDoc) -> str:
    """The terminal form: one line per lane, then the differing files."""
    lines = []
    for lane in doc["lanes"]:
        name = lane["stage"] + (f" ({lane['variant']})" if lane["variant"] else "")
        what = ", ".join(lane["differences"]) or "same"
        lines.append(f"{name}: {what} (files CI {lane['observed_files']} / testfleet "
                     f"{lane['planned_files']}; runners {_cell(lane['runs_on_observed'])} / "
                     f"{_cell(lane['runs_on_planned'])}; shards "
                     f"{'-' if lane['shards_observed'] is None else lane['shards_observed']} / "
                     f"{lane['shards_planned'] or '-'})")
        lines += [f"  only CI:        {d['file']} ({d['why']})" for d in lane["only_observed"]]
        lines += [f"  only testfleet: {d['file']}" for d in lane["only_planned"]]
    lines += [f"note: {n}" for n in doc["notes"]]
    count = sum(1 for lane in doc["lanes"] if lane["differences"])
    lines.append("no difference" if doc["same"] else f"{count} lane(s) differ")
    if doc["verdict"] is not None:
        lines.append(doc["verdict"]["message"])
    return "\n".join(lines) + "\n"


def verdict_for(streak: int, needed: int, recorded: int, events: list[str]) -> VerdictDoc:
    """Safe once the newest ``needed`` recorded runs had no difference."""
    safe = streak >= needed
    if safe:
        message = (f"the switch is safe: the last {streak} recorded run(s) ({', '.join(events)}) "
                   "had no difference; run 'testfleet init --switch'")
    else:
        message = (f"not yet: {streak} of {needed} consecutive recorded run(s) without a "
                   f"difference ({recorded} recorded)")
    return {"safe": safe, "needed": needed, "clean_streak": streak, "recorded": recorded,
            "events": events, "message": message}
