"""Headless Chromium for the dashboard tests (importable as ``browser``: ``tests/`` is on
``sys.path``). Chromium comes from the Debian package ``chromium``; without it a test is
skipped locally and fails under ``CI=true``.

:func:`layout` measures a report the way a reader sees it: a copy of the page gets a
small script (the report itself has none, and its Content-Security-Policy would refuse
one) that records facts about the laid-out page into the DOM, which ``--dump-dom`` then
returns.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed (Debian package 'chromium'); .ci/run must install it")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def run(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp)})


def errors(stderr: str) -> list[str]:
    """Console messages, refused loads and network errors Chromium logged."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line or "Refused to" in line or "net::ERR" in line
            or "Content Security" in line]


# Runs after layout. A path cell's text is split at each <wbr> (after a '/'), so a text
# node of a path that spans two lines was broken inside a name.
_MEASURE = """
<script>
(function () {
  function lines(node) {
    const r = document.createRange(); r.selectNodeContents(node);
    const tops = new Set(); for (const q of r.getClientRects()) tops.add(Math.round(q.top));
    return tops.size;
  }
  const out = {viewport: window.innerWidth,
               page_width: document.documentElement.scrollWidth, tables: [], broken: [],
               paths: 0, strips: []};
  for (const t of document.querySelectorAll("main table")) {
    const box = t.parentElement; const section = t.closest("section") || document.body;
    const sb = section.getBoundingClientRect(); const bb = box.getBoundingClientRect();
    out.tables.push({cls: t.className, section: section.id || "",
                     scroll: getComputedStyle(box).overflowX,
                     table_width: Math.round(t.getBoundingClientRect().width),
                     box_width: Math.round(bb.width), box_right: Math.round(bb.right),
                     section_right: Math.round(sb.right)});
  }
  for (const td of document.querySelectorAll("td.file")) {
    const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    let n; while ((n = walk.nextNode())) {
      if (!n.textContent.trim()) continue;
      out.paths += 1;
      if (lines(n) > 1) out.broken.push(td.textContent);
    }
  }
  for (const svg of document.querySelectorAll("svg.strip")) {
    const row = svg.closest("tr"); const file = row && row.querySelector("td.file");
    const b = svg.getBoundingClientRect();
    out.strips.push({file: file ? file.textContent : "", width: Math.round(b.width),
                     height: Math.round(b.height),
                     cells: Array.from(svg.querySelectorAll("rect.run")).map(
                       r => [r.getAttribute("class").split(" ")[1], getComputedStyle(r).fill,
                             r.querySelector("title").textContent])});
  }
  function boxes() {
    const found = {};
    for (const [name, sel] of Object.entries(BOXES)) {
      const el = document.querySelector(sel);
      const r = el && el.getBoundingClientRect();
      found[name] = r ? {left: Math.round(r.left), top: Math.round(r.top),
                         right: Math.round(r.right), bottom: Math.round(r.bottom)} : null;
    }
    return found;
  }
  out.title = document.title;
  out.boxes = boxes();
  // the same boxes once every scroll box is scrolled to its far right end
  for (const box of document.querySelectorAll(".tw")) box.scrollLeft = box.scrollWidth;
  out.boxes_scrolled = boxes();
  const pre = document.createElement("pre"); pre.id = "layout-facts";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
</script>
"""


def layout(browser: str, page: Path, tmp: Path, width: int = 800,
           boxes: dict[str, str] | None = None) -> dict[str, Any]:
    """Facts about ``page`` laid out in a ``width``-pixel window (see ``_MEASURE``);
    ``boxes`` names CSS selectors whose first match's bounding box (page pixels, from the
    top left) is measured, as laid out and with every scroll box scrolled to its right
    end (``facts["boxes"]``, ``facts["boxes_scrolled"]``; ``None`` when nothing matches)."""
    html = page.read_text(encoding="utf-8")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    probe = tmp / f"measure-{page.stem}-{width}.html"
    script = _MEASURE.replace("(function () {", "(function () {\n  const BOXES = "
                              + json.dumps(boxes or {}) + ";", 1)
    probe.write_text(html.replace("</body>", script + "</body>"), encoding="utf-8")
    r = run(browser, tmp, f"--window-size={width},2000", "--dump-dom", probe.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'<pre id="layout-facts">(.*?)</pre>', r.stdout, re.S)
    assert found, r.stdout[-2000:]
    import html as htmllib

    facts: dict[str, Any] = json.loads(htmllib.unescape(found.group(1)))
    facts["dom"] = r.stdout
    return facts


class _Rows(HTMLParser):
    def __init__(self, cls: str) -> None:
        super().__init__()
        self.cls = cls
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            classes = (dict(attrs).get("class") or "").split()
            self.depth += 1 if self.depth or self.cls in classes else 0
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag == "td":
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.depth:
            self.depth -= 1
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(dom: str, cls: str) -> list[list[str]]:
    """The body rows (cell texts) of the tables with class ``cls`` in a dumped DOM."""
    parser = _Rows(cls)
    parser.feed(dom)
    return [row for row in parser.rows if row]
