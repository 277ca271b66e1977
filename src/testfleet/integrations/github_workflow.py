"""Render the GitHub Actions workflow that consumes a testfleet plan.

The workflow is generated from the configuration, not written by hand, because the
only things it must agree with the configuration on are exactly the things people
forget to keep in sync: which stages exist, what they need and their CI job settings, which cron
strings exist, which cadences a manual run may pick. Everything that changes per
run (jobs, shards, runners, containers) comes from the plan at run time.

Security properties the tests hold the output to:

* the ``plan`` job runs on a hosted runner with read-only contents and no secrets;
* no ``run:`` script contains a ``${{ }}`` expression at all: every value a run
  step needs (workflow inputs, matrix fields, step outputs) travels through
  ``env:``, so no PR-controlled string (label, branch, title) can become shell code;
* checkouts do not persist credentials; every action is pinned to a commit;
* a stage without jobs asks for no runner (its job is skipped by ``if:``).

One job per stage (not one per dependency wave): a stage's container options and
volumes, its secrets, setup commands, ``fail-fast`` and ``max-parallel`` are job
keys GitHub reads before any matrix value exists, so they are written here from
the stage's table (see :mod:`testfleet.planning.jobci`). The matrix of a stage job
still comes from the plan at run time (shards, runners, per-shard timeouts), and
the plan job refuses to go on when the configuration's CI settings no longer match
what this file was generated from. Stage jobs ``needs:`` the jobs of the stages
their stage needs; a stage's failure cancels only its own shards (``fail-fast``)
and stops only the stages that need it (unless the policy bypasses fast-fail).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from testfleet import __version__
from testfleet.config import Config
from testfleet.integrations.yaml_text import PINNED_ACTIONS as PINNED_ACTIONS
from testfleet.integrations.yaml_text import expr_str, yaml_str
from testfleet.integrations.yaml_text import uses as _uses
from testfleet.planning.jobci import PER_JOB_KEYS, JobCI, job_ci
from testfleet.planning.lanes import Lane, all_lanes, stage_lanes

#: The install every generated job runs unless the config says otherwise: exactly the
#: testfleet that generated the workflow (never a floating ``pip install testfleet``).
DEFAULT_INSTALL = f"python3 -m pip install testfleet=={__version__}"
HISTORY_ARTIFACT = "testfleet-history"
HISTORY_CACHE = "testfleet-history"
COLLECTION_CACHE = "testfleet-collection"
WORKFLOW_PATH = ".github/workflows/testfleet.yml"
PLAN_ARTIFACT = "testfleet-plan"
JUNIT_DIR = "testfleet-junit"
MAX_MATRIX = 256  # GitHub's limit of jobs per matrix


@dataclass(frozen=True)
class WorkflowOptions:
    """What a project may choose about its workflow; the defaults suit most trees.

    ``install`` is the shell command that puts ``testfleet`` on PATH (None: the
    testfleet version that generated the workflow, pinned; ``pip install -e .`` for a
    project that pins its own). ``history`` closes the history loop (see
    :func:`_history_job`); ``database_secret`` makes jobs write to PostgreSQL instead,
    ``database_read_secret`` lets the plan job read it.
    ``push_branches`` adds post-merge runs; ``diff_pruning`` lets PR plans skip GPU
    stages that the PR's changes cannot affect (the merge commit's first parent is
    the base, so no extra fetch of a PR-named ref is needed).
    """

    name: str = "testfleet"
    install: str | None = None
    python_version: str = "3.12"
    plan_runner: str = "ubuntu-latest"
    push_branches: tuple[str, ...] = ()
    diff_pruning: bool = True
    plan_timeout_minutes: int = 15
    artifact_retention_days: int = 14
    database_secret: str | None = None
    database_read_secret: str | None = None
    history: bool = True
    config: str | None = None  # repo-relative config file, when it is not found from the root


def stage_waves(config: Config) -> dict[str, int]:
    """Each stage's wave: 0 without ``needs``, else one more than its deepest need.

    Dormant stages count too, so that re-enabling a stage never needs a new
    workflow. (The config loader has already rejected cycles and unknown needs.)
    """
    waves: dict[str, int] = {}

    def wave(name: str, trail: tuple[str, ...] = ()) -> int:
        if name in waves:
            return waves[name]
        if name in trail or name not in config.stages:  # defensive: validated upstream
            return 0
        needs = config.stages[name].needs
        value = 0 if not needs else 1 + max(wave(n, (*trail, name)) for n in needs)
        waves[name] = value
        return value

    for name in config.stages:
        wave(name)
    return waves


def wave_count(config: Config) -> int:
    """How many wave jobs the workflow needs (at least one, so it is never empty)."""
    return max(1, 1 + max(stage_waves(config).values(), default=0))


_RESERVED_JOBS = {"plan", "testfleet"}


def stage_job_ids(config: Config) -> dict[str, str]:
    """Each lane's job id in the workflow (a stage, or one variant of a stage as
    ``<stage>.<variant>``): its name where GitHub allows it (letters, digits, ``-``, ``_``,
    starting with a letter or ``_``), else a cleaned form; unique, case-insensitively, and
    never one of the workflow's own jobs."""
    ids: dict[str, str] = {}
    taken = set(_RESERVED_JOBS)
    for name in sorted(all_lanes(config)):
        base = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        if not (base[0].isalpha() or base[0] == "_") or base.lower() in _RESERVED_JOBS:
            base = f"stage-{base}"
        job_id, n = base, 2
        while job_id.lower() in taken:
            job_id = f"{base}-{n}"
            n += 1
        taken.add(job_id.lower())
        ids[name] = job_id
    return ids


