"""When a dormant stage is back: its probe passed ``restore_after`` times in a row. Pure.

A dormant stage runs nothing but its probe job, so its newest runs are probes. The
probed files are the configured ``probe.files``, else the files of the stage's newest
run (the planner's ``shortest`` N, whatever they were then). A run counts as a clean
probe when every probed file it ran passed on its first attempt; the streak is the
clean probes in a row from the newest run back, and stops at the first run with a
failure, a pass on a retry, or none of the probed files (the stage's last run before it
went dormant).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testfleet.incidents.group import run_key
from testfleet.results.model import RunResult

if TYPE_CHECKING:
    from testfleet.documents.results import ProbeDoc


@dataclass(frozen=True)
class ProbeState:
    stage: str
    reason: str  # why the stage is dormant
    restore_after: int
    clean_streak: int
    probed_files: tuple[str, ...]
    table: str = ""  # the config table holding its ``disabled`` line

    @property
    def ready(self) -> bool:
        return bool(self.probed_files) and self.clean_streak >= self.restore_after

    @property
    def note(self) -> str:
        if not self.probed_files:
            return "no probe results yet"
        if self.ready:
            where = f" from [{self.table}]" if self.table else ""
            return (f"healthy: {self.clean_streak} clean probe(s) in a row (needs "
                    f"{self.restore_after}); the stage can be restored: remove its "
                    f"'disabled' line{where}")
        return f"not ready: {self.clean_streak} of {self.restore_after} clean probe(s) in a row"

    def to_json(self) -> ProbeDoc:
        return {"stage": self.stage, "reason": self.reason, "restore_after": self.restore_after,
                "clean_streak": self.clean_streak, "probed_files": len(self.probed_files),
                "ready": self.ready, "note": self.note}


def probe_streak(results: Sequence[RunResult], probe_files: Sequence[str] = ()) -> tuple[int, tuple[str, ...]]:
    """(clean probes in a row, the probed files) from one stage's file results."""
    runs: dict[str, dict[str, RunResult]] = {}
    newest: dict[str, float] = {}
    for r in results:
        if r.test:
            continue
        key = run_key(r.ci_run_id, r.commit)
        per_file = runs.setdefault(key, {})
        if r.file not in per_file or r.ts > per_file[r.file].ts:
            per_file[r.file] = r
        newest[key] = max(newest.get(key, 0.0), r.ts)
    order = sorted(runs, key=lambda k: newest[k], reverse=True)
    newest_files = set(runs[order[0]]) if order else set()
    probed = set(probe_files) if probe_files else newest_files
    streak = 0
    for key in order:
        ran = [r for f, r in runs[key].items() if f in probed]
        if not ran or not all(r.clean for r in ran):
            break
        streak += 1
    seen = {f for per_file in runs.values() for f in per_file}
    return streak, tuple(sorted(probed & seen))


def probe_states(config: Any, results: Sequence[RunResult], *, pyproject: bool = False) -> list[ProbeState]:
    """One state per dormant stage with a probe, in name order."""
    out = []
    for name, stage in sorted(config.stages.items()):
        if stage.disabled is None or stage.probe is None:
            continue
        mine = [r for r in results if r.stage == name]
        streak, probed = probe_streak(mine, stage.probe.files)
        table = ("tool.testfleet." if pyproject else "") + f"stages.{name}"
        out.append(ProbeState(name, stage.disabled, stage.probe.restore_after, streak, probed, table))
    return out
