"""Colour follows one rule in every command (``testfleet.color``): ``NO_COLOR`` never,
``FORCE_COLOR`` also through a pipe, otherwise only on a terminal; a file written with
``-o`` never. Run in-process, stdout is captured: a pipe, as in ``testfleet plan | less -R``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testfleet.cli.main import main

#: An SGR sequence that sets a foreground or background colour (bold alone is not colour).
COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;\d+)*m")

#: The commands whose human form is coloured on a terminal, as the examples project shows them.
COLOURED = [["check"], ["plan", "--event", "pull_request"], ["report"]]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, 1, None), capsys.readouterr().err
    return capsys.readouterr().out


@pytest.fixture
def fleet(example_project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(example_project)
    for name in ("FORCE_COLOR", "NO_COLOR", "GITHUB_ACTIONS", "TESTFLEET_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    return example_project


@pytest.mark.parametrize("argv", COLOURED, ids=" ".join)
@pytest.mark.parametrize(("env", "coloured"), [
    ({}, False),
    ({"FORCE_COLOR": "1"}, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ({"FORCE_COLOR": ""}, False),  # set but empty: not set (force-color.org)
], ids=["piped", "forced", "no-color-wins", "empty-is-unset"])
def test_colour_through_a_pipe_only_when_forced(fleet: Path, argv: list[str], env: dict[str, str],
                                               coloured: bool, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = _run(argv, capsys)
    assert out.strip()
    assert bool(COLOUR.search(out)) is coloured, out[:400]


@pytest.mark.parametrize("argv", COLOURED[1:], ids=" ".join)
def test_a_file_written_with_output_is_never_coloured(fleet: Path, argv: list[str],
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    target = fleet / "out.txt"
    _run([*argv, "-o", str(target)], capsys)
    text = target.read_text(encoding="utf-8")
    assert text.strip() and "\x1b[" not in text