# -- small YAML helpers -------------------------------------------------------

def _block(text: str, indent: int) -> list[str]:
    pad = " " * indent
    return [pad + line if line else "" for line in text.strip("\n").split("\n")]


# -- the workflow -------------------------------------------------------------

def _action(opts: WorkflowOptions, name: str, command: str, *, step_id: str | None = None,
            cond: str | None = None, env: list[str] | None = None,
            inputs: dict[str, str] | None = None, install: bool = True) -> list[str]:
    """A step that runs testfleet through the vendored composite action (one
    implementation for this workflow and for projects' own workflows)."""
    from testfleet.integrations.action import LOCAL_ACTION

    lines = [f"      - name: {name}"]
    if step_id:
        lines.append(f"        id: {step_id}")
    if cond:
        lines.append(f"        if: {cond}")
    # "./" is the documented local-action form that actionlint and every runner version
    # understand; zizmor's newer "$/" self-repository suggestion is not used on purpose.
    lines.append(f"        uses: {LOCAL_ACTION} # zizmor: ignore[self-repository]")
    if env:
        lines += ["        env:", *env]
    lines += ["        with:", f"          command: {command}"]
    if not install:
        lines.append("          install: none")
    elif opts.install:
        lines += ["          install: |", *_block(opts.install, 12)]
    if opts.config:
        lines.append(f"          config: {yaml_str(opts.config)}")
    for key, value in (inputs or {}).items():
        lines.append(f"          {key}: {value}")
    return lines


def history_mode(config: Config, opts: WorkflowOptions) -> str:
    """How this workflow keeps history: ``cache`` (bundles merged into the Actions
    cache), ``database`` (jobs write to PostgreSQL through ``database_secret``) or
    ``off`` (``history = false``, or the config names its own ``database``)."""
    if opts.database_secret:
        return "database"
    if not opts.history or config.database:
        return "off"
    return "cache"


def history_path(config: Config, opts: WorkflowOptions) -> str:
    """The SQLite history file, relative to the repository root (next to the config)."""
    return _in_cache_dir(config, opts, "history.db")


def collection_cache_paths(config: Config, opts: WorkflowOptions) -> list[str]:
    """What the plan job keeps between runs, relative to the repository root (next to the
    config): the registry cache, and with any ``command = "auto"`` lane the file styles too,
    which a plan would otherwise parse from every such file on every run."""
    from testfleet.commands import AUTO
    from testfleet.registry.cache import NAME
    from testfleet.registry.collectable import NAME as STYLES

    paths = [_in_cache_dir(config, opts, NAME)]
    if any(lane.config.command == AUTO for lane in all_lanes(config).values()):
        paths.append(_in_cache_dir(config, opts, STYLES))
    return paths


