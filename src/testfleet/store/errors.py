"""Why the history database cannot be used, as exceptions a command can show as-is.

Every one is a :class:`~testfleet.errors.TestfleetError` (exit status 2, no
traceback). Planning catches :class:`StoreError` and falls back to literal
``est_time`` values with a warning; commands whose whole job is the database
(``db``, ``durations import``) let it reach the user.
"""

from __future__ import annotations

from testfleet.errors import TestfleetError


class StoreError(TestfleetError):
    """The history database is missing, unreachable, locked, corrupt or mismatched."""


class StoreMissing(StoreError):
    """The database file (or PostgreSQL schema) does not exist yet."""


class StoreUnavailable(StoreError):
    """Cannot connect: server down, bad credentials, unreadable path."""


class StoreLocked(StoreError):
    """Another process holds a lock longer than the busy timeout."""


class StoreCorrupt(StoreError):
    """The file exists but is not a usable database."""


class SchemaNotInitialised(StoreError):
    """The database exists but has no testfleet schema: run ``testfleet db init``."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer testfleet than this one."""


class SchemaOutdated(StoreError):
    """The database needs ``testfleet db upgrade`` before this testfleet can use it."""


class PermissionDenied(StoreError):
    """The database role may not do what was asked (usually DDL)."""


class InvalidExecution(StoreError, ValueError):
    """Execution rows that must not be recorded (negative or non-finite duration, ...)."""
