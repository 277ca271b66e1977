"""``testfleet db status --format json`` (``testfleet.db-status/1``)."""

from __future__ import annotations

from typing import Literal

from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import closed

#: where the database choice came from, by precedence
Origin = Literal["--database", "TESTFLEET_DATABASE_URL", "config 'database'", "default"]
DbState = Literal["missing", "uninitialised", "outdated", "ready", "newer-than-code"]


@closed
class StageExecutionsDoc(TypedDict):
    """What the history holds for one stage (lane)."""

    stage: str
    executions: int
    passing: int
    files: int
    newest: float
    """The newest execution's time (epoch seconds)."""


@closed
class DbStatusDoc(TypedDict):
    """Where the history database is, its migration level and what it holds."""

    schema: Literal["testfleet.db-status/1"]
    database: str
    """The database (a path, or a URL with its password hidden)."""
    origin: Origin
    dialect: Literal["sqlite", "postgresql"]
    code_schema_version: int
    """The migration level this testfleet expects."""
    schema_version: int | None
    """The database's own migration level (null: missing or uninitialised)."""
    state: DbState
    stages: list[StageExecutionsDoc]
    pending: NotRequired[list[str]]
    """Only when ``outdated``: the migrations ``db upgrade`` would apply."""
