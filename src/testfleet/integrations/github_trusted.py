"""``testfleet-trusted.yml``: a pull request's self-hosted and ``trusted_only`` stages,
planned and dispatched from the base branch's definition.

A ``pull_request`` workflow is the pull request's own: GitHub reads it, and the local
action it uses, from the merge commit, so a fork that edits either can ask for any runner.
This workflow is triggered by ``pull_request_target`` instead, which GitHub always reads
from the base branch. So everything that decides a fork's jobs comes from the base:

* the workflow itself, and the runners of its jobs (written in it from the base's config);
* testfleet: the plan job's root is the base branch's checkout, its composite action and
  its install (a pinned version, a VCS commit, or the base's own source), never the PR's;
* the trust settings (``trusted_only``, ``runs_on``, ``authorize_labels``, ...): read
  from the base commit's configuration (the merge commit's first parent);
* authorization: for a fork, only a label a maintainer adds with this very event
  (``labeled``), and only for the commit it was added to: ``refs/pull/<n>/merge`` is read
  when the plan job starts and may already merge a later push, so the plan refuses a
  checkout whose second parent is not the event's ``pull_request.head.sha`` (``--pr-head``),
  and every test job checks out that verified merge commit by its id. A push after the
  label needs the label again.

The plan job checks the pull request out into ``pull-request/`` as data: the planner
reads its test files' syntax and its configuration, and nothing from it is executed (no
``uses: ./`` from it, no install from it). Test jobs do run the pull request's code (that
is what they test): with read-only contents, no credentials in the checkout, and the
stage's secrets only when the plan is authorized. Nothing here ever saves a cache or
writes history: this workflow runs in the base branch's context.

What GitHub must still be told (runner groups, approvals) is :func:`github_settings`;
``testfleet init --github`` prints it and docs/recipes/github-actions.md explains it.
"""

from __future__ import annotations

from typing import Any

from testfleet import __version__
from testfleet.config import Config
from testfleet.integrations import github_steps as steps
from testfleet.integrations.github_jobs import (
    AUTHORIZED,
    fits_args,
    plan_job,
    plan_outputs,
    reconcile_job,
    result_job,
)
from testfleet.integrations.github_options import (
    PLAN_ARTIFACT,
    PR_PATH,
    STAGES_WORKFLOW_PATH,
    TRUSTED_WORKFLOW_PATH,
    WorkflowOptions,
    ignored_label_expr,
    reads_cache,
    restore_collection,
    restore_history,
    trusted_stages,
)
from testfleet.integrations.github_rescue import RESCUED_JOB, rescued_job
from testfleet.integrations.github_stages import RESCUE_JOB, STAGES_JOB, caller_jobs
from testfleet.integrations.yaml_doc import REVIEW_WIDTH, Flow, Note, dump
from testfleet.planning.lanes import all_lanes

CHECK_NAME = "testfleet (trusted)"
#: The plan step's outputs the jobs of this workflow read (the step has more).
PLAN_OUTPUTS = ["has_jobs", "bypass_fastfail", "digest", "stages", "tree_errors", "authorized"]
#: zizmor flags every pull_request_target trigger; this one is the point of the file.
DANGEROUS_TRIGGER_NOTE = ("zizmor: ignore[dangerous-triggers] base-branch definition; the PR "
                          "is checked out as data only, see the header")


def _plan_job(config: Config, opts: WorkflowOptions, stages: list[str]) -> Note:
    inputs: dict[str, Any] = {
        "working-directory": PR_PATH,
        "plan-file": "../plan.json",
        "stages": ",".join(stages),
        # a fork's trust settings: the base's configuration at the merge commit's first
        # parent; and only the merge of the head this event named (a label authorizes the
        # commit it was set on, not a push that came after it)
        "args": steps.args("--trust-base", "HEAD^1",
                           "--pr-head", "${{ github.event.pull_request.head.sha }}",
                           # the base's copy of this file, the one GitHub runs
                           *fits_args(f"../{TRUSTED_WORKFLOW_PATH}")),
    }
    if opts.diff_pruning:
        inputs["diff-base"] = "HEAD^1"
    body: list[Any] = [
        steps.checkout(before=(
            "The base branch (pull_request_target's own ref): this job's testfleet, its",
            "action and its install come from here, never from the pull request.",)),
        steps.checkout(ref="refs/pull/${{ github.event.pull_request.number }}/merge",
                       path=PR_PATH, fetch_depth=2, name="Check out the pull request as data",
                       before=("Read, never executed: the planner parses its files' syntax; "
                               "depth 2 for the base commit.",)),
        steps.setup_python(opts.python_version),
    ]
    if reads_cache(config, opts):
        body.append(restore_history(config, opts, "Read only: this workflow never saves a cache.",
                                    under=PR_PATH))
    body += [
        restore_collection(config, opts, under=PR_PATH),
        steps.action("Plan", "plan", install=opts.install, config=opts.config, step_id="plan",
                     inputs=inputs),
        Note({"name": "The commit every job tests", "id": "pr",
              "run": f'echo "sha=$(git -C {PR_PATH} rev-parse HEAD)" >> "$GITHUB_OUTPUT"'},
             before=("The merge commit planned here (it merges the event's head: the plan "
                     "checked), never a newer one.",)),
        steps.upload(PLAN_ARTIFACT, "plan.json", cond=None, if_no_files="error", overwrite=True,
                     retention_days=opts.artifact_retention_days),
    ]
    outputs = plan_outputs(PLAN_OUTPUTS)
    outputs["sha"] = "${{ steps.pr.outputs.sha }}"
    return plan_job(config, opts, body, outputs)


