"""Configured start-up patterns come from a fork's pull request: screened at load, and
matching them is bounded in time; text from test output stays inert in every output."""

from __future__ import annotations

import time

import pytest

from testfleet.config import config_from_text
from testfleet.errors import ConfigError
from testfleet.failures.patterns import SEARCH_TIMEOUT, matcher_for, pattern_problem
from testfleet.failures.signature import failure_signature


@pytest.mark.parametrize(("pattern", "problem"), [
    ("(?:(?:a{100}){100})", "nest to 10000 repetitions"),
    ("x" * 301, "longer than 300 characters"),
    ("(", "invalid regular expression"),
    ("a\nb", "control character"),
])
def test_configured_patterns_are_screened(pattern: str, problem: str) -> None:
    assert problem in (pattern_problem(pattern) or "")
    text = f"[backends.rocm]\ninfra_patterns = [{pattern!r}]\n".replace("'", '"') \
        if "\n" not in pattern else '[backends.rocm]\ninfra_patterns = ["a\\nb"]\n'
    with pytest.raises(ConfigError) as info:
        config_from_text(text, "testfleet.toml")
    assert "backends.rocm.infra_patterns" in str(info.value)


def test_a_catastrophic_pattern_costs_one_timeout_then_is_switched_off() -> None:
    matcher = matcher_for("rocm", ["(x+x+)+y"])
    text = "x" * 5000 + "\nRuntimeError: No HIP GPUs are available\n"
    started = time.monotonic()
    first = failure_signature(text, matcher=matcher)
    second = failure_signature(text, matcher=matcher)
    assert time.monotonic() - started < SEARCH_TIMEOUT * 20
    assert first == second and first.label == "No HIP GPUs are available"
    assert len(matcher.warnings) == 1 and "switched off" in matcher.warnings[0]


def test_a_signature_from_hostile_output_is_one_inert_line() -> None:
    out = "E   RuntimeError: ::error::owned\x1b[2J\r\n::add-mask::x\u2028<script>`|\n"
    sig = failure_signature(out)
    assert "\n" not in sig.text and "\x1b" not in sig.text and "\u2028" not in sig.text

    from testfleet.runner.step_summary import code

    span = code("a`b``c|d")
    assert span.startswith("```") and "\\|" in span
