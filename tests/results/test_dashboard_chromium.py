"""The dashboard's results section as headless Chromium lays it out (#14): pass rate and
last outcome per stage, the failing files with since-when and first failing commit, and
one SVG strip per file whose cells follow the real outcome sequence; a report with no
results says so. Runs are real ``testfleet run`` processes (see ``conftest.fleet``)."""

from __future__ import annotations

import re
from pathlib import Path

from browser import chromium, errors, layout, run, table_rows

from .conftest import cli

GREEN, AMBER, RED = "rgb(47, 158, 102)", "rgb(224, 165, 38)", "rgb(208, 87, 74)"


def _html(root: Path) -> Path:
    out = root / "report.html"
    r = cli(root, "report", "--format", "html", "--output", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"<script\b", html, re.I) and "default-src 'none'" in html
    return out


def test_results_section_and_strips_in_chromium(fleet, tmp_path: Path) -> None:
    browser = chromium()
    page = _html(fleet(runs=4, split="103"))  # test_split fails only in run 103
    plain = run(browser, tmp_path, "--dump-dom", page.as_uri())  # the page as shipped, CSP on
    assert plain.returncode == 0 and not errors(plain.stderr), errors(plain.stderr)
    assert 'id="results"' in plain.stdout

    facts = layout(browser, page, tmp_path, width=800)
    dom = facts["dom"]
    assert table_rows(dom, "results-stages") == [["s-py", "4", "69% (11/16)", "FAILED"]]
    [failing] = table_rows(dom, "results-failing")  # its own section, first (#26)
    assert failing[:3] == ["s-py", "broken", "tests/test_broken.py"]
    assert re.fullmatch(r"≥4 runs since \d{4}-\d\d-\d\d \(≥0d\)", failing[3]), failing
    assert failing[4] == "c" * 12 and "exit status 1" in failing[6]
    assert "run 104" in failing[5]

    strips = {s["file"]: s for s in facts["strips"]}
    assert set(strips) == {f"tests/test_{n}.py" for n in ("ok", "flip", "broken", "split")}
    expected = {"tests/test_ok.py": ["passed"] * 4, "tests/test_flip.py": ["flaky"] * 4,
                "tests/test_broken.py": ["failed"] * 4,
                "tests/test_split.py": ["passed", "passed", "failed", "passed"]}
    colour = {"passed": GREEN, "flaky": AMBER, "failed": RED}
    for file, outcomes in expected.items():
        strip = strips[file]
        assert strip["width"] > 0 and strip["height"] > 0, strip  # laid out, visible
        assert [c[0] for c in strip["cells"]] == outcomes, (file, strip["cells"])
        assert [c[1] for c in strip["cells"]] == [colour[o] for o in outcomes]
        assert all(c[2].startswith(o.upper()) for c, o in zip(strip["cells"], outcomes,
                                                               strict=True))
    assert "cccccccccc: exit status 1" in strips["tests/test_split.py"]["cells"][2][2]

    # layout at 800 px: nothing wider than the window, each results table in its box
    assert facts["page_width"] <= facts["viewport"]
    results_tables = [t for t in facts["tables"] if t["section"] in ("results", "failing")]
    assert len(results_tables) == 4  # failing now; then stages, strips, flaky
    for t in results_tables:
        assert t["scroll"] == "auto" and t["box_right"] <= t["section_right"], t
    assert facts["paths"] > 0 and facts["broken"] == []


def test_no_results_says_so_in_chromium(fleet, tmp_path: Path) -> None:
    browser = chromium()
    facts = layout(browser, _html(fleet(runs=0)), tmp_path, width=800)
    dom = facts["dom"]
    section = dom[dom.index('<section id="results">'):]
    section = section[:section.index("</section>")]
    assert "no results" in section
    assert facts["strips"] == [] and "<table" not in section
