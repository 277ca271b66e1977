"""Shell completion completes stage, label and backend names from the configuration,
through click's real completion protocol (the environment variable the shell sets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def _complete(words: str, cwd: Path) -> list[str]:
    env = {**os.environ, "_TESTFLEET_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    proc = subprocess.run([sys.executable, "-c", "from testfleet.cli.main import cli; cli(prog_name='testfleet')"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line]


def test_stage_names_from_the_config() -> None:
    got = _complete("testfleet plan --stage stage-c", EXAMPLE)
    assert got and all(s.startswith("stage-c") for s in got)
    assert "stage-c-4-gpu-mi300x" in got


def test_labels_backends_and_pr_labels() -> None:
    assert "megatron" in _complete("testfleet list --label meg", EXAMPLE)
    assert set(_complete("testfleet list --backend ", EXAMPLE)) >= {"cpu", "cuda", "rocm"}
    assert "run-ci-megatron" in _complete("testfleet plan --labels run-ci-m", EXAMPLE)


def test_dash_c_directory_is_honoured(tmp_path: Path) -> None:
    assert "stage-a-cpu" in _complete(f"testfleet -C {EXAMPLE} run --stage stage-a", tmp_path)


@pytest.mark.parametrize("config", ["", "[tool.testfleet\nbroken", "[tool.testfleet]\nstages = 3\n"])
def test_no_or_broken_config_completes_nothing_quietly(tmp_path: Path, config: str) -> None:
    if config:
        (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    assert _complete("testfleet plan --stage s", tmp_path) == []
