"""Fixtures for the registry tests: a small project written from a dict of files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.cli.main import main as cli_main
from testfleet.config import Project, load_project

BASE_CONFIG = """\
roots = ["tests"]
exclude = ["tests/manual/**"]

[[implicit]]
path = "tests/fast"
backend = "cpu"
suite = "stage-a-cpu"
est_time = 5

[labels]
megatron = "Megatron tests"
fsdp = "FSDP tests"
amd = "AMD tests"

[stages.stage-a-cpu]
backend = "cpu"

[stages.stage-b-cpu]
backend = "cpu"
command = "python"

[stages.stage-c-4-gpu-h200]
backend = "cuda"

[stages.stage-c-4-gpu-mi300x]
backend = "rocm"
"""

# Valid files present in every tree: whatever else is broken, these stay collected.
GOOD_FILES = {
    "tests/unit/test_good.py": (
        'from testfleet import register_cpu_ci\n\nregister_cpu_ci(est_time=10, suite="stage-a-cpu")\n'
    ),
    "tests/gpu/test_good_gpu.py": (
        "from testfleet import register_cuda_ci, register_rocm_ci\n"
        'register_cuda_ci(est_time=600, suite="stage-c-4-gpu-h200", labels=["megatron"])\n'
        'register_rocm_ci(est_time=600, suite="stage-c-4-gpu-mi300x", labels=["amd"],\n'
        '                 disabled="MI300X pool down, see #1")\n'
    ),
    "tests/fast/test_quick.py": "def test_quick():\n    assert True\n",
}
GOOD_KEYS = {
    ("tests/unit/test_good.py", "cpu"),
    ("tests/gpu/test_good_gpu.py", "cuda"),
    ("tests/gpu/test_good_gpu.py", "rocm"),
    ("tests/fast/test_quick.py", "cpu"),
}


def write_tree(root: Path, files: dict[str, str | bytes], config: str = BASE_CONFIG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "testfleet.toml").write_text(config, encoding="utf-8")
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[..., Project]:
    """``tree(files, config=BASE_CONFIG, good=True)`` -> a loaded Project."""

    def make(files: dict[str, str | bytes] | None = None, config: str = BASE_CONFIG,
             good: bool = True) -> Project:
        root = write_tree(tmp_path / "proj", {**(GOOD_FILES if good else {}), **(files or {})}, config)
        return load_project(root)

    return make


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """Run the real entry point in-process: (exit code, stdout, stderr)."""

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        code = 0
        try:
            cli_main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out, err = capsys.readouterr()
        return code, out, err

    return run

