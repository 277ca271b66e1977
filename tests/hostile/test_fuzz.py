"""Property-based fuzzing of the parsers that read untrusted input (issue #17): the
configuration, the plan file, the GitHub event payload and metric record lines. Each
either accepts its input or refuses it with testfleet's own error, never another
exception. Bounded: every property runs at most 60 examples, the file in a few seconds."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testfleet import errors
from testfleet.errors import ConfigError, UsageError

BOUNDED = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=20), st.sampled_from(["!", "\ud800", "a=b", "", "\x00"]))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=20)
KEYS = st.sampled_from(["roots", "pattern", "exclude", "cache_dir", "stages", "labels",
                        "implicit", "policy", "runner", "gate", "durations", "backends"])
STAGE = st.fixed_dictionaries({"backend": st.sampled_from(["cpu", "cuda", "x"])}, optional={
    "runs_on": JSONISH, "container": JSONISH, "env": JSONISH, "shards": JSONISH,
    "trusted_only": JSONISH, "disabled": JSONISH, "needs": JSONISH})


@BOUNDED
@given(st.dictionaries(KEYS, JSONISH, max_size=5), st.dictionaries(st.text(max_size=8), STAGE,
                                                                    max_size=3))
def test_config_validation_refuses_cleanly(data: dict[str, Any],
                                           stages: dict[str, Any]) -> None:
    from testfleet.config import validate_config

    data = {**data, "stages": stages} if stages else data
    with contextlib.suppress(ConfigError):
        validate_config(data)


@BOUNDED
@given(st.text(max_size=300))
def test_config_text_refuses_cleanly(text: str) -> None:
    from testfleet.config import config_from_text

    with contextlib.suppress(ConfigError):
        config_from_text(text, "testfleet.toml")


@BOUNDED
@given(JSONISH)
def test_plan_documents_refuse_cleanly(data: Any) -> None:
    from testfleet.planning.model import Plan

    doc = {"schema": "testfleet.plan/1", "digest": "x", "policy": data} \
        if isinstance(data, dict) else data
    with contextlib.suppress(UsageError):
        Plan.from_json(doc)


@BOUNDED
@given(st.sampled_from(["pull_request", "pull_request_target", "push", "schedule",
                        "workflow_dispatch", "release"]), JSONISH)
def test_payloads_refuse_cleanly(event: str, payload: Any) -> None:
    from testfleet.integrations.github_event import trigger_from_payload

    if isinstance(payload, dict) and event.startswith("pull_request"):
        payload = {"pull_request": payload}
    with contextlib.suppress(UsageError):
        trigger_from_payload(event, payload, "payload")


@BOUNDED
@given(JSONISH)
def test_record_lines_never_raise_anything_else(data: Any) -> None:
    from testfleet.gate.records import RecordSet, _read_lines

    line = json.dumps({"metric": "m", "series": data} if isinstance(data, list) else data)
    out = RecordSet()
    _read_lines(out, "r.jsonl", line.encode("utf-8", "surrogatepass") + b"\n")


def test_errors_are_testfleet_errors() -> None:
    assert issubclass(UsageError, errors.TestfleetError)
    assert issubclass(ConfigError, errors.TestfleetError)
