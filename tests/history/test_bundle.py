"""The bundle format on its own: canonical encoding, checksum, and every refusal."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from testfleet.history import bundle as bundle_mod
from testfleet.history.bundle import (
    SCHEMA,
    BundleError,
    Payload,
    Source,
    canonical,
    decode,
    encode,
    read_file,
)


def payload(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "store_schema": 3, "created_at": 5.0, "testfleet": "0.1.0",
        "source": {"event": "push", "ref": "refs/heads/main"},
        "executions": [{"uid": "a" * 32, "file": "tests/t.py", "stage": "s", "backend": "cpu",
                        "duration": 1.5, "outcome": "PASSED", "attempt": 1, "commit_sha": None,
                        "ci_run_id": "9", "ts": 10.0, "recorded_at": 11.0}],
        "gate_runs": [{"uid": "b" * 32, "run_id": "9.1-j", "test_path": "tests/t.py",
                       "backend": "cpu", "suite": "s", "env_key": "", "ci_run_id": "9",
                       "commit_sha": None, "trusted": True, "recorded_at": 12.0}],
        "gate_values": [{"run": "b" * 32, "metric_key": "loss", "steps_key": "all",
                         "constraint_key": "lt", "step": 1, "value": 0.5}],
    }
    base.update(kw)
    return base


def sealed(doc_payload: dict[str, Any], *, schema: str = SCHEMA, sha: str | None = None) -> bytes:
    """Bundle bytes for any payload, with a correct checksum unless ``sha`` is given."""
    digest = sha or hashlib.sha256(canonical(doc_payload)).hexdigest()
    return gzip.compress(canonical({"schema": schema, "sha256": digest, "payload": doc_payload}))


def test_round_trip_is_canonical_and_deterministic() -> None:
    p = Payload.model_validate(payload())
    raw = encode(p)
    assert raw == encode(Payload.model_validate(payload()))
    full = p.model_dump(mode="json")  # the encoder's splice is the canonical document
    assert gzip.decompress(raw) == gzip.decompress(sealed(full))
    got = decode(raw, "b.tfb")
    assert got.payload == p
    assert got.counts() == {"executions": 1, "gate_runs": 1, "gate_values": 1, "testcases": 0,
                            "signatures": 0}


def test_identical_repeats_are_harmless() -> None:
    doc = payload()
    doc["executions"] = doc["executions"] * 2
    assert len(decode(sealed(doc)).payload.executions) == 2


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda raw: raw[: len(raw) // 2], "truncated: the gzip stream ends early"),
    (lambda raw: raw[:-4], "truncated"),
    (lambda raw: raw + b"junk", "unexpected byte(s) after the gzip stream"),
    (lambda raw: b"PK\x03\x04" + raw, "not gzip-compressed"),
    (lambda raw: b"", "not gzip-compressed"),
    (lambda raw: gzip.compress(b"hello"), "not valid JSON"),
    (lambda raw: gzip.compress(b"\xff\xfe"), "not UTF-8 JSON"),
    (lambda raw: gzip.compress(b"[1, 2]"), "no 'schema' field"),
    (lambda raw: sealed(payload(), schema="sarif/2.1"), "foreign schema 'sarif/2.1'"),
    (lambda raw: sealed(payload(), schema="testfleet.plan/1"), "foreign schema"),
    (lambda raw: sealed(payload(), schema="testfleet.bundle/4"), "newer than this testfleet reads"),
    (lambda raw: sealed(payload(), sha="0" * 64), "checksum mismatch"),
    (lambda raw: sealed(payload(store_schema=99)), "history schema version 99, newer"),
])
def test_damaged_foreign_and_newer_bundles_are_refused(mutate: Any, message: str) -> None:
    raw = mutate(encode(Payload.model_validate(payload())))
    with pytest.raises(BundleError) as info:
        decode(raw, "jobs/b.tfb")
    assert str(info.value).startswith("jobs/b.tfb: ") and message in str(info.value)


def test_an_edited_record_breaks_the_checksum() -> None:
    data = gzip.decompress(encode(Payload.model_validate(payload())))
    forged = data.replace(b'"trusted":true', b'"trusted":false')  # a forger flips one field
    assert forged != data
    with pytest.raises(BundleError, match="checksum mismatch"):
        decode(gzip.compress(forged))


def test_a_reformatted_envelope_is_named_as_such() -> None:
    doc = json.loads(gzip.decompress(encode(Payload.model_validate(payload()))))
    with pytest.raises(BundleError, match="malformed bundle envelope"):
        decode(gzip.compress(json.dumps(doc, indent=1).encode()))


def test_values_of_unknown_runs_are_refused() -> None:
    doc = payload()
    doc["gate_values"][0]["run"] = "c" * 32
    with pytest.raises(BundleError, match=r"gate_values\[0\] references run c{32}, which the bundle"):
        decode(sealed(doc), "b")


def test_testcases_of_unknown_executions_are_refused() -> None:
    doc = payload(testcases=[{"execution": "a" * 32, "name": "test_x", "outcome": "PASSED",
                              "duration": 0.5, "final": True, "recorded_at": 11.0}])
    assert decode(sealed(doc), "b").counts()["testcases"] == 1
    doc["testcases"][0]["execution"] = "c" * 32
    with pytest.raises(BundleError, match=r"testcases\[0\] references execution c{32}, which"):
        decode(sealed(doc), "b")
    doc["testcases"][0] = {**doc["testcases"][0], "execution": "a" * 32, "outcome": "GREAT"}
    with pytest.raises(BundleError, match=r"testcases\.0\.outcome|testcases\[0\]\.outcome"):
        decode(sealed(doc), "b")


@pytest.mark.parametrize("table", ["executions", "gate_runs", "gate_values"])
def test_one_identity_with_two_contents_is_refused(table: str) -> None:
    doc = payload()
    other = dict(doc[table][0])
    other["recorded_at" if table != "gate_values" else "value"] = 99.0
    doc[table] = [doc[table][0], other]
    with pytest.raises(BundleError, match="appears twice with different content"):
        decode(sealed(doc), "b")


@pytest.mark.parametrize(("change", "where"), [
    ({"duration": -1.0}, "executions[0].duration"),
    ({"outcome": "GREAT"}, "executions[0].outcome"),
    ({"uid": "xyz"}, "executions[0].uid"),
    ({"duration": "1.5"}, "executions[0].duration"),
    ({"file": ""}, "executions[0].file"),
    ({"extra": 1}, "executions[0].extra"),
])
def test_invalid_records_are_named_by_their_path(change: dict[str, Any], where: str) -> None:
    doc = payload()
    doc["executions"][0] = {**doc["executions"][0], **change}
    with pytest.raises(BundleError) as info:
        decode(sealed(doc), "b")
    assert "invalid records" in str(info.value) and where in str(info.value)


@pytest.mark.parametrize(("raw_value", "message"), [
    (b"NaN", "finite number"),
    (b"1e999", "finite number"),
    (b'"5"', "valid number"),
])
def test_non_finite_and_quoted_numbers_are_refused(raw_value: bytes, message: str) -> None:
    body = canonical(payload()).replace(b'"created_at":5.0', b'"created_at":' + raw_value)
    digest = hashlib.sha256(body).hexdigest().encode()
    doc = b'{"payload":' + body + b',"schema":"' + SCHEMA.encode() + b'","sha256":"' + digest + b'"}'
    with pytest.raises(BundleError, match=f"created_at: .*{message}"):
        decode(gzip.compress(doc))


def test_nul_characters_are_refused() -> None:
    doc = payload()
    doc["executions"][0]["file"] = "tests/t\x00.py"
    with pytest.raises(BundleError, match="NUL character"):
        decode(sealed(doc))


def test_a_gzip_bomb_stops_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_mod, "MAX_JSON", 1000)
    with pytest.raises(BundleError, match="inflates to more than"):
        decode(gzip.compress(b" " * 5000), "bomb")


def test_100_mb_of_junk_is_refused_quickly(tmp_path: Path) -> None:
    """Neither file is read whole: junk fails on its first bytes, a gzip-looking giant
    on its size."""
    junk = tmp_path / "junk.tfb"
    with open(junk, "wb") as fh:
        fh.write(b"\x00junk")
        fh.truncate(100 << 20)
    giant = tmp_path / "giant.tfb"
    with open(giant, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00")
        fh.truncate(100 << 20)
    start = time.perf_counter()
    with pytest.raises(BundleError, match=r"junk\.tfb: not gzip-compressed"):
        read_file(junk)
    with pytest.raises(BundleError, match=r"giant.tfb: 104857600 bytes, larger than the 64 MiB"):
        read_file(giant)
    assert time.perf_counter() - start < 1.0


def test_unreadable_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"nope\.tfb: no such file"):
        read_file(tmp_path / "nope.tfb")
    with pytest.raises(BundleError, match="is a directory"):
        read_file(tmp_path)


def test_source_is_part_of_the_checksummed_payload() -> None:
    p = Payload.model_validate(payload(source=Source(event="schedule").model_dump()))
    assert decode(encode(p)).payload.source.event == "schedule"
