"""The jobs both generated GitHub workflows hold: the plan guard, one job per stage lane,
the reconciliation and the one required check.

A stage job's runner, container, secrets and setup are written here from the stage's
table, statically: GitHub reads them before any matrix value exists, and a runner label
written in the file cannot be changed by a plan. The matrix (shards, job ids, timeouts)
still comes from the plan at run time, and the plan job refuses a plan whose runners or
CI settings differ from what the workflow was generated with.
"""

from __future__ import annotations

import json
from typing import Any

from testfleet.config import Config
from testfleet.integrations import github_steps as steps
from testfleet.integrations.github_options import (
    DEFAULT_BRANCH_RUN,
    HISTORY_ARTIFACT,
    JUNIT_DIR,
    MAX_MATRIX,
    PLAN_ARTIFACT,
    STATUS_ARTIFACT,
    STATUS_DIR,
    WorkflowOptions,
    history_mode,
    reads_cache,
    restore_history,
    workflow_needs,
)
from testfleet.integrations.yaml_doc import Flow, Note
from testfleet.integrations.yaml_text import expr_str
from testfleet.planning.jobci import PER_JOB_KEYS, JobCI, job_ci
from testfleet.planning.lanes import Lane, all_lanes

#: Secrets in the trusted workflow: only for a plan that is authorized (a same-repository
#: pull request, or a fork's with a label a maintainer just added).
AUTHORIZED = "needs.plan.outputs.authorized == 'true'"


def guard_script(config: Config, lanes: list[str]) -> str:
    """The plan job's check that the plan fits this workflow: every lane with jobs has a
    job here, with the runners and CI settings it was generated with."""
    every = all_lanes(config)
    expected = json.dumps({key: job_ci(every[key].config).fingerprint() for key in sorted(lanes)},
                          sort_keys=True, separators=(",", ":"))
    runners = json.dumps({key: list(every[key].config.runs_on) for key in sorted(lanes)},
                         sort_keys=True, separators=(",", ":"))
    return f"""python3 - <<'PY'
import collections, hashlib, json, sys
# each stage's CI settings and runners as this workflow was generated with them
expected = json.loads({json.dumps(expected)})
runners = json.loads({json.dumps(runners)})
plan = json.load(open("plan.json", encoding="utf-8"))
def fingerprint(job):
    body = {{k: v for k, v in job.get("ci", {{}}).items() if k not in {list(PER_JOB_KEYS)!r}}}
    body["env"] = dict(sorted(job.get("env", {{}}).items()))
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]
bad = False
regenerate = "regenerate it with 'testfleet init --github --force'"
def lane(job):  # a stage variant's jobs run in a workflow job of their own
    return job["stage"] + ("." + job["variant"] if job.get("variant") else "")
for stage in sorted({{lane(job) for job in plan["jobs"]}}):
    if stage not in expected:
        print(f"::error title=testfleet::stage {{stage}} has jobs but no job in this workflow; {{regenerate}}")
        bad = True
changed = sorted({{lane(job) for job in plan["jobs"]
                  if lane(job) in expected and fingerprint(job) != expected[lane(job)]}})
for stage in changed:
    print(f"::error title=testfleet::the CI settings of stage {{stage}} (container, setup, secrets, env, python, uv, checkouts, fail_fast, max_parallel) changed since this workflow was generated; {{regenerate}}")
    bad = True
moved = sorted({{lane(job) for job in plan["jobs"]
                if lane(job) in runners and job["runs_on"] != runners[lane(job)]}})
for stage in moved:
    print(f"::error title=testfleet::the runs_on of stage {{stage}} changed since this workflow was generated (its runners are written in this file, never taken from a plan); {{regenerate}}")
    bad = True
sizes = collections.Counter(lane(job) for job in plan["jobs"])
for stage, n in sorted(sizes.items()):
    if n > {MAX_MATRIX}:
        print(f"::error title=testfleet::stage {{stage}} has {{n}} jobs; a GitHub matrix holds at most {MAX_MATRIX} (lower max_shards)")
        bad = True
sys.exit(1 if bad else 0)
PY
"""


def _runs_on(runs_on: list[str] | tuple[str, ...], trusted_lane: bool) -> Any:
    value: Any = runs_on[0] if len(runs_on) == 1 else Flow(list(runs_on))
    if trusted_lane and any(label == "self-hosted" for label in runs_on):
        return Note(value, eol="zizmor: ignore[self-hosted-runner] pull requests reach it "
                               "only through testfleet-trusted.yml")
    return value


def _container(ci: JobCI) -> Note | None:
    if ci.container is None:
        return None
    c = ci.container
    body: dict[str, Any] = {"image": Note(c.image, eol="zizmor: ignore[unpinned-images]")}
    if c.options:
        body["options"] = c.options
    if c.volumes:
        body["volumes"] = list(c.volumes)
    return Note(body, before=("The stage's 'container' from the testfleet config "
                              "(pin it there as image@sha256:...).",))


