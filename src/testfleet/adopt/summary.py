"""The few lines ``init --from-existing`` prints first: what was carried, what adoption
decided for the maintainer, and what needs their decision, as counts and the stages they
touch.

On SGLang's tree ``init`` printed over two thousand lines, and the two facts that mattered
(placeholder runners, one job per partitioned stage) sat in the middle of them. The long
list (every note and everything not carried over) belongs in the report file; these lines
say where to look.
"""

from __future__ import annotations

from typing import Any

from testfleet.adopt.ci_model import CIStage
from testfleet.adopt.derive import Adoption

_SHOWN = 6


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _decided(name: str, stage: dict[str, Any], job: CIStage) -> list[str]:
    """What adoption chose for a stage that the existing CI decides at run time."""
    out: list[str] = []
    if job.partition_rule is not None and "target_minutes" in stage:
        out.append("target_minutes" + (" and max_parallel" if "max_parallel" in stage else ""))
    if job.lookup_notes:
        out.append("a value its CI chooses at run time")
    if any("taking" in n or "empty, as on a run not started by hand" in n for n in job.notes):
        out.append("runs_on read with an assumption")
    return out


def summary_lines(adoption: Adoption, counts: tuple[int, int] | None = None) -> list[str]:
    """``counts``: (marker calls, registrations by location), as the report and the
    configuration's header count them, so the three never name different totals."""
    stages: dict[str, dict[str, Any]] = adoption.data.get("stages", {})
    carried: list[str] = []
    decided: dict[str, list[str]] = {}
    waiting: list[str] = []
    unused: list[str] = []
    for name, stage in sorted(stages.items()):
        job = adoption.lane_jobs.get((name, ""))
        reason = str(stage.get("disabled", ""))
        if reason.startswith("adoption incomplete"):
            waiting.append(name)
        elif "disabled" in stage:
            unused.append(name)
        elif job is not None and (what := _decided(name, stage, job)):
            decided[name] = what
        else:
            carried.append(name)
    errors = [f for f in adoption.findings if f.severity == "error"]
    calls, implicit = counts if counts is not None else (adoption.registrations, 0)
    where = f" ({calls} marker calls, {implicit} by location)" if implicit else ""
    lines = [f"adoption: {len(stages)} stage(s) from {calls + implicit} registration(s){where}"]
    lines.append(f"  carried as the existing CI runs them: {len(carried)}"
                 + (f" ({_names(carried)})" if carried else ""))
    if decided:
        kinds: dict[str, int] = {}
        for what in decided.values():
            for w in what:
                kinds[w] = kinds.get(w, 0) + 1
        lines.append(f"  decided for you: {len(decided)} ({_names(sorted(decided))}): "
                     + "; ".join(f"{w} for {n}" for w, n in sorted(kinds.items())))
    if waiting or errors:
        lines.append(f"  needs your decision: {len(waiting)} stage(s) adopted dormant, each with "
                     "the reason and what to change in its disabled line"
                     + (f" ({_names(waiting)})" if waiting else "")
                     + (f"; {len(errors)} finding(s) stop init" if errors else ""))
    if unused:
        lines.append(f"  dormant, no job of the existing CI runs them: {len(unused)}")
    return lines
