"""Property tests: parsing and escaping hold for any text a reason or path can contain."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from testfleet.report.expiry import parse_expiry
from testfleet.report.references import parse_references
from testfleet.report.render_markdown import code, md
from testfleet.report.svg import esc

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=400)
REASONY = st.lists(st.sampled_from(["#12", "see", " ", "https://x.org/a#3", "until 2026-02-30",
                                    "C#", "&#1;", "o/r#9", "GH-4", "(", ")", "|", "<", "`", "@", "\\"]),
                   max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(TEXT, REASONY))
def test_reference_and_expiry_parsing_never_fail(reason: str) -> None:
    refs = parse_references(reason)
    assert len({r.text for r in refs}) == len(refs)
    for r in refs:
        assert r.text in reason
        assert r.number is None or r.number >= 0
    e = parse_expiry(reason)
    assert e is None or (e.date is None) == (e.error is not None)


@settings(max_examples=300, deadline=None)
@given(st.one_of(TEXT, REASONY))
@example("a\\|b")
@example("\\\\|`|`<x>")
def test_escaped_text_cannot_open_tags_or_split_table_cells(text: str) -> None:
    for out in (md(text), code(text), esc(text)):
        assert "<" not in out and ">" not in out
        assert "\n" not in md(text) and "\n" not in code(text)
    # every pipe in a Markdown cell is escaped
    for out in (md(text), code(text)):
        stripped = out.replace("\\\\", "")
        assert all(stripped[i - 1] == "\\" for i, ch in enumerate(stripped) if ch == "|")
