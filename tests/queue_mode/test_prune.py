"""Queue rows do not grow forever (#40): ``testfleet queue prune`` and the prune every new
lane's enqueue makes delete the lanes idle for long enough, with their files and attempts,
on SQLite and on the real PostgreSQL; a lane still worked on stays."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import func, insert, select

from testfleet.config import Project
from testfleet.store import Store, connect, open_store
from testfleet.store import queue as q

DAY = 86400.0


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, config_project: Callable[[str], Project]
          ) -> Iterator[tuple[Project, str | None, Store]]:
    project = config_project('roots = ["tests"]\n')
    url: str | None = None
    if request.param == "postgresql":
        admin = request.getfixturevalue("pg_url")
        url = request.getfixturevalue("pg_url_rw")
        with connect(project, admin) as conn:
            conn.migrate()
    with open_store(project, url) as s:
        if request.param == "sqlite":
            s.migrate()
        yield project, url, s


def _lane(conn: object, digest: str, *, enqueued: float, touched: float | None) -> None:
    conn.execute(insert(q.queue_lanes).values(  # type: ignore[attr-defined]
        plan_digest=digest, lane="lane", files=2, enqueued_at=enqueued, enqueued_by="r",
        pull_request=False))
    for i, state in enumerate(("done", "pending")):
        conn.execute(insert(q.queue_items).values(  # type: ignore[attr-defined]
            plan_digest=digest, lane="lane", file=f"tests/test_{i}.py", position=i,
            estimate=1.0, state=state, claims=1 if touched else 0, lost=0, infra_retries=0,
            claimed_at=touched, finished_at=touched if state == "done" else None))
    if touched is not None:
        conn.execute(insert(q.queue_attempts).values(  # type: ignore[attr-defined]
            plan_digest=digest, lane="lane", file="tests/test_0.py", runner="r", claim="t",
            claimed_at=touched, ended_at=touched, status="final", outcome="PASSED"))


def _count(store: Store) -> tuple[int, int, int]:
    with store.read() as conn:
        return tuple(conn.execute(select(func.count()).select_from(t)).scalar_one()
                     for t in q.QUEUE_TABLES)  # type: ignore[return-value]


def test_prune_deletes_idle_lanes_only(store: tuple[Project, str | None, Store],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from testfleet.cli.main import main

    project, url, s = store
    now = time.time()
    with s.write() as conn:
        _lane(conn, "sha256:old-finished", enqueued=now - 40 * DAY, touched=now - 39 * DAY)
        _lane(conn, "sha256:old-abandoned", enqueued=now - 40 * DAY, touched=None)
        _lane(conn, "sha256:old-but-active", enqueued=now - 40 * DAY, touched=now - 60)
        _lane(conn, "sha256:recent", enqueued=now - 2 * DAY, touched=now - DAY)
    assert _count(s) == (4, 8, 3)
    args = ["-C", str(project.root), "queue", "prune", "--older-than", "7"]
    if url:
        args += ["--database", url]
    with pytest.raises(SystemExit) as info:
        main([*args, "--dry-run"])
    assert info.value.code == 0
    assert "would delete 2 lane(s)" in capsys.readouterr().out and _count(s) == (4, 8, 3)
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 0
    assert "deleted 2 lane(s) idle for 7 day(s) or more: 4 file row(s), 1 attempt row(s)" in \
        capsys.readouterr().out
    with s.read() as conn:
        left = {d for (d,) in conn.execute(select(q.queue_lanes.c.plan_digest))}
    assert left == {"sha256:old-but-active", "sha256:recent"} and _count(s) == (2, 4, 2)
    with s.write() as conn:  # a lane being enqueued is never its own prune's victim
        assert q.prune(conn, now + DAY, keep=("sha256:recent", "lane")) == q.Pruned(1, 2, 1)
    assert _count(s) == (1, 2, 1)


def test_a_new_lanes_enqueue_prunes_lanes_idle_for_keep_days(pg_url: str, pg_url_rw: str,
        config_project: Callable[[str], Project]) -> None:
    from testfleet.queue.worker import QueueDb, QueueSettings

    project = config_project('roots = ["tests"]\n')
    with connect(project, pg_url) as admin:
        admin.migrate()
    with open_store(project, pg_url_rw) as s:
        with s.write() as conn:
            now = q.server_now(conn)
            _lane(conn, "sha256:ancient", enqueued=now - (q.KEEP_DAYS + 1) * DAY,
                  touched=now - (q.KEEP_DAYS + 1) * DAY)
            _lane(conn, "sha256:last-week", enqueued=now - 7 * DAY, touched=now - 7 * DAY)
        db = QueueDb(s, QueueSettings("sha256:" + "cd" * 32, "lane", 30.0, 1, False, "r1"),
                     lambda _m: None, 5.0, lambda: False)
        assert db.enqueue([("tests/test_a.py", 1.0)])
        with s.read() as conn:
            left = {d for (d,) in conn.execute(select(q.queue_lanes.c.plan_digest))}
        assert left == {"sha256:last-week", "sha256:" + "cd" * 32}