def render_trusted_workflow(config: Config, options: WorkflowOptions | None = None) -> str | None:
    """The trusted workflow's YAML, or None when every stage runs on GitHub-hosted runners
    and is not ``trusted_only`` (then ``testfleet.yml`` serves pull requests alone)."""
    opts = options or WorkflowOptions()
    stages = trusted_stages(config)
    if not stages:
        return None
    jobs: dict[str, Any] = {"plan": _plan_job(config, opts, stages)}
    # the stage jobs of the base branch's stages workflow, on the verified merge commit
    jobs[STAGES_JOB], rescue = caller_jobs(config, opts, authorized=AUTHORIZED,
                                           pr_sha="${{ needs.plan.outputs.sha }}")
    jobs["reconcile"], rescued = rescued_job(reconcile_job(opts, [STAGES_JOB], trusted=True),
                                             [RESCUE_JOB])
    jobs[RESCUE_JOB] = rescue
    jobs[RESCUED_JOB] = rescued
    jobs["testfleet"] = result_job(config, ["plan", STAGES_JOB, "reconcile", RESCUE_JOB,
                                            RESCUED_JOB], CHECK_NAME, rescued=RESCUED_JOB)
    header = (
        f"Generated by 'testfleet init --github' (testfleet {__version__}).",
        "A pull request's self-hosted and trusted_only stages, planned from the base branch:",
        "GitHub reads this file for pull_request_target from the base branch, so a fork's",
        "edits to it, to testfleet's files or to the configuration change nothing here. The",
        "plan job plans the pull request's files as data (pull-request/, never executed) with",
        "the base commit's trust settings; a fork is authorized only by a maintainer's label,",
        "for the commit it labelled. Test jobs run that merge commit's code with read-only",
        "contents, no credentials, and the stage's secrets only when the plan is authorized.",
        "Nothing here saves a cache or writes history. The GitHub settings this relies on:",
        "docs/recipes/github-actions.md. Regenerate it with: testfleet init --github --force",
    )
    doc = {
        "name": f"{opts.name} (trusted)",
        "on": {"pull_request_target": Note(
            {"types": Flow(["opened", "synchronize", "reopened", "labeled"])},
            eol=DANGEROUS_TRIGGER_NOTE)},
        "permissions": {"contents": "read"},
        # restores only, in this job and in every job of the stages workflow it calls
        "cache-mode": "read",
        "concurrency": Note({
            "group": "testfleet-trusted-${{ github.event.pull_request.number }}"
                     f"${{{{ {ignored_label_expr(config)} && format('-{{0}}', github.run_id) || '' }}}}",
            "cancel-in-progress": True,
        }, before=("One run per pull request: a new push or label supersedes the last.",)),
        "jobs": jobs,
    }
    return dump(doc, header, blank_between=2, width=REVIEW_WIDTH)


def github_settings(config: Config, repository: str = "OWNER/REPO", default_branch: str = "main",
                    push_branches: tuple[str, ...] = ()) -> list[str]:
    """What must be set in GitHub for the generated workflows to be fork-safe, one item
    per line (``init --github`` prints them; the docs explain each)."""
    stages = trusted_stages(config)
    refs = [default_branch, *[b for b in push_branches if b != default_branch]]
    # GitHub admits a job by the workflow that defines it, not by its caller: every stage
    # job is defined in the stages workflow, which runs at the base branch's ref for
    # pull_request_target and at refs/pull/<n>/merge for a pull request's own run
    workflows = [f"{repository}/{STAGES_WORKFLOW_PATH}@refs/heads/{ref}" for ref in refs]
    items = [
        "Settings > Actions > General > 'Fork pull request workflows from outside "
        "collaborators': 'Require approval for all external contributors'.",
        "Settings > Actions > General > 'Workflow permissions': 'Read repository contents and "
        "packages permissions' (every generated job sets its own, read-only or none).",
    ]
    if stages:
        runners = sorted({label for key, lane in all_lanes(config).items()
                          if lane.stage in stages for label in lane.config.runs_on})
        items += [
            f"Put the self-hosted runners of {', '.join(stages)} (labels {', '.join(runners)}) "
            "in a runner group (organization Settings > Actions > Runner groups) whose "
            "'Workflow access' is 'Selected workflows': " + ", ".join(workflows) + " (GitHub "
            "admits a job by the workflow that defines it; every stage job is defined there). "
            "A pull request's edited copy runs at refs/pull/<n>/merge and gets none of them.",
            "Make those runners ephemeral (just-in-time or --ephemeral): an authorized fork's "
            "code runs on them, and nothing of it may stay for the next job.",
            f"Branch protection of {default_branch}: require the checks 'testfleet' and "
            f"'{CHECK_NAME}'.",
            "Only maintainers can add labels (triage or write access): "
            + ("policy.authorize_labels names the labels that authorize a fork."
               if config.policy.authorize_labels is not None
               else f"every '{config.policy.label_prefix}<label>' label authorizes a fork; set "
                    "policy.authorize_labels to name one label for that."),
        ]
        loose = [name for name in stages if not config.stages[name].trusted_only]
        if loose:
            items.append(f"Stages {', '.join(loose)} run on self-hosted runners without "
                         "trusted_only = true: a fork's pull request runs them without a "
                         "maintainer's label (without secrets). Set trusted_only = true unless "
                         "that is meant.")
    else:
        items.append("Branch protection: require the check 'testfleet'.")
    return items
