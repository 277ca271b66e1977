"""Grouping and classification: one cause per run is one incident; infrastructure by
start-up pattern or by spread over one stage, never for a test's own verdict."""

from __future__ import annotations

from testfleet.failures.signature import make
from testfleet.incidents.group import Failure, classify, group, run_key

INFRA = make("infra", "what(): HIP error: hipErrorNoDevice", "hipErrorNoDevice")
NCCLISH = make("exception", "RuntimeError: connection to the store timed out", "RuntimeError")
ASSERT = make("exception", "AssertionError: assert <n> >= <n>", "AssertionError")
KEY = make("exception", "KeyError: 'max_new_tokens'", "KeyError")
SIGS = {s.digest: s for s in (INFRA, NCCLISH, ASSERT, KEY)}


def f(run: str, lane: str, file: str, sig: str, test: str = "", backend: str = "rocm") -> Failure:
    return Failure(run, lane, backend, file, sig, test=test, ts=float(run[-1]))


def test_eight_files_one_cause_is_one_infrastructure_incident() -> None:
    failures = [f("r1", "mi300x", f"t{i}.py", INFRA.digest) for i in range(8)]
    (incident,) = group(failures, SIGS, {("r1", "mi300x"): 8})
    assert incident.infrastructure and len(incident.files) == 8
    assert incident.why == "matches a rocm start-up pattern (hipErrorNoDevice)"
    assert [(s.lane, s.files, s.ran, s.whole) for s in incident.whole_lanes] == [("mi300x", 8, 8, True)]


def test_one_cause_in_two_runs_is_two_incidents_newest_first() -> None:
    failures = [f(run, "mi300x", "t.py", INFRA.digest) for run in ("r1", "r2")]
    assert [i.run for i in group(failures, SIGS, {})] == ["r2", "r1"]


def test_spread_over_one_stage_is_infrastructure_without_a_pattern() -> None:
    every = [f("r1", "h200", f"t{i}.py", NCCLISH.digest, backend="cuda") for i in range(2)]
    (incident,) = group(every, SIGS, {("r1", "h200"): 2})
    assert incident.infrastructure and "all 2 files of h200 that ran" in incident.why
    most = [f("r1", "h200", f"t{i}.py", NCCLISH.digest, backend="cuda") for i in range(3)]
    (incident,) = group(most, SIGS, {("r1", "h200"): 6})
    assert incident.infrastructure and "3 of the 6 files" in incident.why
    few = [f("r1", "h200", f"t{i}.py", NCCLISH.digest, backend="cuda") for i in range(3)]
    (incident,) = group(few, SIGS, {("r1", "h200"): 10})
    assert not incident.infrastructure


def test_the_same_failure_on_two_stages_is_the_code_not_a_runner() -> None:
    failures = [f("r1", "h200", "a.py", NCCLISH.digest), f("r1", "h200", "b.py", NCCLISH.digest),
                f("r1", "mi300x", "a.py", NCCLISH.digest)]
    (incident,) = group(failures, SIGS, {("r1", "h200"): 2, ("r1", "mi300x"): 1})
    assert not incident.infrastructure and "several stages" in incident.why


def test_assertions_spread_over_a_stage_stay_test_incidents() -> None:
    failures = [f("r1", "mi300x", f"t{i}.py", ASSERT.digest) for i in range(8)]
    (incident,) = group(failures, SIGS, {("r1", "mi300x"): 8})
    assert incident.category == "test" and "a test's verdict or broken code" in incident.why


def test_two_real_failures_are_two_test_incidents_and_tests_are_counted() -> None:
    failures = [f("r4", "cpu", "a.py", ASSERT.digest, test="test_acc"),
                f("r4", "cpu", "a.py", ASSERT.digest, test="test_acc2"),
                f("r4", "cpu", "b.py", KEY.digest)]
    incidents = group(failures, SIGS, {("r4", "cpu"): 12})
    assert sorted((i.category, i.signature.label, len(i.files), len(i.tests)) for i in incidents) == [
        ("test", "AssertionError", 1, 2), ("test", "KeyError", 1, 0)]


def test_classification_of_a_pattern_needs_no_spread() -> None:
    from testfleet.incidents.group import LaneShare

    assert classify(INFRA, [LaneShare("mi300x", "rocm", 1, 40)])[0] == "infrastructure"


def test_run_key() -> None:
    assert run_key("77", "abc") == "77" and run_key(None, "abc") == "commit:abc"
    assert run_key(None, None) == "local"
