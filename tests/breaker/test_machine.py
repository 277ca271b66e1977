"""The breaker's state machine (#41), pure: opened by the same infrastructure way in
``open_after`` runs in a row, never by a test incident, closed by ``close_after`` clean
probes; each run folded in once; forced by a person with who and why; episodes kept."""

from __future__ import annotations

import json

import pytest

from testfleet.breaker.machine import advance, episodes, force
from testfleet.breaker.model import (
    BreakerState,
    Event,
    LaneOutcome,
    RunRef,
    StateError,
    state_from_json,
)
from testfleet.breaker.settings import BreakerSettings

S = BreakerSettings(open_after=2, close_after=2, max_open_days=7)
LANE = "stage-c-4-gpu-mi300x"


def out(run: str, kind: str, sig: str = "a1", files: int = 8) -> LaneOutcome:
    return LaneOutcome(RunRef(run, f"https://ci/{run}"), float(run), kind,  # type: ignore[arg-type]
                       sig if kind == "infra" else "", "hipErrorNoDevice", files)


def fold(state: BreakerState, *outcomes: LaneOutcome) -> tuple[BreakerState, list[Event]]:
    events = []
    for o in outcomes:
        e = advance(state, o, S)
        if e is not None:
            events.append(e)
            state = e.state
    return state, events


def test_two_runs_failed_the_same_infrastructure_way_open_it() -> None:
    state, events = fold(BreakerState(LANE), out("1", "infra"), out("2", "infra"))
    assert [e.kind for e in events] == ["observed", "opened"]
    assert state.open and state.signature == "a1" and state.files == 8
    assert [r.run for r in state.runs] == ["1", "2"] and state.runs[0].url == "https://ci/1"
    assert state.opened_at == 2.0 and state.opened_by == "" and state.seq == 2


@pytest.mark.parametrize("between", ["failed", "passed"])
def test_a_run_that_did_not_fail_that_way_starts_the_count_again(between: str) -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra"), out("2", between),
                         out("3", "infra"))
    assert not state.open and len(state.streak) == 1


def test_another_signature_is_another_way() -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra", "a1"), out("2", "infra", "b2"))
    assert not state.open and state.streak_kind == "infra:b2"


def test_jobs_that_never_reported_open_it_too() -> None:
    state, events = fold(BreakerState(LANE), out("1", "silent"), out("2", "silent"))
    assert state.open and events[-1].kind == "opened" and state.signature == ""


def test_test_incidents_never_open_it() -> None:
    state, events = fold(BreakerState(LANE), *[out(str(i), "failed") for i in range(1, 10)])
    assert not state.open and {e.kind for e in events} == {"observed"}


def test_clean_probes_close_it_and_a_dirty_one_starts_again() -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra"), out("2", "infra"))
    state, events = fold(state, out("3", "passed", files=1), out("4", "infra"),
                         out("5", "passed", files=1), out("6", "passed", files=1))
    assert [e.kind for e in events] == ["observed", "observed", "observed", "closed"]
    assert not state.open and state.closed_at == 6.0
    assert state.held_runs == 4 and state.held_registrations == 32


def test_a_run_is_folded_in_once() -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra"))
    assert advance(state, out("1", "infra"), S) is None


def test_forced_open_and_close_record_who_and_why_and_episodes_are_kept() -> None:
    state, log = fold(BreakerState(LANE), out("1", "infra"), out("2", "infra"),
                      out("3", "passed"), out("4", "passed"))
    opened = force(state, open_it=True, by="alice", reason="drained for a driver update", at=10.0)
    assert opened.kind == "forced-open" and opened.state.opened_by == "alice"
    closed = force(opened.state, open_it=False, by="bob", reason="driver fixed", at=20.0)
    assert closed.state.closed_by == "bob" and not closed.state.open
    first, second = episodes([*log, opened, closed])
    assert (first.opened_at, first.closed_at, first.held_runs) == (2.0, 4.0, 2)
    assert (second.opened_by, second.closed_by, second.closed_at) == ("alice", "bob", 20.0)


