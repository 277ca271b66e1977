"""Helpers shared by test areas (importable as ``support``: ``tests/`` is on ``sys.path``
because its conftest sits outside any package)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest


def parse_github_output(text: str) -> list[tuple[str, str]]:
    """``$GITHUB_OUTPUT`` as the runner reads it: ``name=value`` lines and
    ``name<<DELIM`` ... ``DELIM`` blocks; returns every (name, value) in order, so a
    test can see a name that was written twice."""
    out: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            assert i < len(lines), f"heredoc {name} never closed"
            i += 1
            out.append((name, "\n".join(body)))
        else:
            assert "=" in line, f"malformed output line {line!r}"
            name, value = line.split("=", 1)
            out.append((name, value))
    return out


def github_output_dict(text: str) -> dict[str, str]:
    """The outputs by name; a name written twice is a failure (GitHub would keep the last,
    so a second write could override a value a later step trusts)."""
    out: dict[str, str] = {}
    for name, value in parse_github_output(text):
        assert name not in out, f"output {name} written twice"
        out[name] = value
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``testfleet`` in-process: (exit status, stdout, stderr). The entry point always
    exits, and no traceback may ever reach the user."""
    from testfleet.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return int(info.value.code or 0), out, err


def commit_tree(root: Path) -> str:
    """Make ``root`` a git repository (if it is not one) and commit everything in it;
    returns the commit id. Fork pull requests read their trust settings from the base
    commit's configuration, so tests that plan one need a real commit to point at."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                              text=True, timeout=60).stdout.strip()

    if not (root / ".git").exists():
        git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q",
        "--allow-empty", "-m", "base")
    return git("rev-parse", "HEAD")


def with_base_sha(payload: Path, dest: Path, sha: str) -> Path:
    """A copy of a pull_request payload whose ``pull_request.base.sha`` is ``sha``."""
    import json

    data = json.loads(payload.read_text(encoding="utf-8"))
    data.setdefault("pull_request", {}).setdefault("base", {})["sha"] = sha
    dest.write_text(json.dumps(data), encoding="utf-8")
    return dest


def wait_for_file(path: Path, timeout: float = 30) -> None:
    """Wait until a process under test has written ``path`` (its ready signal); a
    condition, not a sleep, so a loaded machine only makes the test slower."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    time.sleep(0.1)


def wait_until_ready(path: Path, process: Any, timeout: float = 300.0) -> None:
    """Wait until ``process`` (a ``subprocess.Popen``) or its child has written ``path``
    (written whole: by a rename). The bound is generous because a loaded machine only
    makes the wait longer; a dead ``process`` fails at once with its output, so a crash
    is reported now and a hang still ends in a failure."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"exited {process.returncode} before writing {path}:\n"
                                 f"{out}\n{err}")
        assert time.monotonic() < deadline, f"{path} never appeared within {timeout:g}s"
        time.sleep(0.05)


def process_gone(pid: int) -> bool:
    """A process that exited (or is a zombie nobody reaped yet) is gone."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
