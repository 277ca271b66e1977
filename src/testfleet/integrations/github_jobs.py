"""The jobs of the generated GitHub workflows: the plan guard, the reconciliation and the
one required check in both, and one job per stage lane in the stages workflow they call.

A stage job's runner, container, secrets and setup are written here from the stage's
table, statically: GitHub reads them before any matrix value exists, and a runner label
written in the file cannot be changed by a plan. The matrix (shards, job ids, timeouts)
still comes from the plan at run time, and the plan job refuses a plan whose runners or
CI settings differ from what the workflow was generated with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from testfleet.config import Config
from testfleet.integrations import github_steps as steps
from testfleet.integrations.github_groups import LANES_ENV, JobGroup
from testfleet.integrations.github_options import (
    DEFAULT_BRANCH_RUN,
    PLAN_ARTIFACT,
    STATUS_ARTIFACT,
    STATUS_DIR,
    TRUSTED_WORKFLOW_PATH,
    WORKFLOW_PATH,
    WorkflowOptions,
    workflow_needs,
)
from testfleet.integrations.workflow_fit import SETTINGS_ENV
from testfleet.integrations.yaml_doc import Alias, Anchor, Flow, Note, bare, plain
from testfleet.integrations.yaml_text import expr_str
from testfleet.planning.jobci import JobCI, job_ci
from testfleet.planning.lanes import Lane, all_lanes

#: Secrets in the trusted workflow: only for a plan that is authorized (a same-repository
#: pull request, or a fork's with a label a maintainer just added).
AUTHORIZED = "needs.plan.outputs.authorized == 'true'"


def fits_args(workflow_path: str) -> list[str]:
    """The plan step's arguments that make ``testfleet plan`` refuse a plan this workflow
    was not generated for (:mod:`testfleet.integrations.workflow_fit`)."""
    return ["--fits-workflow", workflow_path]


def _runs_on(runs_on: list[str] | tuple[str, ...], trusted_lane: bool) -> Any:
    value: Any = runs_on[0] if len(runs_on) == 1 else Flow(list(runs_on))
    if trusted_lane and any(label == "self-hosted" for label in runs_on):
        return Note(value, eol="zizmor: ignore[self-hosted-runner] pull requests reach it "
                               "only through testfleet-trusted.yml")
    return Note(value, eol="the stage's runs_on") if trusted_lane else value


#: zizmor reads a runs-on that indexes a map as obfuscation; here the map is the point.
RUNNERS_NOTE = ("each stage's runs_on, written here from the config; the plan's matrix entry "
                "names only its stage")


def _runs_on_lanes(members: list[Lane], trusted_lane: bool) -> Any:
    """One lane's runners as written today; several lanes' as a map from lane to labels,
    written here from the configuration and indexed by the matrix entry's lane."""
    labels = {ln.key: list(ln.config.runs_on) for ln in members}
    if len({tuple(v) for v in labels.values()}) == 1:
        return _runs_on(members[0].config.runs_on, trusted_lane)
    table = json.dumps({k: v[0] if len(v) == 1 else v for k, v in labels.items()},
                       separators=(",", ":")).replace("'", "''")
    if trusted_lane and any("self-hosted" in v for v in labels.values()):
        note = ("zizmor: ignore[self-hosted-runner,obfuscation] pull requests reach them only "
                f"through testfleet-trusted.yml; {RUNNERS_NOTE}")
    else:
        note = f"zizmor: ignore[obfuscation] {RUNNERS_NOTE}"
    return Note(f"${{{{ fromJSON('{table}')[matrix.lane] }}}}", eol=note)


def _container(ci: JobCI) -> Note | None:
    if ci.container is None:
        return None
    c = ci.container
    pinned = "@sha256:" in c.image
    body: dict[str, Any] = {"image": c.image if pinned else Note(c.image, eol=(
        "zizmor: ignore[unpinned-images] the stage's container; pin it in the config "
        "as image@sha256:..."))}
    if c.options:
        body["options"] = c.options
    if c.volumes:
        body["volumes"] = list(c.volumes)
    return Note(body)


#: zizmor asks for a deployment environment around secrets in a pull_request_target run;
#: here the gate is the plan's authorization (a maintainer's label, or no fork at all).
SECRET_NOTE = "zizmor: ignore[secrets-outside-env] given only to an authorized plan"


def _python(ci: JobCI, opts: WorkflowOptions) -> str | None:
    if ci.python is not None:
        return ci.python or None
    return None if ci.container is not None else opts.python_version


