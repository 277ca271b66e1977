"""Gate policy: what a verdict is allowed to change, and which history a run belongs to.

- A gate changes a test's outcome only when its declaration says ``enforce=True``
  AND the global switch is on (``[tool.testfleet.gate] enforce = true`` or
  ``TESTFLEET_GATE_ENFORCE=1``); otherwise it reports.
- Baselines are written only on cadences that write them (the runner passes
  ``write_baseline``); every other run is shadow: evaluated, reported, not stored.
- The run identity is ``(test_path, backend, suite, env_key)``; ``env_key`` is the
  canonical JSON of the configured environment variables (GPU model, image digest,
  ...), so runs on different environments never share a baseline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from testfleet.gate.evaluate import SpecResult
from testfleet.gate.spec import canonical_json

ENFORCE_ENV = "TESTFLEET_GATE_ENFORCE"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, order=True)
class RunIdentity:
    """Whose history a run joins: never shared across tests, stages or environments."""

    test_path: str
    backend: str
    suite: str
    env_key: str = ""


def env_key(env_keys: Sequence[str], environ: Mapping[str, str] | None = None) -> str:
    """Canonical JSON of the configured variables (unset ones as null); "" when none are configured."""
    if not env_keys:
        return ""
    env = os.environ if environ is None else environ
    return canonical_json({name: env.get(name) for name in env_keys})


def enforce_switch(config_enforce: bool, environ: Mapping[str, str] | None = None) -> tuple[bool, str | None]:
    """The global switch and a warning when the variable holds something unrecognised.

    A recognised ``TESTFLEET_GATE_ENFORCE`` value wins over the config, so one CI
    job can turn enforcement on (or off) without editing the project.
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENFORCE_ENV)
    if raw is None:
        return config_enforce, None
    value = raw.strip().lower()
    if value in _TRUE:
        return True, None
    if value in _FALSE:
        return False, None
    return config_enforce, (f"{ENFORCE_ENV}={raw!r} is not one of 1/0/true/false/yes/no/on/off; "
                            f"using the config value enforce = {str(config_enforce).lower()}")


def fails_test(results: Sequence[SpecResult], switch_on: bool) -> bool:
    """True only when the switch is on and an enforced declaration did not pass.

    ERROR counts as not passing: an enforced loss that turned NaN or was never
    logged must not let the test go green.
    """
    if not switch_on:
        return False
    return any(r.spec.enforce and r.status in ("FAIL", "ERROR") for r in results)
