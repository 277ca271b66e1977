"""Schedules are written into the workflow's ``on.schedule``: a cron that GitHub would
reject (or that never fires) must fail ``check``, with its key path."""

from __future__ import annotations

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError


def _config(schedules: dict[str, str]) -> dict[str, object]:
    return {"policy": {"schedules": schedules}}


@pytest.mark.parametrize("cron", ["0 15 * * 0-5", "*/30 2 * * 6", "5 4 1,15 * *", "0 0 * JAN MON"])
def test_valid_crons_pass(cron: str) -> None:
    config = validate_config(_config({cron: "nightly"}))
    assert cron in config.policy.schedules


@pytest.mark.parametrize(
    ("cron", "fragment"),
    [
        ("99 15 * * 6", "Bad minute"),
        ("0 24 * * *", "Bad hour"),
        ("0 0 31 2 *", "Bad day-of-month"),
        ("0 0 * 13 *", "Bad month"),
        ("0 0 * * 9", "Bad day-of-week"),
        ("@daily", "5-field"),
        ("0 15 * *", "5-field"),
    ],
)
def test_invalid_crons_name_the_schedule(cron: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(_config({cron: "nightly"}))
    text = "\n".join(f.message + " " + (f.key or "") for f in info.value.findings)
    assert repr(cron) in text
    assert fragment in text
    assert "policy" in text
