"""The machine outputs' published JSON Schemas, generated from the types their writers
return (:mod:`testfleet.documents`).

Every ``--format json`` document carries a top-level ``schema`` field
``testfleet.<kind>/<n>``: a tool reading it checks the kind and refuses a newer ``n``.
A writer builds its document as the type listed here (mypy checks every key and value),
``testfleet schema KIND`` prints the schema pydantic derives from that type, and a test
runs every command on a real project and checks that the schema describes every key of
its output. The plan and the job status are read back through the same types
(``planning/plan_file.py``, ``reconcile/status.py``), so writer, reader and schema are one
declaration.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import TypeAdapter


def output_types() -> dict[str, Any]:
    """kind -> the type of its documents."""
    from testfleet.documents.breaker import BreakersDoc
    from testfleet.documents.check import CheckDoc
    from testfleet.documents.db import DbStatusDoc
    from testfleet.documents.durations import DurationsDoc, DurationsSuggestDoc
    from testfleet.documents.gate import GateEvaluateDoc, GateHistoryDoc
    from testfleet.documents.history import HistoryMergeDoc, HistoryShowDoc
    from testfleet.documents.job_status import JobStatusDoc
    from testfleet.documents.plan import PlanDoc
    from testfleet.documents.queue import QueueStatusDoc
    from testfleet.documents.reconcile import ReconcileDoc
    from testfleet.documents.registrations import ListDoc
    from testfleet.documents.report import ReportDoc
    from testfleet.documents.rescue import RescueDoc
    from testfleet.documents.results import FlakyDoc, IncidentsDoc, ResultsDoc
    from testfleet.documents.shadow import ShadowDoc

    return {
        "check": CheckDoc,
        "list": ListDoc,
        "plan": PlanDoc,
        "report": ReportDoc,
        "durations": DurationsDoc,
        "durations-suggest": DurationsSuggestDoc,
        "gate-evaluate": GateEvaluateDoc,
        "gate-history": GateHistoryDoc,
        "db-status": DbStatusDoc,
        "history-merge": HistoryMergeDoc,
        "history-show": HistoryShowDoc,
        "results": ResultsDoc,
        "flaky": FlakyDoc,
        "job-status": JobStatusDoc,
        "reconcile": ReconcileDoc,
        "incidents": IncidentsDoc,
        "shadow": ShadowDoc,
        "queue-status": QueueStatusDoc,
        "rescue": RescueDoc,
        "breakers": BreakersDoc,
    }


def output_type(kind: str) -> Any:
    """The type whose instances are ``kind`` documents (KeyError for an unknown kind)."""
    return output_types()[kind]


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    return TypeAdapter(output_type(kind))


def output_json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one output kind, as the document's type says (never hand-kept)."""
    schema = _adapter(kind).json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"testfleet.{kind}",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def output_json_text(kind: str) -> str:
    text: str = json.dumps(output_json_schema(kind), indent=2, sort_keys=True)
    return text + "\n"


def validate_output(kind: str, document: Any) -> None:
    """Raise pydantic's ValidationError when ``document`` is not a valid ``kind`` output."""
    _adapter(kind).validate_python(document)
