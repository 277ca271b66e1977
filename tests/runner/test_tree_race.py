"""A descendant that forks and exits while the runner lists the tree must not hide its child.

Found as a rare failure of ``test_process_that_survives_sigkill_is_reported_not_waited_for``
(about one run in ten on Python 3.10, never seen on 3.11): the runner listed its own
children, then the daemon's parent forked and exited, handing the daemon to the runner
(its subreaper) before the runner listed that parent's children. The daemon was in
neither list, and the test file passed with a live process left behind. The runner now
reads the process table once per round: the same race is a fork-and-exit right after
that read.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from testfleet.runner import tree as tree_module
from testfleet.runner.procscan import Proc
from testfleet.runner.tree import ProcessTree, direct_children, subreaper

# The test process's child A (its own session) waits for the go file, then forks the
# daemon G and exits; the test process itself exits at once.
SCRIPT = """
import os, sys, time
go = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    while not os.path.exists(go):
        time.sleep(0.005)
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)
"""


def _wait(predicate, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_child_handed_over_while_the_tree_is_listed_is_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = tmp_path / "go"
    with subreaper(True) as reaping:
        if not reaping:
            pytest.skip("needs PR_SET_CHILD_SUBREAPER (Linux)")
        baseline = direct_children()
        root = subprocess.Popen([sys.executable, "-c", SCRIPT, str(go)], start_new_session=True)
        root.wait(timeout=30)
        tree = ProcessTree(root.pid, baseline, subreaper=True)
        tree.mark_reaped()
        _wait(lambda: bool(direct_children() - baseline), "the test process's child to be ours")
        real_snapshot = tree_module.snapshot

        def snapshot() -> dict[int, Proc]:
            found = real_snapshot()
            if not go.exists():  # the race, made certain: A forks and exits right after
                go.touch()
                _wait(lambda: psutil.Process(a_pid).status() == psutil.STATUS_ZOMBIE, "A to exit")
            return found

        [a_pid] = direct_children() - baseline
        monkeypatch.setattr(tree_module, "snapshot", snapshot)
        try:
            left = tree.alive()
            assert len(left) == 1, f"the daemon was not found: {left}"
            assert left[0].pid != a_pid and left[0].ppid == os.getpid() and not left[0].zombie
        finally:
            monkeypatch.undo()
            for pid in direct_children() - baseline:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
