"""A CPU training run whose loss curve is gated against its own trusted history.

Runs as ``python FILE`` (stage-b-cpu). The toy trainer is deterministic, so every
honest run logs the same curve and passes; ``FLEET_DRIFT=0.05`` shifts the curve
the way a subtle regression would, and the gate catches it although the test's own
assertion still passes.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `python FILE`: find fleetlib

from fleetlib import train  # noqa: E402

from testfleet import metrics, register_ci_gate, register_cpu_ci  # noqa: E402

register_cpu_ci(est_time=10, suite="stage-b-cpu", labels=["metrics"])
register_ci_gate(
    metric_key="train/loss",
    steps="last",
    constraint={"rel_up": 0.10, "abs_floor_up": 0.001, "rel_down": 0.50, "abs_floor_down": 0.001},
    hard_max=1.0,
    enforce=True,
    reason="the final loss of the reference recipe must not creep up",
)
register_ci_gate(
    metric_key="train/loss",
    steps=[0, 10, 20, 30],
    constraint={"rel_up": 0.05, "abs_floor_up": 0.002, "rel_down": 0.05, "abs_floor_down": 0.002},
)


def main():
    drift = float(os.environ.get("FLEET_DRIFT", "0"))
    points = train.run(40, lr=0.1, drift=drift)
    for step, loss, _grad in points:
        metrics.log("train/loss", loss, step=step)
    first, last = points[0][1], points[-1][1]
    assert last < first, f"loss did not decrease: {first} -> {last}"
    print(f"loss {first:.4f} -> {last:.4f} over {len(points)} steps (drift {drift})")


if __name__ == "__main__":
    main()
