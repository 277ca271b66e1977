"""Security properties of the CI integration.

* A PR from a fork without an authorizing label never gets a ``trusted_only`` stage
  into any matrix the workflow consumes (all-jobs matrix or any wave's matrix).
* Hostile payload fields (newlines, ``${{ }}``, shell metacharacters, output
  injection attempts) never reach a shell or another output.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import parse_github_output, run_cli
from testfleet.config import Project, load_project
from testfleet.integrations.plan_formats import github_outputs
from testfleet.planning import make_plan
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect
from testfleet.registry.model import Registry

from .conftest import EVENTS_DIR, MI300X

PWNED = Path("/tmp/testfleet-pwned")
HOSTILE_FRAGMENTS = ("${{", "$(", "`", "GITHUB_ENV", "LD_PRELOAD", "pwn", "set-output", "\r")


def trusted_stage_entries(outputs: dict[str, str]) -> list[dict[str, object]]:
    entries = []
    for name, value in outputs.items():
        if name == "matrix" or name.startswith("matrix_"):
            entries += [e for e in json.loads(value)["include"] if e["stage"] == MI300X]
    return entries


@pytest.mark.parametrize(("case", "authorized"), [
    ("pr_fork_unlabeled.json", False),
    ("pr_fork_labeled.json", True),
])
def test_fork_prs_need_an_authorizing_label_for_trusted_stages(
        case: str, authorized: bool, trusted_fleet: Path,
        github_env: Callable[[str], dict[str, Path]], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    files = github_env(case, trusted_fleet)
    plan_file = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "-C", str(trusted_fleet), "plan", "--github",
                           "--format", "github", "--plan-file", str(plan_file))
    assert code == 0, err
    outputs = dict(parse_github_output(files["output"].read_text()))
    plan = json.loads(plan_file.read_text())
    stage = next(s for s in plan["stages"] if s["name"] == MI300X)
    entries = trusted_stage_entries(outputs)
    if authorized:
        # positive control: the same tree does schedule the stage when allowed to
        assert entries and stage["status"] == "scheduled"
    else:
        assert entries == []
        assert stage["status"] == "unauthorized"
        assert {s["reason"] for s in plan["skipped"] if s["suite"] == MI300X} <= {
            "unauthorized", "disabled"}


@cache
def _fleet(path: str, authorize: tuple[str, ...] | None) -> tuple[Project, Registry]:
    root = Path(path)
    if authorize is not None:
        text = (root / "pyproject.toml").read_text()
        if "authorize_labels" not in text:
            text = text.replace("[tool.testfleet.policy]\n",
                                f"[tool.testfleet.policy]\nauthorize_labels = {json.dumps(list(authorize))}\n")
            (root / "pyproject.toml").write_text(text)
    project = load_project(root)
    return project, collect(project, use_cache=False)


LABELS = st.lists(st.one_of(
    st.sampled_from(["nightly", "bypass-fastfail", "documentation", "ok-to-test", "run-ci-amd",
                     "run-ci-megatron", "run-ci-all", "run-ci-image", "run-ci-", "run-ci-nope",
                     "RUN-CI-AMD", " run-ci-amd", "run-ci-amd\n", "ci-run-amd"]),
    st.text(min_size=1, max_size=30),
), max_size=6)


@pytest.mark.parametrize("authorize", [None, ("ok-to-test",)])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(labels=LABELS, cadence=st.sampled_from([None, "nightly", "weekly"]))
def test_no_label_set_lets_an_unauthorized_fork_into_a_trusted_stage(
        authorize: tuple[str, ...] | None, labels: list[str], cadence: str | None,
        trusted_fleet: Path) -> None:
    project, registry = _fleet(str(trusted_fleet), authorize)
    selecting = {"run-ci-all", "run-ci-image"} | {f"run-ci-{name}" for name in project.config.labels}
    granting = (set(labels) & selecting if authorize is None else set(labels) & set(authorize))
    trigger = Trigger(event="pull_request", labels=tuple(labels), fork=True, cadence=cadence)
    try:
        plan = make_plan(project, registry, PlanRequest(trigger=trigger))
    except Exception as exc:  # a refused trigger schedules nothing at all: also safe
        assert type(exc).__name__ == "UsageError"
        return
    entries = trusted_stage_entries(github_outputs(plan))
    if not granting:
        assert entries == []
        assert not [j for j in plan.jobs if j.stage == MI300X]


def test_hostile_payload_reaches_no_shell_and_no_other_output(
        example_project: Path, github_env: Callable[[str], dict[str, Path]],
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    PWNED.unlink(missing_ok=True)
    files = github_env("pr_hostile.json")
    plan_file = tmp_path / "plan.json"
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--github",
                             "--format", "github", "--plan-file", str(plan_file))
    assert code == 0, err
    pairs = parse_github_output(files["output"].read_text())
    names = [n for n, _ in pairs]
    assert len(names) == len(set(names))
    from testfleet.planning.model import load_plan

    plan = load_plan(plan_file)
    assert set(names) == set(github_outputs(plan))
    outputs = dict(pairs)
    for name, value in outputs.items():
        for fragment in HOSTILE_FRAGMENTS:
            assert fragment not in value, (name, fragment)
        if name.startswith("has_jobs") or name in ("bypass_fastfail", "write_baseline"):
            assert value in ("true", "false")
        if name == "matrix" or name.startswith("matrix_"):
            ids = [e["id"] for e in json.loads(value)["include"]]
            assert all(re.fullmatch(r"[A-Za-z0-9._-]+", i) for i in ids)
    # workflow commands on stdout: only our own escaped warnings, one per line
    for line in out.splitlines():
        if line.startswith("::"):
            assert line.startswith(("::warning title=testfleet plan::", "::notice title=testfleet plan::")), line
    assert not any(line.startswith(("::set-output", "GITHUB_ENV", "matrix=")) for line in out.splitlines())
    assert not PWNED.exists()


def test_hostile_payload_in_the_step_summary_is_inert(
        example_project: Path, github_env: Callable[[str], dict[str, Path]],
        capsys: pytest.CaptureFixture[str]) -> None:
    github_env("pr_hostile.json")
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--github",
                             "--format", "markdown")
    assert code == 0, err
    assert "touch /tmp/testfleet-pwned" in out  # shown, as text...
    for m in re.finditer(r"[$`{}]", out):  # ...with every active character escaped
        assert out[m.start() - 1] == "\\", out[max(0, m.start() - 40): m.end() + 10]
    assert not PWNED.exists()


def test_hostile_labels_do_not_reach_any_matrix_value(
        example_project: Path, github_env: Callable[[str], dict[str, Path]],
        capsys: pytest.CaptureFixture[str]) -> None:
    """The labels of the hostile payload appear nowhere in what the jobs receive."""
    payload = json.loads((EVENTS_DIR / "pr_hostile.json").read_text())
    labels = [lbl["name"] for lbl in payload["pull_request"]["labels"]]
    files = github_env("pr_hostile.json")
    code, _, err = run_cli(capsys, "-C", str(example_project), "plan", "--github",
                           "--format", "github")
    assert code == 0, err
    text = files["output"].read_text()
    genuine = {f"{n}={v}" for n, v in parse_github_output(text)}
    for label in labels:
        if label != "run-ci-megatron" and label not in genuine:
            assert label not in text
    assert payload["pull_request"]["title"] not in text
    assert payload["pull_request"]["head"]["ref"] not in text
    assert os.environ["GITHUB_EVENT_NAME"] == "pull_request"
