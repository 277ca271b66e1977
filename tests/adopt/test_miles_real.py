"""miles' real tree, adopted on every machine (#39): radixark/miles at 31f1ca9 with its
whole ``.github/``, its ``pyproject.toml``, its ``tests/ci/`` helpers and every test file
reduced to its registration statements (tests/fixtures/real_trees/strip_tree.py; adopting
it writes byte for byte what adopting the full tree writes). The review targets are
checked here, not only where a clone of miles happens to exist: every registration kept,
the generated workflows and actions under 800 lines, 0 actionlint and 0 zizmor (auditor)
findings with every ignore giving its reason, no local path in any generated file, and the
switch and its rollback leaving every old workflow byte for byte as it was."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from integrations.conftest import run_tool, tool
from support import run_cli

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "miles-real"
GENERATED = (".github/workflows/testfleet.yml", ".github/workflows/testfleet-trusted.yml",
             ".github/workflows/testfleet-stages.yml", ".github/actions/testfleet/action.yml",
             ".github/actions/testfleet-job/action.yml", ".github/actionlint.yaml")
#: #39's target for everything adoption writes into .github/ as workflow or action YAML
LINE_TARGET = 800


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".git/" not in p.as_posix()}


@pytest.fixture
def miles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "miles"
    shutil.copytree(REAL, root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_the_real_tree_adopts_within_the_review_targets(miles: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(miles)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--from-existing", "--github",
                             "--allow-findings")
    assert code == 0, out + err
    assert "from 422 registration(s) (183 marker calls, 239 by location)" in out + err
    after = snapshot(miles)
    assert {k: v for k, v in after.items() if k in before and k != "pyproject.toml"} == \
        {k: v for k, v in before.items() if k != "pyproject.toml"}  # no old file edited
    lines = {rel: len((miles / rel).read_text().splitlines()) for rel in GENERATED}
    assert sum(lines.values()) < LINE_TARGET, lines
    # every stage job once, in the stages workflow: the callers hold no matrix job
    for rel in GENERATED[:2]:
        jobs = yaml.safe_load((miles / rel).read_text())["jobs"]
        assert not [j for j, job in jobs.items() if "strategy" in job], rel
        assert {job["uses"] for j, job in jobs.items() if j in ("stages", "rescue")} == \
            {"./.github/workflows/testfleet-stages.yml"}

    # lint, as CI would: actionlint with the labels init wrote, zizmor as an auditor, the schema
    workflows = [str(miles / rel) for rel in GENERATED if rel.startswith(".github/workflows/")]
    actions = [str(miles / rel) for rel in GENERATED if rel.startswith(".github/actions/")]
    tool("shellcheck")
    lint = run_tool(tool("actionlint"), "-no-color", "-config-file",
                    str(miles / ".github/actionlint.yaml"), *workflows, cwd=miles)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    zizmor = run_tool(tool("zizmor"), "--offline", "--persona", "auditor", "--no-progress",
                      *workflows, *actions)
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr
    schema = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                      *workflows)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    for rel in GENERATED:
        text = (miles / rel).read_text()
        for ignore in re.findall(r"# zizmor: ignore\[[^\]]+\](.*)$", text, re.M):
            assert ignore.strip(), f"{rel}: a zizmor ignore without its reason"
        # the install works on a fresh runner: no local path of this machine
        assert "file://" not in text and str(tmp_path) not in text and "/work/" not in text, rel

    # the switch turns the old test jobs off, the rollback gives every byte back
    adopted = snapshot(miles)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 0, out + err
    switched = snapshot(miles)
    changed = {k for k in switched if switched[k] != adopted.get(k)}
    assert ".github/testfleet-switch.json" in changed
    assert {".github/workflows/pr-test.yml", ".github/workflows/pr-test-rocm.yml"} <= changed
    assert all(k.startswith(".github/workflows/") or k == ".github/testfleet-switch.json"
               for k in changed), changed
    assert not any(k.startswith(".github/workflows/testfleet") for k in changed)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 0, out + err
    assert snapshot(miles) == adopted
    for rel in before:
        if rel.startswith(".github/workflows/"):
            assert (miles / rel).read_bytes() == (REAL / rel).read_bytes(), rel
