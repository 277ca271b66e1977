"""Session mode (``batch = true``) vs one pytest process per file, same files, same run.

Builds a scratch project of N small pytest files (a few tests each, importing the
standard library's ``json``/``dataclasses``: what a CPU unit-test file looks like) on one
stage ``unit`` and two config files that differ only in ``batch``; then, in each round,
in alternating order, runs the stage through ``testfleet run --stage unit`` with each
config (a fresh CLI process each time: start-up, planning, history recording, JUnit all
included). A third figure, ``pytest FILES`` in one plain session without testfleet, is
the floor both are compared with.

The figure is the median wall time over rounds; the speed-up is per-file median /
batch median. CPU seconds of the process trees are shown too, since wall time on a
shared machine is noisy.

CLI: ``python benchmarks/bench_batch.py [--files 10] [--rounds 5] [--target 5]``;
exits 1 when the median speed-up is below the target.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
roots = ["tests"]

[[implicit]]
path = "tests"
backend = "cpu"
suite = "unit"
est_time = 1

[stages.unit]
backend = "cpu"
command = "pytest"
shards = 1
batch = {batch}
"""

TEST_FILE = '''\
import dataclasses
import json

import pytest


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_round_trip_{n}():
    p = Point({n}, {n} + 1)
    assert json.loads(json.dumps(dataclasses.asdict(p))) == {{"x": {n}, "y": {n} + 1}}


@pytest.mark.parametrize("k", range(5))
def test_sum_{n}(k):
    assert sum(range(k + {n})) == (k + {n}) * (k + {n} - 1) // 2


class TestPoint{n}:
    def test_fields(self):
        assert [f.name for f in dataclasses.fields(Point)] == ["x", "y"]
'''


def build(root: Path, n: int) -> list[str]:
    (root / "tests").mkdir(parents=True)
    for batch in ("false", "true"):
        (root / f"testfleet-batch-{batch}.toml").write_text(CONFIG.format(batch=batch))
    files = []
    for i in range(n):
        rel = f"tests/test_small_{i:02d}.py"
        (root / rel).write_text(TEST_FILE.format(n=i))
        files.append(rel)
    return files


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}


def run_stage(root: Path, batch: bool, round_no: int) -> tuple[float, float]:
    """(wall, CPU) of one ``testfleet run --stage unit``; every file must pass."""
    name = "true" if batch else "false"
    argv = [sys.executable, "-m", "testfleet.cli.main", "-C", str(root),
            "--config", str(root / f"testfleet-batch-{name}.toml"), "run", "--stage", "unit",
            "--junit", str(root / f"junit-{name}-{round_no}.xml"), "--display", "plain",
            "--records", str(root / "records" / f"{name}-{round_no}")]
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run(argv, cwd=root, stdout=subprocess.DEVNULL, env=_env(), check=True)
    return time.perf_counter() - t0, _child_cpu() - c0


def run_plain(root: Path, files: list[str]) -> tuple[float, float]:
    """(wall, CPU) of ``python -m pytest FILES`` in one session, no testfleet."""
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                   cwd=root, stdout=subprocess.DEVNULL, env=_env(), check=True)
    return time.perf_counter() - t0, _child_cpu() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target", type=float, default=5.0, help="minimum speed-up (default 5)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tf-bench-batch-") as tmp:
        root = Path(tmp) / "proj"
        files = build(root, args.files)
        run_plain(root, files)  # warm the page cache and the bytecode caches
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {batch: run_stage(root, batch, r) for batch in order}
            plain = run_plain(root, files)
            rows.append((got[False], got[True], plain))
            print(f"round {r + 1}: per-file {got[False][0]:.2f}s wall ({got[False][1]:.2f}s CPU)"
                  f"  batch {got[True][0]:.2f}s wall ({got[True][1]:.2f}s CPU)"
                  f"  plain pytest {plain[0]:.2f}s  speed-up {got[False][0] / got[True][0]:.1f}x",
                  flush=True)
    per_file = statistics.median(r[0][0] for r in rows)
    batch = statistics.median(r[1][0] for r in rows)
    plain = statistics.median(r[2][0] for r in rows)
    per_file_cpu = statistics.median(r[0][1] for r in rows)
    batch_cpu = statistics.median(r[1][1] for r in rows)
    speedup = per_file / batch
    print(f"\n{args.files} files x {args.rounds} rounds (medians): one process per file "
          f"{per_file:.2f}s wall / {per_file_cpu:.2f}s CPU; batch = true {batch:.2f}s wall / "
          f"{batch_cpu:.2f}s CPU; plain `pytest FILES` {plain:.2f}s; speed-up "
          f"{speedup:.1f}x (target >= {args.target:g}x); load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0 if speedup >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