#: zizmor asks for a deployment environment around secrets in a pull_request_target run;
#: here the gate is the plan's authorization (a maintainer's label, or no fork at all).
SECRET_NOTE = "zizmor: ignore[secrets-outside-env] given only to an authorized plan"


def _secret(name: str, trusted: bool) -> Any:
    if trusted:
        return Note(f"${{{{ {AUTHORIZED} && secrets.{name} || '' }}}}", eol=SECRET_NOTE)
    return f"${{{{ secrets.{name} }}}}"


def _python(ci: JobCI, opts: WorkflowOptions) -> str | None:
    if ci.python is not None:
        return ci.python or None
    return None if ci.container is not None else opts.python_version


def stage_job(config: Config, opts: WorkflowOptions, lane: Lane, job_ids: dict[str, str],
              waves: dict[str, int], *, present: set[str], trusted: bool,
              pr_excluded: bool) -> Note:
    """The job of one stage lane. ``present``: the lanes this workflow holds (a need on a
    lane of the other workflow cannot be waited for); ``trusted``: this is the trusted
    workflow's job (the pull request's merge commit, secrets only when authorized, no
    history written); ``pr_excluded``: this lane runs only in the trusted workflow for
    pull requests, so here it is skipped on ``pull_request``."""
    name = lane.key
    stage = lane.config
    ci = job_ci(stage)
    stage_ref = f"fromJSON(needs.plan.outputs.stages)[{expr_str(name)}]"
    needed = [ln for n in workflow_needs(stage) for ln in all_lanes(config).values() if ln.stage == n]
    needs = ["plan", *[job_ids[ln.key] for ln in needed if ln.key in present]]
    dropped = sorted({ln.stage for ln in needed if ln.key not in present})
    cond = ["!cancelled()", "needs.plan.result == 'success'", f"{stage_ref}.has_jobs"]
    if pr_excluded:
        cond.insert(0, "github.event_name != 'pull_request'")
    if len(needs) > 1:
        cond.append("(!failure() || needs.plan.outputs.bypass_fastfail == 'true')")
    if ci.fail_fast is None:
        fail_fast: Any = "${{ needs.plan.outputs.bypass_fastfail != 'true' }}"
        fail_fast_note = "fail fast unless the run bypasses fast-fail"
    else:
        fail_fast = ci.fail_fast
        fail_fast_note = "the stage's fail_fast"
    strategy: dict[str, Any] = {
        "fail-fast": Note(fail_fast, before=(
            f"Within this stage only ({fail_fast_note}); other stages' jobs keep running.",)),
    }
    if ci.max_parallel:
        strategy["max-parallel"] = ci.max_parallel
    strategy["matrix"] = f"${{{{ {stage_ref}.matrix }}}}"
    about = [f"Stage {name} (wave {waves[lane.stage]}): one matrix entry per shard of the plan. It runs",
             "when the stages it needs succeeded, unless the policy bypasses fast-fail."]
    if pr_excluded:
        about.append("Pull requests get this stage from testfleet-trusted.yml, never from here.")
    if dropped:
        about.append(f"Its need on {', '.join(dropped)} (in the other workflow) is not waited "
                     "for here.")
    job: dict[str, Any] = {
        "name": "${{ matrix.id }}",
        "needs": Flow(needs),
        "if": f"${{{{ {' && '.join(cond)} }}}}",
        "strategy": strategy,
        "runs-on": Note(_runs_on(stage.runs_on, trusted or pr_excluded), before=(
            "The stage's runs_on, written here: no plan, and nothing a pull request edits in",
            "testfleet's files, chooses the runner of this job.",)),
    }
    container = _container(ci)
    if container is not None:
        job["container"] = container
    job["permissions"] = {"contents": "read"}
    job["timeout-minutes"] = Note("${{ matrix.timeout_minutes }}", before=(
        "From the plan: the stage's job_timeout_minutes, or its factor of this shard's estimate.",))
    if ci.env:
        job["env"] = dict(sorted(ci.env.items()))
    secret_env = {s: _secret(s, trusted) for s in ci.secrets}
    run_env: dict[str, Any] = {}
    if opts.database_secret and not trusted:
        # Only default-branch runs get the database's write secret: a pull request's jobs
        # record into their own throwaway SQLite file and never write shared history.
        run_env["TESTFLEET_DATABASE_URL"] = (f"${{{{ {DEFAULT_BRANCH_RUN} && "
                                             f"secrets.{opts.database_secret} || '' }}}}")
    run_env.update(secret_env)
    body: list[Any] = []
    if trusted:
        body.append(steps.checkout(ref="${{ needs.plan.outputs.sha }}", before=(
            "The pull request's merge commit the plan was made from: code that runs here",
            "gets no token, and the stage's secrets only when the plan is authorized.",)))
    else:
        body.append(steps.checkout())
    for extra in ci.checkouts:
        token = None
        if extra.token_secret:
            secret = (f"{AUTHORIZED} && secrets.{extra.token_secret}" if trusted
                      else f"secrets.{extra.token_secret}")
            token = Note(f"${{{{ {secret} || github.token }}}}", eol=SECRET_NOTE) if trusted \
                else f"${{{{ {secret} || github.token }}}}"
        body.append(steps.checkout(repository=extra.repository, ref=extra.ref or None,
                                   path=extra.path, token=token,
                                   name=f"Check out {extra.repository}"))
    python = _python(ci, opts)
    if python:
        body.append(steps.setup_python(python))
    if ci.uv:
        body.append(steps.setup_uv())
    body.append(steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}))
    if reads_cache(config, opts):
        # read here: the gate compares this run's metrics with the trusted baseline in it
        body.append(restore_history(config, opts, "Read only: the metric gate takes its "
                                                  "baselines from it."))
    body += steps.setup_steps(ci.setup, secret_env, trusted=trusted)
    body.append(steps.action("Run", "run", install=opts.install, config=opts.config, env=run_env,
                             inputs={"job": "${{ matrix.id }}",
                                     "plan-digest": "${{ needs.plan.outputs.digest }}",
                                     "junit-dir": JUNIT_DIR, "status-dir": STATUS_DIR}))
    if history_mode(config, opts) == "cache" and not trusted:
        writes = f"${{{{ !cancelled() && {DEFAULT_BRANCH_RUN} }}}}"
        body.append(steps.action(
            "Record the history", "record", install=None, config=opts.config, cond=writes,
            skip_install=True,
            # the bundle carries the run's cadence and write_baseline (from the plan)
            inputs={"args": steps.args("--run-id", "${{ github.run_id }}", "--plan", "plan.json",
                                       "--output", f"{HISTORY_ARTIFACT}/records.bundle")},
            before=("Default-branch runs only: this job's records (this run's, not the restored",
                    "history's), for the history job to merge.")))
        body.append(steps.upload(f"{HISTORY_ARTIFACT}-${{{{ matrix.id }}}}", f"{HISTORY_ARTIFACT}/",
                                 cond=writes, if_no_files="warn",
                                 retention_days=opts.artifact_retention_days))
    body.append(steps.upload("junit-${{ matrix.id }}", f"{JUNIT_DIR}/", cond="${{ !cancelled() }}",
                             if_no_files="warn", retention_days=opts.artifact_retention_days))
    body.append(steps.upload(f"{STATUS_ARTIFACT}-${{{{ matrix.id }}}}", f"{STATUS_DIR}/",
                             cond="${{ always() }}", if_no_files="warn",
                             retention_days=opts.artifact_retention_days, before=(
                                 "What this job ran, for the reconcile job (also after a "
                                 "failure or a timeout).",)))
    job["steps"] = body
    return Note(job, before=tuple(about))


