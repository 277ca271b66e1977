"""Queue mode's decisions, pure: no database, no clock of their own.

Claim order is longest first (LPT over a shared queue: the long files start while every
runner is there, the short ones fill the tail). A lease is a claim's promise that its
runner is alive; a runner renews it every third of its length, so two missed heartbeats in
a row still leave it valid, and only a runner that is gone (killed, machine lost, network
cut) lets it expire. What follows an expired lease or a failure is decided here so that
the benchmark replays exactly the decisions the runners make.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

#: Leases a file may lose before it is reported ERROR instead of queued again: a file that
#: takes its machine down every time must not cycle through the whole fleet.
MAX_LOST_LEASES = 3
#: Outcomes that end a file's run as a test failure, never retried on another runner.
FAILING = frozenset({"FAILED", "TIMEOUT", "ERROR"})


def queue_order(files: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """The claim order of a lane's planned files: longest estimate first, then by path (so
    every runner that enqueues computes the same order)."""
    return sorted(dict(files).items(), key=lambda fe: (-fe[1], fe[0]))


def heartbeat_interval(lease_seconds: float) -> float:
    """How often a runner renews its lease: a third of it."""
    return lease_seconds / 3.0


def after_expiry(lost_before: int) -> Literal["requeue", "give-up"]:
    """A lease expired: queue the file again, or, when it has now lost
    ``MAX_LOST_LEASES`` runners, report it ERROR once."""
    return "give-up" if lost_before + 1 >= MAX_LOST_LEASES else "requeue"


def give_up_reason(lost: int) -> str:
    return (f"lost its runner {lost} times (lease expired without a heartbeat each time); "
            "not queued again: look for what takes the machine down")


def after_outcome(outcome: str, *, infrastructure: bool, retries_used: int,
                  retries_allowed: int) -> Literal["final", "retry-elsewhere"]:
    """A failure whose signature is an infrastructure incident's goes back to the queue for
    another runner, ``retries_allowed`` times; anything else is the file's final report. A
    test failure is never retried this way (the runner's own classified retries already
    ran)."""
    if outcome in FAILING and infrastructure and retries_used < retries_allowed:
        return "retry-elsewhere"
    return "final"


def next_step(*, claimed: bool, pending: int, avoided: int, others_live: int,
              claimed_total: int, stopped: bool) -> Literal["run", "take-avoided", "wait",
                                                            "done", "stopped"]:
    """What a runner does after a claim attempt.

    - ``run``: it got a file.
    - ``take-avoided``: only files it must avoid (an infra retry from this runner) are
      left and no other runner holds a live claim that could end and take them: run one
      here rather than leave it unrun.
    - ``wait``: nothing to claim now, but files are claimed by runners that may die (their
      file comes back when the lease expires) or pending files wait for another runner.
    - ``done`` / ``stopped``: every file has its report / the lane failed fast.
    """
    if claimed:
        return "run"
    if stopped:
        return "stopped"
    if pending and pending == avoided and not others_live:
        return "take-avoided"
    if pending or claimed_total:
        return "wait"
    return "done"

