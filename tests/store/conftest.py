"""Store fixtures: a minimal project and a store URL per engine (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from testfleet.config import Project

MINIMAL_CONFIG = """\
roots = ["tests"]

[stages.stage-a-cpu]
backend = "cpu"

[stages.stage-c-h200]
backend = "cuda"

[stages.stage-c-mi300x]
backend = "rocm"
"""


@pytest.fixture
def project(config_project: Callable[[str], Project]) -> Project:
    """A project with three stages and no history; ignores any ambient database URL."""
    return config_project(MINIMAL_CONFIG)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(engine_name: str, project: Project, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A ready database for runtime use on each engine.

    SQLite: the embedded default (``None``), created on first use. PostgreSQL: a fresh
    schema initialised by the owner role, then used through the row-only role, which
    is what proves runtime operations need no DDL rights.
    """
    if engine_name == "sqlite":
        yield None
        return
    from testfleet.store import connect

    with connect(project, request.getfixturevalue("pg_url")) as owner:
        owner.migrate()
    yield request.getfixturevalue("pg_url_rw")
