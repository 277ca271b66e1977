"""The HTML report's incidents section: above the disabled ledger, the incidents of the
newest runs, one row per cause (never one per failed file), with the line that makes a
stage dormant when an infrastructure incident took it whole.

Self-contained (its own small CSS, the report's escaper and path renderer), so the
report's page layout calls it once: ``incidents_html(report.results, path)``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from testfleet.report.htmlparts import scroll
from testfleet.report.svg import esc

CSS = (".incidents td.why{max-width:34em}.incidents td.sig{max-width:40em;word-break:break-word}"
       ".incidents pre{margin:.3em 0 0;white-space:pre-wrap;font-size:.85em}")


def incidents_html(results: Any, path: Callable[[str], str]) -> str:
    """The section (empty when the report has no results or no incident)."""
    incidents = getattr(results, "incidents", ()) if results is not None else ()
    if not incidents:
        return ""
    suggestions = getattr(results, "dormancy", {}) or {}
    rows = []
    for n, i in enumerate(incidents):
        when = dt.datetime.fromtimestamp(i.ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M") \
            if i.ts else "—"
        url = results.links.url(i.ci_run_id, i.commit) if hasattr(results, "links") else None
        run = esc(i.ci_run_id or i.run)
        run = f'<a href="{esc(url)}">{run}</a>' if url else run
        pill = "bad" if i.infrastructure else "warn"
        files = "".join(f"<div>{path(f)}</div>" for f in i.files[:5])
        if len(i.files) > 5:
            files += f"<div>and {len(i.files) - 5} more</div>"
        lanes = ", ".join(f"{esc(s.lane)} {s.files}/{s.ran}" for s in i.lanes)
        fix = suggestions.get(n)
        line = (f"<pre>{esc(fix.line)}</pre><div>in <code>{esc('.'.join(fix.path))}</code></div>"
                if fix is not None and not fix.already else "")
        rows.append(f'<tr><td class="mono nw">{run}<div class="m">{esc(when)}</div></td>'
                    f'<td class="mono">{esc(i.id)}</td><td><span class="pill {pill}">'
                    f"{esc(i.category)}</span></td><td class=\"mono nw\">{lanes}</td>"
                    f'<td class="file">{files}</td><td class="num">{len(i.tests) or "—"}</td>'
                    f'<td class="sig mono">{esc(i.signature.text)}</td>'
                    f'<td class="why">{esc(i.why)}{line}</td></tr>')
    infra = sum(1 for i in incidents if i.infrastructure)
    table = ('<table class="incidents"><thead><tr><th>run</th><th>incident</th><th>kind</th>'
             '<th>stage files/ran</th><th>files</th><th class="num">tests</th><th>signature</th>'
             f"<th>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return (f'<section id="incidents"><style>{CSS}</style><h2>Incidents <span class="count">'
            f"({infra} infrastructure, {len(incidents) - infra} test; newest runs first)</span>"
            f"</h2><p class=\"note\">Failures of one CI run that share a signature are one "
            f"incident.</p>{scroll(table)}</section>")
