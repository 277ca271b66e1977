"""The fast scanner against what a full parse would say, on the tricky shapes."""

from __future__ import annotations

import ast
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testfleet.config import BUILTIN_BACKENDS, GATE_MARKER
from testfleet.registry import scan as sc

NAMES = frozenset({m for spec in BUILTIN_BACKENDS.values() for m in spec["markers"]} | {GATE_MARKER})
PATTERN = sc.marker_pattern(NAMES)
NEEDLES = sc.needles_for(NAMES)


def run(src: str | bytes) -> sc.FileScan:
    return sc.scan_source(src.encode() if isinstance(src, str) else src, PATTERN, NEEDLES)


def reference_calls(src: str) -> list[tuple[str, int]]:
    """What a full ``ast.parse`` sees: top-level ``name(...)`` statements."""
    out = []
    for node in ast.parse(src).body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id in NAMES):
            out.append((node.value.func.id, node.lineno))
    return out


AGREES = {
    "plain": 'register_cpu_ci(5, "s")\n',
    "docstring-mention": '"""Docs.\nregister_cuda_ci(5, "s", labels=["x"])\n"""\nregister_cpu_ci(5, "s")\n',
    "comment": '# register_cuda_ci(5, "s")\nregister_cpu_ci(5, "s")\n',
    "string-literal": 'X = "register_cuda_ci(5)"\nregister_cpu_ci(5, "s")\n',
    "single-quoted-docstring": "'''\nregister_rocm_ci(1, 's')\n'''\nregister_cpu_ci(5, 's')\n",
    "multiline-with-comments": 'register_cuda_ci(\n    est_time=5,  # (measured)\n    suite="s",  # ) tricky\n'
                               '    labels=["a)", "b("],\n)\nregister_rocm_ci(1, "r", labels=("x",))\n',
    "escaped-quotes": 'register_cpu_ci(5, "a\\"b)")\n',
    "prefixed-strings": 'X = rb"register_cpu_ci("\nregister_cpu_ci(5, r"s")\n',
    "semicolon-later": 'register_cpu_ci(5, "s"); x = 1\n',
    "inside-brackets": 'ALL = [\nregister_cpu_ci,\n]\nregister_cuda_ci(1, "s", labels=["a"])\n',
    "crlf": 'import os\r\nregister_cpu_ci(5,\r\n "s")\r\n',
    "gate": 'register_ci_gate(metric_key="train/loss", steps=[1, 2])\n',
    "similar-names": 'my_register_cpu_ci(5, "s")\nregister_cpu_ci_old(5)\nregister_cpu_ci(5, "s")\n',
    "late-call-after-classes": 'class A:\n    """register_cpu_ci(\n    """\n    def f(self):\n        return (1,\n'
                               '2)\n\n\nregister_cpu_ci(5, "s")\n',
}


@pytest.mark.parametrize("name", sorted(AGREES))
def test_agrees_with_full_parse(name: str) -> None:
    src = AGREES[name]
    got = [(c.name, c.line) for c in run(src).calls]
    assert got == reference_calls(src.replace("\r\n", "\n"))


def test_nothing_to_do_without_needle() -> None:
    result = run("import os\n\ndef test():\n    pass\n")
    assert result.calls == [] and result.others == []


def test_call_node_has_real_line_numbers_and_segment() -> None:
    src = "import os\n\n\nregister_cuda_ci(\n    est_time=5,\n    suite='s',\n    labels=['a', 'b'],\n)\n"
    call = run(src).calls[0]
    assert call.line == 4
    labels = next(k for k in call.node.keywords if k.arg == "labels")
    assert labels.value.lineno == 7
    assert call.segment(labels.value) == "['a', 'b']"


def test_indented_call_names_its_block() -> None:
    src = 'import x\n\nclass T:\n    def setup(self):\n        register_cpu_ci(5, "s")\n'
    (occ,) = run(src).others
    assert (occ.kind, occ.line, occ.col) == (sc.INDENTED_CALL, 5, 9)
    assert "`def setup(self):` (line 4)" in occ.detail


def test_attribute_alias_embedded_and_mentions() -> None:
    src = (
        "import testfleet as tf\n"
        "from testfleet import register_cuda_ci as rc\n"
        "from testfleet import (\n    register_rocm_ci,\n)\n"
        'tf.register_cpu_ci(5, "s")\n'
        'ok = register_rocm_ci(1, "x")\n'
    )
    kinds = [(o.kind, o.line) for o in run(src).others]
    assert kinds == [(sc.ALIASED_IMPORT, 2), (sc.MENTION, 4), (sc.ATTRIBUTE_CALL, 6), (sc.EMBEDDED_CALL, 7)]


