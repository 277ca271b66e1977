"""Whether a failed attempt deserves another: pure, so every rule has a unit test.

Rules, in order: a timeout is never retried (the next attempt would most likely time out
too and double the job's wall time); a fatal pattern (a broken import, a syntax error,
out of memory, ...) is never retried and wins over any retriable match; otherwise only
a failure whose output matches a retriable pattern (a noisy accuracy/latency assertion,
a flaky connection) is retried, and only while attempts remain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from testfleet.runner.model import Outcome


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    reason: str


def decide(
    outcome: Outcome,
    *,
    fatal: Sequence[str],
    retriable: Sequence[str],
    attempt: int,
    max_attempts: int,
) -> RetryDecision:
    """Decide for one finished attempt; ``outcome`` is that attempt's outcome."""
    if outcome.ok:
        return RetryDecision(False, "")
    if outcome is Outcome.TIMEOUT:
        return RetryDecision(False, "timeouts are not retried")
    if outcome is not Outcome.FAILED:
        return RetryDecision(False, f"{outcome.value} is not retried")
    if fatal:
        return RetryDecision(False, f"fatal pattern matched: {fatal[0]}")
    if not retriable:
        return RetryDecision(False, "no retriable pattern matched")
    if attempt >= max_attempts:
        return RetryDecision(False, f"retriable ({retriable[0]}) but no attempts left ({attempt}/{max_attempts})")
    return RetryDecision(True, f"retriable pattern matched: {retriable[0]}")
