"""Shared fixtures. Area-specific fixtures live in each area's own conftest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "fleet"


@pytest.fixture
def example_project(tmp_path: Path) -> Path:
    """A private copy of examples/fleet, so tests may write caches and history into it."""
    dest = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    return dest
