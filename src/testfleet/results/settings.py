"""From the project's config to the pure functions' inputs."""

from __future__ import annotations

from typing import Any

from testfleet.results.flaky import FlakyPolicy


def flaky_policy(config: Any) -> FlakyPolicy:
    f = config.flaky
    return FlakyPolicy(window=f.window, threshold=f.threshold, min_runs=f.min_runs,
                       quarantine=f.quarantine, restore_after=f.restore_after)
