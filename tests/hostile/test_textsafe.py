"""The one-line rule for untrusted names, against its definition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from testfleet.textsafe import line_break, printable


def first_control(value: str) -> str | None:
    for ch in value:
        code = ord(ch)
        if code < 32 or 127 <= code < 160 or code in (0x2028, 0x2029):
            return ch
    return None


@given(st.text(alphabet=st.characters(max_codepoint=0x2100) | st.sampled_from("\n\r\x1b\x85\u2028\u2029")))
def test_line_break_finds_the_first_control_character(value: str) -> None:
    assert line_break(value) == first_control(value)


def test_printable_spells_out_what_line_break_refuses() -> None:
    assert printable("a\n::error::x\x1b[2J\u2028") == "a\\n::error::x\\x1b[2J\\u2028"
    assert line_break("tests/ok_ünïcode.py") is None