def _cache_path(paths: list[str]) -> list[str]:
    """The ``path:`` input of an actions/cache step: one path, or one per line (as a
    literal block when every path is a plain scalar, else one quoted string)."""
    if len(paths) > 1 and all(yaml_str(path) == path for path in paths):
        return ["          path: |", *(f"            {path}" for path in paths)]
    return [f"          path: {yaml_str(chr(10).join(paths))}"]


def _in_cache_dir(config: Config, opts: WorkflowOptions, name: str) -> str:
    import posixpath

    base = posixpath.dirname(opts.config) if opts.config else ""
    return posixpath.join(base, config.cache_dir, name)


#: Only these runs write history; everything else (pull requests above all) reads it.
DEFAULT_BRANCH_RUN = (
    "github.ref == format('refs/heads/{0}', github.event.repository.default_branch) && "
    "(github.event_name == 'push' || github.event_name == 'schedule' || "
    "github.event_name == 'workflow_dispatch')"
)


def _reads_cache(config: Config, opts: WorkflowOptions) -> bool:
    """Whether the plan and test jobs restore the history from the Actions cache."""
    mode = history_mode(config, opts)
    return mode == "cache" or (mode == "database" and not opts.database_read_secret)


def _restore_history(config: Config, opts: WorkflowOptions, *note: str) -> list[str]:
    return [
        "      # The newest history this branch or the default branch saved (a PR restores",
        "      # the default branch's; nothing in a PR run ever saves it).",
        *[f"      # {line}" for line in note],
        "      - name: Restore the history",
        f"        uses: {_uses('actions/cache/restore')}",
        "        with:",
        *_cache_path([history_path(config, opts)]),
        f"          key: {HISTORY_CACHE}-${{{{ github.run_id }}}}",
        f"          restore-keys: {HISTORY_CACHE}-",
    ]


# The plan job keeps the collection cache between runs: on a fresh checkout every file's
# stat key is new, but its content digest still proves it unchanged, so a large tree is
# planned without scanning it again. Only default-branch runs save it.
def _restore_collection(config: Config, opts: WorkflowOptions) -> list[str]:
    return [
        "      # The last collection of this branch or the default branch: files whose",
        "      # content is unchanged are not scanned again (their digests prove it).",
        "      - name: Restore the collection cache",
        f"        uses: {_uses('actions/cache/restore')}",
        "        with:",
        *_cache_path(collection_cache_paths(config, opts)),
        f"          key: {COLLECTION_CACHE}-${{{{ github.run_id }}}}",
        f"          restore-keys: {COLLECTION_CACHE}-",
    ]


def _save_collection(config: Config, opts: WorkflowOptions) -> list[str]:
    return [
        "      - name: Save the collection cache",
        f"        if: ${{{{ {DEFAULT_BRANCH_RUN} }}}}",
        f"        uses: {_uses('actions/cache/save')}",
        "        with:",
        *_cache_path(collection_cache_paths(config, opts)),
        f"          key: {COLLECTION_CACHE}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}",
    ]


def ignored_label_expr(config: Config) -> str:
    """True for a ``labeled`` event whose label cannot change the plan.

    Such a run plans nothing, cancels nothing (its own concurrency group) and
    reports its summary check under another name, so adding a ``documentation``
    label neither re-runs GPU stages nor turns a failing required check green.
    """
    policy = config.policy
    parts = [f"startsWith(github.event.label.name, {expr_str(policy.label_prefix)})"]
    names = {policy.nightly_label, policy.bypass_label, *policy.scope_labels,
             *(policy.authorize_labels or ())}
    parts += [f"github.event.label.name == {expr_str(n)}" for n in sorted(names)
              if n and not n.startswith(policy.label_prefix)]
    return f"(github.event.action == 'labeled' && !({' || '.join(parts)}))"


