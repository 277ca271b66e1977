"""Gate arguments are read by a fast path that must agree with ``ast.literal_eval`` exactly."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testfleet.registry.validate import _gate_literal

# Python literals of the shapes gate declarations use, and some they should not.
_leaf = st.one_of(
    st.integers(-10**20, 10**20).map(repr),
    st.floats(allow_nan=False).map(repr),
    st.text(max_size=8).map(repr),
    st.sampled_from(["True", "False", "None", "...", "b'x'", "1j", "-1j", "+2.5", "-0.0",
                     "-True", "1 + 2j", "set()", "{1, 2}", "x", "f(1)", "[*a]"]),
)
_literal = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(inner, max_size=4).map(lambda xs: "(" + "".join(x + ", " for x in xs) + ")"),
        st.lists(st.tuples(st.one_of(st.text(max_size=4).map(repr), st.integers(0, 3).map(repr),
                                     st.just("[1]"), st.just("**d")), inner), max_size=4)
        .map(lambda kvs: "{" + ", ".join("**d" if k == "**d" else f"{k}: {v}" for k, v in kvs) + "}"),
    ),
    max_leaves=12,
)


def _same(source: str) -> None:
    node = ast.parse(source, mode="eval").body
    try:
        expected: Any = ("value", ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        expected = ("error", type(exc))
    try:
        got = ("value", _gate_literal(node, 0))
    except LookupError:
        return  # the long way decides: nothing to compare
    assert expected[0] == "value", f"{source!r}: fast path accepted what literal_eval refuses"
    assert repr(got[1]) == repr(expected[1]), source  # repr: types too (tuple vs list, -0.0)


@settings(max_examples=400, deadline=None)
@given(_literal)
def test_fast_path_agrees_with_literal_eval(source: str) -> None:
    _same(source)


@pytest.mark.parametrize("source", [
    '{"rel_up": 0.2, "abs_floor_up": 0.001}', "[50, 100]", "(5, 10, 15)", "-1e309", "-0.0",
    '{"a": 1, "a": 2}', "{1: 'x', 1.0: 'y'}", '{"k": [1, (2, {"z": None})]}', "+3", "-(1)",
])
def test_common_and_corner_shapes(source: str) -> None:
    _same(source)


def test_shapes_it_leaves_to_literal_eval() -> None:
    for source in ("{1, 2}", "set()", "{**d}", "1 + 2j", "-True", "{[1]: 2}", "x", "[" * 20 + "]" * 20):
        with pytest.raises(LookupError):
            _gate_literal(ast.parse(source, mode="eval").body, 0)
