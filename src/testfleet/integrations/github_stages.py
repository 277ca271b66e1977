"""``testfleet-stages.yml``: every stage job, written once, called by both workflows.

A stage job (its runner, container, env, checkouts, setup and the job action) used to be
written four times: in ``testfleet.yml`` and ``testfleet-trusted.yml``, and again in each
as the rescue job of the rescue wave (#40). For SGLang that was 7,300 lines a reviewer was
asked to read. Here each job is written once, in a reusable workflow (``on:
workflow_call``), and each workflow calls it twice: ``stages`` with the plan's matrices,
``rescue`` with the rescue wave's (same shape, per lane ``{has_jobs, matrix}``).

What stays true, and where:

* runners are written in this file from the configuration, never taken from an input: a
  caller gives only the matrices (ids, shards, timeouts), the plan's digest, the commit
  and whether fast-fail applies. GitHub reads a ``./`` reusable workflow from the
  caller's own commit, so the trusted workflow (``pull_request_target``, the base
  branch's) runs the base branch's copy of this file; a pull request's edited copy is
  run only by its own ``pull_request`` run, where every self-hosted and ``trusted_only``
  lane is skipped by its ``if:`` (``github.event_name`` is the caller's event);
* a runner group that admits only selected workflows must select this file: GitHub
  admits a job by the workflow that defines it (docs/recipes/github-actions.md);
* secrets are declared here, each passed by name by its caller: ``testfleet.yml`` passes
  them as they are, the trusted workflow only to an authorized plan (empty otherwise),
  never the history's write secret;
* a stage's ``needs:`` between stage jobs are here, so fast-fail across stages holds
  within one call; a rescue wave is called with ``fast_fail: false``, so a rescue job
  whose stage needs another waits for that stage's rescue but never skips because of it.
"""

from __future__ import annotations

from typing import Any

from testfleet import __version__
from testfleet.config import Config
from testfleet.integrations.github_groups import JobGroup, job_groups
from testfleet.integrations.github_jobs import (
    RESCUE_FAIL_FAST,
    SECRET_NOTE,
    fail_fast_of,
    job_secrets,
    share_repeats,
    stage_job,
)
from testfleet.integrations.github_options import (
    DEFAULT_BRANCH_RUN,
    STAGES_WORKFLOW_PATH,
    WorkflowOptions,
    stage_job_ids,
    stage_waves,
    trusted_stages,
)
from testfleet.integrations.yaml_doc import REVIEW_WIDTH, Alias, Anchor, Flow, Note, dump
from testfleet.planning.jobci import job_ci
from testfleet.planning.lanes import Lane, all_lanes

#: The caller jobs: the plan's stage jobs, and the rescue wave's.
STAGES_JOB = "stages"
RESCUE_JOB = "rescue"
#: GitHub's ``./`` form for a reusable workflow of the same repository and commit.
STAGES_USES = f"./{STAGES_WORKFLOW_PATH}"


def has_stage_jobs(config: Config) -> bool:
    """Whether there is any lane to write a job for (a workflow must have a job)."""
    return bool(all_lanes(config))


def _groups(config: Config) -> tuple[dict[str, Lane], list[JobGroup], set[str]]:
    """(every lane, the jobs they are written in, in order: a stage after those it needs,
    the trusted stages), read once for all the stage jobs."""
    lanes = all_lanes(config)
    waves = stage_waves(config)
    trusted = set(trusted_stages(config))
    order = sorted(lanes, key=lambda k: (waves[lanes[k].stage], k))
    groups = job_groups(config, order, excluded=[k for k in order if lanes[k].stage in trusted])
    return lanes, groups, trusted


def _stage_jobs(config: Config, opts: WorkflowOptions) -> dict[str, Any]:
    """Every stage job, by job id."""
    from testfleet.integrations.setup_scripts import setup_owners

    lanes, groups, trusted = _groups(config)
    job_ids = stage_job_ids(config)
    lane_jobs = {key: job_ids[group.key] for group in groups for key in group.lanes}
    setup_dirs = setup_owners(config)
    return {job_ids[group.key]: stage_job(config, opts, lanes[group.key], lane_jobs,
                                          lanes=lanes, setup_dirs=setup_dirs,
                                          pr_excluded=lanes[group.key].stage in trusted,
                                          group=group)
            for group in groups}


def reads_rescue(config: Config) -> bool:
    """Whether a stage job reads the ``rescue`` input (a stage whose ``fail_fast = true``
    holds for the plan's jobs but never for a rescue wave); the input is declared, and
    passed, only then."""
    lanes, groups, _ = _groups(config)
    return any(fail_fast_of(lanes[g.key], job_ci(lanes[g.key].config), g)[0] == RESCUE_FAIL_FAST
               for g in groups)


