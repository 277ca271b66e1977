"""Adoption of a project's own marker shapes (SGLang's ``register_cuda_ci(est_time=...,
stage="base-b", runner_config="1-gpu-small")``, suite ``f"{stage}-test-{runner_config}"``):
the signature is learnt from the module that defines the markers (read with ast, never
imported) and written as ``[tool.testfleet.markers]``, so those registrations are adopted,
not reported; a file may register several times for one backend."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from support import run_cli
from testfleet.adopt.derive import derive
from testfleet.adopt.scan import scan
from testfleet.config import load_project
from testfleet.registry import collect

# The shapes of sgl-project/sglang python/sglang/test/ci/ci_register.py, reduced.
CI_REGISTER = '''
from dataclasses import dataclass
from typing import Optional

_PARAM_ORDER = ("est_time", "suite", "nightly", "disabled")


@dataclass
class CIRegistry:
    filename: str
    est_time: float
    stage: Optional[str] = None
    runner_config: Optional[str] = None
    suite: Optional[str] = None

    @property
    def effective_suite(self) -> Optional[str]:
        if self.stage is not None and self.runner_config is not None:
            return f"{self.stage}-test-{self.runner_config}"
        return self.suite

    def describe(self) -> str:
        return f"{self.filename}: {self.est_time}"


def register_cpu_ci(
    est_time: float,
    suite: Optional[str] = None,
    nightly: bool = False,
    disabled: Optional[str] = None,
    *,
    stage: Optional[str] = None,
    runner_config: Optional[str] = None,
    in_process_group: Optional[str] = None,
):
    return None


def register_cuda_ci(
    est_time: float,
    suite: Optional[str] = None,
    nightly: bool = False,
    disabled: Optional[str] = None,
    *,
    stage: Optional[str] = None,
    runner_config: Optional[str] = None,
    in_process_group: Optional[str] = None,
):
    return None


def register_amd_ci(
    est_time: float,
    suite: Optional[str] = None,
    nightly: bool = False,
    disabled: Optional[str] = None,
    *,
    stage: Optional[str] = None,
    runner_config: Optional[str] = None,
    in_process_group: Optional[str] = None,
):
    return None
'''

IMPORT = "from sglang.test.ci.ci_register import (\n    register_amd_ci,\n    register_cuda_ci,\n)\n"
CUDA = "from sglang.test.ci.ci_register import (\n    register_cuda_ci,\n)\n"  # as black writes it
CPU = "from sglang.test.ci.ci_register import (register_cpu_ci,\n                                          )\n"
FILES = {
    "python/sglang/__init__.py": "",
    "python/sglang/test/__init__.py": "",
    "python/sglang/test/ci/__init__.py": "",
    "python/sglang/test/ci/ci_register.py": CI_REGISTER,
    # several registrations of one backend, to different stages (one composed, one named)
    "test/registered/test_attention.py": IMPORT + (
        'register_cuda_ci(est_time=120, stage="base-b", runner_config="1-gpu-small")\n'
        'register_cuda_ci(est_time=900, suite="nightly-1-gpu", nightly=True)\n'
        'register_amd_ci(est_time=150, suite="stage-a-test-1-gpu-amd")\n'
        "def test_a(): pass\n"),
    "test/registered/test_grouped.py": CUDA + (
        'register_cuda_ci(est_time=0, stage="base-b", runner_config="1-gpu-small",\n'
        '                 in_process_group=GROUP)\n'
        "def test_g(): pass\n"),
    "test/registered/test_cpu.py": CPU + 'register_cpu_ci(5, "base-a-test-cpu", False)\ndef test_c(): pass\n',
    "test/registered/test_large.py": CUDA + (
        'register_cuda_ci(est_time=300, stage="base-c", runner_config="4-gpu-h100",\n'
        '                 disabled="flaky on H100, see #123")\n'
        "def test_l(): pass\n"),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "sgl"
    for rel, text in {"pyproject.toml": '[project]\nname = "sgl"\nversion = "0"\n', **FILES}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def test_signature_is_learnt_from_the_module_that_defines_the_markers(tree: Path) -> None:
    scanned = scan(tree)
    assert scanned.signatures_source == "python/sglang/test/ci/ci_register.py"
    result = derive(scanned)
    assert result.data["markers"] == {"*": {
        "positional": ["est_time", "suite", "nightly", "disabled"],
        "keywords": {"runner_config": "str", "stage": "str"},
        "suite_template": "{stage}-test-{runner_config}",
        "ignore": ["in_process_group"],
        "allow_zero_est_time": True,  # the tree has est_time=0, which the project's parser accepts
    }}
    assert not [f for f in result.findings if f.severity == "error"], result.findings
    assert result.registrations == 6
    assert set(result.data["stages"]) == {"base-b-test-1-gpu-small", "nightly-1-gpu",
                                          "stage-a-test-1-gpu-amd", "base-a-test-cpu",
                                          "base-c-test-4-gpu-h100"}
    assert not [e for e in result.data.get("exclude", []) if e.startswith("test/")]


def test_composed_registrations_are_adopted_and_check_clean(tree: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    assert 'suite_template = "{stage}-test-{runner_config}"' in (tree / "pyproject.toml").read_text()
    code, out, err = run_cli(capsys, "-C", str(tree), "check", "--format", "json")
    assert code == 0, out + err
    assert json.loads(out)["errors"] == 0
    registry = collect(load_project(tree), use_cache=False)
    got = sorted((r.file.rsplit("/", 1)[-1], r.backend, r.suite) for r in registry.registrations)
    assert got == [
        ("test_attention.py", "cuda", "base-b-test-1-gpu-small"),
        ("test_attention.py", "cuda", "nightly-1-gpu"),
        ("test_attention.py", "rocm", "stage-a-test-1-gpu-amd"),
        ("test_cpu.py", "cpu", "base-a-test-cpu"),
        ("test_grouped.py", "cuda", "base-b-test-1-gpu-small"),
        ("test_large.py", "cuda", "base-c-test-4-gpu-h100"),
    ]


def test_without_the_defining_module_the_keywords_stay_findings(tree: Path) -> None:
    """Nothing to learn from: the calls are reported (file:line), their files never excluded."""
    (tree / "python/sglang/test/ci/ci_register.py").unlink()
    result = derive(scan(tree))
    assert "markers" not in result.data
    unknown = [f for f in result.findings if f.code == "adopt-call" and "unknown keyword" in f.message]
    assert {f.file for f in unknown} == {"test/registered/test_attention.py",
                                         "test/registered/test_grouped.py",
                                         "test/registered/test_large.py"}
    assert not [e for e in result.data.get("exclude", []) if e.startswith("test/registered/")]


def test_a_file_registered_twice_to_one_stage_is_still_a_finding(tree: Path) -> None:
    (tree / "test/registered/test_twice.py").write_text(CUDA + (
        'register_cuda_ci(est_time=10, stage="base-b", runner_config="1-gpu-small")\n'
        'register_cuda_ci(est_time=20, suite="base-b-test-1-gpu-small")\n'))
    result = derive(scan(tree))
    dup = [f for f in result.findings if f.code == "adopt-duplicate"]
    assert [(f.file, f.line) for f in dup] == [("test/registered/test_twice.py", 5)]


def test_a_marker_imported_but_never_called_is_a_finding(tree: Path) -> None:
    """'check' rejects it (marker-not-called): adoption must not exit 0 before it."""
    (tree / "test/registered/test_cpu.py").write_text(
        IMPORT.replace("register_amd_ci", "register_cpu_ci") + 'register_cpu_ci(5, "base-a-test-cpu")\n')
    result = derive(scan(tree))
    got = [(f.file, f.code) for f in result.findings if f.severity == "error"]
    assert got == [("test/registered/test_cpu.py", "adopt-not-called")]
    assert "register_cuda_ci is named here" in result.findings[0].message


def test_signature_details_of_the_defining_module(tmp_path: Path) -> None:
    """A catch-all stand-in says nothing (testfleet's own signature stays); a field the
    suite's f-string formats without an annotation is a string."""
    from testfleet.adopt.signatures import SignatureRead, read_signatures

    module = tmp_path / "markers.py"
    module.write_text(textwrap.dedent('''
        def register_cpu_ci(*args, **kwargs):
            pass

        def register_cuda_ci(est_time, suite=None, *, pool=None, size=None, group=None):
            pass

        def name_of(reg):
            return f"{reg.pool}-{reg.size}gpu"
        '''))
    got = read_signatures(module)
    assert "register_cpu_ci" not in got
    assert got["register_cuda_ci"] == SignatureRead(
        ("est_time", "suite"), (("pool", "str"), ("size", "str")), "{pool}-{size}gpu", ("group",),
        empty_suite=True)
    # a module that tests the suite for emptiness anywhere does not take suite=""
    module.write_text(module.read_text() + "\n\ndef check(reg):\n    if not reg.suite:\n"
                      "        raise ValueError('empty suite')\n")
    assert read_signatures(module)["register_cuda_ci"].empty_suite is False


RUN_SUITE = '''
import glob
import os

def main():
    script_dir = os.path.dirname(os.path.abspath(__file__))
    files = [f for f in glob.glob(os.path.join(script_dir, "registered", "**", "*.py"), recursive=True)
             if not f.endswith("/__init__.py")]
    return files
'''

PR_TEST = '''
on: [pull_request]
jobs:
  base-b-test-1-gpu-small:
    runs-on: [self-hosted, h100]
    steps:
      - run: |
          cd test
          python3 run_suite.py --hw cuda --suite base-b-test-1-gpu-small
'''


def test_discovery_root_from_the_runner_scripts_glob(tree: Path) -> None:
    """SGLang's collector names no roots; its runner globs test/registered/**: that is the
    root, so the legacy tests beside it are neither scanned nor registered."""
    (tree / "test/run_suite.py").write_text(RUN_SUITE)
    (tree / ".github/workflows").mkdir(parents=True)
    (tree / ".github/workflows/pr-test.yml").write_text(textwrap.dedent(PR_TEST).lstrip("\n"))
    (tree / "test/srt").mkdir()
    (tree / "test/srt/test_legacy.py").write_text(CUDA + 'register_cuda_ci(est_time="slow", suite="x")\n')
    (tree / "test/registered/__init__.py").write_text("")
    result = derive(scan(tree))
    assert result.data["roots"] == ["test/registered"]
    assert not [f for f in result.findings if f.severity == "error"]  # test/srt is not the runner's
    assert result.registrations == 6
    assert result.data["stages"]["base-b-test-1-gpu-small"]["runs_on"] == ["self-hosted", "h100"]