def _triggers(config: Config, opts: WorkflowOptions) -> list[str]:
    cadences = sorted(config.policy.cadences, key=lambda c: (config.policy.cadences[c].rank, c))
    lines = ["on:", "  pull_request:", "    types: [opened, synchronize, reopened, labeled]"]
    if opts.push_branches:
        lines += ["  push:", "    branches:"]
        lines += [f"      - {yaml_str(b)}" for b in opts.push_branches]
    if config.policy.schedules:
        lines.append("  schedule:")
        for cron, cadence in sorted(config.policy.schedules.items()):
            lines.append(f"    - cron: {json.dumps(' '.join(cron.split()))}  # {cadence}")
    lines += [
        "  workflow_dispatch:",
        "    inputs:",
        "      cadence:",
        "        description: How broad the run is",
        "        type: choice",
        "        options:",
        *[f"          - {yaml_str(c)}" for c in cadences],
        "        default: regular",
        "      match_all_labels:",
        "        description: Include every registered label",
        "        type: boolean",
        "        default: false",
        "  workflow_call:",
        "    inputs:",
        "      cadence:",
        "        description: Cadence override (" + ", ".join(cadences) + "); empty = from the event",
        "        type: string",
        "        required: false",
        "        default: ''",
    ]
    return lines


def _plan_job(config: Config, opts: WorkflowOptions) -> list[str]:
    outputs = ["waves", "has_jobs", "cadence", "bypass_fastfail", "write_baseline", "digest",
               "stages", "tree_errors"]
    mode = history_mode(config, opts)
    plan_env: list[str] = []
    if mode == "database" and opts.database_read_secret:
        # a read-only role: the plan job never runs test code, but it does check out the PR
        plan_env = [f"          TESTFLEET_DATABASE_URL: ${{{{ secrets.{opts.database_read_secret} }}}}"]
    plan_inputs = {"cadence": "${{ inputs.cadence }}"}
    if opts.diff_pruning:
        plan_inputs["diff-base"] = "HEAD^1"
    expected = json.dumps({key: job_ci(lane.config).fingerprint()
                           for key, lane in sorted(all_lanes(config).items())},
                          sort_keys=True, separators=(",", ":"))
    guard_script = f"""
python3 - <<'PY'
import collections, hashlib, json, sys
# each stage's CI settings as this workflow was generated with them
expected = json.loads('{expected}')
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
    print(f"::error title=testfleet::the CI settings of stage {{stage}} (container, setup, secrets, env, fail_fast, max_parallel) changed since this workflow was generated; {{regenerate}}")
    bad = True
sizes = collections.Counter(lane(job) for job in plan["jobs"])
for stage, n in sorted(sizes.items()):
    if n > {MAX_MATRIX}:
        print(f"::error title=testfleet::stage {{stage}} has {{n}} jobs; a GitHub matrix holds at most {MAX_MATRIX} (lower max_shards)")
        bad = True
sys.exit(1 if bad else 0)
PY
"""
    lines = [
        "  plan:",
        "    name: plan",
        "    # A label that cannot change the plan does not re-run CI.",
        f"    if: ${{{{ !{ignored_label_expr(config)} }}}}",
        f"    runs-on: {yaml_str(opts.plan_runner)}",
        "    permissions:",
        "      contents: read",
        f"    timeout-minutes: {opts.plan_timeout_minutes}",
        "    outputs:",
        *[f"      {o}: ${{{{ steps.plan.outputs.{o} }}}}" for o in outputs],
        "    steps:",
        f"      - uses: {_uses('actions/checkout')}",
        "        with:",
        "          persist-credentials: false",
        # depth 2: the base commit, whose config decides a fork's trust (and the diff base)
        "          fetch-depth: 2",
        f"      - uses: {_uses('actions/setup-python')}",
        "        with:",
        f"          python-version: {json.dumps(opts.python_version)}",
        *(_restore_history(config, opts) if _reads_cache(config, opts) else []),
        *_restore_collection(config, opts),
        *_action(opts, "Plan", "plan", step_id="plan", env=plan_env, inputs=plan_inputs),
        *_save_collection(config, opts),
        "      - name: Check the plan fits this workflow",
        "        run: |",
        *_block(guard_script, 10),
        f"      - uses: {_uses('actions/upload-artifact')}",
        "        with:",
        f"          name: {PLAN_ARTIFACT}",
        "          path: plan.json",
        "          if-no-files-found: error",
        "          overwrite: true",
        f"          retention-days: {opts.artifact_retention_days}",
    ]
    return lines


