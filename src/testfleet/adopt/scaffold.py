"""A starting configuration for a tree with no registrations yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testfleet.adopt.policy import DEFAULT_SCHEDULES


def scaffold(root: Path) -> dict[str, Any]:
    """A starting configuration for a tree with no registrations yet: every test
    file under ``tests`` is a CPU test of one implicit stage."""
    test_root = "tests" if (root / "tests").is_dir() or not (root / "test").is_dir() else "test"
    return {
        "roots": [test_root],
        "pattern": "test_*.py",
        "implicit": [{"path": test_root, "backend": "cpu", "suite": "stage-cpu", "est_time": 30}],
        "labels": {},
        "stages": {"stage-cpu": {"backend": "cpu", "runs_on": ["ubuntu-latest"],
                                 "command": "pytest", "target_minutes": 15, "max_shards": 4}},
        "policy": {"schedules": dict(DEFAULT_SCHEDULES)},
    }
