"""Incidents for people (a rich table) and tools (JSON), and the dormancy suggestion an
infrastructure incident that took a whole stage carries. Text that came from test
output or history is shown through ``textsafe.printable`` and rich's markup escaper."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testfleet.incidents.dormancy import dormant_line, dormant_reason, table_header, table_path
from testfleet.incidents.group import Incident, LaneShare
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.results import DormancyDoc, IncidentDoc

Link = Callable[[str | None, str | None], str | None]  # (ci run id, commit) -> URL


@dataclass(frozen=True)
class Dormancy:
    """Where and how to make a stage dormant for an incident."""

    stage: str  # the lane
    path: list[str]
    line: str
    command: str
    already: str | None  # the stage's current dormancy reason, if it is dormant

    def to_json(self) -> DormancyDoc:
        return {"stage": self.stage, "table": table_header(self.path), "line": self.line,
                "command": self.command, "already_dormant": self.already}


def dormancy(project: Any, incident: Incident, link: Link | None = None,
             ref: str | None = None) -> Dormancy | None:
    """The dormancy line for an infrastructure incident that took a configured lane whole
    (at least two files), else None."""
    from testfleet.planning.lanes import find_lane

    share = next((s for s in incident.whole_lanes if s.files >= 2), None)
    if share is None:
        return None
    lane = find_lane(project.config, share.lane)
    if lane is None:
        return None  # a stage since renamed or removed: nothing to write
    path = table_path(lane.stage, lane.variant, pyproject=project.config_path.name == "pyproject.toml")
    url = link(incident.ci_run_id, incident.commit) if link is not None else None
    reason = dormant_reason(incident, share, url=url, ref=ref)
    run = incident.ci_run_id or ""
    command = f"testfleet incident dormant {share.lane}" + (f" --run {run}" if run else "")
    return Dormancy(share.lane, path, dormant_line(reason), command, lane.config.disabled)


def incident_json(incident: Incident, link: Link | None = None,
                  suggestion: Dormancy | None = None) -> IncidentDoc:
    return {**incident.to_json(),
            "url": link(incident.ci_run_id, incident.commit) if link is not None else None,
            "dormancy": suggestion.to_json() if suggestion is not None else None}


def when(ts: float) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def shares_text(shares: Sequence[LaneShare]) -> str:
    return ", ".join(f"{s.lane} {s.files}/{s.ran}" for s in shares)


def incidents_table(incidents: Sequence[Incident], link: Link | None = None,
                    suggestions: dict[int, Dormancy] | None = None, title: str = "incidents") -> Any:
    """A rich table, newest run first: one row per incident, never one per failed file."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("run", "incident", "kind", "stage files/ran", "tests", "signature", "why"):
        table.add_column(col, overflow="fold")
    for n, i in enumerate(incidents):
        url = link(i.ci_run_id, i.commit) if link is not None else None
        run = [f"{i.ci_run_id or i.run} ({when(i.ts)})", *([url] if url else [])]
        why = [i.why]
        suggestion = (suggestions or {}).get(n)
        if suggestion is not None and not suggestion.already:
            why.append(f"make it dormant: {suggestion.command}")
        kind = "[bold red]infrastructure[/]" if i.infrastructure else "[yellow]test[/]"
        table.add_row(_lines(run), i.id, kind, _lines([shares_text(i.lanes)]),
                      str(len(i.tests)) if i.tests else "-", _lines([i.signature.text]), _lines(why))
    return table


def _lines(parts: Sequence[str]) -> str:
    """Cell text: each part one inert line (textsafe), no rich markup, parts on lines."""
    from rich.markup import escape

    return "\n".join(escape(printable(p)) for p in parts)
