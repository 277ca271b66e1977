"""Signatures in history: schema step 8 on an existing database, both writers, bundles
(format 2; format 1 still read), merge keeps them, pruning drops the unnamed."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.store.conftest import MINIMAL_CONFIG, engine_name, project, store_url
from tests.store.test_recorded_index import migrate_to

from testfleet.config import Project
from testfleet.failures.signature import failure_signature
from testfleet.history.bundle import BundleError, Source, decode, encode
from testfleet.history.export import export_payload
from testfleet.history.merge import merge_bundles
from testfleet.store import connect, open_store
from testfleet.store.caserow import CaseRow
from testfleet.store.durations import Execution
from testfleet.store.sqlite_write import open_writer

__all__ = ["MINIMAL_CONFIG", "engine_name", "project", "store_url"]

SIG = failure_signature("RuntimeError: No HIP GPUs are available\n")
CASE_SIG = failure_signature("E   assert 1 == 2\ntests/t.py:3: AssertionError\n")


def _failed(i: int, run: str = "7") -> Execution:
    return Execution(f"tests/t{i}.py", "mi300x", "rocm", 1.0, "FAILED", ci_run_id=run,
                     timestamp=100.0 + i, signature=SIG.digest)


def _signatures(store: Any) -> dict[str, tuple[str, str, str]]:
    from sqlalchemy import select

    from testfleet.store.tables import failure_signatures as fs

    with store.read() as conn:
        return {r.digest: (r.kind, r.label, r.text) for r in conn.execute(select(fs))}


def test_step_8_keeps_a_step_7_history_and_new_rows_carry_signatures(
        project: Project, engine_name: str, request: pytest.FixtureRequest) -> None:
    from sqlalchemy import select

    from testfleet.store.schema import executions, latest_version

    url = None if engine_name == "sqlite" else request.getfixturevalue("pg_url")
    with connect(project, url, create_file=True) as store:
        migrate_to(store, 7)
        with store.write() as conn:  # as a step-7 writer wrote it
            from testfleet.store.durations import execution_payload
            from testfleet.store.execution_rows import AlchemyDb, insert_payload

            insert_payload(AlchemyDb(conn), [{k: v for k, v in r.items() if k != "signature"}
                                             for r in execution_payload([_failed(0)])])
        # step 8 (signatures) and every later step apply on top of a step-7 history
        assert [m.version for m in store.migrate()] == list(range(8, latest_version() + 1))
        store.record_executions([_failed(1)], [SIG])
        with store.read() as conn:
            rows = [(r.file, r.signature) for r in conn.execute(
                select(executions.c.file, executions.c.signature).order_by(executions.c.file))]
        assert rows == [("tests/t0.py", None), ("tests/t1.py", SIG.digest)]
        assert _signatures(store) == {SIG.digest: (SIG.kind, SIG.label, SIG.text)}


def test_both_writers_store_signatures_alike(project: Project, tmp_path: Path) -> None:
    texts = []
    for name in ("store", "writer"):
        with open_store(project, str(tmp_path / f"{name}.db")) as store:
            writer: Any = store if name == "store" else open_writer(store.target)
            writer.record_executions([_failed(0), _failed(1)], [SIG, SIG, CASE_SIG])
            writer.record_testcases([CaseRow("tests/t0.py", "mi300x", "rocm", "test_a", "FAILED",
                                             ci_run_id="7", timestamp=100.0,
                                             signature=CASE_SIG.digest)])
            if name == "writer":
                writer.close()
        con = sqlite3.connect(tmp_path / f"{name}.db")
        try:
            texts.append((con.execute("SELECT digest, kind, label, text FROM failure_signatures "
                                      "ORDER BY digest").fetchall(),
                          con.execute("SELECT signature FROM testcases").fetchall()))
        finally:
            con.close()
    assert texts[0] == texts[1] and len(texts[0][0]) == 2


def test_a_bad_signature_is_refused_before_anything_is_written(project: Project) -> None:
    from testfleet.store.errors import InvalidExecution

    with open_store(project) as store:
        with pytest.raises(InvalidExecution, match="signature must be 16 lower-case hex"):
            store.record_executions([Execution("t.py", "s", "cpu", 1.0, signature="XYZ")])
        bad = SIG.__class__("00" * 8, "nonsense", "t", "")
        with pytest.raises(InvalidExecution, match="kind 'nonsense'"):
            store.record_executions([_failed(0)], [bad])


def test_bundles_carry_signatures_and_merge_keeps_them(project: Project, tmp_path: Path) -> None:
    with open_store(project, str(tmp_path / "a.db")) as store:
        store.record_executions([_failed(i) for i in range(3)], [SIG, CASE_SIG])
        store.record_testcases([CaseRow("tests/t0.py", "mi300x", "rocm", "test_a", "FAILED",
                                        ci_run_id="7", timestamp=100.0, signature=CASE_SIG.digest)])
        bundle = decode(encode(export_payload(store, run_id="7", source=Source())))
    assert bundle.counts()["signatures"] == 2
    with open_store(project, str(tmp_path / "b.db")) as store:
        result = merge_bundles(store, [bundle], allow_untrusted=True)
        again = merge_bundles(store, [bundle], allow_untrusted=True)
        assert result.added["signatures"] == 2 and again.added["signatures"] == 0
        assert set(_signatures(store)) == {SIG.digest, CASE_SIG.digest}
        from testfleet.incidents.history import recent_incidents

        incidents = recent_incidents(store)
        # t0 reported its failing test: it counts by the test's signature, t1 and t2 by the file's
        assert sorted((i.signature.digest, i.files, i.tests) for i in incidents) == sorted([
            (SIG.digest, ("tests/t1.py", "tests/t2.py"), ()),
            (CASE_SIG.digest, ("tests/t0.py",), ("tests/t0.py::test_a",))])


def _sealed(payload: dict[str, Any], schema: str) -> bytes:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(b'{"payload":' + body + b',"schema":' + json.dumps(schema).encode()
                         + b',"sha256":"' + hashlib.sha256(body).hexdigest().encode() + b'"}',
                         mtime=0)


PAYLOAD = {"store_schema": 7, "created_at": 1.0, "testfleet": "0.1.0", "source": {},
           "executions": [{"uid": "a" * 32, "file": "t.py", "stage": "s", "backend": "cpu",
                           "duration": 1.0, "outcome": "FAILED", "attempt": 1, "ts": 1.0,
                           "recorded_at": 1.0}]}


def test_a_format_1_bundle_is_still_read() -> None:
    bundle = decode(_sealed(PAYLOAD, "testfleet.bundle/1"))
    assert bundle.payload.executions[0].signature is None and bundle.counts()["signatures"] == 0


def test_a_format_1_bundle_cannot_claim_signatures() -> None:
    doc = {**PAYLOAD, "executions": [{**PAYLOAD["executions"][0], "signature": SIG.digest}],
           "signatures": [{"digest": SIG.digest, "kind": SIG.kind, "label": SIG.label,
                           "text": SIG.text}]}
    with pytest.raises(BundleError, match="format-1 bundle cannot carry failure signatures"):
        decode(_sealed(doc, "testfleet.bundle/1"))
    assert decode(_sealed(doc, "testfleet.bundle/2")).counts()["signatures"] == 1


def test_a_named_signature_must_be_in_the_bundle() -> None:
    doc = {**PAYLOAD, "executions": [{**PAYLOAD["executions"][0], "signature": SIG.digest}]}
    with pytest.raises(BundleError, match=f"executions\\[0\\] names failure signature {SIG.digest}"):
        decode(_sealed(doc, "testfleet.bundle/2"))


def test_pruning_drops_signatures_no_row_names(project: Project) -> None:
    with open_store(project) as store:
        store.record_executions([_failed(i, run=str(i)) for i in range(3)], [SIG])
        store.record_executions([Execution("tests/t0.py", "mi300x", "rocm", 1.0, "PASSED",
                                           timestamp=500.0 + i) for i in range(3)])
        store.prune_executions(1, older_than=400.0)
        assert _signatures(store) == {}
