"""Declaration parsing: every malformed register_ci_gate is an error with file and line."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from gate_helpers import call, spec
from hypothesis import given
from hypothesis import strategies as st

from testfleet.config import validate_config
from testfleet.gate.declarations import gate_calls_in_source
from testfleet.gate.spec import parse_gate_call, parse_gate_specs
from testfleet.registry.model import GateCall

GOOD = {"rel_up": 0.1, "rel_down": 0.1}


def codes(c: GateCall, **kw: object) -> list[str]:
    spec_, findings = parse_gate_call(c, **kw)  # type: ignore[arg-type]
    assert spec_ is None
    assert all(f.file == c.file and f.line == c.line for f in findings)
    return [f.code for f in findings]


def test_valid_spec_and_canonical_keys() -> None:
    s = spec(steps=[10, 0, 5], constraint={"rel_up": 1, "abs_floor_down": 0.5, "rel_down": 0.2},
             hard_max=10.0, min_history=3, enforce=True, reason="loss must keep falling")
    assert s.steps == (10, 0, 5)
    assert s.steps_key == "[10,0,5]"
    assert s.constraint_key == '{"abs_floor_down":0.5,"rel_down":0.2,"rel_up":1.0}'
    assert s.enforce and s.min_history == 3 and s.hard_max == 10.0
    assert spec(steps="all").steps_key == '"all"'


def test_corridor_scales_from_reference_only() -> None:
    s = spec(constraint={"rel_up": 0.1, "abs_floor_up": 0.5, "rel_down": 0.2})
    assert s.corridor(10.0) == (8.0, 11.0)
    assert s.corridor(1.0) == (0.8, 1.5)  # the floor wins on the small side
    lo, hi = s.corridor(-10.0)
    assert (lo, hi) == (-12.0, -9.0)  # |ref| keeps the band the right way round


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"steps": []}, "gate-steps"),
        ({"steps": [True, 2]}, "gate-steps"),
        ({"steps": [1, 1]}, "gate-steps"),
        ({"steps": [-1]}, "gate-steps"),
        ({"steps": [1.5]}, "gate-steps"),
        ({"steps": "lats"}, "gate-steps"),
        ({"steps": 5}, "gate-steps"),
        ({"constraint": {"rel_up": -0.1, "rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": {"rel_up": math.inf, "rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": {"rel_up": True, "rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": {"rel_up": "0.1", "rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": {"rel_up": 0.1}}, "gate-constraint"),
        ({"constraint": {"rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": {}}, "gate-constraint"),
        ({"constraint": {"rel_upp": 0.1, "rel_up": 0.1, "rel_down": 0.1}}, "gate-constraint"),
        ({"constraint": [0.1]}, "gate-constraint"),
        ({"hard_min": math.nan}, "gate-hard-limit"),
        ({"hard_min": 2.0, "hard_max": 1.0}, "gate-hard-limit"),
        ({"hard_max": "1"}, "gate-hard-limit"),
        ({"min_history": 0}, "gate-min-history"),
        ({"min_history": True}, "gate-min-history"),
        ({"min_history": 21}, "gate-min-history"),
        ({"enforce": 1}, "gate-enforce"),
        ({"reason": ""}, "gate-reason"),
        ({"metric_key": ""}, "gate-metric-key"),
        ({"metric_key": 3}, "gate-metric-key"),
        ({"metric_key": "a\x00b"}, "gate-metric-key"),
        ({"metric_key": "a\nb"}, "gate-metric-key"),
        ({"metirc_key": "x"}, "gate-unknown-key"),
    ],
)
def test_each_malformed_declaration_is_an_error(kwargs: dict[str, object], code: str) -> None:
    full: dict[str, object] = {"metric_key": "train/loss", "steps": "last", "constraint": GOOD}
    full.update(kwargs)
    assert code in codes(call(**full))


def test_unknown_key_suggests_the_right_one() -> None:
    _, findings = parse_gate_call(call(metric_key="m", steps="last", constraint=GOOD, enforced=True))
    assert "did you mean 'enforce'" in findings[0].message


def test_all_problems_reported_at_once() -> None:
    found = codes(call(steps=[], constraint={"rel_up": -1}, min_history=0, enforce="yes"))
    assert {"gate-missing", "gate-steps", "gate-constraint", "gate-min-history",
            "gate-enforce"} <= set(found)


def test_positional_and_non_literal_arguments() -> None:
    c = GateCall("t.py", 4, 1, {"steps": "last", "constraint": GOOD}, positional=1,
                 non_literal=("metric_key",))
    found = codes(c)
    assert "gate-positional" in found and "gate-non-literal" in found
    assert "gate-missing" not in found  # the non-literal metric_key is reported once, as such


def test_missing_steps_and_constraint_without_defaults() -> None:
    _, findings = parse_gate_call(call(metric_key="train/grad_norm"))
    messages = " ".join(f.message for f in findings)
    assert "steps is required" in messages and "constraint is required" in messages


def test_defaults_fill_what_is_omitted_and_record_it() -> None:
    defaults = {"train/grad_norm": {"steps": "all", "constraint": {"rel_up": 0.5, "rel_down": 0.5}}}
    s, findings = parse_gate_call(call(metric_key="train/grad_norm"), defaults)
    assert not findings and s is not None
    assert s.steps == "all" and s.defaults_from == ("steps", "constraint")
    assert s.constraint_key == '{"rel_down":0.5,"rel_up":0.5}'
    s2, _ = parse_gate_call(call(metric_key="train/grad_norm", steps="last"), defaults)
    assert s2 is not None and s2.steps == "last" and s2.defaults_from == ("constraint",)


def test_config_defaults_are_validated_with_key_paths() -> None:
    from testfleet.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        validate_config({"gate": {"defaults": {"train/loss": {
            "steps": [], "constraint": {"rel_up": -1, "bogus": 1}}}}})
    text = str(info.value)
    assert "gate.defaults.train/loss" in text


def test_duplicate_constraint_keys_found_in_the_source(tmp_path: Path) -> None:
    src = ("from testfleet import register_ci_gate\n"
           "register_ci_gate(metric_key='train/loss', steps='last',\n"
           "                 constraint={'rel_up': 0.1, 'rel_down': 0.1, 'rel_up': 5.0})\n")
    (tmp_path / "t.py").write_text(src)
    calls, problems = gate_calls_in_source(src, "t.py")
    assert not problems and len(calls) == 1

    project = SimpleNamespace(root=tmp_path,
                              config=SimpleNamespace(gate=SimpleNamespace(defaults={}, window=20)))
    specs, findings = parse_gate_specs(project, calls)  # type: ignore[arg-type]
    assert not specs
    assert [f.code for f in findings] == ["gate-duplicate-key"]
    assert findings[0].line == 2 and "'rel_up'" in findings[0].message


def test_repeated_declaration_is_an_error() -> None:
    a = call(metric_key="m", steps="last", constraint=GOOD, line=3)
    b = call(metric_key="m", steps="last", constraint={"rel_down": 0.1, "rel_up": 0.1}, line=4)
    specs, findings = parse_gate_specs(None, [a, b])
    assert len(specs) == 1
    assert findings[0].code == "gate-duplicate" and findings[0].line == 4


_VALUE = st.one_of(st.integers(0, 3), st.sampled_from([0.0, -0.0, 0.1, 1e-300, 5e-324, 1.0, 2**53 + 1.0]),
                   st.floats(min_value=0, allow_nan=False, allow_infinity=False))
_CONSTRAINT = st.dictionaries(st.sampled_from(["abs_floor_up", "abs_floor_down"]), _VALUE).map(
    lambda extra: {"rel_up": 0.1, "rel_down": 0.0, **extra})
_STEPS = st.sampled_from(["last", "all", [1, 2], [2, 1], [1]])


@given(_CONSTRAINT, _CONSTRAINT, _STEPS, _STEPS, st.sampled_from([-0.0, 0.0, 0, 0.1]))
def test_a_repeat_is_exactly_a_repeat_of_the_stored_identity(a: dict[str, float], b: dict[str, float],
                                                             steps_a: object, steps_b: object,
                                                             down: float) -> None:
    """Two declarations repeat each other exactly when they would store under the same
    (metric, steps_key, constraint_key): -0.0 and 0.0 differ there, 1 and 1.0 do not."""
    calls = [call(metric_key="m", steps=steps_a, constraint=a, line=3),
             call(metric_key="m", steps=steps_b, constraint={**b, "rel_down": down}, line=4)]
    first, second = (parse_gate_call(c)[0] for c in calls)
    assert first is not None and second is not None
    same = (first.steps_key, first.constraint_key) == (second.steps_key, second.constraint_key)
    _, findings = parse_gate_specs(None, calls)
    assert [f.code for f in findings] == (["gate-duplicate"] if same else [])


def test_declarations_read_statically_without_import() -> None:
    src = ("import sys\nsys.exit('must never run')\n"
           "from tests.ci.ci_register import register_ci_gate\n"
           "register_ci_gate(metric_key='a', steps=[1, 2], constraint={'rel_up': 0.1, 'rel_down': 0.1})\n"
           "import testfleet\n"
           "testfleet.register_ci_gate(metric_key=NAME, steps='last')\n"
           "def f():\n    register_ci_gate(metric_key='nested')\n")
    calls, problems = gate_calls_in_source(src, "t.py")
    assert not problems
    assert [c.line for c in calls] == [4, 6]
    assert calls[1].non_literal == ("metric_key",)


def test_hostile_metric_keys_are_accepted_verbatim() -> None:
    for key in ["a'; DROP TABLE gate_values; --", 'q"uote', "k" * 10_000, "ünï/cödé"]:
        s = spec(metric_key=key)
        assert s.metric_key == key
        assert len(s.label) < 200


@pytest.mark.parametrize("env_keys", [[""], ["A=B"], ["GPU", "GPU"]])
def test_config_env_keys_are_validated(env_keys: list[str]) -> None:
    from testfleet.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        validate_config({"gate": {"env_keys": env_keys}})
    assert "gate.env_keys" in str(info.value)


def test_config_defaults_accept_valid_entries() -> None:
    cfg = validate_config({"gate": {"window": 5, "defaults": {"train/loss": {
        "steps": [0, 10], "constraint": {"rel_up": 0.1, "abs_floor_down": 0.5}}}}})
    s, findings = parse_gate_call(call(metric_key="train/loss"), cfg.gate.defaults, window=5)
    assert not findings and s is not None and s.steps == (0, 10)
    assert s.constraint_key == '{"abs_floor_down":0.5,"rel_up":0.1}'
