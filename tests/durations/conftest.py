"""Fixtures for estimates, JUnit import and the durations commands."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.store.conftest import engine_name, store_url

from testfleet.config import Project

__all__ = ["engine_name", "store_url"]  # per-engine databases, as the store tests have them

CONFIG = """\
roots = ["tests"]

[durations]
window = 3
min_samples = 2

[stages.stage-a-cpu]
backend = "cpu"

[stages.stage-c-h200]
backend = "cuda"

[stages.stage-c-mi300x]
backend = "rocm"
"""


@pytest.fixture
def project(config_project: Callable[[str], Project]) -> Project:
    return config_project(CONFIG)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> Callable[..., tuple[int, str, str]]:
    """Run ``testfleet ARGS`` in-process; returns (exit status, stdout, stderr)."""
    from testfleet.cli.main import main

    monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "250")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:  # pragma: no cover - main always exits
            code = 0
        out, err = capsys.readouterr()
        return code, out, err

    return run
