"""Reaping orphans (#36 item 1): a test's helpers under ``testfleet run`` vs plain ``python``.

Two test files, each run in every round, in alternating order, as ``python FILE`` (the
reference: what the same body costs with no runner) and as ``testfleet run`` (a fresh
process, the runner's subreaper, continuous reaping and the sweep included):

* helpers: the body runs ``subprocess.run(["bash", "-c", "(sleep 0.05 &)"])`` N times
  (3,000 by default): N orphans, each dead 50 ms later. Its last lines give the time the
  body ended and the zombies its parent held then. Figure: seconds from the end of the
  body to the return of the command (target: 2 s), and the zombies held.
* pid hopper: the body starts a helper that leaves the test's group, ignores SIGTERM and
  forks and exits every 3 ms (a new pid each time), then passes 0.2 s later; the file's
  timeout is short (5 s) and the grace period longer (30 s). Figures: the time from the
  body's start to the hopper's last hop (its pid file's time), beside the file's timeout
  (target: below it), and whether the hopper outlived the command (the reference leaves
  it running: it is then stopped by a file it watches, and ends by itself anyway).

Zombies left: each file once more through ``run_process`` in this process (made a
subreaper, as ``testfleet run`` is); the figure is this process's zombie and live
children afterwards (target 0), with how many orphans the attempt reaped.

CLI: ``python benchmarks/bench_reap.py [--helpers 3000] [--rounds 3] [--hopper-timeout 5]``;
exits 1 when a target is missed. Every helper is bounded (the hopper stops after 30 s at
most), so a failing run cannot exhaust the host's pids.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CONFIG = """\
roots = ["tests"]

[stages.a]
backend = "cpu"
command = "python"

