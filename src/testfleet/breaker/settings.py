"""Which lanes opted in to a breaker, and with which counts: a stage's or variant's
``breaker = true`` (or a table overriding ``[tool.testfleet.breaker]``'s keys); a
variant inherits its stage's unless it says otherwise. Pure: configuration in, values out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testfleet.config import Config


@dataclass(frozen=True)
class BreakerSettings:
    """One opted-in lane's counts (default-branch runs in a row) and its age limit."""

    open_after: int
    close_after: int
    max_open_days: float


def _own(value: Any, base: BreakerSettings) -> BreakerSettings | None:
    """A ``breaker`` key's value over ``base``: None when it opts out."""
    if value is None or value is False:
        return None
    if value is True:
        return base
    return BreakerSettings(
        open_after=value.open_after if value.open_after is not None else base.open_after,
        close_after=value.close_after if value.close_after is not None else base.close_after,
        max_open_days=(value.max_open_days if value.max_open_days is not None
                       else base.max_open_days))


def lane_settings(config: Config) -> dict[str, BreakerSettings]:
    """Every lane with a breaker, by lane key (``<stage>`` or ``<stage>.<variant>``)."""
    section = config.breaker
    base = BreakerSettings(section.open_after, section.close_after, section.max_open_days)
    out: dict[str, BreakerSettings] = {}
    for name in sorted(config.stages):
        stage = config.stages[name]
        own = _own(stage.breaker, base)
        if not stage.variants:
            if own is not None:
                out[name] = own
            continue
        for variant_name, variant in sorted(stage.variants.items()):
            if variant.breaker is None:
                if own is not None:
                    out[f"{name}.{variant_name}"] = own
                continue
            mine = _own(variant.breaker, own or base)
            if mine is not None:
                out[f"{name}.{variant_name}"] = mine
    return out