def test_bom_and_non_utf8() -> None:
    assert [c.name for c in run(b'\xef\xbb\xbfregister_cpu_ci(5, "s")\n').calls] == ["register_cpu_ci"]
    bad = run(b'register_cpu_ci(5, "s")\n# \xff\n')
    assert bad.decode_error is not None and "line 2" in bad.decode_error


@pytest.mark.parametrize(("src", "expected"), [
    ('if __name__ == "__main__":\n    main()\n', True),
    ("if __name__ == '__main__': run(1)\n", True),
    ('if "__main__" == __name__:\n    sys.exit(pytest.main([__file__]))\n', True),
    ('if __name__ == "__main__":\n    pass\n', False),
    ('if __name__ == "__main__":\n    # main()\n    pass\n', False),
    ("def main():\n    pass\n", False),
])
def test_main_guard(src: str, expected: bool) -> None:
    assert run(src).has_main_call is expected


def test_unterminated_triple_quote_does_not_crash() -> None:
    result = run('register_cpu_ci(5, "s")\nX = """never closed\nregister_cuda_ci(1)\n')
    assert [c.name for c in result.calls] == ["register_cpu_ci"]
    assert result.others == []


def test_config_marker_without_common_prefix() -> None:
    names = frozenset({"register_cpu_ci", "npu_ci"})
    pattern, needles = sc.marker_pattern(names), sc.needles_for(names)
    result = sc.scan_source(b'npu_ci(5, "s")\nregister_cpu_ci(1, "t")\n', pattern, needles)
    assert [c.name for c in result.calls] == ["npu_ci", "register_cpu_ci"]


# --- no input makes the scanner (or the validator behind it) raise ----------------------------


FRAGMENTS = st.sampled_from([
    "register_cpu_ci", "register_cuda_ci", "register_ci_gate", "(", ")", "[", "]", "{", "}", "'", '"', '"""',
    "'''", "#", "\n", "\r\n", "    ", "\t", ",", "=", "est_time", "suite", "labels", "disabled", "1", "-1",
    "'stage-a-cpu'", "x.", " as y", "if __name__ == '__main__':", "main()", "\\", "\x00", "é", "\ufeff", ";",
    "def f():", "*", "**",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40))
def test_scanner_and_validator_never_raise(parts: list[str]) -> None:
    from testfleet.config import validate_config
    from testfleet.registry.rules import build_rules
    from testfleet.registry.validate import validate_file

    rules = build_rules(validate_config({"stages": {"stage-a-cpu": {"backend": "cpu"}}}))
    result = run("".join(parts))
    validate_file("tests/test_x.py", result, rules)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    sc.scan_source(b"register_cpu_ci(" + data, PATTERN, NEEDLES)


def test_definitions_and_self_aliases_are_mentions() -> None:
    src = (
        "try:\n    from testfleet import register_cpu_ci as register_cpu_ci\n"
        "except ImportError:\n    def register_cpu_ci(*args, **kwargs):\n        pass\n\n"
        'register_cpu_ci(5, "s")\n'
    )
    result = run(src)
    assert [c.line for c in result.calls] == [7]
    assert [o.kind for o in result.others] == [sc.MENTION] * 3  # name, its self-alias, the def


def test_backslash_continuation_is_not_a_top_level_call() -> None:
    result = run('x = 1 + \\\nregister_cpu_ci(5, "s")\n# c:\\\nregister_cuda_ci(1, "t", labels=["a"])\n')
    assert [c.name for c in result.calls] == ["register_cuda_ci"]
    (occ,) = result.others
    assert (occ.kind, occ.line) == (sc.EMBEDDED_CALL, 2) and occ.detail.startswith("x = 1 +")
    assert reference_calls('x = 1 + \\\nregister_cpu_ci(5, "s")\n') == []


