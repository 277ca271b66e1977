"""Benchmark (#36 item 6): ``check`` against ``list`` of one large tree, and ``disable``
of a 10 MB test file against a plain read and write of it, in one run.

    python benchmarks/bench_check_disable.py [--tree DIR] [--files 100000] [--repeat 3]
        [--cold-repeat 1] [--disable-mb 10]

``--tree DIR``: a tree made by ``benchmarks/gen_tree.py`` (generated there first when
DIR has no ``pyproject.toml``; 100,000 files take about 0.7 GB and a minute), so that
several runs share it. Every figure is whole-command wall time of a subprocess, the
median of its repetitions, and stands beside its reference from the same run:

- ``check`` beside ``list`` of the same tree, warm (the caches of a previous run in
  place, as in a CI job that restores ``.testfleet``; each command primed once) and cold
  (``--no-cache``: nothing read from or written to the caches);
- ``disable`` (and the ``enable`` that undoes it) of a generated test file of
  ``--disable-mb`` MB beside a Python process that reads and rewrites the same file.

The load average at the start and end is printed: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_tree import generate

SRC = Path(__file__).resolve().parents[1] / "src"
CONFIG = 'roots = ["tests"]\n\n[stages.a]\nbackend = "cpu"\ncommand = "pytest"\n'
REWRITE = "import sys; p = sys.argv[1]; d = open(p, 'rb').read(); open(p, 'wb').write(d)"
#: CPython's own compile() of every SAMPLE-th test file in one process: times SAMPLE, the
#: floor of a cold ``check``, which must compile every file once (its syntax check).
SAMPLE = 10
COMPILE = (
    "import sys, pathlib, warnings\n"
    "warnings.simplefilter('ignore')\n"
    "files = sorted(pathlib.Path('tests').rglob('test_*.py'))[::int(sys.argv[1])]\n"
    "for f in files:\n"
    "    compile(f.read_bytes().decode('utf-8'), str(f), 'exec', dont_inherit=True)\n"
)


def timed(argv: list[str], cwd: Path, expect: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of one command; it must exit with one of ``expect``."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}"
                         f"{proc.stderr[-2000:]}")
    return took


def tf(*argv: str) -> list[str]:
    return [sys.executable, "-m", "testfleet", *argv]


def median(runs: list[float]) -> str:
    return f"{statistics.median(runs):.2f}"


def big_test(path: Path, megabytes: float) -> None:
    """A registered test file of ``megabytes`` MB: one registration, then test functions."""
    lines = ["from testfleet import register_cpu_ci", 'register_cpu_ci(est_time=5, suite="a")', ""]
    size, i = 0, 0
    while size < megabytes * 1_000_000:
        block = f"def test_{i}():\n    x = {i} * 2  # padding padding padding\n    assert x == {i * 2}\n"
        lines.append(block)
        size += len(block)
        i += 1
    path.write_text("\n".join(lines), encoding="utf-8")


def bench_tree(tree: Path, repeat: int, cold_repeat: int) -> list[tuple[str, str, str, str]]:
    rows = []
    # check exits 1 when the generated tree has errors; list exits 0 or 1 likewise
    ok = (0, 1)
    for how, flags, n in (("cold (--no-cache)", ["--no-cache"], cold_repeat), ("warm", [], repeat)):
        if not flags:  # prime both caches once
            timed(tf("list"), tree, ok)
            timed(tf("check"), tree, ok)
        lists = [timed(tf("list", *flags), tree, ok) for _ in range(n)]
        checks = [timed(tf("check", *flags), tree, ok) for _ in range(n)]
        ratio = statistics.median(checks) / statistics.median(lists)
        rows.append((f"`check` {how}", median(checks), f"`list` {how}: {median(lists)}",
                     f"{ratio:.1f}x"))
        if flags:
            floor = [SAMPLE * timed([sys.executable, "-c", COMPILE, str(SAMPLE)], tree)
                     for _ in range(n)]
            rows.append((f"`compile()` of every file, one process (1 in {SAMPLE} timed, "
                         f"x{SAMPLE})", median(floor), f"`list` {how}: {median(lists)}",
                         f"{statistics.median(floor) / statistics.median(lists):.1f}x"))
    return rows


def bench_disable(megabytes: float, repeat: int) -> list[tuple[str, str, str, str]]:
    with tempfile.TemporaryDirectory(prefix="tf-bench-disable-") as tmp:
        root = Path(tmp)
        (root / "tests").mkdir()
        (root / "testfleet.toml").write_text(CONFIG, encoding="utf-8")
        path = root / "tests/test_big.py"
        big_test(path, megabytes)
        original = path.read_bytes()
        timed(tf("list"), root)  # the registry cache, as after any earlier command
        disables, enables, rewrites = [], [], []
        for _ in range(repeat):
            disables.append(timed(tf("disable", "tests/test_big.py", "--stage", "a",
                                     "--reason", "bench"), root))
            enables.append(timed(tf("enable", "tests/test_big.py"), root))
            if path.read_bytes() != original:
                raise SystemExit("disable + enable did not give the file back byte for byte")
            rewrites.append(timed([sys.executable, "-c", REWRITE, str(path)], root))
        mb = f"{len(original) / 1e6:.1f} MB"
        ref = f"read + write of the file: {median(rewrites)}"
        return [(f"`disable` of a {mb} file", median(disables), ref,
                 f"{statistics.median(disables) / statistics.median(rewrites):.1f}x"),
                ("`enable` of it again", median(enables), ref,
                 f"{statistics.median(enables) / statistics.median(rewrites):.1f}x")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold-repeat", type=int, default=1)
    parser.add_argument("--disable-mb", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    rows = bench_disable(args.disable_mb, args.repeat)
    made = None
    tree = args.tree
    if tree is None:
        made = Path(tempfile.mkdtemp(prefix="tf-bench-tree-"))
        tree = made
    if not (tree / "pyproject.toml").exists():
        generate(tree, args.files, 0)
    files = sum(1 for _ in (tree / "tests").rglob("test_*.py"))
    rows += [(f"{what} ({files:,} files)", fig, ref, ratio)
             for what, fig, ref, ratio in bench_tree(tree, args.repeat, args.cold_repeat)]
    if made is not None:
        shutil.rmtree(made)
    print(f"load average at end: {os.getloadavg()[0]:.1f}\n")
    print("| command | median s | reference in the same run, median s | ratio |")
    print("|---|---:|---|---:|")
    for what, fig, ref, ratio in rows:
        print(f"| {what} | {fig} | {ref} | {ratio} |")


if __name__ == "__main__":
    main()