def job_secrets(config: Config, opts: WorkflowOptions) -> list[str]:
    """Every secret a stage job reads: the stages' own, their extra checkouts' tokens and
    the history's database roles (the stages workflow declares them; each caller passes
    them, the trusted workflow only to an authorized plan)."""
    names: set[str] = set()
    for lane in all_lanes(config).values():
        ci = job_ci(lane.config)
        names.update(ci.secrets)
        names.update(x.token_secret for x in ci.checkouts if x.token_secret)
    names.update(s for s in (opts.database_secret, opts.queue_secret) if s)
    return sorted(names)


#: A stage's ``fail_fast = true``: the plan's jobs fail fast, a rescue wave's never do.
RESCUE_FAIL_FAST = "${{ !inputs.rescue }}"


def fail_fast_of(lane: Lane, ci: JobCI, group: JobGroup | None) -> tuple[Any, str]:
    """(the job's ``fail-fast``, the comment that says why) for a lane, or for the group
    whose first lane it is."""
    if (lane.config.execution or "shards") == "queue":  # #40: runners pull one queue
        return False, "a queue lane: one runner's failure must not cancel the other pullers"
    if group is not None and group.one_job_each:
        return False, "each of these stages runs one job: nothing of its own to cancel"
    if ci.fail_fast is None:
        return "${{ inputs.fast_fail }}", "unless the run bypasses fast-fail, or is a rescue wave"
    if ci.fail_fast:
        return RESCUE_FAIL_FAST, ("the stage's fail_fast; a rescue wave never cancels a lost "
                                  "file's rescue")
    return False, "the stage's fail_fast"


def stage_job(config: Config, opts: WorkflowOptions, lane: Lane, job_ids: dict[str, str],
              *, lanes: Mapping[str, Lane], setup_dirs: Mapping[str, str], pr_excluded: bool,
              group: JobGroup | None = None) -> Note:
    """The job of one stage lane, or of a :class:`JobGroup` of lanes with the same
    settings (``lane``: its first), in the stages workflow both workflows call
    (:mod:`testfleet.integrations.github_stages`): its matrix from the ``stages`` input
    (the plan's, or the rescue wave's), the commit in ``sha`` (the trusted workflow's
    verified merge commit; empty: the run's own), its secrets as its caller gives them.
    ``lanes``: every lane (``all_lanes``); ``setup_dirs``: lane -> the directory of its
    setup scripts (``setup_owners``), both read once for all the jobs; ``pr_excluded``: a
    pull request reaches this lane only through the trusted workflow, so it is skipped on
    ``pull_request``."""
    name = lane.key
    members = [lanes[key] for key in (group.lanes if group else (name,))]
    stage = lane.config
    ci = job_ci(stage)
    stage_ref = f"fromJSON(inputs.stages)[{expr_str(name)}]"
    needed = [ln for n in workflow_needs(stage) for ln in lanes.values() if ln.stage == n]
    needs = list(dict.fromkeys(job_ids[ln.key] for ln in needed))
    cond = ["!cancelled()", f"{stage_ref}.has_jobs"]
    if pr_excluded:
        cond.insert(0, "github.event_name != 'pull_request'")
    if needs:
        cond.append("(!failure() || !inputs.fast_fail)")
    fail_fast, fail_fast_note = fail_fast_of(lane, ci, group)
    strategy: dict[str, Any] = {"fail-fast": Note(fail_fast, eol=fail_fast_note)}
    if ci.max_parallel:
        strategy["max-parallel"] = ci.max_parallel
    strategy["matrix"] = f"${{{{ {stage_ref}.matrix }}}}"
    # the if: and the runner's note say when a pull request gets the lane (trusted only)
    about = ["The stages in TESTFLEET_LANES: the same settings, one job, each stage on its "
             "own runners."] if len(members) > 1 else []
    job: dict[str, Any] = {"name": "${{ matrix.id }}"}
    if needs:
        job["needs"] = Flow(needs)
    job["if"] = f"${{{{ {' && '.join(cond)} }}}}"
    job["strategy"] = strategy
    job["runs-on"] = _runs_on_lanes(members, pr_excluded)
    container = _container(ci)
    if container is not None:
        job["container"] = container
    job["timeout-minutes"] = "${{ matrix.timeout_minutes }}"
    # the digest of the CI settings written here: the plan job refuses a plan made with others
    job["env"] = {**dict(sorted(ci.env.items())), SETTINGS_ENV: ci.fingerprint()}
    if len(members) > 1:
        job["env"][LANES_ENV] = " ".join(ln.key for ln in members)
    secret_env: dict[str, Any] = {s: f"${{{{ secrets.{s} }}}}" for s in ci.secrets}
    run_env: dict[str, Any] = {}
    queue_lane = (stage.execution or "shards") == "queue"
    pr_queue = opts.queue_secret if queue_lane else None
    if opts.database_secret:
        # Only default-branch runs get the database's write secret: a pull request's jobs
        # record into their own throwaway SQLite file and never write shared history; a
        # pull request's queue runners get the queue tables' role, when there is one (the
        # trusted workflow passes no write secret at all).
        other = f"secrets.{pr_queue}" if pr_queue else "''"
        run_env["TESTFLEET_DATABASE_URL"] = (f"${{{{ {DEFAULT_BRANCH_RUN} && "
                                             f"secrets.{opts.database_secret} || {other} }}}}")
    elif pr_queue:
        run_env["TESTFLEET_DATABASE_URL"] = f"${{{{ secrets.{pr_queue} }}}}"
    run_env.update(secret_env)
    body: list[Any] = [steps.checkout(ref="${{ inputs.sha }}")]
    for extra in ci.checkouts:
        token = f"${{{{ secrets.{extra.token_secret} || github.token }}}}" \
            if extra.token_secret else None
        body.append(steps.checkout(repository=extra.repository, ref=extra.ref or None,
                                   path=extra.path, token=token))
    python = _python(ci, opts)
    if python:
        body.append(steps.setup_python(python))
    if ci.uv:
        body.append(steps.setup_uv())
    if ci.setup:
        body += steps.setup_files(setup_dirs[name], ci.setup, secret_env)
    body.append(steps.job_action(run_env))
    job["steps"] = body
    return Note(job, before=tuple(about))


