"""Wall time of migrating SGLang's central suite lists into in-file registrations (#42).

    python benchmarks/bench_central.py GIT_DIR [COMMIT]   # e.g. a mirror of sglang, 6bc306289
    python benchmarks/bench_central.py                    # the trimmed fixture of the tests

The tree at COMMIT is exported (``git archive``) to a temporary directory; each run works
on a fresh copy of it. Measured, median of 3, against ``python3 -c pass`` in the same run:
``testfleet init --from-existing --migrate --dry-run`` (the diff), the migration itself,
and a second migration of the migrated tree (nothing to change).
"""

from __future__ import annotations

import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/real_trees/sglang-central"


def export(git_dir: str, commit: str, dest: Path) -> None:
    data = subprocess.run(["git", f"--git-dir={git_dir}", "archive", commit],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def timed(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall, CPU user+sys of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr}")
    return wall, cpu, proc.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "tree"
        if len(sys.argv) > 1:
            export(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "HEAD", base)
        else:
            shutil.copytree(FIXTURE, base)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        tf = [sys.executable, "-m", "testfleet", "init", "--from-existing", "--migrate"]
        runs = {"python3 -c pass": [sys.executable, "-c", "pass"],
                "--migrate --dry-run": [*tf, "--dry-run"], "--migrate": tf,
                "--migrate again (no change)": tf}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        summary = ""
        for i in range(3):
            work = Path(tmp) / f"run{i}"
            shutil.copytree(base, work, symlinks=True)
            for name, argv in runs.items():
                wall, cpu, out = timed(argv, work)
                figures[name].append((wall, cpu))
                summary = out if name == "--migrate" else summary
            shutil.rmtree(work)
        print(next(line for line in summary.splitlines() if line.startswith("wrote")))
        print(f"load average: {os.getloadavg()[0]:.1f}")
        for name, pairs in figures.items():
            print(f"{name:32} wall {statistics.median(w for w, _ in pairs):6.2f} s   "
                  f"CPU {statistics.median(c for _, c in pairs):6.2f} s")


if __name__ == "__main__":
    main()
