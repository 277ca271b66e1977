"""``.github/actions/testfleet-job/action.yml``: the steps every stage job shares.

Every stage job of both generated workflows runs one job of the plan the same way:
download the plan, restore the history read-only, run, export the records of a
default-branch run for the history job, upload JUnit and the status file. Written into
each job, that was some fifty lines per stage lane, most of the generated YAML; written
once here, a stage job is its own checkout, setup and the one ``uses:`` of this action.

A composite action, not a reusable workflow: what differs per stage stays in the stage's
job, in the workflow, where GitHub reads it before any matrix value exists and where a
reviewer reads it: the runner (written from the base's configuration, never from a plan
or an input), the container, the stage's secrets (explicit, never ``secrets: inherit``),
env, checkouts and setup steps. The action gets only the job id and the plan's digest; the
stage's secrets, in the ``env:`` of the step that uses it, are the environment of all its
steps (the pinned artifact and cache actions too), which is how ``testfleet run`` gets them.
It is generated for this project (its history path, install and artifact retention), so
it has no input that could change what it does.

In ``testfleet-trusted.yml`` the test job runs this action from the pull request's
merge commit, like the tests it runs: that job has the stage's secrets only when the plan
is authorized, and the history export never runs there (a ``pull_request_target`` run is
not a default-branch run).
"""

from __future__ import annotations

from typing import Any

from testfleet import __version__
from testfleet.config import Config
from testfleet.integrations import github_steps as steps
from testfleet.integrations.github_options import (
    DEFAULT_BRANCH_RUN,
    HISTORY_ARTIFACT,
    JUNIT_DIR,
    PLAN_ARTIFACT,
    STATUS_ARTIFACT,
    STATUS_DIR,
    WorkflowOptions,
    history_mode,
    reads_cache,
    restore_history,
)
from testfleet.integrations.github_rescue import RESCUE_ARTIFACT
from testfleet.integrations.yaml_doc import REVIEW_WIDTH, dump

JOB_ACTION_PATH = ".github/actions/testfleet-job/action.yml"
JOB_ACTION = "./.github/actions/testfleet-job"


def render_job_action(config: Config, opts: WorkflowOptions) -> str:
    """The composite action a stage job runs its plan job with (deterministic)."""
    body: list[Any] = [steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}),
                       # a rescue job (#40): the rescue wave its matrix entry names
                       steps.uses("actions/download-artifact", {"name": RESCUE_ARTIFACT},
                                  cond="${{ inputs.rescue != '' }}")]
    if reads_cache(config, opts):  # read only: the metric gate's baselines
        body.append(restore_history(config, opts).value)
    body.append(steps.action("Run", "run", install=opts.install, config=opts.config, inputs={
        # JUnit and the status file go to the action's defaults, testfleet-junit/ and
        # testfleet-status/, uploaded below
        "job": "${{ inputs.job }}", "plan-digest": "${{ inputs.plan-digest }}",
        "rescue-digest": "${{ inputs.rescue }}"}))
    if history_mode(config, opts) == "cache":
        writes = f"${{{{ !cancelled() && {DEFAULT_BRANCH_RUN} }}}}"
        body.append(steps.action(
            "Record the history", "history-export", install=None, config=opts.config,
            cond=writes, skip_install=True,
            # the bundle carries the run's cadence and write_baseline (from the plan)
            inputs={"args": steps.args("--run-id", "${{ github.run_id }}", "--plan", "plan.json",
                                       "--output", f"{HISTORY_ARTIFACT}/records.bundle")}))
        body.append(steps.upload(f"{HISTORY_ARTIFACT}-${{{{ inputs.job }}}}", f"{HISTORY_ARTIFACT}/",
                                 cond=writes, if_no_files="warn",
                                 retention_days=opts.artifact_retention_days))
    body.append(steps.upload("junit-${{ inputs.job }}", f"{JUNIT_DIR}/", cond="${{ !cancelled() }}",
                             if_no_files="warn", retention_days=opts.artifact_retention_days))
    body.append(steps.upload(f"{STATUS_ARTIFACT}-${{{{ inputs.job }}}}", f"{STATUS_DIR}/",
                             cond="${{ always() }}", if_no_files="warn",
                             retention_days=opts.artifact_retention_days, before=(
                                 "What this job ran, for the reconcile job (also after a "
                                 "failure or a timeout).",)))
    doc = {
        "name": "testfleet job",
        "description": "Run one job of the testfleet plan and keep what it ran (generated).",
        "inputs": {
            "job": {"description": "The plan job id (matrix.id).", "required": True},
            "plan-digest": {"description": "The digest the plan file must have (the plan "
                                           "job's output digest).", "required": True},
            "rescue": {"description": "A rescue job's rescue file digest (matrix.rescue); empty "
                                      "for a planned job.", "default": ""},
        },
        "runs": {"using": "composite", "steps": body},
    }
    header = (f"Generated by 'testfleet init --github --force' (testfleet {__version__}): what "
              "every stage job",
              "of testfleet-stages.yml runs after its own checkout and setup.")
    return dump(doc, header, width=REVIEW_WIDTH)
