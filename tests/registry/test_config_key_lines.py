"""A misspelt configuration key names its line and the key it most likely meant (#39), in
testfleet.toml and under [tool.testfleet] of pyproject.toml alike."""

from __future__ import annotations

import pytest

from testfleet.config import config_from_text
from testfleet.config.keyloc import key_line
from testfleet.errors import ConfigError

TOML = """\
roots = ["tests"]

[stages.a]
backend = "cpu"
run_on = ["x"]
"""
PYPROJECT = """\
[project]
name = "x"

[tool.testfleet]
roots = ["tests"]
shard = 3

[[tool.testfleet.implicit]]
path = "tests/a"
[[tool.testfleet.implicit]]
path = "tests/b"
sute = "a"

[tool.testfleet.stages.a]
backend = "cpu"
shards = "x"
"""


def _findings(text: str, name: str) -> list[tuple[int, str, str]]:
    with pytest.raises(ConfigError) as info:
        config_from_text(text, name)
    return [(f.line, f.key, f.message.split(";")[0]) for f in info.value.findings]


def test_an_unknown_key_names_its_line_and_the_key_it_meant() -> None:
    assert _findings(TOML, "testfleet.toml") == [
        (5, "stages.a.run_on", "unknown key 'run_on' (did you mean 'runs_on'?)")]


def test_pyproject_keys_are_found_under_tool_testfleet_and_arrays_of_tables() -> None:
    found = _findings(PYPROJECT, "pyproject.toml")
    assert (6, "tool.testfleet.shard", "unknown key 'shard'") in found
    assert (12, "tool.testfleet.implicit.1.sute", "unknown key 'sute' (did you mean 'suite'?)") in found
    assert any(line == 16 and key == "tool.testfleet.stages.a.shards" for line, key, _ in found)


def test_a_key_without_a_line_of_its_own_points_at_its_table() -> None:
    text = '[stages."a"]\nenv = { A = 1 }\n'
    assert key_line(text, ["stages", "a", "env", "A"]) == 2
    assert key_line(text, ["stages", "a", "backend"]) == 1
    assert key_line(text, ["stages", "b"]) == 0
