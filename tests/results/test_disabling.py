"""disable/enable edit only the disabled= argument: every other byte stays."""

from __future__ import annotations

import pytest

from testfleet.results.disabling import EditError, compose_reason, mentions_ref, set_disabled

M = {"register_cuda_ci", "register_rocm_ci", "register_amd_ci"}

SOURCE = (
    "\ufeff# -*- coding: utf-8 -*-\r\n"
    "from tests.ci.ci_register import register_amd_ci, register_cuda_ci  # übung\r\n"
    "register_cuda_ci(est_time=60, suite=\"stage-c-h200\", labels=[\"x\"])\r\n"
    "register_amd_ci(\r\n"
    "    est_time=60,\r\n"
    "    suite=\"stage-c-mi300x\",  # comment é\r\n"
    "    labels=[\"x\"],\r\n"
    "    disabled=\"Disable due to failure\",\r\n"
    ")\r\n"
    "def test_x():\r\n"
    "    pass\r\n"
).encode("utf-8")


def outside(before: bytes, after: bytes, old: bytes, new: bytes) -> None:
    """Everything except the one argument is byte-identical."""
    i = before.index(old)
    assert after == before[:i] + new + before[i + len(old):]


def test_enable_removes_the_argument_and_its_line() -> None:
    out, edit = set_disabled(SOURCE, M, "stage-c-mi300x", None)
    outside(SOURCE, out, b'    disabled="Disable due to failure",\r\n', b"")
    assert edit.line == 8 and edit.old == 'disabled="Disable due to failure"' and edit.new == ""


def test_round_trip_restores_every_byte() -> None:
    reason = compose_reason("MI300X runners fail at start-up", "#2230", "2027-01-31")
    assert reason == "MI300X runners fail at start-up, see #2230, until 2027-01-31"
    enabled, _ = set_disabled(SOURCE, M, "stage-c-mi300x", None)
    disabled, _ = set_disabled(enabled, M, "stage-c-mi300x", "Disable due to failure")
    assert disabled == SOURCE


def test_disable_inserts_after_the_last_argument_when_absent() -> None:
    out, edit = set_disabled(SOURCE, M, "stage-c-h200", 'runner "down", see #7')
    outside(SOURCE, out, b'labels=["x"])\r\n', b'labels=["x"], disabled="runner \\"down\\", see #7")\r\n')
    assert edit.old == "" and edit.line == 3 and edit.new == 'disabled="runner \\"down\\", see #7"'
    again, _ = set_disabled(out, M, "stage-c-h200", None)
    assert again == SOURCE  # no leftover disabled=None (#27)


SHAPES = (b"register_cuda_ci(5, 'a')\n"
          b"register_cuda_ci(5, 'b',)\n"
          b"register_cuda_ci(\n    5,\n    'c',  # why\n)\n"
          b"register_cuda_ci(\n    5,\n    'd'  # no trailing comma\n)\n"
          b"register_cuda_ci(\n\t5, 'e',\n)\n"
          b"register_cuda_ci(5,\n                 'f')\n")


@pytest.mark.parametrize(("suite", "disabled"), [
    ("a", b"register_cuda_ci(5, 'a', disabled=\"r\")\n"),
    ("b", b"register_cuda_ci(5, 'b', disabled=\"r\",)\n"),
    ("c", b"    'c',  # why\n    disabled=\"r\",\n)\n"),
    ("d", b"    'd',  # no trailing comma\n    disabled=\"r\"\n)\n"),
    ("e", b"\t5, 'e',\n\tdisabled=\"r\",\n)\n"),
    ("f", b"                 'f', disabled=\"r\")\n"),
])
def test_disable_writes_the_call_s_style_and_enable_restores_every_byte(
        suite: str, disabled: bytes) -> None:
    """#27: the argument was appended to the last line whatever the layout (where a
    formatter would move it), and enable left ', disabled=None' behind."""
    out, _ = set_disabled(SHAPES, M, suite, "r")
    assert disabled in out
    back, edit = set_disabled(out, M, suite, None)
    assert back == SHAPES and edit.old == 'disabled="r"' and edit.new == ""