def _container(ci: JobCI) -> list[str]:
    if ci.container is None:
        return []
    c = ci.container
    lines = [
        "    # The stage's 'container' from the testfleet config (pin it there as image@sha256:...).",
        "    container:",
        f"      image: {yaml_str(c.image)} # zizmor: ignore[unpinned-images]",
    ]
    if c.options:
        lines.append(f"      options: {yaml_str(c.options)}")
    if c.volumes:
        lines += ["      volumes:", *[f"        - {yaml_str(v)}" for v in c.volumes]]
    return lines


def _secret_env(ci: JobCI, indent: int) -> list[str]:
    pad = " " * indent
    return [f"{pad}{name}: ${{{{ secrets.{name} }}}}" for name in ci.secrets]


def _stage_job(config: Config, opts: WorkflowOptions, lane: Lane, job_ids: dict[str, str],
               waves: dict[str, int]) -> list[str]:
    name = lane.key
    stage = lane.config
    ci = job_ci(stage)
    stage_ref = f"fromJSON(needs.plan.outputs.stages)[{expr_str(name)}]"
    # a needed stage with variants is every one of its variants' jobs
    needs = ["plan", *[job_ids[ln.key] for n in stage.needs for ln in stage_lanes(config, n)]]
    cond = [
        "!cancelled()",
        "needs.plan.result == 'success'",
        f"{stage_ref}.has_jobs",
    ]
    if stage.needs:
        cond.append("(!failure() || needs.plan.outputs.bypass_fastfail == 'true')")
    if ci.fail_fast is None:
        fail_fast = "${{ needs.plan.outputs.bypass_fastfail != 'true' }}"
        fail_fast_note = "fail fast unless the run bypasses fast-fail"
    else:
        fail_fast = "true" if ci.fail_fast else "false"
        fail_fast_note = "the stage's fail_fast"
    # Only default-branch runs get the database's write secret: a PR's jobs record into
    # their own throwaway SQLite file and never write shared history.
    run_env = [f"          TESTFLEET_DATABASE_URL: ${{{{ {DEFAULT_BRANCH_RUN} && "
               f"secrets.{opts.database_secret} || '' }}}}"] if opts.database_secret else []
    run_env += _secret_env(ci, 10)
    lines = [
        f"  {job_ids[name]}:",
        f"    # Stage {name} (wave {waves[lane.stage]}): one matrix entry per shard of the plan. It runs",
        "    # when the stages it needs succeeded, unless the policy bypasses fast-fail.",
        "    name: ${{ matrix.id }}",
        f"    needs: [{', '.join(needs)}]",
        "    if: >-",
        "      " + " &&\n      ".join(cond),
        "    strategy:",
        f"      # Within this stage only ({fail_fast_note}); other stages' jobs keep running.",
        f"      fail-fast: {fail_fast}",
        *([f"      max-parallel: {ci.max_parallel}"] if ci.max_parallel else []),
        f"      matrix: ${{{{ {stage_ref}.matrix }}}}",
        "    runs-on: ${{ matrix.runs_on }}",
        *_container(ci),
        "    permissions:",
        "      contents: read",
        "    # From the plan: the stage's job_timeout_minutes, or its factor of this shard's estimate.",
        "    timeout-minutes: ${{ matrix.timeout_minutes }}",
        *(["    env:", *[f"      {k}: {yaml_str(v)}" for k, v in sorted(ci.env.items())]]
          if ci.env else []),
        "    steps:",
        f"      - uses: {_uses('actions/checkout')}",
        "        with:",
        "          persist-credentials: false",
    ]
    if ci.container is None:
        lines += [
            f"      - uses: {_uses('actions/setup-python')}",
            "        with:",
            f"          python-version: {json.dumps(opts.python_version)}",
        ]
    lines += [
        f"      - uses: {_uses('actions/download-artifact')}",
        "        with:",
        f"          name: {PLAN_ARTIFACT}",
    ]
    if _reads_cache(config, opts):
        # read here: the gate compares this run's metrics with the trusted baseline in it
        lines += _restore_history(config, opts, "Read only: the metric gate takes its baselines from it.")
    if ci.setup:
        lines += [
            "      - name: Setup",
            *(["        env:", *_secret_env(ci, 10)] if ci.secrets else []),
            "        run: |",
            *_block("\n".join(ci.setup), 10),
        ]
    lines += [
        *_action(opts, "Run", "run", env=run_env, inputs={
            "job": "${{ matrix.id }}", "plan-digest": "${{ needs.plan.outputs.digest }}",
            "junit-dir": JUNIT_DIR}),
    ]
    if history_mode(config, opts) == "cache":
        writes = f"${{{{ !cancelled() && {DEFAULT_BRANCH_RUN} }}}}"
        lines += [
            "      # Default-branch runs only: this job's records (this run's, not the restored",
            "      # history's), for the history job to merge.",
            *_action(opts, "Record the history", "record", cond=writes, install=False,
                     inputs={"args": "|"}),
            "            --run-id",
            "            ${{ github.run_id }}",
            "            --plan",  # the bundle carries the run's cadence and write_baseline
            "            plan.json",
            "            --output",
            f"            {HISTORY_ARTIFACT}/records.bundle",
            f"      - uses: {_uses('actions/upload-artifact')}",
            f"        if: {writes}",
            "        with:",
            f"          name: {HISTORY_ARTIFACT}-${{{{ matrix.id }}}}",
            f"          path: {HISTORY_ARTIFACT}/",
            "          if-no-files-found: warn",
            f"          retention-days: {opts.artifact_retention_days}",
        ]
    lines += [
        f"      - uses: {_uses('actions/upload-artifact')}",
        "        if: ${{ !cancelled() }}",
        "        with:",
        "          name: junit-${{ matrix.id }}",
        f"          path: {JUNIT_DIR}/",
        "          if-no-files-found: warn",
        f"          retention-days: {opts.artifact_retention_days}",
    ]
    return lines


