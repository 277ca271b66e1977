"""The runner's own memory while a test prints a lot: ``testfleet run`` on a file that
writes ``--mb`` MB to stdout, against the same run of a file that prints one line.

    python benchmarks/bench_runner_memory.py [--mb 50] [--runs 3]

Each run is a fresh process executing ``testfleet run --file ... --output plain``
in-process under a small wrapper that reports the runner process's own peak RSS
(``RUSAGE_SELF`` max RSS: the test's process is a child and not counted). The runner
must stream the output (to the console and a bounded tail for JUnit), not hold it:
the figure is the peak RSS with the big output beside the peak with a one-line
output (the reference from the same run) and their difference. Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = """\
[tool.testfleet]
roots = ["tests"]

[tool.testfleet.stages.stage-a-cpu]
backend = "cpu"
command = "python"
"""

WRAPPER = """
import resource, sys
from testfleet.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nMAXRSS_KB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_kb(root: Path, test: str) -> int:
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "run", "--file", test, "--output", "plain"],
                          cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    for line in proc.stderr.splitlines():
        if line.startswith("MAXRSS_KB "):
            return int(line.split()[1])
    raise SystemExit(f"no RSS figure:\n{proc.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-mem-"))
    try:
        (tmp / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
        tests = tmp / "tests"
        tests.mkdir()
        head = "from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite='stage-a-cpu')\n"
        (tests / "test_big.py").write_text(
            head + "import sys\nline = 'x' * 99 + '\\n'\n"
            f"for _ in range({args.mb} * 10_000):\n    sys.stdout.write(line)\n", encoding="utf-8")
        (tests / "test_small.py").write_text(head + "print('ok')\n", encoding="utf-8")
        small = [peak_kb(tmp, "tests/test_small.py") for _ in range(args.runs)]
        big = [peak_kb(tmp, "tests/test_big.py") for _ in range(args.runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    s, b = statistics.median(small), statistics.median(big)
    print(f"| test output | runner peak RSS (median of {args.runs}) | runs |")
    print("|---|---:|---|")
    print(f"| one line (reference) | {s / 1024:.1f} MB | {', '.join(f'{x / 1024:.1f}' for x in small)} |")
    print(f"| {args.mb} MB | {b / 1024:.1f} MB | {', '.join(f'{x / 1024:.1f}' for x in big)} |")
    print(f"growth with {args.mb} MB of output: {(b - s) / 1024:.1f} MB")


if __name__ == "__main__":
    main()
