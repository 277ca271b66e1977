"""The history database: test durations now, metric history (gate) on the same schema.

SQLite under ``<root>/<cache_dir>/history.db`` by default; PostgreSQL (psycopg 3)
for a team's shared history via ``--database URL``, ``TESTFLEET_DATABASE_URL`` or the
config's ``database``. SQLAlchemy Core is imported lazily, on first real use.

    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    with open_store(project) as store:
        store.record_executions([Execution("tests/test_x.py", "stage-a-cpu", "cpu", 12.5)])
        store.durations("stage-a-cpu", None, window=10)  # {"tests/test_x.py": [12.5]}
"""

from __future__ import annotations

from testfleet.store.core import Store, connect, open_store
from testfleet.store.engine import ENV_URL, Target, mask_password, resolve_target
from testfleet.store.errors import (
    InvalidExecution,
    PermissionDenied,
    SchemaNotInitialised,
    SchemaOutdated,
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreMissing,
    StoreUnavailable,
)

__all__ = [
    "ENV_URL",
    "InvalidExecution",
    "PermissionDenied",
    "SchemaNotInitialised",
    "SchemaOutdated",
    "SchemaTooNew",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreLocked",
    "StoreMissing",
    "StoreUnavailable",
    "Target",
    "connect",
    "mask_password",
    "open_store",
    "resolve_target",
]
