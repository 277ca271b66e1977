"""A queue-mode project on the test PostgreSQL server: files that log each execution,
a sealed plan, and runners started as real ``testfleet run`` processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

CONFIG = """\
roots = ["tests"]

[stages.q]
backend = "cpu"
command = "python"
shards = {shards}
execution = "queue"
queue_lease_seconds = {lease}
timeout_floor = 60

[runner]
max_attempts = 1
"""

BODY = """\
import os, pathlib, sys, time
root = pathlib.Path(__file__).resolve().parents[1]
with open(root / "ran.log", "a") as fh:
    fh.write(f"{{__file__.split('/')[-1]}} {{os.getpid()}}\\n")
marker = root / "started" / pathlib.Path(__file__).name
marker.parent.mkdir(exist_ok=True)
marker.write_text(str(os.getppid()))
time.sleep({sleep})
{tail}
from testfleet import register_cpu_ci
register_cpu_ci(est_time={est}, suite="q")
"""


@dataclass
class QueueProject:
    root: Path
    plan: Path
    digest: str
    url: str  # the runners' (rows only), tagged with an application_name
    admin_url: str
    app: str

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "TESTFLEET_", "BUILDKITE", "PYTEST_"))}
        env.update(TESTFLEET_DATABASE_URL=self.url, PYTHONPATH=os.pathsep.join(sys.path))
        env.update(extra)
        return env

    def start(self, job: str, name: str, **extra: str) -> subprocess.Popen[str]:
        """A runner in its own session (SIGKILL to its group is a lost machine)."""
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed by the process's end
        return subprocess.Popen(
            [sys.executable, "-m", "testfleet", "-C", str(self.root), "run", "--plan",
             str(self.plan), "--job", job, "--display", "plain", "--plan-digest", self.digest,
             "--status-file", str(self.root / "statuses" / f"{name}.json")],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env(**extra),
            start_new_session=True)

    def testfleet(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(self.root), *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env())

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text()

    def ran(self) -> list[str]:
        log = self.root / "ran.log"
        return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []

    def sql(self, query: str, *params: object) -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            return list(conn.execute(query, params).fetchall())


def _tagged(url: str, app: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("application_name", app)]
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture
def queue_project(tmp_path: Path, pg_database) -> Callable[..., QueueProject]:  # type: ignore[no-untyped-def]
    def build(files: dict[str, tuple[float, float]], *, shards: int = 3, lease: float = 5,
              tail: dict[str, str] | None = None, owner_role: bool = False) -> QueueProject:
        """``files``: name -> (estimate, seconds it sleeps). ``owner_role``: runners connect
        as the schema's owner, whose backends the test may terminate (a role can signal
        only its own backends without pg_signal_backend)."""
        root = tmp_path / "proj"
        (root / "tests").mkdir(parents=True)
        (root / "statuses").mkdir()
        (root / "testfleet.toml").write_text(CONFIG.format(shards=shards, lease=lease))
        for name, (est, sleep) in files.items():
            (root / "tests" / name).write_text(textwrap.dedent(BODY.format(
                sleep=sleep, est=est, tail=(tail or {}).get(name, ""))))
        app = f"tfq-{uuid.uuid4().hex[:12]}"
        project = QueueProject(root, root / "plan.json", "", _tagged(pg_database.url if owner_role else pg_database.url_rw, app),
                               pg_database.url, app)
        init = project.testfleet("db", "init", "--database", pg_database.url)
        assert init.returncode == 0, init.stderr
        made = project.testfleet("plan", "--format", "json", "-o", str(project.plan))
        assert made.returncode == 0, made.stderr
        project.digest = json.loads(project.plan.read_text())["digest"]
        return project

    return build


class Outage:
    """A TCP forwarder between the runners and the PostgreSQL server that can go down and
    come back on the same port: to the runners, the database server stopped and restarted
    (connections reset, new ones refused), without touching the shared server."""

    def __init__(self, target: tuple[str, int]) -> None:
        import socket
        import threading

        self.target = target
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        import socket
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        import socket

        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, listener: Any) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.close()

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        return urlunsplit(parts._replace(netloc=f"{netloc[0]}@127.0.0.1:{self.port}"))


@pytest.fixture
def outage(pg_database) -> Iterator[Outage]:  # type: ignore[no-untyped-def]
    parts = urlsplit(pg_database.url)
    proxy = Outage((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield proxy
    finally:
        proxy.down()
