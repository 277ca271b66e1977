"""A 12-stage GPU fleet with history, for the report-truth tests (#26 item 4).

``build(root)`` writes the project (``pyproject.toml`` with ``[project] name``, one or two
test files per stage) and records final verdicts as CI runs 101..107 would have:

- ``stage-c-8-gpu-h100``: ``test_ring_attention.py`` failed all 7 runs (broken);
- ``stage-b-cpu``: ``test_rollout_buffer.py`` passed 6 runs, failed the last (failing);
- ``stage-a-cpu``: ``test_train_curve_loss.py`` passed every run, its metric gate too,
  except the last run, where the enforced gate failed it (its stored baseline history
  says PASS: the gate table must not);
- every other stage passed every run; ``stage-c-4-gpu-mi300x`` is dormant.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc).timestamp()
DAY = 86400.0
RUNS = 7
NAME = "gpu-fleet"

STAGES: dict[str, tuple[str, str]] = {  # stage -> (backend, runner)
    "stage-a-cpu": ("cpu", "ubuntu-latest"),
    "stage-b-cpu": ("cpu", "ubuntu-latest"),
    "stage-c-1-gpu-h200": ("cuda", "h200-1gpu"),
    "stage-c-2-gpu-h200": ("cuda", "h200-2gpu"),
    "stage-c-4-gpu-h200": ("cuda", "h200-4gpu"),
    "stage-c-8-gpu-h200": ("cuda", "h200-8gpu"),
    "stage-c-4-gpu-h100": ("cuda", "h100-4gpu"),
    "stage-c-8-gpu-h100": ("cuda", "h100-8gpu"),
    "stage-c-8-gpu-b200": ("cuda", "b200-8gpu"),
    "stage-c-4-gpu-mi300x": ("rocm", "mi300x-4gpu"),
    "stage-c-8-gpu-mi325x": ("rocm", "mi325x-8gpu"),
    "stage-d-8-gpu-h200-long-soak": ("cuda", "h200-8gpu"),
}
BROKEN = ("stage-c-8-gpu-h100", "tests/e2e/test_ring_attention.py")
FAILING = ("stage-b-cpu", "tests/unit/test_rollout_buffer.py")
GATED = ("stage-a-cpu", "tests/unit/test_train_curve_loss.py")
DORMANT = "stage-c-4-gpu-mi300x"
MARKER = {"cpu": "register_cpu_ci", "cuda": "register_cuda_ci", "rocm": "register_rocm_ci"}


def files() -> dict[str, tuple[str, str]]:
    """file -> (stage, backend)."""
    out: dict[str, tuple[str, str]] = {}
    for stage, (backend, _) in STAGES.items():
        short = stage.replace("stage-", "").replace("-", "_")
        out[f"tests/e2e/test_{short}_smoke.py"] = (stage, backend)
    out[BROKEN[1]] = (BROKEN[0], "cuda")
    out[FAILING[1]] = (FAILING[0], "cpu")
    out[GATED[1]] = (GATED[0], "cpu")
    return out


def write_project(root: Path, name: str | None = NAME) -> None:
    lines = []
    if name is not None:
        lines += ["[project]", f"name = {json.dumps(name)}", 'version = "1.0"', ""]
    lines += ["[tool.testfleet]", 'roots = ["tests"]', "",
              "[tool.testfleet.labels]", 'megatron = "Megatron-LM"', "",
              "[tool.testfleet.results]", 'github_repository = "octo/gpu-fleet"', ""]
    for stage, (backend, runner) in STAGES.items():
        lines += [f"[tool.testfleet.stages.{stage}]", f'backend = "{backend}"',
                  f'runs_on = ["self-hosted", "{runner}"]']
        if stage == DORMANT:
            lines.append('disabled = "MI300X runners fail at start-up, see #2230"')
        lines.append("")
    (root / "pyproject.toml").write_text("\n".join(lines), encoding="utf-8")
    for file, (stage, backend) in files().items():
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        labels = ', labels=["megatron"]' if backend != "cpu" else ""
        gate = ('from testfleet import register_ci_gate\nregister_ci_gate(metric_key="train/loss", '
                'steps="last", constraint={"rel_up": 0.1, "rel_down": 0.5})\n'
                if (stage, file) == GATED else "")
        path.write_text(f"from testfleet import {MARKER[backend]}\n"
                        f'{MARKER[backend]}(est_time=60, suite="{stage}"{labels})\n{gate}',
                        encoding="utf-8")


def seed(root: Path) -> None:
    from testfleet.config import load_project
    from testfleet.store import open_store
    from testfleet.store.durations import Execution
    from testfleet.store.metric_store import MetricStore
    from testfleet.store.metrics import GateRun, StoredValue

    project = load_project(root)
    rows = []
    for i in range(RUNS):
        run, ts = str(101 + i), T0 + DAY * i
        last = i == RUNS - 1
        for file, (stage, backend) in files().items():
            if stage == DORMANT:
                continue
            outcome, gate, mode, reason = "PASSED", None, None, "exit status 0"
            if (stage, file) == BROKEN:
                outcome, reason = "FAILED", "exit status 1: NCCL timeout in ring all-reduce"
            elif (stage, file) == FAILING and last:
                outcome, reason = "FAILED", "exit status 1: AssertionError: buffer size"
            elif (stage, file) == GATED:
                gate, mode = "PASS", "enforced"
                if last:
                    outcome, gate = "FAILED", "FAIL"
                    reason = ("metric gate failed: FAIL train/loss[last] (enforced) at step 39: "
                              "value 0.0596, reference 0.0096 (mean of 6)")
            rows.append(Execution(file, stage, backend, 30.0, outcome, commit=f"{i:x}" * 40,
                                  ci_run_id=run, timestamp=ts + 60, gate_status=gate,
                                  gate_mode=mode, reason=reason))
    ckey = json.dumps({"rel_down": 0.5, "rel_up": 0.1}, sort_keys=True, separators=(",", ":"))
    with open_store(project) as store:
        store.record_executions(rows)
        ms = MetricStore(store)
        for i in range(RUNS - 1):  # the failing run was not a baseline run: nothing stored
            ms.write_run(GateRun(f"run-{i}", GATED[1], "cpu", GATED[0], ci_run_id=str(101 + i),
                                 recorded_at=T0 + DAY * i + 30),
                         [StoredValue("train/loss", '"last"', ckey, -1, 0.0096, 39)],
                         trusted=True)


def build(root: Path, name: str | None = NAME) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_project(root, name)
    seed(root)
    return root
