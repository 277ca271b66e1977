"""Benchmark: the marker scan on files a pull request can shape adversarially.

    python benchmarks/bench_scan.py [--sizes 25000 100000] [--repeat 3]

Each file holds N marker occurrences of one shape (bare mentions on their own lines,
mentions on one long line, attribute mentions, calls indented in one function,
calls embedded in one expression). The scan must stay linear in N: the table shows
CPU seconds per shape and size, microseconds per occurrence, and, as the reference
from the same run, ``ast.parse`` of the same text (a linear full parse). Medians of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import ast
import functools
import statistics
import time
from collections.abc import Callable

from testfleet.config import BUILTIN_BACKENDS, GATE_MARKER
from testfleet.registry import scan

NAMES = frozenset({m for spec in BUILTIN_BACKENDS.values() for m in spec["markers"]} | {GATE_MARKER})
SHAPES = {
    "mentions, one per line": lambda n: "register_cpu_ci\n" * n,
    "mentions, one line": lambda n: "x = [" + "register_cpu_ci, " * n + "]\n",
    "attribute mentions": lambda n: "x = " + "a.register_cpu_ci + " * n + "1\n",
    "indented calls": lambda n: "def f():\n" + "    register_cpu_ci(5, 's')\n" * n,
    "embedded calls": lambda n: "x = [" + "register_cpu_ci(1), " * n + "]\n",
}


def cpu(fn: Callable[..., object], arg: object, repeat: int) -> tuple[float, object]:
    times = []
    out: object = None
    for _ in range(repeat):
        start = time.process_time()
        out = fn(arg)
        times.append(time.process_time() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pattern, needles = scan.marker_pattern(NAMES), scan.needles_for(NAMES)
    print("| shape | occurrences | scan CPU s | us / occurrence | ast.parse CPU s (reference) |")
    print("|---|---:|---:|---:|---:|")
    for shape, make in SHAPES.items():
        for n in args.sizes:
            text = make(n)
            data = text.encode()
            t, result = cpu(functools.partial(scan.scan_source, pattern=pattern, needles=needles),
                            data, args.repeat)
            assert isinstance(result, scan.FileScan)
            assert len(result.others) + len(result.calls) == n, shape
            try:
                shown = f"{cpu(ast.parse, text, args.repeat)[0]:.3f}"
            except RecursionError:  # ``a + a + ...`` 100k deep: the parser itself gives up
                shown = "RecursionError"
            print(f"| {shape} | {n:,} | {t:.3f} | {t / n * 1e6:.1f} | {shown} |")


if __name__ == "__main__":
    main()
