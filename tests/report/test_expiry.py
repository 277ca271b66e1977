"""``until YYYY-MM-DD`` in disabled reasons."""

from __future__ import annotations

import datetime as dt

from testfleet.report.expiry import parse_expiry


def test_until_date_is_parsed_and_expires_after_the_day() -> None:
    e = parse_expiry("Disk stream offload slow on MI300X runner disks until 2026-09-01")
    assert e is not None and e.date == dt.date(2026, 9, 1) and e.error is None
    assert not e.expired(dt.date(2026, 9, 1))
    assert e.expired(dt.date(2026, 9, 2))
    assert e.days_left(dt.date(2026, 8, 30)) == 2
    assert e.days_left(dt.date(2026, 9, 3)) == -2


def test_other_spellings_and_case() -> None:
    for reason in ("UNTIL 2027-1-5", "expires 2027-01-05", "expires on 2027-01-05", "expiry: 2027-01-05",
                   "till 2027-01-05"):
        e = parse_expiry(reason)
        assert e is not None and e.date == dt.date(2027, 1, 5), reason


def test_no_expiry() -> None:
    assert parse_expiry(None) is None
    assert parse_expiry("see #12") is None
    assert parse_expiry("since 2026-01-01") is None


def test_impossible_date_is_reported_not_dropped() -> None:
    e = parse_expiry("until 2026-02-30")
    assert e is not None and e.date is None and "2026-02-30" in (e.error or "")
    assert not e.expired(dt.date(2030, 1, 1))
