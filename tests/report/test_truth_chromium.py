"""What a reader sees first (#26 item 4), in a real headless Chromium.

A 12-stage fleet with one broken and two failing stages (``truth_fleet``), reported by
the real CLI. In a 1400x900 window the first screen must hold the failing stages' red
state (the "stages failing" card, the "Failing now" section with the broken stage's
pill): asserted on the laid-out boxes and on the screenshot's pixels. The coverage
matrix fits its box at 1400 px and scrolls inside its own box at 1024 px, with the
stage column staying in view. The page's title is the project's name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import truth_fleet as fleet
from report_png import decode

from browser import chromium, errors, layout, run

FOLD = 900
BOXES = {
    "headline": "p.headline",
    "kpi": "#kpi-failing",
    "kpi_number": "#kpi-failing .n",
    "kpi_runnable": ".kpis .kpi:nth-child(4)",
    "failing": "#failing",
    "failing_title": "#failing h2",
    "broken_pill": "#failing .pill.broken",
    "broken_row": "#failing tr.frow.broken",
    "matrix": "#matrix",
    "matrix_box": "#matrix .tw",
    "matrix_table": "#matrix table",
    "matrix_stage": "#matrix td.stage",
    "matrix_broken": "#matrix tr.failing-row .pill.broken",
}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = fleet.build(tmp_path_factory.mktemp("report") / "tmp.Xy7Qk2")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    r = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "report",
                        "--format", "html", "--output", "report.html"],
                       capture_output=True, text=True, timeout=300,
                       env={**env, "SOURCE_DATE_EPOCH": str(int(fleet.T0 + 8 * fleet.DAY))})
    assert r.returncode == 0, r.stderr
    return root / "report.html"


def _screenshot(browser: str, page: Path, tmp: Path, width: int, height: int) -> Path:
    shot = tmp / f"shot-{width}x{height}.png"
    r = run(browser, tmp, f"--window-size={width},{height}", "--force-device-scale-factor=1",
            f"--screenshot={shot}", page.as_uri())
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    assert not errors(r.stderr), errors(r.stderr)
    keep = os.environ.get("TESTFLEET_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, f"{keep}-{width}x{height}.png")
    return shot


def _red_share(png: tuple[int, int, int, bytes], box: dict[str, int]) -> float:
    """The share of the box's pixels (clipped to the screen) that are the report's red."""
    width, height, ch, px = png
    red = total = 0
    for y in range(max(box["top"], 0), min(box["bottom"], height)):
        for x in range(max(box["left"], 0), min(box["right"], width)):
            o = (y * width + x) * ch
            r, g, b = px[o], px[o + 1], px[o + 2]
            total += 1
            red += r >= 150 and r - g >= 80 and r - b >= 80
    return red / total if total else 0.0


def test_the_failing_state_is_on_the_first_screen(page: Path, tmp_path: Path) -> None:
    browser = chromium()
    facts = layout(browser, page, tmp_path, 1400, boxes=BOXES)
    assert facts["title"] == "gpu-fleet · testfleet report"
    box = facts["boxes"]
    for name in ("headline", "kpi", "failing_title", "broken_pill", "broken_row"):
        assert box[name] is not None and box[name]["bottom"] <= FOLD, (name, box[name])
    # "Failing now" is the first section under the cards, before the holes and the matrix
    assert box["failing"]["top"] < box["matrix"]["top"]
    assert box["failing"]["top"] - box["kpi"]["bottom"] < 60, box

    png = decode(_screenshot(browser, page, tmp_path, 1400, FOLD).read_bytes())
    assert png[:2] == (1400, FOLD)
    assert _red_share(png, box["broken_pill"]) > 0.5  # the broken pill is filled red
    assert _red_share(png, box["kpi_number"]) > 0.05  # the count of failing stages is red
    headline = dict(box["headline"], bottom=box["headline"]["top"] + 20)
    assert _red_share(png, headline) > 0.03  # the headline is set in red
    left_border = dict(box["failing"], right=box["failing"]["left"] + 2)
    assert _red_share(png, left_border) > 0.8  # the section is framed in red
    # the check can fail: a card that is not about failures has no red at all
    assert _red_share(png, box["kpi_runnable"]) < 0.01


@pytest.mark.parametrize("width", [1400, 1024])
def test_the_matrix_fits_or_scrolls_inside_its_own_box(page: Path, tmp_path: Path,
                                                        width: int) -> None:
    browser = chromium()
    facts = layout(browser, page, tmp_path, width, boxes=BOXES)
    assert facts["page_width"] <= width  # nothing makes the page itself scroll sideways
    [matrix] = [t for t in facts["tables"] if t["section"] == "matrix"]
    assert matrix["scroll"] == "auto" and matrix["box_right"] <= matrix["section_right"]
    box, scrolled = facts["boxes"], facts["boxes_scrolled"]
    if width == 1400:  # the whole matrix, 12 stages and every column, is in view
        assert matrix["table_width"] <= matrix["box_width"], matrix
    else:  # scrolled to its right end, the last column shows and the stage names stay
        assert matrix["table_width"] > matrix["box_width"], matrix
        assert scrolled["matrix_table"]["right"] <= scrolled["matrix_box"]["right"] + 1
        assert scrolled["matrix_stage"]["left"] == box["matrix_box"]["left"], scrolled
    assert box["matrix_broken"] is not None  # the broken stage's row says so
    png = decode(_screenshot(browser, page, tmp_path, width, max(FOLD, box["matrix"]["bottom"]
                                                               + 20)).read_bytes())
    assert _red_share(png, box["matrix_broken"]) > 0.5
