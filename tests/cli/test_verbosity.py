"""``-q``/``-v`` mean one thing in every command (``testfleet.cli._verbosity``): they change
what stderr says, never standard output, a written file or the exit status, and they work
before the command and after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.cli.main import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fleet(example_project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(example_project)
    for name in ("GITHUB_ACTIONS", "TESTFLEET_DATABASE_URL", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return example_project


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_drops_notes_and_keeps_the_output(fleet: Path, where: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["db", "status", "--json"]  # an old spelling: a note on stderr
    code, out, err = _run(argv, capsys)
    assert "testfleet: note: `--json` is now `--format json`" in err
    quiet = ["-q", *argv] if where == "before" else [*argv, "-q"]
    q_code, q_out, q_err = _run(quiet, capsys)
    assert (q_code, q_out) == (code, out) and '"state"' in out
    assert "note:" not in q_err


def test_output_file_is_the_same_at_every_verbosity_and_only_quiet_hides_where(
        fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = {}
    for flag in ("", "-q", "-v"):
        target = fleet / f"list{flag}.json"
        code, out, err = _run(["list", "--format", "json", "-o", str(target),
                               *([flag] if flag else [])], capsys)
        assert code == 0 and out == ""
        texts[flag] = target.read_text(encoding="utf-8")
        assert (f"testfleet: note: wrote {target}" in err) is (flag != "-q")
    assert texts[""] == texts["-q"] == texts["-v"]


def test_verbose_adds_details_on_stderr_only(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["db", "status", "--format", "json"], capsys)
    v_code, v_out, v_err = _run(["db", "status", "--format", "json", "-v"], capsys)
    assert (v_code, v_out) == (code, out)
    assert "configuration" not in err
    assert f"testfleet: note: configuration {fleet / 'pyproject.toml'}" in v_err
