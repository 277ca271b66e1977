"""Small formatting helpers shared by the renderers (durations, ages, plurals)."""

from __future__ import annotations

from testfleet.report.model import LedgerEntry


def duration(seconds: float) -> str:
    """``95`` -> ``1m35s``; ``5400`` -> ``1h30m``: short enough for a table cell."""
    if seconds < 9.95:
        return f"{seconds:.1f}s".replace(".0s", "s")
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        m, r = divmod(s, 60)
        return f"{m}m{r:02d}s" if r else f"{m}m"
    h, r = divmod(s, 3600)
    m = r // 60
    return f"{h}h{m:02d}m" if m else f"{h}h"


def measured(seconds: float) -> str:
    """Like :func:`duration`, but a sub-second time keeps its digits (``0.04s``, not
    ``0s``): a drift row of a file that runs in 40 ms must show what was measured."""
    if 0 < seconds < 0.995:
        if seconds < 0.001:
            return "<0.001s"
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    return duration(seconds)


def factor(value: float) -> str:
    """``measured / est_time`` as ``2.22x`` (with U+00D7); a tiny one as ``1/125x``, not ``0.00x``."""
    if 0 < value < 0.01:
        return f"1/{1 / value:.0f}\u00d7"
    return f"{value:.2f}\u00d7"


def age(e: LedgerEntry) -> str:
    if e.age_status == "uncommitted":
        return "uncommitted"
    if e.age_days is None:
        return "unknown"
    return f"{'≥' if e.age_lower_bound else ''}{e.age_days}d"


def expiry(e: LedgerEntry) -> str:
    if e.expiry_error:
        return "invalid date"
    if e.expiry is None:
        return "—"
    if e.expired:
        return f"{e.expiry} (expired {-(e.days_left or 0)}d ago)"
    return f"{e.expiry} ({e.days_left}d left)"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def cause(c: str) -> str:
    return {
        "dormant": "stage dormant",
        "all-stages-dormant": "every stage dormant",
        "all-disabled": "every registration disabled",
        "no-registrations": "no registrations",
        "all-invalid": "every registration invalid",
        "nothing-scheduled": "nothing scheduled",
    }.get(c, c)


def lost(n: int) -> str:
    """What a hole costs: ``1 registration that would run is held back``."""
    return f"{plural(n, 'registration')} that would run {'is' if n == 1 else 'are'} held back"
