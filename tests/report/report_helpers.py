"""Builders shared by the report tests (plain functions, no fixtures needed)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from testfleet.config import Config, validate_config
from testfleet.registry.model import Registration

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.timezone.utc)


def config(**overrides: Any) -> Config:
    data: dict[str, Any] = {
        "labels": {"megatron": "m", "amd": "a", "long": "l"},
        "stages": {
            "cpu-a": {"backend": "cpu"},
            "gpu-h200": {"backend": "cuda"},
            "gpu-mi300x": {"backend": "rocm", "trusted_only": True,
                           "disabled": "MI300X runners fail at start-up, see #2230"},
        },
    }
    data.update(overrides)
    return validate_config(data)


def reg(file: str, suite: str = "cpu-a", backend: str = "cpu", est: float = 10.0, *,
        labels: tuple[str, ...] = (), nightly: bool = False, disabled: str | None = None,
        line: int = 3) -> Registration:
    return Registration(file, backend, suite, est, line=line, col=1, labels=labels,
                        nightly=nightly, disabled=disabled)


def fleet() -> list[Registration]:
    return [
        reg("tests/fast/test_a.py"),
        reg("tests/fast/test_b.py", labels=("long",), nightly=True),
        reg("tests/e2e/test_m.py", "gpu-h200", "cuda", 900, labels=("megatron",)),
        reg("tests/e2e/test_x.py", "gpu-h200", "cuda", 100, labels=("megatron",),
            disabled="Disable due to failure"),
        reg("tests/e2e/test_m.py", "gpu-mi300x", "rocm", 1800, labels=("megatron", "amd"),
            disabled="Disable due to failure", line=4),
        reg("tests/e2e/test_s.py", "gpu-mi300x", "rocm", 300, labels=("amd",)),
    ]
