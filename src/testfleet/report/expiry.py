"""Expiry dates named in a disabled reason: ``until 2026-09-01``.

A reason that says when it stops being true can be checked: after that day the
ledger marks it expired and ``testfleet check`` reports it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_UNTIL = re.compile(
    r"\b(?:until|till|expires?(?:\s+on)?|expiry:?)\s+(?P<date>\d{4}-\d{1,2}-\d{1,2})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Expiry:
    """The parsed date, or the text that looked like one but is not a real date."""

    text: str
    date: dt.date | None
    error: str | None = None

    def expired(self, today: dt.date) -> bool:
        return self.date is not None and today > self.date

    def days_left(self, today: dt.date) -> int | None:
        return None if self.date is None else (self.date - today).days


def parse_expiry(reason: str | None) -> Expiry | None:
    """The first ``until YYYY-MM-DD`` in ``reason``; ``None`` when there is none.

    An impossible date (``until 2026-02-30``) is returned with ``error`` set, so the
    ledger and ``check`` can say so instead of silently ignoring it.
    """
    if not reason:
        return None
    m = _UNTIL.search(reason)
    if m is None:
        return None
    raw = m.group("date")
    try:
        year, month, day = (int(p) for p in raw.split("-"))
        return Expiry(m.group(0), dt.date(year, month, day))
    except ValueError as exc:
        return Expiry(m.group(0), None, f"{raw!r} is not a valid date ({exc})")
