"""Property-based fuzzing of the parsers that read untrusted input (issues #17, #27): the
configuration, the plan file, the GitHub event payload, metric record lines, history
bundles (with odd digits in their schema, integers no column holds and times after the
merge, merged into a real SQLite history), JUnit files in any declared encoding and
registrations in test files. Each either accepts its input or refuses it with
testfleet's own error, never another exception. Bounded: every property runs at most
60 examples, the file in well under a minute."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path as _Path
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


# New shapes (#27): digits that are digits to str.isdigit() but not to int(), integers no
# history column holds, times after the merge.
ODD_DIGITS = st.sampled_from(["\u00b9", "\u0661", "\uff11", "\u0663", "1\u00b2", "\u2460"])
HUGE = st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**400])
FUTURE = st.sampled_from([4e9, 1e12, 253402300800.0, 1.7976931348623157e308])
_INT_PATHS = [("executions", 0, "attempt"), ("gate_values", 0, "step"),
              ("gate_values", 0, "actual_step"), ("store_schema",)]
_TIME_PATHS = [("executions", 0, "ts"), ("executions", 0, "recorded_at"),
               ("gate_runs", 0, "recorded_at"), ("gate_runs", 0, "untrusted_at"),
               ("testcases", 0, "recorded_at"), ("created_at",)]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    import copy

    doc = copy.deepcopy(doc)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


@BOUNDED
@given(ODD_DIGITS, st.sampled_from(["testfleet.bundle/", "testfleet.bundle/1", "testfleet.bundle/0"]))
def test_bundle_schema_with_odd_digits_is_foreign(digits: str, prefix: str) -> None:
    from testfleet.history.bundle import BundleError, decode

    raw = _sealed(_json_bytes(BASE_PAYLOAD), _json_bytes(prefix + digits))
    try:
        decode(raw)
    except BundleError as exc:
        assert "foreign schema" in str(exc)
    else:
        raise AssertionError(f"{prefix + digits!r} was accepted")


_MERGE: dict[str, Any] = {}


def _merge_store() -> Any:
    """One SQLite history for the merge properties (a store per example would dominate)."""
    if "store" not in _MERGE:
        import tempfile
        from pathlib import Path

        from testfleet.config import load_project
        from testfleet.store import open_store

        root = Path(tempfile.mkdtemp(prefix="tf-fuzz-"))
        (root / "tests").mkdir()
        (root / "testfleet.toml").write_text('roots = ["tests"]\n[stages.a]\nbackend = "cpu"\n')
        _MERGE["store"] = open_store(load_project(root), None)
    return _MERGE["store"]


@BOUNDED
@given(st.one_of(st.tuples(st.sampled_from(_INT_PATHS), HUGE),
                 st.tuples(st.sampled_from(_TIME_PATHS), FUTURE)),
       st.binary(min_size=16, max_size=16))
def test_bundles_with_huge_numbers_or_future_times_refuse_or_merge_bounded(
        mutation: tuple[tuple[Any, ...], Any], salt: bytes) -> None:
    """A huge integer is refused as invalid (no OverflowError at insert); a time after the
    merge never reaches the history (no stored row is dated after now + the skew)."""
    import time

    from sqlalchemy import func, select

    from testfleet.history.bundle import BundleError, decode
    from testfleet.history.merge import merge_bundles
    from testfleet.store.durations import FUTURE_SKEW
    from testfleet.store.metrics import gate_runs
    from testfleet.store.schema import executions
    from testfleet.store.testcases import testcases

    path, value = mutation
    uid_a, uid_b = salt.hex(), salt[::-1].hex()
    doc = _set(BASE_PAYLOAD, path, value)
    doc["executions"][0]["uid"] = doc["testcases"][0]["execution"] = uid_a
    doc["gate_runs"][0]["uid"] = doc["gate_values"][0]["run"] = uid_b
    try:
        bundle = decode(_sealed(_json_bytes(doc)))
    except BundleError:
        return
    store = _merge_store()
    merge_bundles(store, [bundle], keep=None)
    limit = time.time() + FUTURE_SKEW
    with store.read() as conn:
        for table, column in ((executions, executions.c.ts), (executions, executions.c.recorded_at),
                              (gate_runs, gate_runs.c.recorded_at),
                              (testcases, testcases.c.recorded_at)):
            newest = conn.execute(select(func.max(column)).select_from(table)).scalar()
            assert newest is None or newest <= limit, (table.name, column.name, newest)


# -- JUnit files (store/junit_import.py), in the encodings a report may declare ---------

ENCODINGS = st.sampled_from(["shift_jis", "euc-jp", "gb2312", "big5", "cp932", "UTF-7",
                             "utf-8", "UTF-16", "latin-1", "cp1252", "koi8-r", "utf-8-sig",
                             "x-no-such-codec", "base64", "rot13", "utf-32", ""])
JUNIT_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@BOUNDED
@given(ENCODINGS, JUNIT_TEXT, st.one_of(st.none(), st.sampled_from(
    ["1", "-1", "nan", "1e308", "x", "1,5", "\u0661"])),
       st.one_of(st.none(), st.sampled_from(["2024-01-01T00:00:00", "9999-12-31T23:59:59Z",
                                             "2096-01-01", "x", "\u0661\u0669"])),
       st.sampled_from(["", "<!DOCTYPE t>", "+ADw-!DOCTYPE t+AD4-", "<!-- c -->"]))
def test_junit_in_any_encoding_refuses_cleanly(encoding: str, name: str, time: str | None,
                                               stamp: str | None, prolog: str) -> None:
    """Parsed or refused with testfleet's own error: never ValueError (pyexpat on a
    multi-byte encoding), LookupError (an unknown one) or anything else."""
    from xml.sax.saxutils import quoteattr

    from testfleet.store.junit_import import parse_cases

    declared = f' encoding="{encoding}"' if encoding else ""
    attrs = (f" time={quoteattr(time)}" if time is not None else "")
    suite = f" timestamp={quoteattr(stamp)}" if stamp is not None else ""
    text = (f'<?xml version="1.0"{declared}?>{prolog}<testsuite{suite}>'
            f"<testcase classname=\"tests.test_a\" name={quoteattr(name)}{attrs}/></testsuite>")
    try:
        data = text.encode(encoding or "utf-8")
    except (LookupError, UnicodeError):  # not encodable that way: the bytes a tool might write
        data = text.encode("utf-8", "surrogatepass")
    with contextlib.suppress(UsageError):
        parse_cases(data, _Path("r.xml"))


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