# The string pattern as it was written with possessive quantifiers (Python 3.11+ only);
# the shipped pattern must match exactly the same spans on every input.
_POSSESSIVE_STRING = (
    r"'''(?:[^'\\]++|\\.|'(?!''))*+(?:'''|\Z)"
    r'|"""(?:[^"\\]++|\\.|"(?!""))*+(?:"""|\Z)'
    r"|'(?:[^'\\\n]++|\\.)*+(?:'|$)"
    r'|"(?:[^"\\\n]++|\\.)*+(?:"|$)'
)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive quantifiers need Python 3.11")
@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="'\"\\\nab#()", max_size=40))
def test_string_pattern_matches_the_possessive_form(text: str) -> None:
    possessive = re.compile(_POSSESSIVE_STRING, re.DOTALL | re.MULTILINE)
    for pos in range(len(text) + 1):
        want = possessive.match(text, pos)
        got = sc._STRING_RE.match(text, pos)
        assert (got and got.span()) == (want and want.span()), (text, pos)


def test_unterminated_string_with_trailing_backslash() -> None:
    # The string match fails and backtracks (linearly: the loop is unrolled); the call stands.
    src = 'register_cpu_ci(5, "s")\nx = "' + "a" * 200_000 + "\\"
    got = run(src)
    assert [c.name for c in got.calls] == ["register_cpu_ci"]


def test_backslash_after_a_string_holding_a_hash_continues_the_line() -> None:
    # `x = "#" \` is not a comment: the marker on the next line is inside that statement.
    got = run('x = "#" \\\nregister_cpu_ci(5, "s")\n')
    assert got.calls == []
    assert [(o.kind, o.line) for o in got.others] == [(sc.EMBEDDED_CALL, 2)]
    assert got.others[0].detail.startswith('x = "#" \\ register_cpu_ci(')


def test_backslash_inside_a_comment_does_not_continue_the_line() -> None:
    src = 'x = 1  # see a\\b \\\nregister_cpu_ci(5, "s")\n'
    assert reference_calls(src) == [("register_cpu_ci", 2)]
    assert [(c.name, c.line) for c in run(src).calls] == [("register_cpu_ci", 2)]


def _naive_header(text: str, line_start: int, indent: int) -> str:
    """The walk back to the enclosing header as the scanner once did it (quadratic)."""
    pos = line_start - 1
    while pos > 0:
        prev_start = text.rfind("\n", 0, pos) + 1
        raw = text[prev_start:pos]
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            width = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
            if width < indent:
                return f"`{stripped[:60]}` (line {text.count(chr(10), 0, prev_start) + 1})"
        pos = prev_start - 1
    return "an indented block"


_LINE = st.sampled_from([
    "def f():", "    def g(self):", "class A:", "        if x:", "    # comment", "", "  \t",
    "    register_cpu_ci(1, 's')", "        register_cuda_ci(2, 's')", "\tregister_rocm_ci(1, 's')",
    "x = 1", "    y = [register_cpu_ci]", "register_cpu_ci # mention",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, max_size=30))
def test_lines_and_headers_match_a_walk_from_the_top(lines: list[str]) -> None:
    """The forward-only cursor gives the same lines and headers as looking back each time."""
    text = "\n".join(lines) + "\n"
    got = run(text)
    want = []
    for m in PATTERN.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line = text.count("\n", 0, m.start()) + 1
        prefix = text[line_start:m.start()]
        if prefix and not prefix.strip() and text.startswith("(", m.end()):
            want.append((line, _naive_header(text, line_start, len(prefix.expandtabs()))))
    indented = [(o.line, o.detail) for o in got.others if o.kind == sc.INDENTED_CALL]
    assert indented == want


def test_many_occurrences_keep_their_lines_and_details() -> None:
    # What a PR can put in one file: every kind of occurrence, many times over
    # (benchmarks/bench_scan.py measures that the time stays linear).
    n = 3000
    src = ("def f():\n" + "    register_cpu_ci(5, 's')\n" * n
           + "x = [" + "a.register_cpu_ci, " * n + "]\n"
           + "register_cuda_ci\n" * n
           + "register_cpu_ci(5, 'stage')\n")
    got = run(src)
    kinds = [o.kind for o in got.others]
    assert kinds.count(sc.INDENTED_CALL) == n and kinds.count(sc.MENTION) == 2 * n
    indented = [o for o in got.others if o.kind == sc.INDENTED_CALL]
    assert indented[-1].line == n + 1 and indented[-1].detail == "`def f():` (line 1)"
    attrs = [o for o in got.others if o.detail == "a.register_cpu_ci"]
    assert len(attrs) == n and attrs[-1].line == n + 2 and attrs[-1].col == 8 + 19 * (n - 1)
    assert [(c.name, c.line) for c in got.calls] == [("register_cpu_ci", 2 * n + 3)]