@pytest.mark.parametrize(("source", "expect"), [
    (b"register_cuda_ci(5, 's', disabled='x', labels=['a'])\n",
     b"register_cuda_ci(5, 's', labels=['a'])\n"),
    (b"register_cuda_ci(disabled='x', est_time=5, suite='s')\n",
     b"register_cuda_ci(est_time=5, suite='s')\n"),
    (b"register_cuda_ci(\n    5, 's',\n    disabled='x',  # keep me\n)\n",
     b"register_cuda_ci(\n    5, 's',\n    disabled=None,  # keep me\n)\n"),
    (b"register_cuda_ci(5, 's',  # c\n                 disabled='x')\n",
     b"register_cuda_ci(5, 's',  # c\n                 disabled=None)\n"),
])
def test_enable_never_takes_a_comment_with_the_argument(source: bytes, expect: bytes) -> None:
    out, edit = set_disabled(source, M, "s", None)
    assert out == expect
    assert edit.new == ("disabled=None" if b"None" in expect else "")


@pytest.mark.parametrize(("source", "suite", "reason", "message"), [
    (SOURCE, "nope", "r", "no top-level"),
    (SOURCE, "stage-c-mi300x", "r", "already disabled"),
    (SOURCE, "stage-c-h200", None, "enabled already"),
    (b"register_cuda_ci(1, 's', disabled=REASON)\n", "s", None, "not a string literal"),
    (b"register_cuda_ci(*args, suite='s')\n", "s", "r", "unpacks arguments"),
    (b"register_cuda_ci(1, 's'\n", "s", "r", "cannot parse"),
    (b"# -*- coding: latin-1 -*-\nregister_cuda_ci(1, 's')\n", "s", "r", "only UTF-8"),
])
def test_refusals_leave_nothing_half_done(source: bytes, suite: str, reason: str | None,
                                          message: str) -> None:
    with pytest.raises(EditError, match=message):
        set_disabled(source, M, suite, reason)


@pytest.mark.parametrize(("args", "message"), [
    (("  ",), "non-empty"), (("a\nb",), "control character"), (("x", "2230"), "expected #N"),
    (("x", None, "2027-13-01"), "YYYY-MM-DD"), (("x", None, "20270101"), "YYYY-MM-DD"),
    # accepted by date.fromisoformat, never read back by the ledger (#27)
    (("x", None, "2024-W01-1"), "YYYY-MM-DD"), (("x", None, "\uff12\uff10\uff12\uff14-01-01"), "YYYY-MM-DD"),
])
def test_bad_reason_ref_until(args: tuple, message: str) -> None:
    with pytest.raises(EditError, match=message):
        compose_reason(*args)


@pytest.mark.parametrize(("reason", "ref", "hit"), [
    ("runners down, see #2230", "#2230", True),
    ("runners down, see #22301", "#2230", False),
    ("see https://github.com/o/r/issues/2230 for details", "#2230", True),
    ("see o/r#2230", "#2230", False),
    ("https://ci.example/x/1", "https://ci.example/x/1", True),
    ("Disable due to failure", "#2230", False),
    # a URL is cited as a whole, not as a prefix of a longer one (#27)
    ("x, see https://github.com/o/r/issues/2234", "https://github.com/o/r/issues/223", False),
    ("x, see https://github.com/o/r/issues/223, until 2027-01-01",
     "https://github.com/o/r/issues/223", True),
    ("(https://github.com/o/r/issues/223/).", "https://github.com/o/r/issues/223", True),
    ("see https://github.com/o/r/issues/223.5", "https://github.com/o/r/issues/223", False),
    ("see xhttps://github.com/o/r/issues/223", "https://github.com/o/r/issues/223", False),
    ("see https://github.com/o/r/issues/223?x=1", "https://github.com/o/r/issues/223", False),
])
def test_mentions_ref(reason: str, ref: str, hit: bool) -> None:
    assert mentions_ref(reason, ref) is hit


def test_enable_puts_back_a_disabled_none_that_disable_wrote_over() -> None:
    """The same text after disable either way; restore_none says it was None before."""
    original = b'register_cpu_ci(est_time=5, suite="a", disabled=None)\n'
    inserted = b'register_cpu_ci(est_time=5, suite="a")\n'
    markers = {"register_cpu_ci"}
    over, _ = set_disabled(original, markers, "a", "r")
    added, _ = set_disabled(inserted, markers, "a", "r")
    assert over == added
    back, edit = set_disabled(over, markers, "a", None, restore_none=True)
    assert back == original and edit.new == "disabled=None"
    assert set_disabled(added, markers, "a", None)[0] == inserted
