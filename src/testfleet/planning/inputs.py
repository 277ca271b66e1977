"""What a plan pins about the history it was made from. Pure.

Shard membership depends on the duration estimates and the quarantine, both read from a
history that every shard of a run may grow. Two plans computed from the same config,
registry and trigger are the same plan exactly when they were given the same history,
so the plan records one digest over everything history contributed: every estimate
whose source is ``history`` (the literals follow from the registry) and every
quarantined (stage, file) with its reason. The digest is part of the plan's content, so
the plan's own digest pins it too, and a mismatch can say *why* two plans differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from testfleet.canonical import canonical_bytes

Estimates = Mapping[tuple[str, str], tuple[float, str]]


def _seconds(value: float) -> float:
    f = float(value)
    return f if f.is_integer() else round(f, 3)  # the plan's rounding (model.rounded)


def history_digest(estimates: Estimates | None,
                   quarantine: Mapping[tuple[str, str], str] | None,
                   breakers: Mapping[str, object] | None = None) -> str:
    """``sha256:<hex>`` over the history-derived estimates, the quarantine and the open
    runner-class breakers (#41: each one's lane and ``seq``; none open: the digest is the
    one made before breakers existed)."""
    measured = sorted([file, key, _seconds(seconds)]
                      for (file, key), (seconds, source) in (estimates or {}).items()
                      if source == "history")
    held = sorted([stage, file, why] for (stage, file), why in (quarantine or {}).items())
    doc: dict[str, object] = {"estimates": measured, "quarantine": held}
    opened = sorted([lane, getattr(state, "seq", 0)] for lane, state in (breakers or {}).items()
                    if getattr(state, "open", False))
    if opened:
        doc["breakers"] = opened
    body = canonical_bytes(doc)
    return "sha256:" + hashlib.sha256(body).hexdigest()
