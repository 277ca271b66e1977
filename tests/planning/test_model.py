"""The plan file: canonical bytes, digest, and load_plan's refusal of anything wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testfleet.errors import UsageError
from testfleet.planning import make_plan
from testfleet.planning.model import Plan, load_plan, plan_bytes
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest

from .conftest import make_project, sample_registrations


def _plan() -> Plan:
    return make_plan(make_project(), sample_registrations(),
                     PlanRequest(Trigger(event="schedule", schedule="0 15 * * 6")))


def test_byte_identical_for_identical_inputs() -> None:
    a = plan_bytes(_plan())
    b = plan_bytes(make_plan(make_project(), list(reversed(sample_registrations())),
                             PlanRequest(Trigger(event="schedule", schedule="0 15 * * 6"))))
    assert a == b
    assert a.endswith(b"\n") and a.count(b"\n") == 1
    # the fast path (digest spliced into cached content bytes) is the canonical form
    assert a == json.dumps(_plan().to_json(), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False).encode() + b"\n"


def test_round_trip(tmp_path: Path) -> None:
    plan = _plan()
    path = tmp_path / "plan.json"
    path.write_bytes(plan_bytes(plan))
    loaded = load_plan(path)
    assert loaded == plan
    assert plan_bytes(loaded) == plan_bytes(plan)
    assert Plan.from_json(plan.to_json()) == plan
    data = json.loads(path.read_text())
    assert data["schema"] == "testfleet.plan/1"
    assert list(data) == sorted(data)
    assert {"schema", "policy", "jobs", "stages", "skipped", "warnings", "digest"} <= set(data)
    job = data["jobs"][0]
    assert {"id", "stage", "backend", "runs_on", "container", "command", "shard", "shards",
            "wave", "needs", "estimate", "tests", "env"} <= set(job)
    stage = data["stages"][0]
    assert {"name", "backend", "status", "reason", "wave", "counts", "shards", "makespan",
            "lower_bound", "ratio", "history_share"} <= set(stage)


def test_job_lookup() -> None:
    plan = _plan()
    assert plan.job(plan.jobs[0].id) is plan.jobs[0]
    with pytest.raises(UsageError, match="no job 'nope'"):
        plan.job("nope")


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _resealed(data: dict) -> dict:
    from testfleet.planning.model import content_digest

    data = dict(data)
    data["digest"] = content_digest(data)
    return data


def test_load_plan_errors(tmp_path: Path) -> None:
    good = _plan().to_json()
    with pytest.raises(UsageError, match="does not exist"):
        load_plan(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="is a directory"):
        load_plan(tmp_path)
    with pytest.raises(UsageError, match="not valid JSON"):
        load_plan(_write(tmp_path, "{nope"))
    with pytest.raises(UsageError, match="not valid JSON"):
        p = tmp_path / "bin.json"
        p.write_bytes(b"\xff\xfe")
        load_plan(p)
    with pytest.raises(UsageError, match="must be a JSON object"):
        load_plan(_write(tmp_path, [1, 2]))
    with pytest.raises(UsageError, match=r"unsupported plan schema 'testfleet\.plan/2'"):
        load_plan(_write(tmp_path, {**good, "schema": "testfleet.plan/2"}))
    with pytest.raises(UsageError, match="missing field 'digest'"):
        load_plan(_write(tmp_path, {k: v for k, v in good.items() if k != "digest"}))
    tampered = json.loads(json.dumps(good))
    tampered["jobs"][0]["tests"][0]["file"] = "tests/evil.py"
    with pytest.raises(UsageError, match="digest mismatch"):
        load_plan(_write(tmp_path, tampered))


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["jobs"][0].pop("shard"), r"jobs\[0\]: missing field 'shard'"),
    (lambda d: d["jobs"][0].__setitem__("shard", "1"), r"jobs\[0\].shard: expected an integer"),
    (lambda d: d["jobs"][0].__setitem__("shard", 99), "beyond shards"),
    (lambda d: d["jobs"][0].__setitem__("tests", []), "at least one test"),
    (lambda d: d["jobs"][0].__setitem__("command", "bash"), r"jobs\[0\]\.command: command template .bash. never names the file"),
    (lambda d: d["jobs"][0]["tests"][0].__setitem__("estimate", -1), "finite number"),
    # finite but absurd: `testfleet report --plan` crashed drawing the timeline
    (lambda d: d["jobs"][0].__setitem__("estimate", 1e308),
     r"jobs\[0\].estimate: expected a finite number >= 0 \(at most 1e\+12\), got 1e\+308"),
    (lambda d: d["jobs"][0]["tests"][0].__setitem__("source", "guess"), "source"),
    (lambda d: d["stages"][0].__setitem__("status", "running"), "status"),
    (lambda d: d["skipped"][0].__setitem__("reason", "because"), "reason"),
    (lambda d: d.__setitem__("jobs", {}), "jobs: expected a list"),
    (lambda d: d["jobs"].append(d["jobs"][0]), "duplicate job id"),
    (lambda d: d["jobs"][0].__setitem__("shards", True), "expected an integer"),
])
def test_load_plan_malformed_fields(tmp_path: Path, mutate, message: str) -> None:
    data = json.loads(json.dumps(_plan().to_json()))
    mutate(data)
    with pytest.raises(UsageError, match=message):
        load_plan(_write(tmp_path, _resealed(data)))


def test_oversized_plan_is_refused_without_reading_it_all(tmp_path: Path, monkeypatch) -> None:
    """`--plan /dev/zero` (size 0 to stat) was read until memory ran out; a plan is read
    up to a cap and refused beyond it."""
    from testfleet.planning import model

    path = _write(tmp_path, _plan().to_json())
    monkeypatch.setattr(model, "MAX_PLAN_BYTES", 64)
    with pytest.raises(UsageError, match=r"cannot read plan file .*: larger than 64 bytes"):
        load_plan(path)
