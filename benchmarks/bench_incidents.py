"""Signature computation and grouping over 10,000 failures, beside a reference.

    python benchmarks/bench_incidents.py [--failures 10000] [--repeat 5] [--seed 0] [--pad KB]

Builds N failed outputs from the real failure texts of ``tests/incidents/real_texts.py``
(pytest runs with tracebacks, summaries and the noise a runner adds: hosts, PIDs,
temporary paths, timings; ~1 KB each, plus ``--pad`` KB of log lines printed before the
failure: a long test's tail, of which signatures read the last 16 KiB), spread over 50 CI
runs and 6 stages (a third of them on ROCm and CUDA stages, where start-up patterns
apply), then times:

- **incidents**: ``failure_signature`` of every output (with the stage's backend
  matcher) and ``group`` of the failures into incidents, as the runner and
  ``testfleet results`` do;
- **reference**: the cheapest grouping there is, measured in the same run on the same
  outputs: SHA-256 of each output's last line and a dict of lists by (run, digest).

Prints the median of ``--repeat`` timed runs of each (after one warm-up), the ratio,
how many incidents the grouping found and how many the exact-text reference would
report (what "never eight rows for one cause" saves), and exits 1 when the incidents'
median is a second or more.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.incidents import real_texts as rt

STAGES = [("stage-a-cpu", "cpu"), ("stage-b-cpu", "cpu"), ("stage-c-h200", "cuda"),
          ("stage-c-b200", "cuda"), ("stage-c-mi300x", "rocm"), ("stage-c-mi325x", "rocm")]


def synth(n: int, seed: int, pad_kb: int = 0) -> list[tuple[str, str, str, str]]:
    """(run, stage, backend, output) for n failures."""
    rng = random.Random(seed)
    infra = {"cuda": [rt.NO_CUDA_DEVICE, rt.NO_NVIDIA_DRIVER, "\n".join(rt.NVML_MISMATCH_LINES)],
             "rocm": [rt.NO_HIP_GPUS, "\n".join(rt.HIP_NO_DEVICE_LINES),
                      "\n".join(rt.HSA_OUT_OF_RESOURCES_LINES)],
             "cpu": [rt.DOCKER_PULL_LIMIT]}
    tests = [rt.CUDA_OOM_TEST, "KeyError: 'max_new_tokens'", "ValueError: dtype bfloat16 not "
             "supported on gfx90a", rt.HIP_INVALID_DEVICE_FUNCTION,
             "AttributeError: 'NoneType' object has no attribute 'generate'"]
    out = []
    for _ in range(n):
        run = str(1000 + rng.randrange(50))
        stage, backend = STAGES[rng.randrange(len(STAGES))]
        file = f"tests/test_{rng.randrange(400):03d}.py"
        if rng.random() < 0.3:
            error = rng.choice(infra[backend])
            if "\n" in error:
                output = f"[{stage}-runner-{rng.randint(1, 40)}] pid {rng.randint(1000, 99999)}\n" \
                         + error + "\n"
            else:
                output = rt.pytest_output(file, [("test_setup", error)], rng=rng)
        elif rng.random() < 0.5:
            output = rt.assertion_output(file, f"test_{rng.randrange(40)}",
                                         f"assert out.score >= 0.{rng.randint(50, 90)}", rng=rng)
        else:
            output = rt.pytest_output(file, [(f"test_{rng.randrange(40)}", rng.choice(tests))],
                                      rng=rng, phase="FAILED")
        if pad_kb:
            lines = [f"[{rng.randint(0, 86399)}] step {s} loss {rng.random():.4f} "
                     f"lr {rng.random():.2e} tokens/s {rng.randint(1000, 90000)}"
                     for s in range(pad_kb * 1024 // 60)]
            output = "\n".join(lines) + "\n" + output
        out.append((run, stage, backend, output))
    return out


def incidents(failures: list[tuple[str, str, str, str]]) -> int:
    from testfleet.failures.normalize import _normalize
    from testfleet.failures.patterns import matcher_for
    from testfleet.failures.signature import failure_signature
    from testfleet.incidents.group import Failure, group

    _normalize.cache_clear()  # every timed run starts cold: no line is known yet
    signatures = {}
    rows = []
    ran: dict[tuple[str, str], int] = {}
    for n, (run, stage, backend, output) in enumerate(failures):
        sig = failure_signature(output, matcher=matcher_for(backend))
        signatures[sig.digest] = sig
        rows.append(Failure(run, stage, backend, f"f{n}", sig.digest))
        ran[(run, stage)] = ran.get((run, stage), 0) + 1
    return len(group(rows, signatures, ran))


def reference(failures: list[tuple[str, str, str, str]]) -> int:
    groups: dict[tuple[str, str], list[int]] = {}
    for n, (run, _, _, output) in enumerate(failures):
        last = output.rstrip("\n").rsplit("\n", 1)[-1]
        groups.setdefault((run, hashlib.sha256(last.encode()).hexdigest()), []).append(n)
    return len(groups)


def timed(fn: object, data: object, repeat: int) -> tuple[float, int]:
    result = fn(data)  # type: ignore[operator]  # warm-up (imports, compiled patterns)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(data)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pad", type=int, default=0, metavar="KB",
                        help="log lines printed before each failure (KiB)")
    args = parser.parse_args()
    data = synth(args.failures, args.seed, args.pad)
    size = sum(len(o) for *_, o in data) / len(data)
    ours, found = timed(incidents, data, args.repeat)
    ref, exact = timed(reference, data, args.repeat)
    print(f"{args.failures} failures ({size / 1024:.1f} KiB of output each, 50 runs, 6 stages), "
          f"median of {args.repeat}:")
    print(f"  signatures + grouping : {ours:.3f} s  -> {found} incidents")
    print(f"  reference (sha256 of the last line, dict): {ref:.3f} s  -> {exact} groups")
    print(f"  ratio {ours / ref:.1f}x the reference; {ours / args.failures * 1e6:.0f} us a failure")
    return 0 if ours < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
