"""All four formats say the same thing, and hostile content stays inert in each."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from report_helpers import NOW, config, fleet, reg

from testfleet.report.collect import build_report
from testfleet.report.model import SCHEMA, HistorySection, TrendPoint, TrendSeries
from testfleet.report.planview import plan_section
from testfleet.report.render_html import render_html
from testfleet.report.render_json import render_json
from testfleet.report.render_markdown import code, md, render_markdown
from testfleet.report.render_text import render_text

HOSTILE = ('<script>alert("x")</script> | `rm -rf` **bold** [link](javascript:alert(1)) '
           "@everyone \"quoted\" 'single' &amp; " + "A" * 5000)


def _report(**kw):
    regs = [*fleet(), reg("tests/evil.py", disabled=HOSTILE)]
    cfg = config(stages={
        "cpu-a": {"backend": "cpu"}, "gpu-h200": {"backend": "cuda"},
        "gpu-mi300x": {"backend": "rocm", "disabled": HOSTILE + " see #2230"}})
    return build_report(project="fleet<&>", config=cfg, registrations=regs, now=NOW, **kw)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append(tag)
        self.attrs.extend(attrs)


def test_json_is_versioned_sorted_and_complete() -> None:
    text = render_json(_report())
    data = json.loads(text)
    assert data["schema"] == SCHEMA == "testfleet.report/1"
    assert text == render_json(_report())  # deterministic
    assert json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n" == text
    assert [h["name"] for h in data["holes"]] == ["rocm", "gpu-mi300x"]
    assert data["dormant"][0]["name"] == "gpu-mi300x"
    assert data["dormant"][0]["references"][0]["text"] == "#2230"
    ledger = {(e["file"], e["backend"]): e for e in data["ledger"]}
    assert ledger[("tests/evil.py", "cpu")]["reason"] == HOSTILE  # JSON keeps the exact text
    assert ledger[("tests/e2e/test_x.py", "cuda")]["references"] == []
    assert data["totals"]["total"] == 7 and data["plan"] is None
    assert {s["name"]: s["counts"]["active"] for s in data["stages"]}["gpu-h200"] == 1


def test_markdown_escapes_hostile_values() -> None:
    out = render_markdown(_report())
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "@everyone" not in out  # no mention
    assert "](javascript" not in out
    for line in out.splitlines():
        if line.startswith("| ") and "evil.py" in line:
            # the cell's pipe is escaped: the row keeps its 7 columns
            assert len(re.findall(r"(?<!\\)\|", line)) == 8
            assert len(line) < 2000  # long values are cut
    assert md("a|b") == "a\\|b" and md("x\ny") == "x y"
    assert code("a`b|c") == "`a\u02cbb\\|c`"


def test_html_escapes_hostile_values_and_has_no_external_assets() -> None:
    out = render_html(_report())
    parser = _Tags()
    parser.feed(out)
    assert "script" not in parser.tags
    assert "alert(&quot;x&quot;)" in out
    assert not any(name.startswith("on") for name, _ in parser.attrs)
    hrefs = [v for k, v in parser.attrs if k in ("href", "src") and not (v or "").startswith("#")]
    assert all(v and v.startswith(("http://", "https://")) for v in hrefs)
    assert "javascript:" not in " ".join(v or "" for v in hrefs)
    lowered = out.lower()
    for needle in ("<link", "<img", "<iframe", "<script", "@import", "url("):
        assert needle not in lowered
    assert "Content-Security-Policy" in out and "default-src 'none'" in out
    assert 'class="more"' in out and "show all 5" in out  # runaway reasons fold away


def test_html_navigation_links_resolve() -> None:
    from testfleet.report.model import DriftRow

    hist = HistorySection(True, drift=(DriftRow("a.py", "cpu-a", 10, 30, 3, 3.0),))
    for report in (_report(), _report(plan=plan_section(_plan_data(), "p.json"), history=hist)):
        out = render_html(report)
        anchors = re.findall(r'href="#([^"]+)"', out)
        assert "holes" in anchors and "ledger" in anchors
        for ident in anchors:
            assert f'id="{ident}"' in out, ident


def test_text_names_holes_dormant_and_ledger() -> None:
    out = render_text(_report(), width=160)
    assert "COVERAGE HOLES (2)" in out
    assert "gpu-mi300x" in out and "Dormant stages" in out
    assert "tests/e2e/test_x.py:3" in out and "none" in out
    assert "<script>" in out  # plain text keeps the text; rich markup is not interpreted
    assert "\x1b[" not in out  # no colour unless asked
    assert "\x1b[" in render_text(_report(), width=160, color=True)


def _plan_data():
    return {
        "schema": "testfleet.plan/1",
        "policy": {"cadence": "regular"},
        "jobs": [
            {"id": "gpu-h200-1", "stage": "gpu-h200", "shard": 1, "shards": 2, "estimate": 900,
             "tests": [{"file": "a.py", "estimate": 600, "source": "history"},
                       {"file": "b.py", "estimate": 300, "source": "est_time"}]},
            {"id": "gpu-h200-2", "stage": "gpu-h200", "shard": 2, "shards": 2, "estimate": 700,
             "tests": [{"file": "c<x>.py", "estimate": 700, "source": "est_time"}]},
        ],
        "stages": [
            {"name": "gpu-h200", "backend": "cuda", "status": "scheduled", "reason": "",
             "makespan": 900, "lower_bound": 800, "ratio": 1.125},
            {"name": "gpu-mi300x", "backend": "rocm", "status": "dormant",
             "reason": "MI300X runners fail", "makespan": 0, "lower_bound": 0, "ratio": 1.0},
        ],
        "warnings": ["coverage hole: gpu-mi300x"],
        "digest": "sha256:x",
    }


def test_plan_timelines_in_every_format() -> None:
    plan = plan_section(_plan_data(), "plan.json")
    r = _report(plan=plan)
    t = {x.stage: x for x in plan.timelines}
    assert [b.estimate for b in t["gpu-h200"].shards] == [900, 700]
    assert t["gpu-h200"].ratio == 1.125 and t["gpu-mi300x"].shards == ()
    html = render_html(r)
    assert "shard timeline of gpu-h200" in html and "c&lt;x&gt;.py" in html
    # the dormant stage's reason is under Dormant stages; the timeline points there
    assert "MI300X runners fail" not in html and 'reason under <a href="#dormant">' in html
    data = json.loads(render_json(r))
    assert data["plan"]["stages"][0]["shards"][1]["tests"][0]["file"] == "c<x>.py"
    assert "Plan shard balance" in render_markdown(r)
    assert "makespan 15m" in render_text(r, width=160)


def test_history_sections_render() -> None:
    from testfleet.report.model import DriftRow, GateRow

    hist = HistorySection(
        True, drift=(DriftRow("tests/e2e/test_m.py", "gpu-h200", 900, 2000, 5, 2000 / 900),),
        gates=(GateRow("tests/e2e/test_m.py", "cuda", "gpu-h200", "train/<loss>", 3, "FAIL",
                       "2026-05-30", 12, 2),),
        trends=(TrendSeries("tests/e2e/test_m.py", "train/<loss>", -1, (
            TrendPoint("2026-05-01", 1.0, True), TrendPoint("2026-05-02", 1.1, True),
            TrendPoint("2026-05-03", 3.0, False), TrendPoint("2026-05-04", float("nan"), False)),
            reference=1.05, band=(0.9, 1.2)),))
    r = _report(history=hist)
    html = render_html(r)
    assert "Duration drift" in html and "2.2\u00d7" in html and "train/&lt;loss&gt;" in html
    assert "<polyline" in html and "band [0.9, 1.2]" in html
    assert "untrusted" in html
    md_out = render_markdown(r)
    assert "Metric gates" in md_out and "FAIL" in md_out
    data = json.loads(render_json(r))
    assert data["history"]["gates"][0]["untrusted_runs"] == 2
    assert data["history"]["trends"][0]["points"][3]["value"] is None  # NaN is not JSON
    assert "Metric gates" in render_text(r, width=160)


def test_text_does_not_interpret_rich_markup() -> None:
    regs = [reg("a.py"), reg("b.py", disabled="[red]boom[/red] [link=https://x]y[/link] see #1")]
    r = build_report(project="p", config=config(), registrations=regs, now=NOW)
    out = render_text(r, width=200)
    assert "[red]boom[/red]" in out and "[link=https://x]y[/link]" in out


def _schema():
    from importlib import resources

    return json.loads(resources.files("testfleet.report").joinpath("schema/report-1.schema.json")
                      .read_text(encoding="utf-8"))


def test_json_matches_the_published_schema() -> None:
    import jsonschema

    from testfleet.report.model import DriftRow, GateRow

    hist = HistorySection(
        True, drift=(DriftRow("a.py", "cpu-a", 10, 30, 3, 3.0),),
        gates=(GateRow("a.py", "cpu", "cpu-a", "m", 1, None, None, 0, 0),),
        trends=(TrendSeries("a.py", "m", -1, (TrendPoint("t", float("inf"), False),), None, None),))
    for report in (_report(), _report(plan=plan_section(_plan_data(), "p.json"), history=hist)):
        jsonschema.validate(json.loads(render_json(report)), _schema())
    bad = json.loads(render_json(_report()))
    bad["holes"][0]["kind"] = "galaxy"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema())


def test_markdown_row_cap_keeps_the_most_urgent_rows() -> None:
    regs = [reg(f"tests/t{i:03d}.py", disabled=f"broken #{i}") for i in range(120)]
    regs.append(reg("tests/expired.py", disabled="until 2026-01-01"))
    r = build_report(project="p", config=config(), registrations=regs, now=NOW)
    capped = render_markdown(r, max_rows=10)
    assert "expired.py" in capped  # expired sorts first
    assert "111 more disabled registrations" in capped
    assert capped.count("| `tests/t") == 9
    full = render_markdown(r, max_rows=0)
    assert "more disabled" not in full and full.count("| `tests/t") == 120


def test_history_tables_keep_long_file_names_and_sub_second_times() -> None:
    """A narrow terminal wraps a long path after a '/' (and folds a name only when the name
    alone is wider than the column) instead of cutting it; a 40 ms file does not read as
    "0s / 0.00x", and every factor is in one notation."""
    from testfleet.report.model import DriftRow, GateRow

    long = "tests/unit/test_training_loop_with_a_rather_long_descriptive_name.py"
    hist = HistorySection(
        True, drift=(DriftRow("tests/unit/test_tiny.py", "cpu-a", 5, 0.04, 4, 0.04 / 5),
                     DriftRow("tests/unit/test_fast.py", "cpu-a", 60, 0.5, 4, 0.5 / 60)),
        gates=(GateRow(long, "cpu", "cpu-a", "train/loss", 3, "PASS", "2026-05-30", 12, 0),))
    r = _report(history=hist)
    text = render_text(r, width=100)
    gates = text.split("Metric gates", 1)[1]
    assert "…" not in gates
    first_cells = [line.split("│")[1].strip() for line in gates.splitlines() if line.startswith("│")]
    assert "".join(first_cells) == long
    assert first_cells[0] == "tests/unit/"
    for out in (text, render_markdown(r), render_html(r)):
        assert "0.04s" in out and "0.5s" in out and "0.0080\u00d7" in out and "0.0083\u00d7" in out
        assert "0.00\u00d7" not in out and "1/" not in out.replace("1/1", "")


@pytest.mark.parametrize(("seconds", "shown"), [
    (0.04, "0.04s"), (0.5, "0.5s"), (0.123, "0.123s"), (0.0004, "<0.001s"), (0, "0s"),
    (0.999, "1s"), (5, "5s"), (95, "1m35s"),
])
def test_measured_durations(seconds: float, shown: str) -> None:
    from testfleet.report import fmt

    assert fmt.measured(seconds) == shown
