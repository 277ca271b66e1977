"""Pattern matching of test output: the runner's bounded matcher (``regex`` with a
timeout, #27) against the standard ``re`` it replaced, on the same output in one run.

A test may print tens of MB; every byte goes through the retriable and fatal patterns
(the defaults of ``[runner]``) in the runner's main loop. Each round feeds the same
synthetic output -- pytest-like lines, tracebacks, NCCL chatter, long progress lines --
in 64 KiB chunks through ``OutputCapture`` twice: once with the patterns compiled by
``re`` (what the runner did before, unbounded), once as the runner compiles them now.
The figure is the median over rounds of each, in CPU seconds and MB per CPU second,
side by side; and how long (wall) a catastrophic pattern held the loop (``^(a|a)*$`` on
one line of 40 ``a``s: ``re`` is not run on it, it would take hours).

CLI: ``python benchmarks/bench_capture.py [--mb 50] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import Any

LINES = [
    b"tests/e2e/test_train.py::test_loss[step-%d] PASSED                        [ 42%%]\n",
    b"[rank0]:[W reducer.cpp:1360] Warning: find_unused_parameters=True was specified %d\n",
    b"NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7 comm %d\n",
    b"  File \"/usr/lib/python3/site-packages/torch/nn/modules/module.py\", line %d, in _call_impl\n",
    b"Iteration %d: loss=2.3412 grad_norm=0.8812 lr=0.000300 tokens/s=182331.2 " + b"=" * 120 + b"\n",
]


def output(megabytes: int) -> bytes:
    chunks = []
    size = 0
    i = 0
    while size < megabytes << 20:
        line = LINES[i % len(LINES)] % i
        chunks.append(line)
        size += len(line)
        i += 1
    return b"".join(chunks)


class _Stdlib:
    """A compiled ``re`` pattern with the interface the capture calls (the old matcher)."""

    def __init__(self, source: str) -> None:
        self.pattern = source
        self._compiled = re.compile(source, re.MULTILINE)

    def search(self, text: str) -> bool:
        return self._compiled.search(text) is not None


def feed(capture: Any, data: bytes, clock: Any = time.process_time) -> float:
    """Seconds of this process's CPU (the machine is shared: wall time is noise) spent
    feeding ``data``; ``clock=time.monotonic`` for how long the loop was held."""
    start = clock()
    for i in range(0, len(data), 64 << 10):
        capture.feed(data[i:i + (64 << 10)])
    capture.close()
    return float(clock() - start)


def main() -> None:
    from testfleet.config import DEFAULT_FATAL, DEFAULT_RETRIABLE
    from testfleet.runner.capture import OutputCapture, compile_patterns

    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = output(args.mb)
    old_s, new_s = [], []
    for _ in range(args.rounds):
        old = OutputCapture(tuple(_Stdlib(p) for p in DEFAULT_RETRIABLE),  # type: ignore[misc]
                            tuple(_Stdlib(p) for p in DEFAULT_FATAL))  # type: ignore[misc]
        new = OutputCapture(compile_patterns(DEFAULT_RETRIABLE), compile_patterns(DEFAULT_FATAL))
        old_s.append(feed(old, data))
        new_s.append(feed(new, data))
        assert old.fatal == new.fatal and old.retriable == new.retriable
    mb = len(data) / 1e6
    print(f"{mb:.0f} MB of output, {len(DEFAULT_RETRIABLE)} retriable + {len(DEFAULT_FATAL)} "
          f"fatal default patterns, {args.rounds} rounds")
    print("| matcher | median CPU s | MB per CPU s |")
    print("|---|---|---|")
    for name, times in (("re (before, unbounded)", old_s), ("regex + timeout (now)", new_s)):
        med = statistics.median(times)
        print(f"| {name} | {med:.2f} | {mb / med:.0f} |")
    bad = OutputCapture((), compile_patterns([r"^(a|a)*$"]))
    held = feed(bad, b"a" * 40 + b"b\n" + data[: 1 << 20], time.monotonic)
    print(f"catastrophic ^(a|a)*$ then 1 MiB: the loop was held {held:.2f} s in all "
          f"(pattern dropped: {bad.fatal_patterns[0].dropped})")


if __name__ == "__main__":
    main()
