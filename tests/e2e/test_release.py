"""The release workflow of testfleet itself (`.github/workflows/release.yml`): it lints clean,
and its build-and-check script, run here as the runner would run it, builds an sdist and a
wheel that pass ``twine check --strict`` and check-wheel-contents, and refuses a tag that
does not match the version. The publish job belongs to GitHub and PyPI (trusted publishing):
what can be checked here is that it publishes exactly the checked files, with OIDC and no
stored token."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _workflow() -> dict[str, Any]:
    data: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def _tool(name: str) -> str:
    path = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert path, f"{name} is not installed: pip install -e '.[test]'"
    return path


def _step(job: str, name: str) -> dict[str, Any]:
    (step,) = [s for s in _workflow()["jobs"][job]["steps"] if s.get("name") == name]
    return step


def test_release_workflow_lints_clean() -> None:
    _tool("shellcheck")  # actionlint checks run: scripts with it when it is on PATH
    for argv in ([_tool("actionlint"), "-no-color", str(WORKFLOW)],
                 [_tool("zizmor"), "--offline", "--persona", "auditor", "--no-progress", str(WORKFLOW)],
                 [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                  str(WORKFLOW)]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 0, f"{argv[0]}:\n{proc.stdout}\n{proc.stderr}"


def test_publish_uses_trusted_publishing_on_the_checked_files_only() -> None:
    wf = _workflow()
    assert wf["on"] == {"push": {"tags": ["v*"]}}
    assert wf["permissions"] == {}
    publish = wf["jobs"]["publish"]
    assert publish["needs"] == ["build"]
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    uses = [s["uses"] for s in publish["steps"]]
    assert uses[0].startswith("actions/download-artifact@")
    assert uses[-1].startswith("pypa/gh-action-pypi-publish@")
    assert all(len(u.split("@", 1)[1]) == 40 for u in uses)  # pinned by commit
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text and "password" not in text
    # the tools are pinned, and the build job installs exactly them
    tools = (REPO / ".github" / "release-tools.txt").read_text(encoding="utf-8").split()
    assert sorted(t.split("==")[0] for t in tools) == ["build", "check-wheel-contents", "twine"]
    assert all("==" in t for t in tools)
    assert ".github/release-tools.txt" in _step("build", "Install the build tools")["run"]


def _build_and_check(tmp_path: Path, tag: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The step's script in a copy of the source tree, as the runner runs it (bash -e)."""
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".testfleet", "__pycache__", "*.egg-info", "dist", "build", "site", ".venv"))
    step = _step("build", "Build and check")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTHON"))}
    bindir = tmp_path / "bin"  # `python3` in the script is this interpreter, with the tools
    bindir.mkdir()
    # a wrapper, not a symlink: a symlink outside a virtual environment loses its
    # site-packages (pyvenv.cfg is looked up beside the link)
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env.update(step.get("env", {}) | {"TAG": tag}, PATH=f"{bindir}{os.pathsep}{env['PATH']}",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          cwd=src, env=env, capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)
    return proc, src / "dist"


#: The workflow runs its script under the Python it sets up (3.12), which reads the version
#: with ``tomllib``; an older test interpreter cannot stand in for it.
SCRIPT_PYTHON = pytest.mark.skipif(sys.version_info < (3, 11),
                                   reason="the release script runs under the workflow's Python 3.12 (tomllib)")


@SCRIPT_PYTHON
@pytest.mark.timeout(900)
def test_build_and_check_makes_a_clean_sdist_and_wheel(tmp_path: Path) -> None:
    proc, dist = _build_and_check(tmp_path, f"v{VERSION}")
    out = proc.stdout + proc.stderr
    offline = "Could not find a version that satisfies" in out or "NewConnectionError" in out
    if proc.returncode and offline and os.environ.get("CI") != "true":
        pytest.skip("no package index reachable for the isolated build (CI=true fails instead)")
    assert proc.returncode == 0, out[-4000:]
    assert sorted(p.name for p in dist.iterdir()) == [
        f"testfleet-{VERSION}-py3-none-any.whl", f"testfleet-{VERSION}.tar.gz"]
    assert "PASSED" in out  # twine check --strict
    assert "OK" in out  # check-wheel-contents


@SCRIPT_PYTHON
def test_a_tag_that_is_not_the_version_stops_the_release(tmp_path: Path) -> None:
    proc, dist = _build_and_check(tmp_path, "v99.0.0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"tag v99.0.0 does not match the version in pyproject.toml ({VERSION})" in proc.stdout
    assert not dist.exists()
