"""Queue mode's pure decisions (#40)."""

from __future__ import annotations

import pytest

from testfleet.queue import policy


def test_queue_order_is_longest_first_then_by_path_and_deduplicated() -> None:
    files = [("b.py", 5.0), ("a.py", 5.0), ("c.py", 50.0), ("d.py", 0.0), ("b.py", 5.0)]
    assert policy.queue_order(files) == [("c.py", 50.0), ("a.py", 5.0), ("b.py", 5.0),
                                         ("d.py", 0.0)]


def test_heartbeat_every_third_of_the_lease() -> None:
    assert policy.heartbeat_interval(120) == 40


def test_an_expired_lease_requeues_until_the_file_lost_too_many_runners() -> None:
    assert policy.after_expiry(0) == "requeue"
    assert policy.after_expiry(policy.MAX_LOST_LEASES - 2) == "requeue"
    assert policy.after_expiry(policy.MAX_LOST_LEASES - 1) == "give-up"
    assert "3 times" in policy.give_up_reason(3)


@pytest.mark.parametrize(("outcome", "infra", "used", "allowed", "want"), [
    ("FAILED", True, 0, 1, "retry-elsewhere"),
    ("ERROR", True, 0, 1, "retry-elsewhere"),
    ("TIMEOUT", True, 0, 2, "retry-elsewhere"),
    ("FAILED", True, 1, 1, "final"),  # retried once already
    ("FAILED", False, 0, 1, "final"),  # a test failure is never retried elsewhere
    ("FAILED", True, 0, 0, "final"),  # turned off
    ("PASSED", True, 0, 1, "final"),
    ("FLAKY", False, 0, 1, "final"),
])
def test_only_infrastructure_failures_go_to_another_runner(outcome: str, infra: bool, used: int,
                                                           allowed: int, want: str) -> None:
    assert policy.after_outcome(outcome, infrastructure=infra, retries_used=used,
                                retries_allowed=allowed) == want


@pytest.mark.parametrize(("kw", "want"), [
    ({"claimed": True, "pending": 3, "avoided": 0, "others_live": 0, "claimed_total": 1,
      "stopped": False}, "run"),
    ({"claimed": False, "pending": 0, "avoided": 0, "others_live": 0, "claimed_total": 0,
      "stopped": False}, "done"),
    ({"claimed": False, "pending": 0, "avoided": 0, "others_live": 2, "claimed_total": 2,
      "stopped": False}, "wait"),  # a runner that holds a file may die: stay for it
    ({"claimed": False, "pending": 1, "avoided": 1, "others_live": 1, "claimed_total": 1,
      "stopped": False}, "wait"),  # another runner may take the infra retry
    ({"claimed": False, "pending": 1, "avoided": 1, "others_live": 0, "claimed_total": 0,
      "stopped": False}, "take-avoided"),  # nobody else: run it here rather than never
    ({"claimed": False, "pending": 4, "avoided": 0, "others_live": 0, "claimed_total": 0,
      "stopped": True}, "stopped"),
])
def test_next_step(kw: dict[str, object], want: str) -> None:
    assert policy.next_step(**kw) == want  # type: ignore[arg-type]

