"""Read-only commands on a project with no history yet read nothing, create nothing, and
say that no run was recorded rather than "no failures" (#39)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import run_cli


@pytest.mark.parametrize("argv", [["flaky"], ["incident", "list"], ["results"]])
def test_a_read_only_command_creates_no_database(example_project: Path, capsys,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 argv: list[str]) -> None:
    monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
    history = example_project / ".testfleet" / "history.db"
    assert not history.exists()
    code, out, err = run_cli(capsys, "-C", str(example_project), *argv)
    assert code == 0, out + err
    assert "recorded yet" in out
    assert "no failures" not in out and "no flaky" not in out
    assert not history.exists()
