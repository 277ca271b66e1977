"""The one canonical JSON spelling (sorted keys, no spaces, UTF-8, no NaN).

Plan digests, bundle checksums and the gate's stored identities are all computed over
it: two spellings would let the same content hash two ways, so there is one.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")
