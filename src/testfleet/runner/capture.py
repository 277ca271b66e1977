"""Bounded output capture: a tail for JUnit and streaming retry-pattern matching.

A test may print 50 MB; the runner streams it through and keeps only the last
``tail_bytes`` plus which retriable/fatal patterns matched anywhere in the output.
Patterns are matched line by line (blocks of complete lines searched with
``MULTILINE``, which is equivalent because no pattern is compiled with DOTALL), so
an ``ImportError`` printed early is not forgotten when the tail scrolls past it.

Matching is bounded in time. The patterns come from the configuration, which a pull
request controls, and matching runs in the runner's main loop: with the standard
``re`` a catastrophic pattern (``^(a|a)*$`` against one line of ``a``s) froze the loop,
so the file's timeout was never enforced, SIGTERM was never handled and the test
outlived a SIGKILLed runner (#27). Patterns are compiled by the ``regex`` package
(``re``'s syntax, version 0) and each search may take at most :data:`SEARCH_TIMEOUT`;
a pattern that exceeds it, or spends :data:`PATTERN_BUDGET` in all, is dropped for
the rest of the job with a warning, and counts as not matched. So the loop never waits
on matching for more than a fraction of a second per pattern, once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_LINE = 64 * 1024  # a longer "line" is matched in pieces of this size
#: The longest one search of one block of output may take (seconds).
SEARCH_TIMEOUT = 0.25
#: The most one pattern may spend matching in one job, all searches together (seconds).
PATTERN_BUDGET = 2.0


class BoundedPattern:
    """One retriable or fatal pattern, searched within a time bound."""

    def __init__(self, source: str, compiled: Any) -> None:
        self.pattern = source
        self._compiled = compiled
        self.spent = 0.0
        self.dropped: str | None = None  # why it is no longer searched
        self._told = False

    def search(self, text: str) -> bool:
        """Whether the pattern matches in ``text``; False once it was dropped."""
        if self.dropped is not None:
            return False
        start = time.monotonic()
        try:
            found = self._compiled.search(
                text, timeout=min(SEARCH_TIMEOUT, max(PATTERN_BUDGET - self.spent, 0.01))
            ) is not None
        except TimeoutError:
            found = False
            self.dropped = (f"one search took more than {SEARCH_TIMEOUT:g} s (catastrophic "
                            "backtracking?)")
        self.spent += time.monotonic() - start
        if self.dropped is None and self.spent >= PATTERN_BUDGET:
            self.dropped = f"matching took {self.spent:.1f} s in all"
        return found

    def note(self) -> str | None:
        """The warning about this pattern being dropped, once."""
        if self.dropped is None or self._told:
            return None
        self._told = True
        from testfleet.textsafe import printable

        return (f"runner pattern {printable(self.pattern)!r} is no longer matched in this job: "
                f"{self.dropped}; it counts as not matched (simplify it)")


def compile_patterns(patterns: Sequence[str]) -> tuple[BoundedPattern, ...]:
    """The configured patterns, compiled for bounded matching; a pattern the matcher
    cannot compile is a :class:`~testfleet.errors.UsageError` naming it."""
    if not patterns:
        return ()
    import regex

    from testfleet.errors import UsageError

    out = []
    for p in patterns:
        try:
            out.append(BoundedPattern(p, regex.compile(p, regex.MULTILINE | regex.VERSION0)))
        except regex.error as exc:
            raise UsageError(f"runner pattern {p!r}: not a usable regular expression: {exc}") from None
    return tuple(out)


def dropped_notes(patterns: Sequence[BoundedPattern]) -> list[str]:
    """Warnings, once each, about patterns dropped since the last call."""
    return [n for n in (p.note() for p in patterns) if n is not None]


@dataclass
class OutputCapture:
    """Feed raw bytes; read ``tail``, ``fatal`` and ``retriable`` afterwards."""

    retriable_patterns: tuple[BoundedPattern, ...] = ()
    fatal_patterns: tuple[BoundedPattern, ...] = ()
    tail_bytes: int = 64 * 1024
    total_bytes: int = 0
    fatal: list[str] = field(default_factory=list)
    retriable: list[str] = field(default_factory=list)
    _tail: bytearray = field(default_factory=bytearray)
    _pending: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self._tail += data
        if len(self._tail) > 2 * self.tail_bytes:
            del self._tail[: len(self._tail) - self.tail_bytes]
        if not self._open_patterns():
            return
        self._pending += data
        cut = self._pending.rfind(b"\n")
        if cut >= 0:
            block = bytes(self._pending[: cut + 1])
            del self._pending[: cut + 1]
            self._match(block)
        if len(self._pending) > MAX_LINE:
            self._match(bytes(self._pending))
            self._pending.clear()

    def close(self) -> None:
        """Match what is left after the last newline."""
        if self._pending:
            self._match(bytes(self._pending))
            self._pending.clear()

    @property
    def tail(self) -> str:
        raw = bytes(self._tail[-self.tail_bytes :])
        text = raw.decode("utf-8", errors="replace")
        if self.total_bytes > len(raw):
            skipped = self.total_bytes - len(raw)
            text = f"[... {skipped} earlier bytes of output not kept ...]\n" + text
        return text

    def _open_patterns(self) -> bool:
        return len(self.fatal) < len(self.fatal_patterns) or len(self.retriable) < len(
            self.retriable_patterns
        )

    def _match(self, block: bytes) -> None:
        text = block.decode("utf-8", errors="replace")
        for found, patterns in ((self.fatal, self.fatal_patterns), (self.retriable, self.retriable_patterns)):
            for pattern in patterns:
                if pattern.pattern not in found and pattern.search(text):
                    found.append(pattern.pattern)
