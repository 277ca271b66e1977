"""Fixtures for the runner: real processes, small timeouts, a spec builder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.config import DEFAULT_FATAL, DEFAULT_RETRIABLE
from testfleet.runner.model import JobSpec, RunItem, RunOptions, StageSettings


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., JobSpec]:
    """Write test files into a scratch project and return a JobSpec that runs them."""
    root = tmp_path / "proj"
    root.mkdir()

    def build(files: dict[str, str], *, command: str = "python", floor: float = 5.0,
              factor: float = 1.0, grace: float = 1.0, max_attempts: int = 1,
              fast_fail: bool = True, estimate: float = 0.1, env: dict[str, str] | None = None,
              job_id: str = "job-1") -> JobSpec:
        items = []
        for name, body in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(body))
            items.append(RunItem(name, estimate))
        settings = StageSettings("stage-x", "cpu", command, floor, factor, grace, env or {})  # type: ignore[arg-type]
        options = RunOptions(max_attempts=max_attempts, fast_fail=fast_fail,
                             retriable_patterns=tuple(DEFAULT_RETRIABLE),
                             fatal_patterns=tuple(DEFAULT_FATAL))
        return JobSpec(job_id, settings, tuple(items), root, tmp_path / "records", options, "run-1")

    return build


PROJECT_TOML = """\
roots = ["tests"]

[stages.s-py]
backend = "cpu"
command = "python"
shards = 1
timeout_floor = {floor}
timeout_factor = 1.0
grace_seconds = {grace}

[stages.s-pytest]
backend = "cpu"
command = "pytest"
shards = 2

[runner]
max_attempts = 1
"""


@pytest.fixture
def cli_project(tmp_path: Path) -> Callable[..., tuple[Path, Path, list[str]]]:
    """A project with a config and test files, and a sealed plan file for them.

    Returns (project root, plan path, job ids). Each file is registered on stage ``s-py``
    (command python) with estimate 0.1 s, in the given order; a marker line appended to
    each file registers it in the tree too, as a plan run without a pinned digest needs.
    """

    def build(files: dict[str, str], *, floor: float = 5.0, grace: float = 0.5,
              stage: str = "s-py", cadence: str | None = None) -> tuple[Path, Path, list[str]]:
        from testfleet.config import load_project
        from testfleet.planning import make_plan
        from testfleet.planning.model import plan_bytes
        from testfleet.planning.request import PlanRequest
        from testfleet.registry.model import Registration

        root = tmp_path / "proj"
        (root / "tests").mkdir(parents=True, exist_ok=True)
        (root / "testfleet.toml").write_text(PROJECT_TOML.format(floor=floor, grace=grace))
        regs = []
        for i, (name, body) in enumerate(files.items()):
            path = root / "tests" / name
            text = textwrap.dedent(body)
            if "register_" not in text:  # a plan nobody pins runs registered files only
                text += (f"\nfrom testfleet import register_cpu_ci\n"
                         f"register_cpu_ci(est_time=1, suite={stage!r})\n")
            path.write_text(text)
            # decreasing estimates keep the planned order equal to the given order
            regs.append(Registration(f"tests/{name}", "cpu", stage, 100.0 - i))
        project = load_project(root)
        from testfleet.planning.policy import Trigger

        plan = make_plan(project, regs, PlanRequest(trigger=Trigger(cadence=cadence)))
        plan_path = tmp_path / "plan.json"
        plan_path.write_bytes(plan_bytes(plan))
        return root, plan_path, [j.id for j in plan.jobs]

    return build
