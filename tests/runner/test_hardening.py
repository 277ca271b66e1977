"""Runner hardening from issue #17, with real processes: every catchable terminating
signal is handled like SIGTERM, a lost final JUnit write is not a green exit, and a
PostgreSQL server that stops answering after connect (a real TCP proxy in front of the
real server that stops relaying) neither hangs the run nor blocks its signal handling."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from support import process_gone, wait_until_ready

PASS = "print('ok')\n"
SLOW_WITH_CHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
open(sys.argv[0] + ".pids.tmp", "w").write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[0] + ".pids.tmp", sys.argv[0] + ".pids")  # whole or absent
print("running", flush=True)
time.sleep(3600)
"""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env.update(extra or {})
    return env


def _spawn(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(env))


@pytest.mark.parametrize("sig", [signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM])
def test_every_terminating_signal_kills_the_test_and_its_children(cli_project, sig: int) -> None:
    root, plan, [job] = cli_project({"test_a.py": SLOW_WITH_CHILD}, floor=60.0, grace=2.0)
    proc = _spawn(root, "--plan", str(plan), "--job", job, "--junit", "j.xml", "--no-history")
    pids_file = root / "tests" / "test_a.py.pids"
    wait_until_ready(pids_file, proc)  # a condition: load makes it slower, never red
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)  # grace 2 s; the bound only catches a hang
    assert proc.returncode == 128 + sig, out + err
    deadline = time.monotonic() + 30
    pids = list(map(int, pids_file.read_text().split()))
    while not all(process_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(process_gone(p) for p in pids), pids


def test_a_lost_final_junit_write_is_not_exit_0(cli_project) -> None:
    # the test puts a file where the JUnit directory was, while it runs: the final write cannot happen,
    # and the run must not report success beside a missing or placeholder file
    body = ("import shutil\nshutil.rmtree('out', ignore_errors=True)\n"
            "open('out', 'w').write('a file where the JUnit directory was')\n")
    root, plan, [job] = cli_project({"test_a.py": body})
    res = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                          "--plan", str(plan), "--job", job, "--junit", "out/j.xml",
                          "--no-history"], capture_output=True, text=True, timeout=120,
                         env=_env())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "could not be written" in res.stderr


class SilentProxy:
    """A TCP proxy on 127.0.0.1 to the real PostgreSQL server that relays the start of
    each connection, then stops relaying (both ways) while keeping the sockets open:
    to the client the server is connected and never answers again."""

    def __init__(self, host: str, port: int, relay_bytes: int) -> None:
        self.target = (host, port)
        self.relay_bytes = relay_bytes  # server->client bytes relayed per connection
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.sockets: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        relayed = 0
        while not self.stop.is_set() and relayed < self.relay_bytes:
            for key, _ in sel.select(0.2):
                src = key.fileobj
                assert isinstance(src, socket.socket)
                data = src.recv(65536)
                if not data:
                    return
                if src is upstream:
                    data = data[: self.relay_bytes - relayed]
                    relayed += len(data)
                key.data.sendall(data)
        # silent from here on: nothing read, nothing relayed, sockets left open
        self.stop.wait()

    def close(self) -> None:
        self.stop.set()
        for s in [self.listener, *self.sockets]:
            s.close()


def _via(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    query = "&".join(q for q in [parts.query, "sslmode=disable"] if q)
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host,
                                     query=query))


def _migrate(url: str, root: Path) -> None:
    from testfleet.config import load_project
    from testfleet.store.core import connect

    store = connect(load_project(root), url)
    try:
        store.migrate()
    finally:
        store.close()


def _connected_then_silent(proxy: SilentProxy, url: str) -> None:
    """Let the proxy relay one full connection set-up (measured on a real connection
    through it), then go silent for every later byte of every connection."""
    from sqlalchemy import create_engine

    from testfleet.store.engine import pg_connect_args

    sa_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    counted: list[int] = []
    orig = proxy._pump

    def counting(client: socket.socket, upstream: socket.socket) -> None:
        total = 0
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        while not proxy.stop.is_set():
            events = sel.select(0.5)
            if not events:
                counted.append(total)
                return
            for key, _ in events:
                src = key.fileobj
                assert isinstance(src, socket.socket)
                data = src.recv(65536)
                if not data:
                    counted.append(total)
                    return
                if src is upstream:
                    total += len(data)
                key.data.sendall(data)

    proxy._pump = counting  # type: ignore[method-assign]
    engine = create_engine(sa_url, connect_args=pg_connect_args(sa_url))
    with engine.connect():  # connect + dialect initialisation, nothing else
        pass
    engine.dispose()
    deadline = time.monotonic() + 10
    while not counted and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counted and counted[0] > 0
    proxy._pump = orig  # type: ignore[method-assign]
    proxy.relay_bytes = counted[0]  # the set-up only: the next statement gets no answer


def test_silent_postgresql_neither_hangs_the_run_nor_changes_verdicts(
        cli_project, pg_database, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    parts = urlsplit(pg_database.url)
    assert parts.hostname and parts.port
    root, plan, [job] = cli_project({"test_a.py": PASS, "test_b.py": PASS})
    _migrate(pg_database.url, root)
    proxy = SilentProxy(parts.hostname, parts.port, relay_bytes=10**9)
    try:
        url = _via(pg_database.url_rw, proxy.port)
        _connected_then_silent(proxy, url)
        start = time.monotonic()
        proc = _spawn(root, "--plan", str(plan), "--job", job, "--junit", "j.xml",
                      "--database", url, env={"TESTFLEET_HISTORY_TIMEOUT": "3"})
        out, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - start
        assert proc.returncode == 0, out + err  # verdicts unchanged
        assert "history database unavailable" in out + err, out + err
        assert "did not finish within 3s" in out + err, out + err
        assert elapsed < 60, elapsed

        # the same silence while the run is asked to stop: it stops at once, although
        # the history write it waits on would take up to 600 s
        root2, plan2, [job2] = cli_project({"test_c.py": PASS, "test_d.py": PASS})
        proc = _spawn(root2, "--plan", str(plan2), "--job", job2, "--database", url,
                      "--output", "plain", env={"TESTFLEET_HISTORY_TIMEOUT": "600"})
        time.sleep(10)  # test_c has passed; its history write hangs on the silent server
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, out + err
    finally:
        proxy.close()


def test_postgresql_sessions_get_timeouts_and_keepalives(pg_database) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from testfleet.config import Config, Project
    from testfleet.store.engine import create_engine_for, resolve_target

    project = Project(root=Path("/nonexistent"), config_path=Path("/nonexistent/t.toml"),
                      config=Config(), raw_config_text="")
    engine = create_engine_for(resolve_target(project, pg_database.url_rw))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "1min"
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "15s"
            # the URL's own options (the test schema's search_path) are kept
            assert "tf_" in str(conn.execute(text("SHOW search_path")).scalar())
            raw = conn.connection.dbapi_connection
            assert raw is not None
            info = raw.info  # type: ignore[attr-defined]
            params = info.get_parameters()
            assert params.get("keepalives") == "1" and params.get("tcp_user_timeout") == "30000"
    finally:
        engine.dispose()