def reconcile_job(opts: WorkflowOptions, job_ids: list[str], *, trusted: bool) -> Note:
    """Every planned (stage, file) reported exactly once, by the jobs that were planned
    (INTERFACES.md §1): a shard that never reported fails the run, naming it."""
    checkout_note = ("The base branch's own files: nothing of the pull request runs here.",) \
        if trusted else ()
    return Note({
        "name": "reconcile",
        "needs": Flow(["plan", *job_ids]),
        "if": "${{ always() && needs.plan.result == 'success' }}",
        "runs-on": "ubuntu-latest",
        "permissions": {"contents": "read"},
        "timeout-minutes": 10,
        "steps": [
            steps.checkout(before=checkout_note),
            steps.setup_python(opts.python_version),
            steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}),
            {"name": "Collect the status files", "run": f"mkdir -p {STATUS_DIR}\n"},
            steps.uses("actions/download-artifact", {"pattern": f"{STATUS_ARTIFACT}-*",
                                                     "path": STATUS_DIR},
                       cond="${{ needs.plan.outputs.has_jobs == 'true' }}"),
            steps.action("Reconcile", "reconcile", install=opts.install, config=opts.config,
                         inputs={"plan-digest": "${{ needs.plan.outputs.digest }}",
                                 "args": steps.args(STATUS_DIR)}),
        ],
    }, before=("Every planned job reported, every planned file exactly once, nothing unplanned:",
               "otherwise this job fails and names what is missing (testfleet reconcile)."))


RESULT_SCRIPT = """set -euo pipefail
echo "job results: $RESULTS"
if [ "${TREE_ERRORS:-}" = "true" ]; then
  echo "::error title=testfleet::registrations were rejected; the plan ran every valid test and left them out as 'invalid' (testfleet check lists them)"
  exit 1
fi
for result in $RESULTS; do
  case "$result" in
    success|skipped) ;;
    *) echo "::error title=testfleet::a testfleet job ended with '$result'"; exit 1 ;;
  esac
done
"""


def result_job(config: Config, needs: list[str], check: str) -> Note:
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
                    "TREE_ERRORS": "${{ needs.plan.outputs.tree_errors }}"},
            "run": RESULT_SCRIPT,
        }],
    }, before=("One stable check to require in branch protection, whatever the plan holds.",))
