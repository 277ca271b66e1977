"""Fixtures for planning tests: a config like the example project's and hand-built registrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testfleet.config import Config, Project, validate_config
from testfleet.registry.model import Registration

LABELS = ["megatron", "fsdp", "rollout", "offload", "amd", "long", "ft-short", "ft-long"]


def make_config(**overrides: Any) -> Config:
    """A compact version of examples/fleet's config; ``overrides`` replace top-level keys."""
    data: dict[str, Any] = {
        "labels": {name: name for name in LABELS},
        "stages": {
            "stage-a-cpu": {"backend": "cpu", "shards": 2},
            "stage-b-cpu": {"backend": "cpu", "command": "python", "needs": ["stage-a-cpu"]},
            "gpu-h200": {"backend": "cuda", "max_shards": 3, "target_minutes": 60,
                         "needs": ["stage-a-cpu"], "env": {"NCCL_DEBUG": "WARN"}},
            "gpu-h100": {"backend": "cuda", "shards": 2, "needs": ["gpu-h200"]},
            "gpu-mi300x": {"backend": "rocm", "trusted_only": True, "max_shards": 2,
                           "needs": ["stage-a-cpu"]},
        },
        "policy": {"schedules": {"0 15 * * 0-5": "nightly", "0 15 * * 6": "weekly",
                                 "0 3 1 * *": "release"}},
    }
    data.update(overrides)
    return validate_config(data)


def make_project(config: Config | None = None, root: Path | None = None) -> Project:
    return Project(root=root or Path("/nonexistent-repo"), config_path=Path("testfleet.toml"),
                   config=config or make_config(), raw_config_text="")


def reg(file: str, suite: str, est: float = 100, *, backend: str | None = None,
        labels: tuple[str, ...] = (), nightly: bool = False, disabled: str | None = None) -> Registration:
    backend = backend or {"stage-a-cpu": "cpu", "stage-b-cpu": "cpu", "gpu-h200": "cuda",
                          "gpu-h100": "cuda", "gpu-mi300x": "rocm"}[suite]
    return Registration(file=file, backend=backend, suite=suite, est_time=est, labels=labels,
                        nightly=nightly, disabled=disabled)


def sample_registrations() -> list[Registration]:
    return [
        reg("tests/fast/test_a.py", "stage-a-cpu", 5),
        reg("tests/fast/test_b.py", "stage-a-cpu", 7),
        reg("tests/fast/test_c.py", "stage-a-cpu", 3),
        reg("tests/unit/test_roll.py", "stage-b-cpu", 20, labels=("rollout",)),
        reg("tests/unit/test_plain.py", "stage-b-cpu", 30),
        reg("tests/unit/test_long.py", "stage-b-cpu", 60, labels=("long",), nightly=True),
        reg("tests/e2e/test_meg.py", "gpu-h200", 1600, labels=("megatron",)),
        reg("tests/e2e/test_fsdp.py", "gpu-h200", 600, labels=("fsdp",)),
        reg("tests/e2e/test_meg_long.py", "gpu-h200", 3000, labels=("megatron", "long")),
        reg("tests/e2e/test_soak.py", "gpu-h100", 5400, labels=("ft-long",), nightly=True),
        reg("tests/e2e/test_ft.py", "gpu-h100", 900, labels=("ft-short",)),
        reg("tests/e2e/test_meg.py", "gpu-mi300x", 1800, labels=("megatron", "amd")),
        reg("tests/e2e/amd/test_smoke.py", "gpu-mi300x", 300, labels=("amd",)),
        reg("tests/e2e/amd/test_broken.py", "gpu-mi300x", 300, labels=("amd",),
            disabled="crashes in hipBLASLt, see #2235"),
    ]


@pytest.fixture
def config() -> Config:
    return make_config()


@pytest.fixture
def project() -> Project:
    return make_project()


@pytest.fixture
def registrations() -> list[Registration]:
    return sample_registrations()
