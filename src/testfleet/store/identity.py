"""Stable identities of history records, so that copying a record twice stores it once.

Every execution and gate run row carries a ``uid`` (32 lower-case hex digits), fixed
when the row is first written and carried as-is by history bundles, never recomputed:
merging a bundle whose records are already stored adds nothing. A new row gets a
random uid (:func:`new_uid`): two executions that look the same (a batch recorded
with one "now" timestamp) are still two observations.

Rows written before schema step 4 get their uid from their content (the first 128
bits of the SHA-256 of the canonical JSON of the fields that make the row what it
is) so that two copies of one old database -- a history restored from the same
cache on two runners -- agree on every uid. Identical old rows are told apart by
their order of insertion (``seq``).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

UID_LENGTH = 32
UID_PATTERN = re.compile(r"^[0-9a-f]{32}$")


def new_uid() -> str:
    """The identity of a row written now."""
    return uuid.uuid4().hex


def _digest(parts: list[Any]) -> str:
    text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:UID_LENGTH]


def execution_uid(*, file: str, stage: str, backend: str, attempt: int, commit: str | None,
                  ci_run_id: str | None, ts: float, duration: float, outcome: str,
                  seq: int = 0) -> str:
    """Identity of an execution row written before step 4 (``seq``: see above)."""
    parts: list[Any] = ["execution", file, stage, backend, int(attempt), commit, ci_run_id,
                        float(ts), float(duration), outcome]
    return _digest([*parts, seq] if seq else parts)


def gate_run_uid(*, run_id: str, test_path: str, backend: str, suite: str, env_key: str,
                 ci_run_id: str | None, commit: str | None, recorded_at: float, seq: int = 0) -> str:
    """Identity of a gate run row (one gated file in one run) written before step 4."""
    parts: list[Any] = ["gate_run", run_id, test_path, backend, suite, env_key, ci_run_id,
                        commit, float(recorded_at)]
    return _digest([*parts, seq] if seq else parts)
