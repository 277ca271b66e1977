"""Failure signatures in history (schema step 8): one row per digest, named by the
``signature`` column of executions and testcases.

A failed file's row carries only the 16-digit digest of its signature; the signature's
kind, label and normalized text are stored once per digest here, so a night on which 8
files failed alike adds one text, not eight (the history is a CI cache every job
restores). Rows are content-addressed: inserting one that exists changes nothing, so
writers and history merge insert without looking first. Pruning deletes the rows no
execution or testcase names any more.

One implementation for the SQLAlchemy store and the runner's standard-library writer,
through :class:`testfleet.store.execution_rows.Db`; without SQLAlchemy (the table is
``store.tables.failure_signatures``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from testfleet.store.errors import InvalidExecution

if TYPE_CHECKING:
    from testfleet.failures.signature import Signature
    from testfleet.store.execution_rows import Db

DIGEST_RE = r"^[0-9a-f]{16}$"
DIGEST = re.compile(DIGEST_RE)
KINDS = ("infra", "timeout", "exception", "fatal", "output", "exit")
LABEL_MAX = 120
TEXT_MAX = 300


def signature_payload(signatures: Iterable[Signature]) -> list[dict[str, Any]]:
    """The rows of ``signatures`` (each digest once), validated: a bad one rejects all."""
    rows: dict[str, dict[str, Any]] = {}
    bad = []
    for s in signatures:
        problem = row_problem(s.digest, s.kind, s.label, s.text)
        if problem:
            bad.append(f"{s.digest!r:.40}: {problem}")
            continue
        rows.setdefault(s.digest, {"digest": s.digest, "kind": s.kind, "label": s.label,
                                   "text": s.text})
    if bad:
        raise InvalidExecution("refusing to record failure signatures:\n  " + "\n  ".join(bad[:20]))
    return list(rows.values())


def row_problem(digest: object, kind: object, label: object, text: object) -> str:
    if not isinstance(digest, str) or not DIGEST.match(digest):
        return "digest must be 16 lower-case hex digits"
    if kind not in KINDS:
        return f"kind {kind!r:.40} is not one of {', '.join(KINDS)}"
    if not isinstance(label, str) or len(label) > LABEL_MAX:
        return f"label must be a string of at most {LABEL_MAX} characters"
    if not isinstance(text, str) or not text or len(text) > TEXT_MAX:
        return f"text must be a non-empty string of at most {TEXT_MAX} characters"
    return ""


def insert_signatures(db: Db, payload: Sequence[dict[str, Any]]) -> None:
    db.many("INSERT INTO failure_signatures (digest, kind, label, text) "
            "VALUES (:digest, :kind, :label, :text) ON CONFLICT (digest) DO NOTHING", list(payload))


def read_signatures(db: Db, digests: Iterable[str]) -> dict[str, Signature]:
    """The stored signatures among ``digests`` (a digest without a row is absent)."""
    from testfleet.failures.signature import Signature

    wanted = sorted({d for d in digests if d})
    out: dict[str, Signature] = {}
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        params = {f"d{j}": d for j, d in enumerate(chunk)}
        listed = "(" + ", ".join(":" + k for k in params) + ")"
        for digest, kind, label, text in db.rows(
                f"SELECT digest, kind, label, text FROM failure_signatures WHERE digest IN {listed}",
                params):
            out[digest] = Signature(digest, kind, text, label)
    return out


def prune_signatures(db: Db) -> None:
    """Delete the signatures no execution or testcase names (after pruning them)."""
    db.many("DELETE FROM failure_signatures WHERE digest NOT IN (SELECT signature FROM "
            "execution_rows WHERE signature IS NOT NULL) AND digest NOT IN (SELECT signature "
            "FROM testcases WHERE signature IS NOT NULL)", [{}])
