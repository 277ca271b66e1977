"""Injection and confinement (#17), as real processes: a hostile test file name never
becomes a workflow command in any command's output, and a symlinked ``.testfleet``
receives nothing (no caches, no history.db, no runs/) from any command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.hostile.test_corpus import CACHES, CONFIG, GOOD_TEST, HOSTILE_NAME

PYTHON_CONFIG = CONFIG + 'command = "python"\n'
# What testfleet itself may print as a workflow command (an annotation, escaped).
OWN = re.compile(r"::((error|warning|notice) (file=|title=)|group::|endgroup::$"
                 r"|stop-commands::[0-9a-f]{32}$|[0-9a-f]{32}::$)")


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "p"
    for rel, text in {"testfleet.toml": PYTHON_CONFIG, "tests/test_a.py": GOOD_TEST,
                      **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _run(root: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *argv],
                          capture_output=True, text=True, timeout=60, env=full)


def test_hostile_file_name_is_no_workflow_command_in_any_output(tmp_path: Path) -> None:
    root = _project(tmp_path, {HOSTILE_NAME: GOOD_TEST})
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "out.txt")}
    for argv, code in ((["check"], 1), (["check", "--format", "json"], 1), (["list"], 1),
                       (["plan", "--format", "github"], 1), (["plan"], 1),
                       (["run", "--stage", "a"], 0)):  # the valid file runs (#12)
        res = _run(root, *argv, env=env)
        assert res.returncode == code, (argv, res.stdout, res.stderr)
        lines = re.split(r"\r\n|\r|\n", res.stdout + res.stderr)
        commands = [line.lstrip() for line in lines if line.lstrip().startswith("::")]
        assert all(OWN.match(c) for c in commands), (argv, commands)
        assert not any("::error::pwned" in c and not OWN.match(c) for c in commands)
        assert "Traceback" not in res.stderr
    out = _run(root, "check")
    assert "tests/test_b\\n::error::pwned.py" in out.stdout + out.stderr
    assert "control-character" in out.stdout + out.stderr


def test_symlinked_cache_dir_receives_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path, {})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".testfleet").symlink_to(elsewhere)
    assert _run(root, "list").returncode == 0
    assert _run(root, "plan").returncode == 0
    res = _run(root, "run", "--stage", "a")
    assert res.returncode == 2 and ".testfleet is a symlink" in res.stderr, res.stderr
    assert _run(root, "db", "init").returncode == 2
    res = _run(root, "check")
    assert res.returncode == 1 and "cache-dir-symlink" in res.stdout
    assert list(elsewhere.iterdir()) == []
    # With the link gone, the same commands write their caches, history and records.
    (root / ".testfleet").unlink()
    assert _run(root, "run", "--stage", "a").returncode == 0
    names = {p.name for p in (root / ".testfleet").iterdir()}
    assert {"history.db", "runs", "registry-cache.bin"} <= names, names


def test_fifo_caches_are_replaced_with_a_warning(tmp_path: Path) -> None:
    root = _project(tmp_path, {})
    (root / ".testfleet").mkdir()
    for rel in CACHES:
        os.mkfifo(root / rel)
    res = _run(root, "check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("a FIFO stands where testfleet's cache file belongs") == len(CACHES)
    assert all((root / rel).is_file() for rel in CACHES)
    assert "cache-not-a-file" not in _run(root, "check").stdout  # rebuilt: no note again


ESCAPER = '''\
from testfleet import register_cpu_ci
register_cpu_ci(est_time=5, suite="a")
import os, time
if __name__ == "__main__":
    runner = os.getppid()
    with open(f"/proc/{runner}/fd/1", "w") as fh:
        fh.write("::error::straight to the runner's stdout\\n")
    if os.fork() == 0:  # a daemon that outlives the test and writes after it
        os.setsid()
        if os.fork() == 0:
            time.sleep(1.5)
            with open(f"/proc/{runner}/fd/1", "w") as fh:
                fh.write("::error::after the test ended\\n")
            os._exit(0)
        os._exit(0)
'''
SLOW = "print('next file')\nimport time\ntime.sleep(3)\n"


def test_writes_to_the_runners_stdout_stay_inside_the_fence(tmp_path: Path) -> None:
    """What docs/runner.md says is fenced: a line the test writes straight to the runner's
    stdout, and one a process it left behind would write later (the runner kills it
    before closing the fence), never reach the log outside a stop-commands span."""
    root = _project(tmp_path, {"tests/test_a.py": ESCAPER,
                               "tests/test_b.py": GOOD_TEST + SLOW})
    res = _run(root, "run", "--stage", "a", "--no-history", env={"GITHUB_ACTIONS": "true"})
    assert res.returncode == 0, res.stdout + res.stderr
    token = None
    for line in res.stdout.splitlines():
        if line.startswith("::stop-commands::"):
            token = line.removeprefix("::stop-commands::")
        elif token is not None and line == f"::{token}::":
            token = None
        elif line.lstrip().startswith("::error::"):
            assert token is not None, f"unfenced: {line!r}\n{res.stdout}"
    assert "leftover process(es) killed" in res.stdout
