"""Fixtures for the runner: real processes, small timeouts, a spec builder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.config import DEFAULT_FATAL, DEFAULT_RETRIABLE
from testfleet.runner.model import JobSpec, RunItem, RunOptions, StageSettings


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., JobSpec]:
    """Write test files into a scratch project and return a JobSpec that runs them."""
    root = tmp_path / "proj"
    root.mkdir()

    def build(files: dict[str, str], *, command: str = "python", floor: float = 5.0,
              factor: float = 1.0, grace: float = 1.0, max_attempts: int = 1,
              fast_fail: bool = True, estimate: float = 0.1, env: dict[str, str] | None = None,
              job_id: str = "job-1") -> JobSpec:
        items = []
        for name, body in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(body))
            items.append(RunItem(name, estimate))
        settings = StageSettings("stage-x", "cpu", command, floor, factor, grace, env or {})  # type: ignore[arg-type]
        options = RunOptions(max_attempts=max_attempts, fast_fail=fast_fail,
                             retriable_patterns=tuple(DEFAULT_RETRIABLE),
                             fatal_patterns=tuple(DEFAULT_FATAL))
        return JobSpec(job_id, settings, tuple(items), root, tmp_path / "records", options, "run-1")

    return build