def render_stages_workflow(config: Config, options: WorkflowOptions | None = None) -> str | None:
    """The stages workflow's YAML, or None when the configuration has no stage."""
    opts = options or WorkflowOptions()
    if not has_stage_jobs(config):
        return None
    jobs = _stage_jobs(config, opts)
    share_repeats(jobs)
    # stages: each lane's {has_jobs, matrix}, the plan's or the rescue wave's; digest: the
    # plan's; sha: the commit to test (empty: the run's own); fast_fail: a stage's failure
    # cancels its shards and stops the stages that need it
    call: dict[str, Any] = {"inputs": {
        "stages": Flow({"type": "string", "required": True}),
        "digest": Flow({"type": "string", "required": True}),
        "sha": Flow({"type": "string", "default": ""}),
        "fast_fail": Flow({"type": "boolean", "default": True}),
    }}
    if reads_rescue(config):  # this call runs the rescue wave
        call["inputs"]["rescue"] = Flow({"type": "boolean", "default": False})
    secrets = job_secrets(config, opts)
    if secrets:
        call["secrets"] = {name: Flow({"required": False}) for name in secrets}
    header = (
        f"Generated by 'testfleet init --github' (testfleet {__version__}); regenerate it with",
        "'testfleet init --github --force'. Every stage job, once: testfleet.yml and",
        "testfleet-trusted.yml call this file with the plan's matrices (job 'stages') and",
        "with the rescue wave's (job 'rescue'). Runners, containers and setup are written",
        "here from the configuration; a caller gives only matrices, the plan's digest, the",
        "commit and its secrets. Each stage's setup items are in .github/testfleet/.",
    )
    doc = {
        "name": f"{opts.name} stages",
        "on": {"workflow_call": call},
        "permissions": {"contents": "read"},
        "jobs": jobs,
    }
    return dump(doc, header, blank_between=2, width=REVIEW_WIDTH)


def secrets_given(config: Config, opts: WorkflowOptions, *, authorized: str | None) -> dict[str, Any]:
    """What a caller passes for each secret of the stages workflow. ``authorized``: the
    trusted workflow's condition for any secret at all; the history's write secret only
    ever comes from ``testfleet.yml``, and only on a default-branch run."""
    out: dict[str, Any] = {}
    for name in job_secrets(config, opts):
        if authorized is None:
            value = f"${{{{ secrets.{name} }}}}"
            if name == opts.database_secret and name != opts.queue_secret:
                value = f"${{{{ {DEFAULT_BRANCH_RUN} && secrets.{name} || '' }}}}"
            out[name] = value
        elif name != opts.database_secret or name == opts.queue_secret:
            out[name] = Note(f"${{{{ {authorized} && secrets.{name} || '' }}}}",
                             eol=SECRET_NOTE)
    return out


def caller_jobs(config: Config, opts: WorkflowOptions, *, authorized: str | None,
                pr_sha: str | None = None) -> tuple[Note, Note]:
    """(the ``stages`` job, the ``rescue`` job) of a workflow: the stages workflow called
    with the plan's matrices, then with the rescue wave's."""
    given = secrets_given(config, opts, authorized=authorized)
    with_: dict[str, Any] = {"stages": "${{ needs.plan.outputs.stages }}",
                             "digest": "${{ needs.plan.outputs.digest }}"}
    if pr_sha:
        with_["sha"] = pr_sha
    with_["fast_fail"] = "${{ needs.plan.outputs.bypass_fastfail != 'true' }}"
    uses = Note(STAGES_USES, eol="zizmor: ignore[self-repository] the ./ form: the stages "
                                 "workflow of this very commit")
    stages: dict[str, Any] = {
        "name": STAGES_JOB,
        "needs": Flow(["plan"]),
        "if": "${{ needs.plan.outputs.has_jobs == 'true' }}",
        "uses": uses,
        "with": with_,
    }
    rescue_with = {"stages": "${{ needs.reconcile.outputs.rescue }}",
                   "digest": with_["digest"], **({"sha": pr_sha} if pr_sha else {}),
                   "fast_fail": False, **({"rescue": True} if reads_rescue(config) else {})}
    rescue: dict[str, Any] = {
        "name": RESCUE_JOB,
        "needs": Flow(["plan", "reconcile"]),
        "if": "${{ !cancelled() && needs.reconcile.result == 'success' && "
              "needs.reconcile.outputs.has_rescue == 'true' }}",
        "uses": uses,
        "with": rescue_with,
    }
    if given:
        stages["secrets"] = Anchor("stage-secrets", given)
        rescue["secrets"] = Alias("stage-secrets", given)
    return (Note(stages, before=("Every stage job (testfleet-stages.yml), with this run's plan.",)),
            Note(rescue, before=("The files of the shards whose runner was lost (the rescue wave, "
                                 "from reconcile):", "the same jobs, one per lost shard.")))