def _history_job(config: Config, opts: WorkflowOptions, job_ids: list[str]) -> list[str]:
    """The job that keeps history across runs (none when history is off, or when the
    plan reads the database through its read-only secret).

    cache mode: download every test job's bundle, merge them into the history restored
    from the Actions cache, save it under a new key. database mode without a read
    secret: snapshot the database into the cache, for the plan job to read.
    """
    mode = history_mode(config, opts)
    if mode == "off" or (mode == "database" and opts.database_read_secret):
        return []
    path = history_path(config, opts)
    lines = [
        "  history:",
        "    # Trust rule: only runs on the default branch (push, schedule, manual dispatch)",
        "    # write history. Pull requests, from forks above all, restore and read the",
        "    # default branch's history but never save it, and no PR job's artifact is ever",
        "    # merged: this job does not run for them. Metric baselines are written only by",
        "    # cadences that write baselines (the plan's policy, recorded with each run).",
        "    name: history",
        f"    needs: [{', '.join(['plan', *job_ids])}]",
        "    if: >-",
        "      !cancelled() && needs.plan.result == 'success' &&",
        f"      {DEFAULT_BRANCH_RUN}",
        "    runs-on: ubuntu-latest",
        "    permissions:",
        "      contents: read",
        "    timeout-minutes: 30",
        "    # one merge at a time, so two runs never save histories that miss each other's",
        "    concurrency:",
        f"      group: {HISTORY_CACHE}-${{{{ github.workflow }}}}",
        "      cancel-in-progress: false",
        "    steps:",
        f"      - uses: {_uses('actions/checkout')}",
        "        with:",
        "          persist-credentials: false",
        f"      - uses: {_uses('actions/setup-python')}",
        "        with:",
        f"          python-version: {json.dumps(opts.python_version)}",
    ]
    if mode == "cache":
        lines += [
            *_restore_history(config, opts),
            f"      - uses: {_uses('actions/download-artifact')}",
            "        with:",
            f"          pattern: {HISTORY_ARTIFACT}-*",
            f"          path: {HISTORY_ARTIFACT}-in",
            *_action(opts, "Merge this run's records", "history-merge",
                     inputs={"args": "|"}),
            f"            {HISTORY_ARTIFACT}-in",
            "            --require-ref",  # a bundle from any other ref is refused, nothing merged
            "            refs/heads/${{ github.event.repository.default_branch }}",
        ]
    else:
        secret = f"${{{{ secrets.{opts.database_secret} }}}}"
        lines += [
            *_action(opts, "Snapshot the database", "record",
                     env=[f"          TESTFLEET_DATABASE_URL: {secret}"],
                     inputs={"args": "|"}),
            "            --output",
            f"            {HISTORY_ARTIFACT}-in/snapshot.bundle",
            *_action(opts, "Keep it for the plan job", "history-merge", install=False,
                     inputs={"args": f"{HISTORY_ARTIFACT}-in"}),
        ]
    lines += [
        "      - name: Save the history",
        f"        uses: {_uses('actions/cache/save')}",
        "        with:",
        *_cache_path([path]),
        f"          key: {HISTORY_CACHE}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}",
    ]
    return lines


