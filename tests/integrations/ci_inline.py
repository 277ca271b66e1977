"""A generated workflow's stage jobs with the shared job action's steps in place of its
``uses:`` step, as GitHub runs them: inputs become the values the job passes, and the
step's env (the stage's secrets) reaches every inner step. Tests read a stage job's
whole sequence of steps from it, wherever the generator put them."""

from __future__ import annotations

from typing import Any

import yaml

from testfleet.config import Config
from testfleet.integrations.github_job_action import JOB_ACTION, render_job_action
from testfleet.integrations.github_options import WorkflowOptions


def inline(data: dict[str, Any], config: Config, opts: WorkflowOptions | None = None) -> dict[str, Any]:
    """``data`` (a parsed workflow) with every job-action step replaced by its steps."""
    action = yaml.safe_load(render_job_action(config, opts or WorkflowOptions()))
    for job in data["jobs"].values():
        steps: list[dict[str, Any]] = []
        for step in job.get("steps", []):
            if step.get("uses") != JOB_ACTION:
                steps.append(step)
                continue
            given = {f"${{{{ inputs.{k} }}}}": v for k, v in step["with"].items()}
            for inner in action["runs"]["steps"]:
                text = yaml.safe_dump(inner)
                for placeholder, value in given.items():
                    text = text.replace(placeholder, value)
                copy = yaml.safe_load(text)
                if "env" in step:
                    copy["env"] = {**step["env"], **copy.get("env", {})}
                steps.append(copy)
        job["steps"] = steps
    return data
