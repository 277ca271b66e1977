"""Gate fixtures: a metric store on each engine (SQLite file, real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gate_helpers import make_project


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated history database URL; for PostgreSQL, the role that may NOT change the schema."""
    from testfleet.store.core import connect

    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.db'}"
        return
    pg = request.getfixturevalue("pg_database")
    owner = connect(make_project(tmp_path), pg.url)
    try:
        owner.migrate()  # `testfleet db init`, done by someone allowed to create tables
    finally:
        owner.close()
    yield pg.url_rw


@pytest.fixture
def metric_store(store_url: str, tmp_path: Path) -> Iterator[object]:
    from testfleet.store.core import open_store
    from testfleet.store.metric_store import MetricStore

    store = open_store(make_project(tmp_path), store_url)
    try:
        yield MetricStore(store)
    finally:
        store.close()