def _result_job(config: Config, job_ids: list[str]) -> list[str]:
    needs = ["plan", *job_ids]
    script = """
set -euo pipefail
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
    return [
        "  testfleet:",
        "    # One stable check to require in branch protection, whatever the plan holds.",
        f"    name: ${{{{ {ignored_label_expr(config)} && 'testfleet (label ignored)' || 'testfleet' }}}}",
        f"    needs: [{', '.join(needs)}]",
        "    if: ${{ always() }}",
        "    runs-on: ubuntu-latest",
        "    permissions: {}",
        "    timeout-minutes: 5",
        "    steps:",
        "      - name: All jobs passed",
        "        env:",
        "          RESULTS: ${{ join(needs.*.result, ' ') }}",
        "          TREE_ERRORS: ${{ needs.plan.outputs.tree_errors }}",
        "        run: |",
        *[ln for ln in _block(script, 10) if ln.strip()],
    ]


def render_workflow(config: Config, options: WorkflowOptions | None = None) -> str:
    """The workflow YAML for ``config`` (deterministic: same inputs, same bytes)."""
    opts = options or WorkflowOptions()
    waves = stage_waves(config)
    job_ids = stage_job_ids(config)
    lanes = all_lanes(config)
    order = sorted(lanes, key=lambda k: (waves[lanes[k].stage], k))
    lines = [
        f"# Generated by 'testfleet init --github' (testfleet {__version__}).",
        "# The plan decides jobs, shards, runners and timeouts at run time; this file has",
        "# one job per stage and must agree with the configuration on stages, their needs",
        "# and CI settings (container, setup, secrets, env, fail_fast, max_parallel),",
        "# schedules and cadences (the plan job checks). Regenerate it after changing them:",
        "#   testfleet init --github --force",
        "# History: only default-branch runs (push, schedule, manual dispatch) write it; pull",
        "# requests restore and read the default branch's history and never save it.",
        f"name: {yaml_str(opts.name)}",
        "",
        *_triggers(config, opts),
        "",
        "permissions: {}",
        "",
        "concurrency:",
        "  # One run per PR (a new push or CI label supersedes the last); other events never wait.",
        "  group: testfleet-${{ github.workflow }}-${{ github.event.pull_request.number || github.run_id }}"
        f"${{{{ {ignored_label_expr(config)} && format('-{{0}}', github.run_id) || '' }}}}",
        "  cancel-in-progress: ${{ github.event_name == 'pull_request' }}",
        "",
        "jobs:",
        *_plan_job(config, opts),
    ]
    for name in order:
        lines += ["", *_stage_job(config, opts, lanes[name], job_ids, waves)]
    ids = [job_ids[n] for n in order]
    history = _history_job(config, opts, ids)
    lines += [*(["", *history] if history else []), "", *_result_job(config, ids)]
    return "\n".join(lines) + "\n"