def test_the_state_has_one_json_form_and_a_bad_one_is_refused() -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra"), out("2", "infra"))
    doc = json.loads(json.dumps(state.to_json()))
    assert state_from_json(doc) == state
    for broken in ({**doc, "status": "ajar"}, {**doc, "extra": 1}, {**doc, "seq": -1},
                   {**doc, "runs": [{"run": 1}]}, {**doc, "schema": "x"}, [], None,
                   {**doc, "at": float("nan")}):
        with pytest.raises(StateError):
            state_from_json(broken)


def test_age_counts_only_while_open() -> None:
    state, _ = fold(BreakerState(LANE), out("1", "infra"), out("2", "infra"))
    assert state.age_days(2.0 + 86400 * 3) == pytest.approx(3.0)
    assert BreakerState(LANE).age_days(1e9) == 0.0


def test_lanes_opt_in_per_stage_and_variant(config_project) -> None:  # type: ignore[no-untyped-def]
    from testfleet.breaker.settings import lane_settings

    project = config_project("""\
[breaker]
open_after = 3

[stages.a]
backend = "rocm"
breaker = { close_after = 5 }

[stages.a.variants.x]
runs_on = ["x"]

[stages.a.variants.y]
runs_on = ["y"]
breaker = false

[stages.b]
backend = "cpu"

[stages.b.variants.z]
runs_on = ["z"]
breaker = { max_open_days = 1 }

[stages.c]
backend = "cpu"
""")
    assert lane_settings(project.config) == {
        "a.x": BreakerSettings(3, 5, 7), "b.z": BreakerSettings(3, 2, 1)}


@pytest.mark.parametrize(("text", "where"), [
    ("[breaker]\nopen_after = 0\n", "breaker.open_after"),
    ("[breaker]\nopen_afte = 2\n", "open_afte"),
    ('[stages.a]\nbackend = "cpu"\nbreaker = "yes"\n', "stages.a.breaker"),
    ('[stages.a]\nbackend = "cpu"\nbreaker = { close_after = -1 }\n', "close_after"),
])
def test_bad_breaker_keys_are_config_errors_naming_the_key(config_project, text: str,  # type: ignore[no-untyped-def]
                                                           where: str) -> None:
    from testfleet.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        config_project(text)
    assert where in str(info.value)


def _rows(texts: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    """Final rows of one run of one lane, each failed with (kind, text), and signatures."""
    from types import SimpleNamespace

    from testfleet.failures.signature import make

    sigs = {}
    rows = []
    for i, (kind, text) in enumerate(texts):
        sig = make(kind, text, text.split(":")[0])  # type: ignore[arg-type]
        sigs[sig.digest] = sig
        rows.append(SimpleNamespace(file=f"tests/t{i}.py", stage=LANE, backend="rocm",
                                    outcome="FAILED", ts=float(i), commit_sha=None,
                                    ci_run_id="9", signature=sig.digest, attempt=1))
    return rows, sigs


@pytest.mark.parametrize(("texts", "kind"), [
    ([("infra", "RuntimeError: HIP error: hipErrorNoDevice")] * 8, "infra"),
    ([("exception", f"AssertionError: loss diverged at step {i}") for i in range(8)], "failed"),
    ([("exception", "AssertionError: wrong result")] * 8, "failed"),
    ([("exception", "ModuleNotFoundError: No module named 'megatron'")] * 8, "failed"),
    ([("exception", "RuntimeError: rendezvous timed out")] * 8, "infra"),
])
def test_a_runs_outcome_of_a_lane(texts: list[tuple[str, str]], kind: str) -> None:
    from testfleet.app.breaker import RunSource, lane_outcome

    rows, sigs = _rows(texts)
    got = lane_outcome(rows, [], sigs, LANE, RunSource("9", None), 1.0)
    assert got.kind == kind and got.files == 8
