"""Orphans of a test (#36 item 1): reaped while it runs, swept in bounded, linear rounds.

Real processes, counted and inspected; no assertion on elapsed time. Every helper here
ends by itself (the longest after 10 s), so a failing test leaks nothing for good.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testfleet.runner import tree as tree_module
from testfleet.runner.interrupt import Interrupt
from testfleet.runner.process import ProcessResult, run_process
from testfleet.runner.procscan import Proc, parse_stat, read_proc, snapshot
from testfleet.runner.tree import ProcessTree, direct_children, subreaper

# N shells that background a short sleep and exit: N orphans, dead shortly after; then
# exit 3 (the runner must see that status, never a 0 stolen by its reaping).
SHORT_HELPERS = """
import subprocess, sys
for _ in range(int(sys.argv[1])):
    subprocess.run(["sh", "-c", "(sleep 0.01 &)"])
sys.exit(3)
"""

# N orphans that live (sleep) until killed or 10 s have passed; then the test passes.
LIVE_HELPERS = """
import subprocess, sys
for _ in range(int(sys.argv[1])):
    subprocess.run(["sh", "-c", "(sleep 10 &)"])
print("helpers started", flush=True)
"""

# Leaves the test's session, ignores SIGTERM, forks and exits every 3 ms for 10 s.
HOPPER = """
import os, signal, time
end = time.time() + 10
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.setsid()
while time.time() < end:
    if os.fork():
        os._exit(0)
    time.sleep(0.003)
"""

HOPPING_TEST = f"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", {HOPPER!r}])
time.sleep(0.3)
"""


@pytest.fixture
def reaping() -> Iterator[set[int]]:
    """This process as a subreaper; yields the children it had before (never touched)."""
    with subreaper(True) as ok:
        if not ok:
            pytest.skip("needs PR_SET_CHILD_SUBREAPER (Linux)")
        baseline = direct_children()
        try:
            yield baseline
        finally:
            for pid in direct_children() - baseline:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)


def _orphans(baseline: set[int]) -> set[int]:
    return direct_children() - baseline


def _zombies(pids: set[int]) -> set[int]:
    return {pid for pid in pids if (p := read_proc(pid)) is not None and p.zombie}


