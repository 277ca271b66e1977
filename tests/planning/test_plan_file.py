"""The plan file is validated through its pydantic model (planning/plan_file.py): every
problem at once with its path, nothing coerced, nothing unknown, and the model is the
one the published JSON Schema comes from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from testfleet.documents.plan import (
    ContainerDoc,
    JobCIDoc,
    JobDoc,
    PlannedTestDoc,
    SkippedDoc,
    StageDoc,
)
from testfleet.errors import UsageError
from testfleet.planning import make_plan
from testfleet.planning.jobci import Container, JobCI
from testfleet.planning.model import (
    Job,
    Plan,
    PlannedTest,
    Skipped,
    StageSummary,
    content_digest,
    load_plan,
)
from testfleet.planning.plan_file import SHOWN_PROBLEMS, validate_plan_document
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.schemas.outputs import output_json_schema

from .conftest import make_project, sample_registrations


def _plan() -> Plan:
    return make_plan(make_project(), sample_registrations(),
                     PlanRequest(Trigger(event="schedule", schedule="0 15 * * 6")))


def _doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(_plan().to_json()))
    return data


def _load(tmp_path: Path, data: dict[str, Any]) -> Plan:
    data = dict(data)
    data["digest"] = content_digest(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return load_plan(path)


def test_every_problem_is_named_at_once_with_its_path(tmp_path: Path) -> None:
    data = _doc()
    data["jobs"][0]["shard"] = "1"
    data["jobs"][0]["tests"][0]["estimate"] = -3
    data["stages"][0]["status"] = "running"
    with pytest.raises(UsageError) as info:
        _load(tmp_path, data)
    text = str(info.value)
    assert "3 problems:" in text
    assert "jobs[0].shard: expected an integer, got '1'" in text
    assert "jobs[0].tests[0].estimate: expected a finite number >= 0" in text
    assert "stages[0].status: expected one of" in text and "got 'running'" in text


def test_a_flood_of_problems_is_counted_not_printed(tmp_path: Path) -> None:
    data = _doc()
    job = data["jobs"][0]
    job["tests"] = [dict(job["tests"][0], estimate="x") for _ in range(SHOWN_PROBLEMS + 7)]
    with pytest.raises(UsageError) as info:
        _load(tmp_path, data)
    text = str(info.value)
    assert f"{SHOWN_PROBLEMS + 7} problems:" in text
    assert "… and 7 more" in text
    assert text.count("expected a number") == SHOWN_PROBLEMS


@pytest.mark.parametrize("where", ["top", "job", "test", "ci", "stage"])
def test_an_unknown_field_is_refused_not_ignored(tmp_path: Path, where: str) -> None:
    """A field this version does not know is a newer or edited plan: half-reading it could
    drop a setting a job needs, so it is refused with its path."""
    data = _doc()
    target = {"top": data, "job": data["jobs"][0], "test": data["jobs"][0]["tests"][0],
              "ci": data["jobs"][0]["ci"], "stage": data["stages"][0]}[where]
    target["surprise"] = 1
    with pytest.raises(UsageError, match=r"surprise: unknown field"):
        _load(tmp_path, data)


@pytest.mark.parametrize(("field", "value"), [
    ("shards", 2.0),       # a float is not a count, even a whole one
    ("wave", False),       # a bool is not a number
    ("needs", "stage-a"),  # a string is not a list of names
    ("env", {"A": 1}),     # environment values are strings
])
def test_nothing_is_coerced(tmp_path: Path, field: str, value: Any) -> None:
    data = _doc()
    data["jobs"][0][field] = value
    with pytest.raises(UsageError, match=rf"jobs\[0\]\.{field}"):
        _load(tmp_path, data)


def test_a_valid_plan_reads_back_equal(tmp_path: Path) -> None:
    plan = _plan()
    assert _load(tmp_path, _doc()) == plan


def test_job_ci_round_trips_through_the_model(tmp_path: Path) -> None:
    ci = JobCI(container=Container("img:1", "--gpus all", ("/models:/models",)),
               setup=("pip install -e .",), secrets=("HF_TOKEN",), fail_fast=False,
               max_parallel=3, timeout_factor=2.5)
    plan = _plan()
    job = dataclasses.replace(plan.jobs[0], ci=dataclasses.replace(ci, env=plan.jobs[0].env))
    data = _doc()
    data["jobs"][0] = job.to_json()
    (loaded,) = [j for j in _load(tmp_path, data).jobs if j.id == job.id]
    assert loaded.ci == job.ci


@pytest.mark.parametrize(("doc", "cls"), [
    (JobDoc, Job), (PlannedTestDoc, PlannedTest), (StageDoc, StageSummary),
    (SkippedDoc, Skipped), (JobCIDoc, JobCI), (ContainerDoc, Container),
])
def test_the_document_knows_every_field_of_the_dataclass(doc: Any, cls: Any) -> None:
    """The dataclass is what flows, the document type what is written and read back (its
    ``to_json`` is checked against it by mypy): a field of the dataclass that the document
    has no key for would be lost in every plan file."""
    fields = {f.name for f in dataclasses.fields(cls)} - {"env"} | (
        {"env"} if cls is Job else set())
    assert set(doc.__annotations__) == fields


def test_the_published_schema_is_the_readers_model() -> None:
    """`testfleet schema plan` comes from the model load_plan uses: a real plan validates,
    and a job with an unknown key does not, under the JSON Schema alone."""
    schema = output_json_schema("plan")
    assert schema["title"] == "testfleet.plan"
    good = _doc()
    jsonschema.validate(good, schema)
    bad = _doc()
    bad["jobs"][0]["surprise"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    assert validate_plan_document(good)["digest"] == good["digest"]
