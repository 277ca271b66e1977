"""Bounded output capture: a tail for JUnit and streaming retry-pattern matching.

A test may print 50 MB; the runner streams it through and keeps only the last
``tail_bytes`` plus which retriable/fatal patterns matched anywhere in the output.
Patterns are matched line by line (blocks of complete lines searched with
``re.MULTILINE``, which is equivalent because no pattern is compiled with DOTALL), so
an ``ImportError`` printed early is not forgotten when the tail scrolls past it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_LINE = 64 * 1024  # a longer "line" is matched in pieces of this size


def compile_patterns(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.MULTILINE) for p in patterns)


@dataclass
class OutputCapture:
    """Feed raw bytes; read ``tail``, ``fatal`` and ``retriable`` afterwards."""

    retriable_patterns: tuple[re.Pattern[str], ...] = ()
    fatal_patterns: tuple[re.Pattern[str], ...] = ()
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