def _wait_for(predicate, what: str, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _run(script: str, *args: str, timeout: float = 60.0, grace: float = 5.0,
         interrupt: Interrupt | None = None) -> tuple[ProcessResult, bytes]:
    out: list[bytes] = []
    res = run_process([sys.executable, "-c", script, *args], cwd=Path.cwd(), env=dict(os.environ),
                      timeout=timeout, grace=grace, sink=out.append, interrupt=interrupt,
                      subreaper=True)
    return res, b"".join(out)


def test_reap_collects_dead_orphans_only(reaping: set[int]) -> None:
    """Dead orphans are collected; the test process and an older child keep their status."""
    older = subprocess.Popen([sys.executable, "-c", "raise SystemExit(5)"])
    root = subprocess.Popen([sys.executable, "-c", SHORT_HELPERS.replace("sys.exit(3)", ""), "20"],
                            start_new_session=True)
    baseline = reaping | {older.pid}
    tree = ProcessTree(root.pid, baseline, subreaper=True)
    _wait_for(lambda: _zombies({root.pid}) == {root.pid}, "the test process to exit")
    _wait_for(lambda: len(_zombies(_orphans(baseline) - {root.pid})) == 20, "20 dead orphans")
    assert tree.reap() == 20
    assert tree.reaped == 20
    assert _orphans(baseline) == {root.pid}  # only the unreaped test process is left
    assert root.wait(timeout=30) == 0  # its status was not taken
    assert older.wait(timeout=30) == 5


def test_attempt_reaps_every_orphan_and_keeps_the_exit_status(reaping: set[int]) -> None:
    res, _ = _run(SHORT_HELPERS, "200")
    assert res.returncode == 3
    assert res.reaped == 200
    assert _orphans(reaping) == set()  # no zombie, nothing alive


def test_a_sweep_round_is_one_scan_of_the_process_table(
        reaping: set[int], monkeypatch: pytest.MonkeyPatch) -> None:
    root = subprocess.Popen([sys.executable, "-c", LIVE_HELPERS, "50"], start_new_session=True,
                            stdout=subprocess.DEVNULL)
    assert root.wait(timeout=60) == 0
    tree = ProcessTree(root.pid, reaping, subreaper=True)
    tree.mark_reaped()
    _wait_for(lambda: len(_orphans(reaping) - _zombies(_orphans(reaping))) == 50, "50 helpers")
    scans: list[int] = []

    def counted() -> dict[int, Proc]:
        scans.append(1)
        return snapshot()

    monkeypatch.setattr(tree_module, "snapshot", counted)
    assert len(tree.alive()) == 50
    assert len(scans) == 1
    tree.kill_all()
    assert tree.alive() == []
    assert _orphans(reaping) == set()


def test_kill_all_catches_a_pid_hopper_and_spares_older_children(reaping: set[int]) -> None:
    older = subprocess.Popen(["sleep", "10"])
    baseline = reaping | {older.pid}
    root = subprocess.Popen([sys.executable, "-c", HOPPING_TEST], start_new_session=True)
    assert root.wait(timeout=60) == 0
    tree = ProcessTree(root.pid, baseline, subreaper=True)
    tree.mark_reaped()
    assert not tree.gone(), "the hopper should be running"
    assert tree.kill_all() >= 1  # it left the group: only a kill by pid reaches it
    assert tree.alive() == []
    assert _orphans(baseline) == set()
    assert older.poll() is None  # not ours to kill
    older.kill()
    older.wait(timeout=30)


def test_the_sweep_ends_at_the_file_deadline(reaping: set[int]) -> None:
    """The grace period (60 s) is longer than what is left of the file's 2 s: the sweep
    goes to SIGKILL at the deadline and says so."""
    res, _ = _run(HOPPING_TEST, timeout=2.0, grace=60.0)
    assert res.returncode == 0
    assert res.leftovers == 1
    assert res.sweep_cut
    assert not res.unkillable
    assert _orphans(reaping) == set()


def test_a_signal_during_the_sweep_ends_its_grace(
        reaping: set[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The first signal to the runner (here, as the sweep starts) ends the polite wait:
    the hopper ignores SIGTERM, and neither the 60 s timeout nor grace is reached."""
    interrupt = Interrupt()
    real_terminate = ProcessTree.terminate

    def terminate(self: ProcessTree, sig: int = signal.SIGTERM) -> None:
        real_terminate(self, sig)
        interrupt.trigger(signal.SIGTERM)

    monkeypatch.setattr(ProcessTree, "terminate", terminate)
    try:
        res, _ = _run(HOPPING_TEST, timeout=60.0, grace=60.0, interrupt=interrupt)
    finally:
        interrupt.close()
    assert res.returncode == 0
    assert res.leftovers == 1
    assert not res.sweep_cut
    assert interrupt.signum == signal.SIGTERM
    assert _orphans(reaping) == set()


def test_an_orphan_that_got_the_reaped_test_process_pid_is_still_found(reaping: set[int]) -> None:
    """After the test process was collected its pid is free; if an orphan gets it, the
    orphan must not be mistaken for the (protected) test process."""
    helper = subprocess.Popen(["sleep", "10"])
    tree = ProcessTree(helper.pid, reaping, subreaper=True)
    assert tree.alive() == []  # while it is "the test process", it is protected
    tree.mark_reaped()  # as if the test process had been collected and its pid reused
    assert [p.pid for p in tree.alive()] == [helper.pid]
    assert tree.kill_all() == 1
    assert _orphans(reaping) == set()


def test_a_stat_line_is_read_past_a_command_name_with_parentheses_and_spaces() -> None:
    rest = b" ".join([b"Z", b"17", b"99", *([b"0"] * 16), b"4242", b"0"])
    proc = parse_stat(123, b"123 (evil) Z 1 1 (x) " + rest + b"\n")
    assert proc == Proc(123, 17, 99, True, 4242.0)
    assert parse_stat(7, b"7 (truncated") is None
