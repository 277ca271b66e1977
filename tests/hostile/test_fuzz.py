"""Property-based fuzzing of the parsers that read untrusted input (issue #17): the
configuration, the plan file, the GitHub event payload, metric record lines, history
bundles and registrations in test files. Each either accepts its input or refuses it
with testfleet's own error, never another exception. Bounded: every property runs at
most 60 examples, the file in well under a minute."""

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


# -- history bundles (history/bundle.py) ------------------------------------------------

_UID_A, _UID_B = "0" * 32, "ab" * 16
BASE_PAYLOAD: dict[str, Any] = {
    "store_schema": 5, "created_at": 1.0, "testfleet": "0.1.0",
    "source": {"event": "push", "ref": "refs/heads/main", "cadence": "regular",
               "write_baseline": True, "ci_run_id": "1", "repository": "o/r"},
    "executions": [{"uid": _UID_A, "file": "tests/test_a.py", "stage": "a", "backend": "cpu",
                    "duration": 1.5, "outcome": "PASSED", "attempt": 1, "commit_sha": "abc",
                    "ci_run_id": "1", "ts": 1.0, "recorded_at": 1.0, "gate_status": None,
                    "gate_mode": None, "reason": None, "final": True}],
    "gate_runs": [{"uid": _UID_B, "run_id": "r", "test_path": "tests/test_a.py", "backend": "cpu",
                   "suite": "a", "env_key": "", "ci_run_id": "1", "commit_sha": "abc",
                   "trusted": True, "recorded_at": 1.0, "untrusted_at": None,
                   "untrusted_by": None}],
    "gate_values": [{"run": _UID_B, "metric_key": "m", "steps_key": "\"last\"",
                     "constraint_key": "{}", "step": -1, "value": 0.5, "actual_step": 3}],
    "testcases": [{"execution": _UID_A, "name": "t", "outcome": "PASSED", "duration": 1.0,
                   "final": True, "recorded_at": 1.0}],
}
# Where a mutation lands: a top-level field, or a field of the first row of a table.
BUNDLE_PATHS = st.sampled_from(
    [(k,) for k in BASE_PAYLOAD] + [("source", k) for k in BASE_PAYLOAD["source"]]
    + [(t, 0, k) for t in ("executions", "gate_runs", "gate_values", "testcases")
       for k in BASE_PAYLOAD[t][0]] + [("executions", 0, "extra"), ("unknown",)])


def _sealed(body: bytes, schema: bytes = b'"testfleet.bundle/1"') -> bytes:
    """Bundle bytes around ``body`` with a correct checksum: what a forger can make."""
    import gzip
    import hashlib

    digest = hashlib.sha256(body).hexdigest().encode()
    return gzip.compress(b'{"payload":' + body + b',"schema":' + schema + b',"sha256":"'
                         + digest + b'"}', mtime=0)


def _json_bytes(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=True).encode("utf-8", "surrogatepass")


def test_the_base_bundle_is_valid() -> None:
    """The mutations below start from a bundle the parser accepts."""
    from testfleet.history.bundle import decode

    assert decode(_sealed(_json_bytes(BASE_PAYLOAD))).counts() == {
        "executions": 1, "gate_runs": 1, "gate_values": 1, "testcases": 1, "signatures": 0}


@BOUNDED
@given(BUNDLE_PATHS, st.one_of(JSONISH, st.just(_UID_A), st.just(_UID_B)), st.booleans())
def test_bundle_payload_mutations_refuse_cleanly(path: tuple[Any, ...], value: Any,
                                                 drop: bool) -> None:
    import copy

    from testfleet.history.bundle import BundleError, decode

    doc = copy.deepcopy(BASE_PAYLOAD)
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    if drop:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    with contextlib.suppress(BundleError):
        decode(_sealed(_json_bytes(doc)))


@BOUNDED
@given(st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda b: b"\x1f\x8b" + b),
                 JSONISH.map(lambda d: _sealed(_json_bytes(d))),
                 st.tuples(JSONISH, JSONISH).map(
                     lambda t: _sealed(_json_bytes(t[0]), _json_bytes(t[1])))))
def test_bundle_bytes_refuse_cleanly(raw: bytes) -> None:
    """Arbitrary bytes, gzip magic then junk, sealed arbitrary JSON, a foreign schema."""
    from testfleet.history.bundle import BundleError, decode

    with contextlib.suppress(BundleError):
        decode(raw)


# -- registrations in test files (registry/scan.py + registry/validate.py) -------------

_ARG = st.one_of(
    st.sampled_from(["5", "1e308", "-1", "0", "True", "None", "'stage-a'", '"a"', "[]",
                     "['megatron']", "[1]", "{'x': 1}", "f'{x}'", "x", "x.y", "*a", "**k",
                     "'\\ud800'", "'\\x00'", "1 +", "(", "lambda: 0", "...", "b'x'",
                     "'" + "s" * 300 + "'", "['a'] * 3", "-inf", "1j", "0x10"]),
    st.text(max_size=10))
_KEYWORD = st.sampled_from(["est_time", "suite", "labels", "nightly", "disabled", "x", "suite",
                            "metric_key", "steps", "constraint"])
_CALL = st.tuples(st.sampled_from(["register_cpu_ci", "register_cuda_ci", "register_rocm_ci",
                                   "register_ci_gate", "register_amd_ci"]),
                  st.lists(_ARG, max_size=3), st.lists(st.tuples(_KEYWORD, _ARG), max_size=4)
                  ).map(lambda t: f"{t[0]}({', '.join([*t[1], *(f'{k}={v}' for k, v in t[2])])})")
_LINE = st.one_of(_CALL, _CALL.map(lambda c: "    " + c), _CALL.map(lambda c: "x = \\\n" + c),
                  _CALL.map(lambda c: '"""' + c), _CALL.map(lambda c: "# " + c),
                  st.sampled_from(["from testfleet import register_cpu_ci", "if True:",
                                   'if __name__ == "__main__":', "    main()", "def f():",
                                   "s = , ", "x = (", ")", "\t", "\x0c"]),
                  st.text(max_size=30))


@BOUNDED
@given(st.lists(_LINE, max_size=8), st.sampled_from(["\n", "\r\n", "\r"]),
       st.sampled_from(["", "\ufeff", "# -*- coding: latin-1 -*-\n"]))
def test_registration_parsing_never_raises(lines: list[str], newline: str, head: str) -> None:
    from testfleet.registry import scan as sc
    from testfleet.registry.validate import validate_file

    rules = _rules()
    data = (head + newline.join(lines)).encode("utf-8", "surrogatepass")
    scanned = sc.scan_source(data, sc.marker_pattern(rules.markers), sc.needles_for(rules.markers))
    result = validate_file("tests/test_f.py", scanned, rules)
    for finding in result.findings:
        assert "\n" not in finding.render()


_RULES: list[Any] = []


def _rules() -> Any:
    if not _RULES:
        from testfleet.config import validate_config
        from testfleet.registry.rules import build_rules

        config = validate_config({"roots": ["tests"], "labels": {"megatron": "m"},
                                  "stages": {"stage-a": {"backend": "cpu"},
                                             "a": {"backend": "cpu"},
                                             "g": {"backend": "cuda"}}})
        _RULES.append(build_rules(config))
    return _RULES[0]


def test_errors_are_testfleet_errors() -> None:
    assert issubclass(UsageError, errors.TestfleetError)
    assert issubclass(ConfigError, errors.TestfleetError)
