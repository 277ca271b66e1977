"""Builders shared by the gate tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testfleet.config import Config, Project
from testfleet.gate.spec import GateSpec, parse_gate_call
from testfleet.registry.model import GateCall


def call(file: str = "tests/unit/test_x.py", line: int = 3, **kwargs: Any) -> GateCall:
    return GateCall(file=file, line=line, col=1, kwargs=kwargs)


def spec(**kwargs: Any) -> GateSpec:
    kwargs.setdefault("metric_key", "train/loss")
    kwargs.setdefault("steps", "last")
    kwargs.setdefault("constraint", {"rel_up": 0.1, "rel_down": 0.1})
    result, findings = parse_gate_call(call(**kwargs))
    assert not findings, findings
    assert result is not None
    return result


def make_project(root: Path, config: Config | None = None) -> Project:
    """A project without a config file, for store and hook tests."""
    return Project(root=root, config_path=root / "testfleet.toml", config=config or Config(),
                   raw_config_text="")
