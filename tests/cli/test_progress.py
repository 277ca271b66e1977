"""Progress of a cold ``check`` on a large tree: drawn on a real terminal (a pty here),
on stderr only, never when stderr is not a terminal, never with ``-q``; stdout is the
same either way."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

FILES = 3000


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    (root / "testfleet.toml").write_text('roots = ["tests"]\n\n[stages.a]\nbackend = "cpu"\n',
                                         encoding="utf-8")
    body = "".join(f"def test_{i}():\n    assert {i} + 1 > {i}\n\n" for i in range(60))
    for d in range(30):
        folder = root / "tests" / f"d{d:02d}"
        folder.mkdir(parents=True)
        for i in range(FILES // 30):
            (folder / f"test_{i:03d}.py").write_text(
                'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="a")\n'
                + body, encoding="utf-8")
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env.update(NO_COLOR="1", TERM="xterm", COLUMNS="120")
    return env


def _check_on_a_terminal(root: Path, *args: str) -> tuple[int, str, str]:
    """``testfleet [args] check --no-cache`` with stderr on a pty: (status, stdout, terminal)."""
    main_fd, worker_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "testfleet", *args, "check", "--no-cache"],
                            cwd=root, env=_env(), stdout=subprocess.PIPE, stderr=worker_fd,
                            stdin=subprocess.DEVNULL)
    os.close(worker_fd)
    seen = b""
    while True:
        ready, _, _ = select.select([main_fd], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError("check did not finish")
        try:
            chunk = os.read(main_fd, 1 << 16)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        seen += chunk
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    os.close(main_fd)
    return proc.wait(timeout=60), out, seen.decode("utf-8", "replace")


@pytest.mark.timeout(600)
def test_cold_check_shows_progress_on_a_terminal_and_clears_it(big_tree: Path) -> None:
    status, out, terminal = _check_on_a_terminal(big_tree)
    assert status == 0, out + terminal
    assert f"{FILES} files" in out
    assert "checking syntax" in terminal or "scanning test files" in terminal, terminal
    assert f"/{FILES}" in terminal  # an m/n count of the phase's items
    assert "Traceback" not in terminal


@pytest.mark.timeout(600)
def test_quiet_or_not_a_terminal_shows_nothing(big_tree: Path) -> None:
    status, out, terminal = _check_on_a_terminal(big_tree, "-q")
    assert status == 0 and "scanning" not in terminal and "checking syntax" not in terminal
    piped = subprocess.run([sys.executable, "-m", "testfleet", "check", "--no-cache"],
                           cwd=big_tree, env=_env(), capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout == out