def plan_job(config: Config, opts: WorkflowOptions, body: list[Any],
             outputs: dict[str, str]) -> Note:
    """The plan job both workflows share around their own steps and outputs."""
    from testfleet.integrations.github_options import ignored_label_expr

    return Note({
        "name": "plan",
        "if": f"${{{{ !{ignored_label_expr(config)} }}}}",
        "runs-on": opts.plan_runner,
        "timeout-minutes": opts.plan_timeout_minutes,
        "outputs": outputs,
        "steps": body,
    }, before=("A label that cannot change the plan does not re-run CI.",))


def plan_outputs(names: list[str]) -> dict[str, str]:
    return {o: f"${{{{ steps.plan.outputs.{o} }}}}" for o in names}


def reconcile_job(opts: WorkflowOptions, job_ids: list[str], *, trusted: bool) -> Note:
    """Every planned (stage, file) reported exactly once, by the jobs that were planned
    (INTERFACES.md §1): a shard that never reported fails the run, naming it, unless its
    files go to the rescue wave (:mod:`testfleet.integrations.github_rescue`), whose
    reconcile (these steps again, with ``TESTFLEET_RESCUE``) then decides."""
    from testfleet.integrations.github_rescue import RESCUE_ARTIFACT, RESCUE_FILE

    # said above the job, not inside its steps: zizmor 1.30 (the newest for Python 3.10)
    # fails its self-repository audit on a comment that opens an anchored sequence
    checkout_note = ("Its checkout is the base branch's own files: nothing of the pull request "
                     "runs here.",) if trusted else ()
    return Note({
        "name": "reconcile",
        "needs": Flow(["plan", *job_ids]),
        "if": "${{ always() && needs.plan.result == 'success' }}",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 10,
        "outputs": {o: f"${{{{ steps.reconcile.outputs.{o} }}}}" for o in ("has_rescue", "rescue")},
        "env": Note({"TESTFLEET_RESCUE_OUT": RESCUE_FILE,
                     # its jobs that run several stages read one rescue matrix each
                     "TESTFLEET_WORKFLOW": TRUSTED_WORKFLOW_PATH if trusted else WORKFLOW_PATH},
                    eol="lost shards' files: the rescue wave"),
        "steps": [
            steps.checkout(),
            steps.setup_python(opts.python_version),
            steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}),
            steps.uses("actions/download-artifact", {"pattern": f"{STATUS_ARTIFACT}-*",
                                                     "path": STATUS_DIR},
                       cond="${{ needs.plan.outputs.has_jobs == 'true' }}"),
            steps.uses("actions/download-artifact", {"name": RESCUE_ARTIFACT},
                       cond="${{ env.TESTFLEET_RESCUE != '' }}"),
            steps.action("Reconcile", "reconcile", install=opts.install, config=opts.config,
                         step_id="reconcile",
                         # reads the status-dir: a job that never reported is named
                         inputs={"plan-digest": "${{ needs.plan.outputs.digest }}"}),
            steps.upload(RESCUE_ARTIFACT, RESCUE_FILE, overwrite=True, if_no_files="error",
                         cond="${{ steps.reconcile.outputs.has_rescue == 'true' }}",
                         retention_days=opts.artifact_retention_days),
        ],
    }, before=("Every planned job reported, every planned file exactly once, nothing unplanned:",
               "otherwise this job fails and names what is missing (testfleet reconcile).",
               *checkout_note))


