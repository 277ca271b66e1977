"""The report as one self-contained HTML page: the fleet's state in ten seconds.

No scripts, no external assets, no network access (a Content-Security-Policy forbids
it even if something slipped through); charts are inline SVG. Reading order is the
order of urgency: the headline and its cards, then :data:`SECTIONS` in the order of
:data:`testfleet.report.sections.ORDER` (failing now, coverage holes, dormant stages,
the matrix, ..., metric history, results). Everything from the tree is escaped with
:func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable

from testfleet.report import fmt, svg
from testfleet.report.health import StageHealth
from testfleet.report.htmlparts import path as _path
from testfleet.report.htmlparts import scroll
from testfleet.report.links import RepoLinks
from testfleet.report.model import (
    CATEGORIES,
    CATEGORY_HELP,
    GroupRow,
    Report,
    StageRow,
    TrendSeries,
)
from testfleet.report.references import Reference
from testfleet.report.render_failing import html_section as failing_html
from testfleet.report.render_incidents import incidents_html
from testfleet.report.render_results import CSS as RESULTS_CSS
from testfleet.report.render_results import generated_epoch
from testfleet.report.render_results import html_section as results_html
from testfleet.report.sections import ORDER
from testfleet.report.svg import esc
from testfleet.report.trends import split as split_trends

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

CSS = """
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--muted:#6b7385;--grid:#e3e6ec;--track:#eceff3;
--red:#c8372b;--red-bg:#fdecea;--amber:#a86400;--amber-bg:#fff4e0;--green:#23804f;--green-bg:#e8f6ee;
--line:#dde1e8}
@media (prefers-color-scheme:dark){:root{--bg:#14171c;--card:#1d2129;--ink:#e7e9ee;--muted:#9aa3b5;
--grid:#2d333d;--track:#2a2f38;--red:#ff7b6e;--red-bg:#3a1d1b;--amber:#ffb54d;--amber-bg:#3a2a12;
--green:#5fd39a;--green-bg:#16301f;--line:#2d333d}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",
Roboto,"Noto Sans","DejaVu Sans",sans-serif}
main{max-width:1360px;margin:0 auto;padding:24px 28px 48px}
header h1{font-size:22px;margin:0 0 2px} header h1 .tool{color:var(--muted);font-weight:500;
font-size:15px}
header .sub{color:var(--muted);font-size:13px}
.headline{font-size:16px;margin:10px 0 18px;font-weight:600}
.headline.bad{color:var(--red)}
.kpis{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;margin-bottom:20px}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.kpi .n{font-size:28px;font-weight:700;line-height:1.1}
.kpi .l{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.kpi.bad{border-color:var(--red);background:var(--red-bg)} .kpi.bad .n{color:var(--red)}
.kpi.warn{border-color:var(--amber);background:var(--amber-bg)} .kpi.warn .n{color:var(--amber)}
.kpi.good .n{color:var(--green)}
.kpi .d{font-size:11.5px;margin-top:2px}
.kpi.bad .d{color:var(--red);font-weight:600}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;
margin:0 0 18px}
section h2{font-size:16px;margin:0 0 10px}
section h2 .count{color:var(--muted);font-weight:500}
.holes{border:2px solid var(--red);background:var(--red-bg)}
.holes h2{color:var(--red);font-size:19px}
.hole{display:flex;gap:12px;align-items:baseline;padding:6px 0;border-top:1px solid rgba(200,55,43,.25)}
.hole:first-of-type{border-top:0}
.hole .what{font-weight:700;font-size:15px;white-space:nowrap}
.hole .why{overflow-wrap:break-word}
.ok{border:1px solid var(--green);background:var(--green-bg);color:var(--green);font-weight:600}
.failing-now{border:2px solid var(--red)} .failing-now h2{color:var(--red);font-size:19px}
.failing-unknown{padding:8px 18px}
.dormant{border:2px solid var(--amber);background:var(--amber-bg)}
.dormant h2{color:var(--amber)}
.dcard{padding:8px 0;border-top:1px solid rgba(168,100,0,.25)} .dcard:first-of-type{border-top:0}
.dcard .name{font-weight:700;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.dcard .reason{font-size:15px;margin:2px 0;overflow-wrap:break-word}
.dcard .meta{color:var(--muted);font-size:12.5px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.reason{overflow-wrap:break-word;min-width:12em}
.nw{white-space:nowrap}
td.stages{color:var(--muted);font-size:12px}
td.file{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;
overflow-wrap:normal;word-break:normal;min-width:14em}
.tw{overflow-x:auto;max-width:100%;
background:linear-gradient(to right,var(--card) 30%,transparent) left/28px 100% no-repeat local,
linear-gradient(to left,var(--card) 30%,transparent) right/28px 100% no-repeat local,
radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.22),transparent) left/12px 100% no-repeat scroll,
radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.22),transparent) right/12px 100% no-repeat scroll}
table.matrix td.stage,table.matrix th:first-child{position:sticky;left:0;background:var(--card);
z-index:1}
table.matrix tr.dormant-row td.stage{background:var(--amber-bg)}
table.matrix tr.failing-row td.stage{box-shadow:inset 4px 0 var(--red)}
table.matrix td.lastrun{font-size:12px;white-space:nowrap}
table.matrix .streak{font-size:11.5px;color:var(--red);white-space:nowrap;margin-top:2px}
td.mix{min-width:84px;width:16%} td.mix svg.bar{width:100%;max-width:200px;height:14px;display:block}
.out-failed{color:var(--red);font-weight:700} .out-passed{color:var(--green);font-weight:600}
tr.hole-row td:first-child{color:var(--red);font-weight:700}
tr.dormant-row{background:var(--amber-bg)}
tr.total td{font-weight:700;border-top:2px solid var(--line)}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.pill{display:inline-block;padding:1px 7px;border-radius:999px;font-size:11.5px;font-weight:600;
white-space:nowrap}
.pill.wrap{white-space:normal}
.pill.active{background:var(--green-bg);color:var(--green)}
.pill.dormant{background:var(--amber-bg);color:var(--amber);border:1px solid var(--amber)}
.pill.unconfigured{background:var(--red-bg);color:var(--red)}
.pill.bad{background:var(--red-bg);color:var(--red)}
.pill.broken{background:var(--red);color:#fff}
.pill.failing{background:var(--red-bg);color:var(--red);border:1px solid var(--red)}
.pill.warn{background:var(--amber-bg);color:var(--amber)}
.pill.pass{background:var(--green-bg);color:var(--green)}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;color:var(--muted);margin:8px 0 0}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.none{color:var(--red);font-weight:600}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:18px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.charts figure{margin:0} figcaption{font-size:12px;color:var(--muted);max-width:360px;
overflow-wrap:break-word}
svg.chart.wide{width:100%;max-width:1060px;height:auto}
svg text.t{font-size:10.5px;fill:var(--muted)} svg text.v{font-size:10.5px;fill:var(--ink)}
.trend-h{font-size:14px;margin:12px 0 4px} .trend-h .m{color:var(--muted);font-weight:400;font-size:12.5px}
.stage-tl{margin:10px 0 16px} .stage-tl h3{font-size:14px;margin:0 0 4px}
.stage-tl .m{color:var(--muted);font-weight:400;font-size:12.5px}
details summary{cursor:pointer;font-weight:600;margin:4px 0}
details.more{display:inline} details.more summary{display:inline;font-weight:400;color:var(--muted);
font-size:12px}
.note{color:var(--muted);font-size:12.5px}
a{color:#3b82c4}
.toc{display:flex;flex-wrap:wrap;gap:6px;margin:-8px 0 14px}
.toc a{font-size:12px;padding:2px 9px;border:1px solid var(--line);border-radius:999px;
background:var(--card);color:var(--muted);text-decoration:none}
.toc a:hover{color:var(--ink)}
footer{color:var(--muted);font-size:12px;text-align:center}
"""


def _refs(refs: tuple[Reference, ...], links: RepoLinks | None = None) -> str:
    if not refs:
        return '<span class="none">none</span>'
    out = []
    for r in refs:
        url = r.url
        if url is None and links is not None and r.kind == "issue" and r.number is not None:
            url = links.issue(r.number, r.repo)
        if url and url.lower().startswith(("https://", "http://")):
            out.append(f'<a href="{esc(url)}" rel="noopener noreferrer">{esc(_short_url(r))}</a>')
        else:
            out.append(f'<span class="mono">{esc(r.text)}</span>')
    return ", ".join(out)


LONG = 300


def _long(text: str, limit: int = LONG) -> str:
    """Escaped text; beyond ``limit`` characters the rest folds into a ``<details>``
    (works without JavaScript), so one runaway reason cannot push the page away."""
    if len(text) <= limit:
        return _soft(text)
    return (f"{_soft(text[:limit])}<details class=\"more\"><summary>\u2026 show all "
            f"{len(text)} characters</summary>{_soft(text[limit:])}</details>")


def _soft(text: str) -> str:
    """Escaped prose whose URLs and paths may break after a '/' (no word breaks inside)."""
    return esc(text).replace("/", "/<wbr>")


def _file_cell(report: Report, file: str, line: int) -> str:
    text = f"{_path(file)}:{line}"
    if report.links is None:
        return text
    return f'<a href="{esc(report.links.file(file, line))}" rel="noopener noreferrer">{text}</a>'


def _short_url(r: Reference) -> str:
    if r.number is not None and r.repo:
        return f"{r.repo}#{r.number}"
    return r.text if len(r.text) <= 48 else r.text[:47] + "…"


def _kpis(report: Report) -> str:
    t = report.totals
    oldest = max((e.age_days for e in report.ledger if e.age_days is not None), default=None)
    expired = sum(1 for e in report.ledger if e.expired)
    no_ref = sum(1 for e in report.ledger if not e.references)
    tiles = [
        ("bad" if report.holes else "good", str(len(report.holes)), "coverage holes"),
        ("warn" if report.dormant else "good", str(len(report.dormant)), "dormant stages"),
        ("", f"{report.runnable}<span class='l'> / {t.total}</span>", "registrations can run"),
        ("warn" if report.ledger else "good", str(t.disabled), "disabled"),
        ("bad" if no_ref else "good", str(no_ref), "disabled without reference"),
        ("bad" if expired else "", str(expired), "past their expiry"),
        ("", "—" if oldest is None else f"{oldest}d", "oldest disabled"),
    ]
    cells = "".join(f'<div class="kpi {cls}"><div class="n">{n}</div><div class="l">{esc(label)}</div></div>'
                    for cls, n, label in tiles)
    return f'<div class="kpis">{_failing_kpi(report)}{cells}</div>'


def _failing_kpi(report: Report) -> str:
    """The first card: how many stages fail, which are broken (their names, up to three)."""
    r = report.results
    if r is None or not r.available or not r.files:
        return ('<div class="kpi" id="kpi-failing"><div class="n">—</div><div class="l">stages '
                'failing (no results)</div></div>')
    failing = report.failing_stages
    broken = [h for h in failing if h.state == "broken"]
    label = "stages failing" + (f" · {len(broken)} broken" if broken else "")
    detail = ", ".join(h.stage for h in (broken or failing)[:3])
    if len(broken or failing) > 3:
        detail += ", …"
    return (f'<div class="kpi {"bad" if failing else "good"}" id="kpi-failing"><div class="n">'
            f'{len(failing)}</div><div class="l">{esc(label)}</div>'
            + (f'<div class="d mono">{esc(detail)}</div>' if detail else "") + "</div>")


def _holes(report: Report) -> str:
    if not report.holes:
        return ('<section class="ok" id="holes">✔ No coverage holes: every configured stage and '
                'backend has registrations that can run.</section>')
    rows = "".join(
        f'<div class="hole"><span class="what">✖ {esc(h.kind)} <span class="mono">{esc(h.name)}</span>'
        f'</span><span class="why"><b>{esc(fmt.cause(h.cause))}</b> — {_long(h.detail)}'
        f"{' · <b>' + esc(fmt.lost(h.lost)) + '</b>' if h.lost else ''}</span></div>"
        for h in report.holes)
    return (f'<section class="holes" id="holes"><h2>⚠ Coverage holes '
            f'<span class="count">({len(report.holes)})</span></h2>{rows}</section>')


def _dormant(report: Report) -> str:
    if not report.dormant:
        return ""
    cards = "".join(
        f'<div class="dcard"><div class="name">{esc(s.name)} '
        f'<span class="pill dormant">dormant</span></div>'
        f'<div class="reason">{_long(s.reason or "")}</div>'
        f'<div class="meta">backend {esc(s.backend)} · runs on {esc(", ".join(s.runs_on))} · '
        f"{fmt.plural(s.counts.total, 'registration')} held, {s.counts.active} would run · "
        f"reference: {_refs(s.references, report.links)}{_restore(report, s)}</div></div>"
        for s in report.dormant)
    return (f'<section class="dormant" id="dormant"><h2>Dormant stages '
            f'<span class="count">({len(report.dormant)})</span></h2>{cards}</section>')


def _restore(report: Report, s: StageRow) -> str:
    """Where to switch the stage back on: one line of the configuration."""
    if not report.config_file:
        return ""
    where = f"{report.config_file}:{s.config_line}" if s.config_line else report.config_file
    return (f' · restore: remove <span class="mono">disabled</span> at '
            f'<span class="mono">{esc(where)}</span>')


def _legend() -> str:
    items = "".join(f'<span title="{esc(CATEGORY_HELP[c])}"><span class="sw" '
                    f'style="background:{svg.CAT_COLORS[c]}"></span>{esc(c)}</span>'
                    for c in CATEGORIES)
    return f'<div class="legend">{items}</div>'


def _matrix(report: Report) -> str:
    hole_stages = {h.name for h in report.holes if h.kind == "stage"}
    head = "".join(f'<th class="num">{esc(c)}</th>' for c in CATEGORIES)
    with_health = report.results is not None and report.results.available
    rows = []
    for s in report.stages:
        health = report.health_of(s.name)
        cls = []
        if s.name in hole_stages:
            cls.append("hole-row")
        if s.status == "dormant":
            cls.append("dormant-row")
        elif health is not None and health.failing:
            cls.append("failing-row")
        cells = "".join(f'<td class="num">{s.counts.get(c)}</td>' for c in CATEGORIES)
        flags = ' <span class="pill warn">trusted only</span>' if s.trusted_only else ""
        last = f'<td class="lastrun">{_last_run(health)}</td>' if with_health else ""
        rows.append(
            f'<tr class="{" ".join(cls)}"><td class="mono nw stage">{esc(s.name)}</td>'
            f"<td>{esc(s.backend)}</td><td>{_status(s, health)}{flags}</td>{last}"
            f'<td class="mix">{svg.stacked_bar(s.counts)}</td>{cells}'
            f'<td class="num">{s.counts.total}</td>'
            f'<td class="num">{esc(fmt.duration(s.counts.est_seconds))}</td></tr>')
    t = report.totals
    rows.append('<tr class="total"><td class="stage">all stages</td><td></td><td></td>'
                + ("<td></td>" if with_health else "")
                + f'<td class="mix">{svg.stacked_bar(t)}</td>'
                + "".join(f'<td class="num">{t.get(c)}</td>' for c in CATEGORIES)
                + f'<td class="num">{t.total}</td><td class="num">{esc(fmt.duration(t.est_seconds))}</td></tr>')
    table = ('<table class="matrix"><thead><tr><th>stage</th><th>backend</th><th>status</th>'
             + ("<th>last run</th>" if with_health else "")
             + f'<th>mix</th>{head}<th class="num">total</th>'
             f'<th class="num">est. time</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return f'<section id="matrix"><h2>Coverage matrix</h2>{scroll(table)}{_legend()}</section>'


def _status(s: StageRow, health: StageHealth | None) -> str:
    """The stage's pill: dormant and unconfigured from the config; an active stage is
    ``broken`` or ``failing`` when its results say so (never a green "active")."""
    if s.status != "active" or health is None or not health.failing:
        return f'<span class="pill {esc(s.status)}">{esc(s.status)}</span>'
    return (f'<span class="pill {health.state}" title="{esc(health.summary)}">{health.state}'
            f'</span><div class="streak">{esc(health.streak_text)}</div>')


def _last_run(health: StageHealth | None) -> str:
    """When the stage last ran, whether anything failed in it, and a link to the run."""
    if health is None:
        return '<span class="note">no results</span>'
    last = health.last
    outcome = (f'<span class="out-{last.outcome.lower()}">{esc(last.outcome.lower())}</span> '
               f"{esc(last.when)}")
    if last.url:
        return (f'{outcome}<br><a href="{esc(last.url)}" rel="noopener noreferrer">'
                f"{esc(last.label)}</a>")
    if last.ci_run_id or last.commit:
        return f'{outcome}<br><span class="note">{esc(last.label)}</span>'
    return outcome


def _groups(title: str, rows: tuple[GroupRow, ...], ident: str) -> str:
    head = "".join(f'<th class="num">{esc(c)}</th>' for c in CATEGORIES)
    body = []
    for g in rows:
        bad = g.scheduled == 0 and g.counts.total > 0
        body.append(
            f'<tr class="{"hole-row" if bad else ""}"><td class="mono nw">{esc(g.name)}</td>'
            f"<td>{svg.stacked_bar(g.counts, 200, 12)}</td>"
            + "".join(f'<td class="num">{g.counts.get(c)}</td>' for c in CATEGORIES)
            + f'<td class="num">{"<b class=none>0</b>" if bad else g.scheduled}</td>'
            f'<td class="stages">{", ".join(f"<span class=nw>{esc(n)}</span>" for n in g.stages)}'
            "</td></tr>")
    table = (f'<table><thead><tr><th>{esc(title[:-1].lower())}'
             f'</th><th>mix</th>{head}<th class="num">scheduled</th><th>stages</th></tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table>')
    return f'<div id="{ident}"><h2>{esc(title)}</h2>{scroll(table)}</div>'


def _ledger(report: Report) -> str:
    if not report.ledger:
        return '<section id="ledger"><h2>Disabled ledger</h2><p>Nothing is disabled.</p></section>'
    rows = []
    for e in report.ledger:
        shared = (f' <span class="pill warn" title="the same reason text on {e.shared_reason} '
                  f'registrations">same reason \u00d7{e.shared_reason}</span>') if e.shared_reason > 1 else ""
        exp = fmt.expiry(e)
        exp_html = (f'<span class="pill bad wrap">{esc(exp)}</span>' if e.expired or e.expiry_error
                    else esc(exp))
        dormant = ' <span class="pill dormant">dormant</span>' if e.stage_dormant else ""
        age_title = esc(e.age_note or (f"changed {e.changed} in {e.commit[:12]}" if e.commit and e.changed else ""))
        rows.append(
            f'<tr><td class="file">{_file_cell(report, e.file, e.reason_line or e.line)}</td>'
            f'<td>{esc(e.backend)}</td><td class="mono"><span class="nw">{esc(e.suite)}</span>'
            f"{dormant}</td>"
            f'<td class="reason">{_long(e.reason)}{shared}</td><td>{_refs(e.references, report.links)}</td>'
            f'<td class="num" title="{age_title}">{esc(fmt.age(e))}</td><td>{exp_html}</td></tr>')
    return (f'<section id="ledger"><h2>Disabled ledger <span class="count">({len(report.ledger)})'
            f'</span></h2><div class="grid2" style="grid-template-columns:1fr auto;align-items:start">'
            f'<p class="note">Each disabled registration, oldest first. Age: when its '
            f"<span class=mono>disabled=</span> line last changed (git: {esc(report.git)}). "
            f"A reason that cites no issue or URL shows <span class=none>none</span>.</p>"
            f'<figure style="margin:0">{svg.age_histogram(report.ledger)}'
            f"<figcaption>How long registrations have been disabled</figcaption></figure></div>"
            + scroll(f"<table><thead><tr><th>file:line</th><th>backend</th><th>suite</th>"
                     f'<th>reason</th><th>reference</th><th class="num">age</th><th>expiry</th>'
                     f'</tr></thead><tbody>{"".join(rows)}</tbody></table>') + "</section>")


def _plan(report: Report) -> str:
    if report.plan is None:
        return ""
    p = report.plan
    blocks = []
    for t in p.timelines:
        if not t.shards:
            blocks.append(f'<div class="stage-tl"><h3 class="mono">{esc(t.stage)} '
                          f'<span class="pill {"dormant" if t.status == "dormant" else "warn"}">'
                          f'{esc(t.status or "no jobs")}</span></h3>'
                          f'<div class="note">{_no_jobs(report, t.status, t.reason)}</div></div>')
            continue
        ratio = f"{t.ratio:.3f}" if t.ratio is not None else "n/a"
        blocks.append(
            f'<div class="stage-tl"><h3><span class="mono">{esc(t.stage)}</span> '
            f'<span class="m">{fmt.plural(len(t.shards), "shard")} · makespan '
            f"{esc(fmt.duration(t.makespan))} · lower bound {esc(fmt.duration(t.lower_bound))} · "
            f"ratio {ratio}</span></h3>{svg.shard_timeline(t)}</div>")
    warn = "".join(f'<p class="note">⚠ {esc(w)}</p>' for w in p.warnings)
    legend = ('<div class="legend"><span><span class="sw" style="background:#3b82c4"></span>files '
              '(estimated)</span><span><span class="sw" style="background:#2f9e66"></span>lower '
              'bound (dashed)</span><span><span class="sw" style="background:#d0574a"></span>'
              "makespan</span></div>")
    return (f'<section id="plan"><h2>Shard timeline <span class="count">({esc(p.source)})</span></h2>'
            f'{"".join(blocks)}{legend}{warn}</section>')


def _no_jobs(report: Report, status: str, reason: str | None) -> str:
    """Why a stage has no jobs; a dormant stage's reason is under Dormant stages already."""
    if status == "dormant" and report.dormant:
        return 'dormant: nothing scheduled (reason under <a href="#dormant">Dormant stages</a>)'
    return esc(reason or "no jobs in this plan")


def _history(report: Report) -> str:
    """Why there is no history, or what it says about itself (a note)."""
    h = report.history
    if not h.available:
        return f'<section id="history"><h2>History</h2><p class="note">{esc(h.note)}</p></section>'
    return f'<p class="note">History: {esc(h.note)}</p>' if h.note else ""


def _drift(report: Report) -> str:
    h = report.history
    if not h.available or not h.drift:
        return ""
    rows = "".join(
        f'<tr><td class="file">{_path(d.file)}</td><td class="mono nw">{esc(d.stage)}</td>'
        f'<td class="num">{esc(fmt.measured(d.literal))}</td>'
        f'<td class="num">{esc(fmt.measured(d.measured))}</td><td class="num">{d.samples}</td>'
        f'<td class="num"><span class="pill {"bad" if d.factor > 1 else "warn"}">'
        f"{esc(fmt.factor(d.factor))}</span></td></tr>" for d in h.drift)
    return (f'<section id="drift"><h2>Duration drift <span class="count">(est_time vs '
            f"measured, factor ≥ {h.drift_factor:g})</span></h2>"
            + scroll('<table><thead><tr><th>file</th><th>stage</th>'
                     '<th class="num">est_time</th><th class="num">measured</th>'
                     '<th class="num">samples</th><th class="num">factor</th></tr>'
                     f"</thead><tbody>{rows}</tbody></table>") + "</section>")


def _gates(report: Report) -> str:
    """Each gated metric with the gate's verdict in its file's last gated run: the verdict
    "Failing now" reads (see :mod:`testfleet.report.gate_verdicts`)."""
    h = report.history
    if not h.available or not h.gates:
        return ""
    rows = []
    for g in h.gates:
        mode = f' <span class="note">{esc(g.last_mode)}</span>' if g.last_mode else ""
        when = esc(g.last_run or "—")
        if g.last_url:
            when += (f'<br><a href="{esc(g.last_url)}" rel="noopener noreferrer">'
                     f"run {esc(g.last_ci_run_id or '')}</a>")
        source = "" if g.last_source != "baseline" else ' <span class="note">(baseline run)</span>'
        rows.append(
            f'<tr><td class="file">{_path(g.file)}</td><td class="mono nw">{esc(g.suite)}</td>'
            f'<td class="mono">{esc(g.metric)}</td><td class="num">{g.coordinates}</td>'
            f"<td class=\"nw\">{_verdict(g.last_verdict)}{mode}{source}</td><td class=\"nw\">{when}</td>"
            f'<td class="num">{g.runs}</td><td class="num">{g.untrusted_runs}</td></tr>')
    return ('<section id="gates"><h2>Metric gates</h2>'
            + scroll('<table class="gates"><thead><tr><th>file</th><th>suite</th><th>metric</th>'
                     '<th class="num">coords</th><th>last verdict</th><th>last run</th>'
                     '<th class="num">baseline runs</th><th class="num">untrusted</th></tr>'
                     f"</thead><tbody>{''.join(rows)}</tbody></table>")
            + '<p class="note">Last verdict: the gate\'s verdict on the file in its last gated '
            "run, as recorded with the file's result (the run \"Failing now\" reads); baseline "
            "runs: runs stored in the gate's history (nightly/weekly cadences).</p></section>")


def _trends_section(report: Report) -> str:
    h = report.history
    return _trends(h.trends) if h.available and h.trends else ""


def _trends(trends: tuple[TrendSeries, ...]) -> str:
    """Charts only for series that moved; the flat ones in one table, a row per metric."""
    moving, flat = split_trends(trends)
    groups: dict[tuple[str, str], list[TrendSeries]] = {}
    for t in moving:
        groups.setdefault((t.file, t.metric), []).append(t)
    blocks = []
    for (file, metric), series in groups.items():
        figs = "".join(
            f"<figure>{svg.trend_chart(t)}<figcaption>"
            f"{'step ' + str(t.step) if t.step >= 0 else 'last step'}"
            f"{' · ' + esc(t.label) if t.label else ''}</figcaption></figure>" for t in series)
        blocks.append(f'<h3 class="trend-h"><span class="mono">{esc(metric)}</span> '
                      f'<span class="m">{_path(file)}</span></h3><div class="charts">{figs}</div>')
    legend = ('<div class="legend"><span><span class="sw" style="background:#3b82c4"></span>'
              'trusted run</span><span><span class="sw" style="background:#d0574a"></span>'
              'untrusted run (\u00d7)</span><span><span class="sw" style="background:#2f9e66;'
              'opacity:.35"></span>band the next run is judged against, around the reference '
              "(dashed)</span></div>") if moving else ""
    summary = ""
    if flat:
        rows = "".join(
            f'<tr><td class="mono">{esc(f.metric)}</td><td class="file">{_path(f.file)}</td>'
            f'<td class="mono nw">{esc(f.label)}</td><td>{esc(f.steps_text())}</td>'
            f'<td class="num">{f.runs}</td><td class="num">{esc(f.values_text())}</td></tr>'
            for f in flat)
        n = sum(len(f.steps) for f in flat)
        summary = (f'<h3 class="trend-h" id="flat-trends">Flat, not drawn <span class="m">'
                   f"({fmt.plural(n, 'coordinate')}: every run the same value, all trusted)"
                   "</span></h3>"
                   + scroll('<table class="flat-trends"><thead><tr><th>metric</th><th>file</th>'
                            '<th>suite</th><th>coordinates</th><th class="num">runs</th>'
                            f'<th class="num">value(s)</th></tr></thead><tbody>{rows}</tbody></table>'))
    return f'<section id="trends"><h2>Metric trends</h2>{"".join(blocks)}{legend}{summary}</section>'


def _verdict(v: str | None) -> str:
    if not v:
        return "—"
    cls = {"PASS": "pass", "FAIL": "bad", "ERROR": "bad", "INACTIVE": "warn"}.get(v.upper(), "warn")
    return f'<span class="pill {cls}">{esc(v)}</span>'


def _findings(report: Report) -> str:
    if not report.findings:
        return ""
    items = "".join(f"<li class=mono>{esc(f)}</li>" for f in report.findings)
    return f'<section id="findings"><h2>Check rules</h2><ul>{items}</ul></section>'


def _backends(report: Report) -> str:
    return f'<section>{_groups("Backends", report.backends, "backends")}</section>'


def _labels(report: Report) -> str:
    return f'<section>{_groups("Labels", report.labels, "labels")}</section>' if report.labels else ""


def _results(report: Report) -> str:
    return results_html(report.results, generated_epoch(report), _path)


def _failing(report: Report) -> str:
    return failing_html(report, _path)


#: Each section of :data:`testfleet.report.sections.ORDER`: its entry in the page's
#: navigation (None: not listed) and its HTML ("" when it has nothing to show). The
#: section's id is its anchor.
SECTIONS: dict[str, tuple[Callable[[Report], str | None], Callable[[Report], str]]] = {
    "failing": (lambda r: "failing now" if r.results is not None and (r.results.failing
                                                                      or r.broken)
                else None, _failing),
    "incidents": (lambda r: "incidents", lambda r: incidents_html(r.results, _path)),
    "holes": (lambda r: f"holes ({len(r.holes)})", _holes),
    "dormant": (lambda r: "dormant", _dormant),
    "matrix": (lambda r: "matrix", _matrix),
    "backends": (lambda r: "backends", _backends),
    "labels": (lambda r: "labels", _labels),
    "ledger": (lambda r: f"disabled ({len(r.ledger)})", _ledger),
    "plan": (lambda r: "shards", _plan),
    "drift": (lambda r: "drift", _drift),
    "gates": (lambda r: "gates", _gates),
    "trends": (lambda r: "trends", _trends_section),
    "history": (lambda r: "history" if not r.history.available else None, _history),
    "results": (lambda r: "results", _results),
    "findings": (lambda r: "check", _findings),
}


def _nav(items: list[tuple[str, str]]) -> str:
    """In-page links (plain anchors: no JavaScript) to each section present."""
    links = "".join(f'<a href="#{ident}">{esc(text)}</a>' for ident, text in items)
    return f'<nav class="toc">{links}</nav>'


def render_html(report: Report) -> str:
    body, nav = [], []
    for ident in ORDER:
        if ident not in SECTIONS:
            continue
        label, render = SECTIONS[ident]
        html = render(report)
        if not html:
            continue
        body.append(html)
        text = label(report)
        if text is not None and f'id="{ident}"' in html:
            nav.append((ident, text))
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in report.notes)
    name = esc(report.project)
    headline = "headline bad" if report.failing_stages else "headline"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{name} · testfleet report</title><style>{CSS}{RESULTS_CSS}</style></head><body><main>"
        f'<header><h1>{name} <span class="tool">· testfleet report</span></h1><div class="sub">'
        f"coverage report generated {esc(report.generated)}</div></header>"
        f'<p class="{headline}">{esc(report.headline())}</p>{_nav(nav)}'
        f"{_kpis(report)}{''.join(body)}{notes}"
        f"<footer>testfleet report · schema {esc('testfleet.report/1')}</footer>"
        "</main></body></html>\n"
    )
