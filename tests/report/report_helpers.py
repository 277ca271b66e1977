"""Builders shared by the report tests (plain functions, no fixtures needed)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from testfleet.config import Config, validate_config
from testfleet.registry.model import Registration

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.timezone.utc)
LOSS = "tests/unit/test_train_curve_loss.py"
H200 = "tests/e2e/megatron/test_qwen3_8B_dense.py"  # est_time=1100 on stage-c-4-gpu-h200
T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc).timestamp()


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


def seed_history(project_root: Path) -> None:
    """Durations 3x the literal for one H200 file; seven gated runs of the loss curve,
    one rejected by the gate (0.45) and one marked untrusted afterwards."""
    import json

    from testfleet.config import load_project
    from testfleet.store import open_store
    from testfleet.store.durations import Execution
    from testfleet.store.metric_store import MetricStore
    from testfleet.store.metrics import GateRun, StoredValue

    project = load_project(project_root)
    with open_store(project) as store:
        store.record_executions([
            Execution(H200, "stage-c-4-gpu-h200", "cuda", 3300.0 + i, timestamp=T0 + i)
            for i in range(4)])
        ms = MetricStore(store)
        steps_key, ckey = '"last"', json.dumps(
            {"abs_floor_down": 0.001, "abs_floor_up": 0.001, "rel_down": 0.5, "rel_up": 0.1},
            sort_keys=True, separators=(",", ":"))
        values = [0.30, 0.31, 0.29, 0.30, 0.45, 0.30, 0.305]
        for i, v in enumerate(values):
            run = GateRun(f"run-{i}", LOSS, "cpu", "stage-b-cpu", ci_run_id=f"ci-{i}",
                          recorded_at=T0 + 86400 * i)
            ms.write_run(run, [StoredValue("train/loss", steps_key, ckey, -1, v, 39)],
                         trusted=i != 4)
        ms.mark_untrusted(run_id="run-6")
