"""In-place est_time rewrites: exactly the number's bytes change, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testfleet.planning.literals import LiteralNotFound, format_seconds, rewrite_est_time

CUDA = {"register_cuda_ci"}
ROCM = {"register_rocm_ci", "register_amd_ci"}


def only_change(before: bytes, after: bytes, old: bytes, new: bytes) -> None:
    """``after`` is ``before`` with one occurrence of ``old`` replaced by ``new``."""
    i = next(i for i in range(len(before)) if before[i:i + len(old)] == old
             and after[:i] == before[:i])
    assert after == before[:i] + new + before[i + len(old):]


def test_keyword_literal_in_a_crlf_file_with_comments() -> None:
    src = (b"# -*- coding: utf-8 -*-\r\nfrom testfleet import register_cuda_ci\r\n\r\n"
           b"register_cuda_ci(est_time=1100, suite=\"stage-c-h200\", labels=['megatron'])  # 1100?\r\n"
           b"def test_x():\r\n    register_cuda_ci(est_time=1100, suite='stage-c-h200')\r\n")
    out, edit = rewrite_est_time(src, CUDA, "stage-c-h200", 2400.2, line=4)
    assert (edit.line, edit.old, edit.new) == (4, "1100", "2401")
    only_change(src, out, b"est_time=1100", b"est_time=2401")
    assert out.count(b"1100") == 2  # the comment and the nested call are untouched


def test_positional_multiline_call_and_the_right_backend() -> None:
    src = (b"from tests.ci.ci_register import register_amd_ci, register_cuda_ci\n"
           b"register_cuda_ci(\n    1_900,\n    \"stage-c-h200\",\n)\n"
           b"register_amd_ci(1900, suite=\"stage-c-mi300x\")\n")
    out, edit = rewrite_est_time(src, ROCM, "stage-c-mi300x", 4000)
    assert (edit.line, edit.old, edit.new) == (6, "1900", "4000")
    only_change(src, out, b"(1900,", b"(4000,")
    out2, edit2 = rewrite_est_time(src, CUDA, "stage-c-h200", 600)
    assert (edit2.line, edit2.old) == (3, "1_900")
    only_change(src, out2, b"1_900", b"600")


def test_non_ascii_before_the_call_on_the_same_line() -> None:
    src = "π = 3.14; register_cuda_ci(est_time=5.5, suite='s')  # ünïcode\n".encode()
    out, edit = rewrite_est_time(src, CUDA, "s", 12.0)
    assert edit.old == "5.5"
    assert out == "π = 3.14; register_cuda_ci(est_time=12, suite='s')  # ünïcode\n".encode()


def test_bom_and_latin1_sources_keep_their_encoding() -> None:
    bom = b"\xef\xbb\xbfregister_cuda_ci(est_time=10, suite='s')\n"
    out, _ = rewrite_est_time(bom, CUDA, "s", 20)
    assert out == b"\xef\xbb\xbfregister_cuda_ci(est_time=20, suite='s')\n"
    latin = (b"# -*- coding: latin-1 -*-\n"
             b"x = '\xe9'; register_cuda_ci(est_time=10, suite='s')\n")
    out, _ = rewrite_est_time(latin, CUDA, "s", 30)
    assert out == latin.replace(b"est_time=10", b"est_time=30")


def test_no_trailing_newline_and_lone_cr() -> None:
    src = b"x = 1\rregister_cuda_ci(est_time=10, suite='s')"
    out, edit = rewrite_est_time(src, CUDA, "s", 11)
    assert edit.line == 2
    assert out == b"x = 1\rregister_cuda_ci(est_time=11, suite='s')"


@pytest.mark.parametrize(("src", "message"), [
    (b"register_cuda_ci(est_time=10, suite='other')\n", "no top-level"),
    (b"def f():\n    register_cuda_ci(est_time=10, suite='s')\n", "no top-level"),
    (b"register_cuda_ci(est_time=T, suite='s')\n", "not a plain number"),
    (b"register_cuda_ci(est_time=True, suite='s')\n", "not a plain number"),
    (b"register_cuda_ci(est_time=10, suite='s'\n", "cannot parse"),
])
def test_refusals(src: bytes, message: str) -> None:
    with pytest.raises(LiteralNotFound, match=message):
        rewrite_est_time(src, CUDA, "s", 20)


@pytest.mark.parametrize(("value", "text"), [(0.2, "1"), (5.0, "5"), (5.01, "6"), (2400.5, "2401")])
def test_format_seconds(value: float, text: str) -> None:
    assert format_seconds(value) == text


_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.lists(_line, max_size=5), st.lists(_line, max_size=5),
       st.sampled_from([b"\n", b"\r\n", b"\r"]), st.integers(min_value=1, max_value=99999),
       st.integers(min_value=1, max_value=99999))
def test_only_the_literal_changes(before: list[str], after: list[str], eol: bytes,
                                  old: int, new: int) -> None:
    head = eol.join(b"# " + line.encode("utf-8") for line in before)
    tail = eol.join(b"# " + line.encode("utf-8") for line in after)
    call = f"register_cuda_ci(est_time={old}, suite='s', labels=['x'])  # keep {old}".encode()
    src = (head + eol if before else b"") + call + eol + tail
    out, edit = rewrite_est_time(src, CUDA, "s", float(new))
    assert edit.old == str(old)
    assert out == src.replace(f"est_time={old},".encode(), f"est_time={new},".encode(), 1)