RESULT_SCRIPT = """echo "job results: $RESULTS"
if [ "$TREE_ERRORS" = true ]; then
  echo "::error title=testfleet::registrations were rejected; the plan ran every valid test and left them out as 'invalid' (testfleet check lists them)"; exit 1
fi
if [ "$RESCUED" = success ]; then
  echo "a rescue wave ran and its reconcile passed: every planned file has one final report, none failed"; exit 0
fi
for result in $RESULTS; do
  case "$result" in success|skipped) ;; *) echo "::error title=testfleet::a testfleet job ended with '$result'"; exit 1 ;; esac
done
"""


def result_job(config: Config, needs: list[str], check: str, rescued: str | None = None) -> Note:
    """The one required check; ``rescued``: the job that reconciles after the rescue wave,
    whose pass is the verdict on the stage jobs when it ran (a lost runner fails its job)."""
    from testfleet.integrations.github_options import ignored_label_expr

    return Note({
        "name": f"${{{{ {ignored_label_expr(config)} && '{check} (label ignored)' || '{check}' }}}}",
        "needs": Flow(needs),
        "if": "${{ always() }}",
        "runs-on": "ubuntu-latest",
        "permissions": {},
        "timeout-minutes": 5,
        "steps": [{
            "name": "All jobs passed",
            "env": {"RESULTS": "${{ join(needs.*.result, ' ') }}",
                    "TREE_ERRORS": "${{ needs.plan.outputs.tree_errors }}",
                    **({"RESCUED": f"${{{{ needs.{rescued}.result }}}}"} if rescued else {})},
            "run": RESULT_SCRIPT,
        }],
    }, before=("One stable check to require in branch protection, whatever the plan holds.",))


#: The job keys whose value, when two stage jobs have the same, is written once.
SHARED_KEYS = ("container", "env", "steps")
_NOT_ANCHOR = re.compile(r"[^A-Za-z0-9_-]+")


def share_repeats(jobs: dict[str, Any]) -> None:
    """Write each repeated ``container``/``env``/``steps`` of the jobs once: the first
    job that has it holds it under an anchor (``&<job>-steps``), the others name it
    (``*<job>-steps``). Stages that run on different runners with the same image, env
    and setup (miles' five H100/H200 stages, most of SGLang's) then cost a reviewer a few
    lines each, and each stage keeps its own job, ``runs-on``, fail-fast and matrix."""
    first: dict[tuple[str, str], str] = {}  # what is shared -> the job that holds it
    repeated: set[tuple[str, str]] = set()
    seen: list[tuple[str, str, dict[str, Any], tuple[str, str]]] = []
    for job_id, raw in jobs.items():
        body = bare(raw)
        if not isinstance(body, dict):
            continue
        for key in SHARED_KEYS:
            value = body.get(key)
            if value is None or (key == "env" and len(plain(value)) < 2):
                continue
            sig = (key, json.dumps(plain(value), sort_keys=True))
            if sig in first:
                repeated.add(sig)
            else:
                first[sig] = job_id
            seen.append((job_id, key, body, sig))
    for job_id, key, body, sig in seen:
        if sig not in repeated:
            continue
        owner = first[sig]
        name = f"{_NOT_ANCHOR.sub('-', owner)}-{key}"
        body[key] = Anchor(name, body[key]) if owner == job_id else Alias(name, body[key])
    for job_id, raw in jobs.items():
        body = bare(raw)
        held = body.get("steps") if isinstance(body, dict) else None
        if isinstance(held, Anchor):
            held = held.value
        if isinstance(held, list):
            _share_step_env(f"{_NOT_ANCHOR.sub('-', job_id)}-secrets", held)


def _share_step_env(name: str, steps: list[Any]) -> None:
    """The stage's secrets reach each setup step and its job step, and only those (never the
    checkout or the other actions): the same ``env:`` several times, written once."""
    envs = [step for raw in steps if isinstance(step := bare(raw), dict)
            and isinstance(step.get("env"), dict) and step["env"]]
    sigs = [json.dumps(plain(step["env"]), sort_keys=True) for step in envs]
    if len(envs) < 2 or len(set(sigs)) != 1:
        return
    envs[0]["env"] = Anchor(name, envs[0]["env"])
    for step in envs[1:]:
        step["env"] = Alias(name, step["env"])

