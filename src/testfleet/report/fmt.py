"""Small formatting helpers shared by the renderers (durations, ages, plurals)."""

from __future__ import annotations

import math

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
    """``measured / est_time`` in one notation for every row, so a reader compares like with
    like: decimal with two significant digits and U+00D7 (``0.0030x``, ``0.11x``, ``2.2x``),
    whole from 10 up (``338x``); never ``1/338x`` beside ``0.02x``, never ``0.00x``."""
    if not math.isfinite(value) or value <= 0:
        return "0\u00d7" if value == 0 else f"{value}\u00d7"
    if value >= 9.95:
        return f"{value:.0f}\u00d7"
    rounded = float(f"{value:.2g}")
    decimals = max(0, 1 - math.floor(math.log10(rounded)))
    return f"{rounded:.{decimals}f}\u00d7"


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
        "runner-broken": "runner class broken (breaker open)",
    }.get(c, c)


def lost(n: int) -> str:
    """What a hole costs: ``1 registration that would run is held back``."""
    return f"{plural(n, 'registration')} that would run {'is' if n == 1 else 'are'} held back"


PATH_COLUMN = 44


def path_width(paths: list[str], limit: int = PATH_COLUMN) -> int:
    """A terminal column width for these paths: the longest path up to ``limit``, but never
    narrower than the longest single name (a name is never split)."""
    longest_name = max((len(part) + 1 for p in paths for part in p.split("/")), default=1)
    return max(longest_name, min(max((len(p) for p in paths), default=1), limit))


def path_lines(path: str, width: int) -> str:
    """``path`` wrapped to ``width`` only after a ``/`` (a terminal table would otherwise
    cut ``test_qwen3_4B_offl|oad``); a name longer than ``width`` keeps a line of its own."""
    lines: list[str] = []
    line = ""
    parts = path.split("/")
    for i, part in enumerate(parts):
        piece = part + ("/" if i < len(parts) - 1 else "")
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    return "\n".join(lines)
