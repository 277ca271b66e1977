"""A CPU training run whose gradient norm is gated at every step, with config defaults.

``register_ci_gate(metric_key="train/grad_norm")`` omits ``steps`` and ``constraint``:
both come from ``[tool.testfleet.gate.defaults."train/grad_norm"]`` in pyproject.toml.
``FLEET_DRIFT`` scales the norms; the gate then names the first step out of band.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `python FILE`: find fleetlib

from fleetlib import train  # noqa: E402

from testfleet import metrics, register_ci_gate, register_cpu_ci  # noqa: E402

register_cpu_ci(est_time=10, suite="stage-b-cpu", labels=["metrics"])
register_ci_gate(metric_key="train/grad_norm", hard_max=100.0)


def main():
    drift = float(os.environ.get("FLEET_DRIFT", "0"))
    points = train.run(30, lr=0.1, drift=drift)
    for step, _loss, grad in points:
        metrics.log("train/grad_norm", grad, step=step)
    assert all(g >= 0 for _s, _l, g in points)
    print(f"grad norm {points[0][2]:.4f} -> {points[-1][2]:.6f} (drift {drift})")


if __name__ == "__main__":
    main()