[runner]
timeout_floor = {floor}
timeout_factor = 0.01
grace_seconds = {grace}
max_attempts = 1
"""

ZOMBIES = '''
from testfleet import register_cpu_ci
register_cpu_ci(est_time=5, suite="a")
import os, subprocess, sys, time

if __name__ == "__main__":
    print(f"body-start {time.time():.6f}", flush=True)


def zombies_of_parent():
    n = 0
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                rest = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        n += rest[0] == b"Z" and int(rest[1]) == os.getppid()
    return n


def report():
    print(f"zombies-held {zombies_of_parent()}", flush=True)
    print(f"body-end {time.time():.6f}", flush=True)
'''

HELPERS_TEST = ZOMBIES + '''
if __name__ == "__main__":
    for _ in range(int(os.environ.get("BENCH_HELPERS", "3000"))):
        subprocess.run(["bash", "-c", "(sleep 0.05 &)"])
    time.sleep(0.1)  # the last helpers die
    report()
'''

HOPPER = '''
import os, signal, sys, time
end = time.time() + 30
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.setsid()
while time.time() < end and not os.path.exists("stop"):
    if os.fork():
        os._exit(0)
    with open(f"hopper.{os.getpid()}", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(f"hopper.{os.getpid()}", "hopper.pid")
    time.sleep(0.003)
'''

HOPPING_TEST = ZOMBIES + '''
if __name__ == "__main__":
    subprocess.Popen([sys.executable, "hopper.py"])
    time.sleep(0.2)
    report()
'''


def build(root: Path, test: str, floor: float, grace: float) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG.format(floor=floor, grace=grace))
    (root / "hopper.py").write_text(HOPPER)
    path = root / "tests/test_a.py"
    path.write_text(test)
    return path


def _env(helpers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env["BENCH_HELPERS"] = str(helpers)
    return env


def _figures(out: str) -> tuple[float, float, int]:
    """(time the body started, ended, zombies its parent held then) from its output."""
    start = end = zombies = None
    for line in out.splitlines():
        if line.startswith("body-start "):
            start = float(line.split()[1])
        elif line.startswith("body-end "):
            end = float(line.split()[1])
        elif line.startswith("zombies-held "):
            zombies = int(line.split()[1])
    if start is None or end is None or zombies is None:
        raise SystemExit(f"the test body did not finish:\n{out[-2000:]}")
    return start, end, zombies


@dataclass
class Ran:
    started: float  # when the test body started (its own clock line)
    ended: float  # when the body ended
    returned: float  # when the command returned
    zombies: int  # zombies the body's parent held at its end


def run(root: Path, argv: list[str], helpers: int) -> Ran:
    # Output to a file, not a pipe: a helper left running (the reference's hopper) keeps
    # the output open, and waiting for a pipe's end would measure the helper.
    with tempfile.TemporaryFile() as out:
        subprocess.run(argv, cwd=root, env=_env(helpers), stdout=out, stderr=subprocess.STDOUT,
                       timeout=900)
        returned = time.time()
        out.seek(0)
        start, end, zombies = _figures(out.read().decode("utf-8", "replace"))
    return Ran(start, end, returned, zombies)


def hopper_life(root: Path, started: float) -> float:
    """Seconds from the test body's start to the hopper's last hop (its pid file's time)."""
    return (root / "hopper.pid").stat().st_mtime - started


def hopper_alive(root: Path) -> bool:
    """Whether a hopper still hops (it rewrites hopper.pid every few ms)."""
    path = root / "hopper.pid"
    before = path.read_bytes() if path.exists() else b""
    time.sleep(0.3)
    return path.exists() and path.read_bytes() != before


def stop_hopper(root: Path) -> None:
    (root / "stop").touch()
    deadline = time.monotonic() + 10
    while hopper_alive(root) and time.monotonic() < deadline:
        pass
    (root / "stop").unlink()


def in_process(root: Path, helpers: int, timeout: float, grace: float) -> tuple[int, int]:
    """(children of ours left after one attempt, orphans it reaped), as a subreaper."""
    from testfleet.runner.process import run_process
    from testfleet.runner.tree import direct_children, subreaper

    with subreaper(True) as ok:
        if not ok:
            raise SystemExit("needs PR_SET_CHILD_SUBREAPER (Linux)")
        baseline = direct_children()
        res = run_process([sys.executable, "tests/test_a.py"], cwd=root, env=_env(helpers),
                          timeout=timeout, grace=grace, sink=lambda _data: None, subreaper=True)
        return len(direct_children() - baseline), res.reaped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--helpers", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hopper-timeout", type=float, default=5.0)
    ap.add_argument("--limit", type=float, default=2.0,
                    help="seconds allowed from the end of the helpers' body to the return")
    args = ap.parse_args(argv)
    after: dict[str, list[float]] = {"python": [], "testfleet": []}
    held: dict[str, list[int]] = {"python": [], "testfleet": [], "hopper": []}
    hop_return: dict[str, list[float]] = {"python": [], "testfleet": []}
    hop_life: list[float] = []
    outlived: dict[str, int] = {"python": 0, "testfleet": 0}
    with tempfile.TemporaryDirectory(prefix="tf-bench-reap-") as tmp:
        helpers_root, hopper_root = Path(tmp) / "helpers", Path(tmp) / "hopper"
        build(helpers_root, HELPERS_TEST, 600, 10)
        build(hopper_root, HOPPING_TEST, args.hopper_timeout, 30)
        commands = {"python": lambda root: [sys.executable, "tests/test_a.py"],
                    "testfleet": lambda root: [sys.executable, "-m", "testfleet", "-C", str(root),
                                               "run", "--stage", "a", "--no-history",
                                               "--output", "plain"]}
        for r in range(args.rounds):
            for kind in ("python", "testfleet") if r % 2 == 0 else ("testfleet", "python"):
                ran = run(helpers_root, commands[kind](helpers_root), args.helpers)
                after[kind].append(ran.returned - ran.ended)
                held[kind].append(ran.zombies)
                ran = run(hopper_root, commands[kind](hopper_root), 0)
                hop_return[kind].append(ran.returned - ran.started)
                if kind == "testfleet":
                    hop_life.append(hopper_life(hopper_root, ran.started))
                    held["hopper"].append(ran.zombies)
                if hopper_alive(hopper_root):
                    outlived[kind] += 1
                    stop_hopper(hopper_root)
            print(f"round {r + 1}: {args.helpers} helpers, body end -> return: python "
                  f"{after['python'][-1]:.3f}s, testfleet {after['testfleet'][-1]:.3f}s (zombies "
                  f"held {held['testfleet'][-1]}); pid hopper: body start -> return python "
                  f"{hop_return['python'][-1]:.2f}s, testfleet {hop_return['testfleet'][-1]:.2f}s, "
                  f"hopper's last hop {hop_life[-1]:.2f}s after the body started", flush=True)
        left_helpers, reaped_helpers = in_process(helpers_root, args.helpers, 600, 10)
        left_hopper, reaped_hopper = in_process(hopper_root, 0, args.hopper_timeout, 30)
    med = statistics.median
    print(f"\nmedians of {args.rounds} rounds (load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs):")
    print(f"  {args.helpers} helpers, body end -> return: python {med(after['python']):.3f}s, "
          f"testfleet {med(after['testfleet']):.3f}s (target <= {args.limit:g}s); zombies held "
          f"at the body's end: by python's parent {med(held['python']):.0f}, by testfleet "
          f"{med(held['testfleet']):.0f}")
    print(f"  pid hopper ({args.hopper_timeout:g}s file timeout, 30s grace): body start -> "
          f"return python {med(hop_return['python']):.2f}s (hopper outlived it "
          f"{outlived['python']}/{args.rounds}), testfleet {med(hop_return['testfleet']):.2f}s "
          f"(outlived {outlived['testfleet']}/{args.rounds}); hopper's last hop "
          f"{med(hop_life):.2f}s after the body started (max {max(hop_life):.2f}s); zombies held "
          f"{med(held['hopper']):.0f}")
    print(f"  children left after one attempt in-process: helpers {left_helpers} "
          f"({reaped_helpers} orphans reaped), pid hopper {left_hopper} ({reaped_hopper} reaped)")
    ok = (med(after["testfleet"]) <= args.limit and not outlived["testfleet"]
          and max(hop_life) <= args.hopper_timeout and left_helpers == 0 and left_hopper == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
