"""Emit a plan as a Buildkite pipeline: one command step per job of the plan.

Buildkite is the distributed engine here exactly as GitHub Actions is: a
bootstrap step writes the plan once, uploads it as an artifact and uploads this
pipeline; every step downloads that same plan file and runs its own job from it,
so no shard recomputes a different split. Each step checks that the plan it
downloaded is the one the pipeline was emitted from (by digest) before running.

Mapping:

* ``key``: the job id (characters Buildkite does not allow in keys become ``_``);
* ``agents``: from the stage's ``runs_on`` -- ``key=value`` entries are agent tag
  rules as written, a bare label ``L`` becomes ``L=true``, and GitHub-only labels
  (``self-hosted``, ``ubuntu-latest``, ...) are dropped, so a CPU stage runs on
  the default queue;
* ``depends_on``: every job of the stages in the job's ``needs``; a needed stage
  with no jobs under this trigger is replaced by everything it would itself have
  waited for (all jobs of earlier waves), so ordering never silently disappears;
* ``allow_dependency_failure``: when the policy bypasses fast-fail;
* ``plugins``: the Docker plugin when the stage has a ``container`` (with GPUs for
  ``cuda`` and the ROCm devices for ``rocm``);
* ``artifact_paths``: the JUnit file; ``retry``: only when the agent was lost.

The stage's CI job settings (:mod:`testfleet.planning.jobci`) map as follows:
``container`` options and volumes become the Docker plugin's own keys (an option the
plugin has no key for is an error naming the stage, never dropped); ``checkouts`` are
``git clone`` commands (a ``token_secret`` reaches git through its environment); ``python``
is checked, not installed: Buildkite has no setup-python, so the step fails, saying so,
when the agent's or image's ``python3`` is another version; ``uv`` is installed with pip
when the agent has none; ``setup`` items run before ``testfleet run``, each in a shell of
its own (``bash -eo pipefail -c``), so an ``exit 0`` in one ends only that item; ``secrets`` become the step's ``secrets``
(Buildkite secrets of those names); ``max_parallel`` is a ``concurrency`` limit in
a group of this build and stage; the job timeout is ``timeout_in_minutes``;
``fail_fast = true`` sets ``cancel_on_build_failing`` on the stage's steps (Buildkite
has no per-stage fail-fast: the stage's running jobs stop once the build is
failing, while other stages' steps are never cancelled by it).

Coverage holes and plan warnings are not left in the uploader's log, where nobody
reads them: when there are any, the first step (default queue, no checkout work,
soft-failing) prints them and posts them as a ``warning`` annotation with context
``testfleet-holes`` at the top of the build page, and the pipeline's env carries
``TESTFLEET_COVERAGE_HOLES`` (the hole stages, comma-separated) into every step.
The text travels only in the step's ``env`` and reaches the annotation through
stdin (``"$VAR"``, never spliced into a command), so a hostile label or reason
is data to the shell, and it is Markdown-escaped so it renders as written.

History (see docs/ci-history.md): in a build of the default branch (not a pull
request), each step exports this build's records (``history export --run-id
$BUILDKITE_BUILD_NUMBER``) and uploads the bundle as an artifact, whatever its tests'
outcome; after a ``wait`` that continues on failure, the ``testfleet-history`` step
downloads them and merges them into ``TESTFLEET_DATABASE_URL`` (a shared PostgreSQL,
or a SQLite file on a persistent agent). Only that step needs the database: test
agents, which run test code, never get its credentials. A step whose agent has
``TESTFLEET_DATABASE_URL`` itself wrote there directly and exports nothing. A pull
request's pipeline has neither the export nor the merge step, and both check the
branch again at run time.

Reconciliation (INTERFACES.md section 1): each step writes its job status file
(``testfleet-status/<job>.json``, an artifact of the step whatever its outcome); after a
``wait`` that continues on failure, the ``testfleet-reconcile`` step downloads them and runs
``testfleet reconcile``, which fails the build naming every job that never reported and
every planned file reported other than once.

The rescue wave (#40): a step whose agent was lost is retried automatically (exit status
-1, signal reason ``agent_stop``), and when its retries are spent it soft-fails (exit
status -1 only): the reconcile step writes the files no step reported as the rescue wave
(``reconcile --rescue-out``) and uploads :func:`rescue_pipeline`, one step per lost job on
its origin's agents and settings, and the reconcile after it, which fails the build unless
every planned file then has exactly one final report and none failed.

Rejected registrations (``plan`` exit 1): the bootstrap uploads the plan of every
valid test as usual and passes; the pipeline ends with a step, after a ``wait`` that
continues on failure, that fails the build naming the cause, as the GitHub
workflow's final check does.

Buildkite interpolates ``$VAR`` when a pipeline is uploaded; every string this
module emits has ``$`` escaped so that variables expand at run time only, and
nothing from the plan can reach the upload-time environment.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testfleet.errors import UsageError
from testfleet.planning.model import Job, Plan

DOCKER_PLUGIN = "docker#v5.12.0"
JUNIT_DIR = "testfleet-junit"
PLAN_FILE = "plan.json"
NOTICE_KEY = "testfleet-warnings"
HISTORY_KEY = "testfleet-history"
RESCUE_HISTORY_KEY = "testfleet-history-rescued"
HISTORY_DIR = "testfleet-history"
TREE_ERRORS_KEY = "testfleet-tree-errors"
RECONCILE_KEY = "testfleet-reconcile"
STATUS_DIR = "testfleet-status"
#: the rescue wave (#40): its file and the key of the reconcile after it
RESCUE_FILE = "rescue.json"
RESCUED_KEY = "testfleet-rescued"
#: A build of the default branch, not of a pull request (the shell test every history
#: command repeats at run time; the step-level ``if`` is Buildkite's own at upload).
DEFAULT_BRANCH_BUILD = ('[ "${BUILDKITE_PULL_REQUEST:-false}" = "false" ] && '
                        '[ -n "${BUILDKITE_BRANCH:-}" ] && '
                        '[ "$BUILDKITE_BRANCH" = "${BUILDKITE_PIPELINE_DEFAULT_BRANCH:-}" ]')
ANNOTATION_CONTEXT = "testfleet-holes"
#: One warning and the whole notice are capped well below the kernel's 128 KiB limit
#: for a single environment string, so a hostile label cannot make the step unable
#: to start (and a 1 MiB annotation is Buildkite's own limit).
MAX_WARNING_CHARS = 1_000
MAX_NOTICE_CHARS = 32_000

_KEY_BAD = re.compile(r"[^A-Za-z0-9_:-]")
_HOSTED = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.]*)(-[\w.]+)*$")
_GITHUB_ONLY = {"self-hosted", "linux", "x64", "arm64", "windows", "macos"}


@dataclass(frozen=True)
class BuildkiteOptions:
    """Choices a project may make about its pipeline."""

    plan_file: str = PLAN_FILE
    docker_plugin: str = DOCKER_PLUGIN
    agent_lost_retries: int = 2


def escape(value: str) -> str:
    """Defer ``$`` interpolation from pipeline upload to run time."""
    return value.replace("$", "$$")


def step_key(job_id: str, taken: set[str]) -> str:
    """A Buildkite step key for ``job_id``: allowed characters, unique, <= 100 chars."""
    base = _KEY_BAD.sub("_", job_id)[:90] or "job"
    if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", base):
        base = "job-" + base[:80]
    key, n = base, 2
    while key in taken:
        key = f"{base}-{n}"
        n += 1
    taken.add(key)
    return key


def agents_for(runs_on: Sequence[str]) -> dict[str, str]:
    """Agent targeting rules for a stage's ``runs_on`` (see the module docstring)."""
    agents: dict[str, str] = {}
    for label in runs_on:
        if "=" in label:
            k, _, v = label.partition("=")
            if k.strip():
                agents[k.strip()] = v.strip()
            continue
        if label in _GITHUB_ONLY or _HOSTED.match(label):
            continue
        agents[label] = "true"
    return agents


#: ``docker run`` options and the Docker plugin key each becomes: (key, kind), where
#: kind is "str" (one value), "list" (repeatable) or "flag" (no value).
_DOCKER_OPTIONS: dict[str, tuple[str, str]] = {
    "--gpus": ("gpus", "str"), "--ipc": ("ipc", "str"), "--shm-size": ("shm-size", "str"),
    "--network": ("network", "str"), "--net": ("network", "str"), "--pid": ("pid", "str"),
    "--runtime": ("runtime", "str"), "--user": ("user", "str"), "-u": ("user", "str"),
    "--cpus": ("cpus", "str"), "--memory": ("memory", "str"), "-m": ("memory", "str"),
    "--memory-swap": ("memory-swap", "str"), "--userns": ("userns", "str"),
    "--workdir": ("workdir", "str"), "-w": ("workdir", "str"),
    "--storage-opt": ("storage-opt", "str"),
    "--device": ("devices", "list"), "--volume": ("volumes", "list"), "-v": ("volumes", "list"),
    "--env": ("environment", "list"), "-e": ("environment", "list"),
    "--add-host": ("add-host", "list"), "--group-add": ("additional-groups", "list"),
    "--tmpfs": ("tmpfs", "list"), "--sysctl": ("sysctls", "list"),
    "--publish": ("publish", "list"), "-p": ("publish", "list"),
    "--privileged": ("privileged", "flag"), "--init": ("init", "flag"),
}


def docker_plugin_options(options: str) -> tuple[dict[str, Any], list[str]]:
    """A stage's ``container.options`` (``docker run`` syntax) as Docker plugin keys,
    and the options the plugin has no key for (the caller reports them)."""
    out: dict[str, Any] = {}
    unsupported: list[str] = []
    try:
        words = shlex.split(options)
    except ValueError as exc:
        return {}, [f"{options!r} ({exc})"]
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, value = word.partition("=")
        spec = _DOCKER_OPTIONS.get(name)
        if spec is None:
            unsupported.append(word)
            i += 1
            continue
        key, kind = spec
        if kind == "flag":
            out[key] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(words):
                unsupported.append(f"{word} (no value)")
                break
            value = words[i + 1]
            i += 1
        i += 1
        if kind == "list":
            out.setdefault(key, []).append(value)
        else:
            out[key] = value
    return out, unsupported


def _plugins(job: Job, opts: BuildkiteOptions) -> list[dict[str, Any]]:
    if not job.container:
        return []
    config: dict[str, Any] = {
        "image": job.container,
        "propagate-environment": True,
        "mount-buildkite-agent": True,
    }
    if job.backend == "cuda":
        config["gpus"] = "all"
    elif job.backend == "rocm":
        config["devices"] = ["/dev/kfd", "/dev/dri"]
    container = job.ci.container
    if container is not None:
        extra, unsupported = docker_plugin_options(container.options)
        if unsupported:
            raise UsageError(
                f"stages.{job.stage}{f'.variants.{job.variant}' if job.variant else ''}"
                f".container.options: {', '.join(unsupported)} has no "
                f"equivalent in the Buildkite Docker plugin ({opts.docker_plugin}); use its "
                "keys' options (--gpus, --ipc, --shm-size, --device, -v, --privileged, ...)")
        for key, value in extra.items():
            if isinstance(value, list):
                config[key] = [*config.get(key, []), *value]
            else:
                config[key] = value
        if container.volumes:
            config["volumes"] = [*config.get("volumes", []), *container.volumes]
    return [{opts.docker_plugin: config}]


def _command(plan: Plan, opts: BuildkiteOptions) -> tuple[list[str], list[str]]:
    """(the commands before the stage's setup, the run and what follows it)."""
    plan_file = shlex.quote(opts.plan_file)
    digest = plan.digest or plan.to_json()["digest"]
    prefix = '{"digest":' + json.dumps(digest) + ","
    mismatch = (f"echo 'testfleet: {opts.plan_file} is not the plan this pipeline was emitted from "
                f"({digest})' >&2; exit 2")
    run = (f'testfleet run --plan {plan_file} --job "$TESTFLEET_JOB_ID" '
           f'--junit "{JUNIT_DIR}/$TESTFLEET_JOB_ID.xml" '
           f'--status-file "{STATUS_DIR}/$TESTFLEET_JOB_ID.json"'
           # a rescue step (#40): the rescue wave's file, its digest in the step's env
           f'${{TESTFLEET_RESCUE_DIGEST:+ --rescue {RESCUE_FILE}}}')
    before = [
        f"buildkite-agent artifact download {plan_file} .",
        # the plan file's own digest, exactly (it is written first); not a substring of it
        f"head -c {len(prefix)} {plan_file} | grep -qxF {shlex.quote(prefix)} || {{ {mismatch}; }}",
        f"mkdir -p {JUNIT_DIR}",
    ]
    if not writes_history(plan):
        return before, [run]
    bundle = f'"{HISTORY_DIR}/$TESTFLEET_JOB_ID.bundle"'
    record = (f'testfleet history export --run-id "$BUILDKITE_BUILD_NUMBER" --plan {plan_file} '
              f"--output {bundle} && buildkite-agent artifact upload {bundle}")
    return before, [
        "status=0",
        f"{run} || status=$?",
        "# this build's records for the testfleet-history step, whatever the tests' outcome",
        f'if {DEFAULT_BRANCH_BUILD} && [ -z "${{TESTFLEET_DATABASE_URL:-}}" ]; then',
        f"  {record} || echo 'testfleet: warning: the history of this job was not recorded' >&2",
        "fi",
        'exit "$status"',
    ]


#: Checks that the agent's (or container's) ``python3`` is the stage's ``python``:
#: Buildkite has no setup-python, so the version is the agent's or the image's to provide.
_PYTHON_CHECK = (
    "import platform, sys\n"
    "want = sys.argv[1]\n"
    "impl = 'pypy' if want.startswith('pypy') else 'graalpy' if want.startswith('graalpy') "
    "else 'cpython'\n"
    "parts = want.removeprefix(impl if impl != 'cpython' else '').removesuffix('-dev').split('.')\n"
    "have = platform.python_version().split('.')\n"
    "ok = platform.python_implementation().lower() == impl and all(\n"
    "    w in ('x', h) for w, h in zip(parts, have))\n"
    "print(f'python3 is {platform.python_implementation()} {platform.python_version()}; '\n"
    "      f'the stage wants {want}')\n"
    "sys.exit(0 if ok else 1)\n"
)


def machine_commands(job: Job) -> list[str]:
    """The stage's ``checkouts``, ``python`` and ``uv`` as commands (see the module
    docstring), before its setup."""
    out: list[str] = []
    for c in job.ci.checkouts:
        url = shlex.quote(f"https://github.com/{c.repository}.git")
        path = shlex.quote(c.path)
        clone = f"git clone --quiet {url} {path}"
        if c.token_secret:
            # the token reaches git through its environment, never its arguments or a
            # config file the tests can read later
            clone = (f'GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader '
                     f'GIT_CONFIG_VALUE_0="Authorization: Basic $(printf \'x-access-token:%s\' '
                     f'"${c.token_secret}" | base64 | tr -d \'\\n\')" {clone}')
        out.append(f"rm -rf {path} && {clone}")
        if c.ref:
            out.append(f"git -C {path} checkout --quiet {shlex.quote(c.ref)}")
    if job.ci.python:
        why = (f"testfleet: this agent or image does not have the stage's python "
               f"{job.ci.python} (Buildkite has no setup-python)")
        out.append(f"python3 -c {shlex.quote(_PYTHON_CHECK)} {shlex.quote(job.ci.python)} || "
                   f"{{ echo {shlex.quote(why)} >&2; exit 2; }}")
    if job.ci.uv:
        out.append("command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv")
    return out


def setup_commands(job: Job) -> list[str]:
    """Each ``setup`` item in a shell of its own: an ``exit 0`` in one (a wait loop that is
    done) ends only that item, as it ends only its own step on GitHub."""
    return [f"bash -eo pipefail -c {shlex.quote(item)}" for item in job.ci.setup]


def writes_history(plan: Plan) -> bool:
    """Whether this plan's build may write history: not a pull request's (the branch is
    checked again at run time, where Buildkite knows it)."""
    return plan.policy.get("event") not in ("pull_request", "pull_request_target")


def history_step() -> dict[str, Any]:
    """The step that merges this build's bundles into the shared history (see the
    module docstring); its commands are constants."""
    bundles = f"{HISTORY_DIR}/*.bundle"
    return {
        "label": ":card_file_box: testfleet history",
        "key": HISTORY_KEY,
        "if": "build.pull_request.id == null && build.branch == pipeline.default_branch",
        "commands": [
            "set -euo pipefail",
            f"if ! {{ {DEFAULT_BRANCH_BUILD}; }}; then",
            "  echo 'testfleet: only builds of the default branch write history' >&2; exit 2",
            "fi",
            'if [ -z "${TESTFLEET_DATABASE_URL:-}" ]; then',
            "  echo 'testfleet: the history step needs TESTFLEET_DATABASE_URL (a shared PostgreSQL, "
            "or a SQLite file on a persistent agent); see docs/ci-history.md' >&2",
            "  exit 2",
            "fi",
            f"mkdir -p {HISTORY_DIR}",
            f"if ! buildkite-agent artifact download '{bundles}' .; then",
            "  echo 'testfleet: no history bundles in this build'; exit 0",
            "fi",
            # the plan: a lane it gave jobs that recorded nothing moves its breaker (#41)
            f"buildkite-agent artifact download {PLAN_FILE} .",
            f'testfleet history merge {bundles} --require-ref "refs/heads/$BUILDKITE_BRANCH" '
            f"--plan {PLAN_FILE}",
        ],
        "timeout_in_minutes": 30,
        # one merge at a time per pipeline (the group is named at upload, below)
        "concurrency": 1,
        "concurrency_group": "testfleet-history",
    }


def reconcile_step(plan: Plan, opts: BuildkiteOptions) -> dict[str, Any] | None:
    """The last step (INTERFACES.md section 1): every planned job reported its status file
    (an artifact of its step), every planned file exactly once; it fails, naming what is
    missing, when a job never reported. Its commands are constants and the plan's digest."""
    if not plan.jobs:
        return None
    plan_file = shlex.quote(opts.plan_file)
    digest = shlex.quote(plan.digest or plan.to_json()["digest"])
    return {
        "label": ":white_check_mark: testfleet reconcile",
        "key": RECONCILE_KEY,
        "commands": [
            f"buildkite-agent artifact download {plan_file} .",
            f"mkdir -p {STATUS_DIR}",
            f"buildkite-agent artifact download '{STATUS_DIR}/*.json' . || "
            "echo 'testfleet: no job status file in this build' >&2",
            # the files of lost agents' jobs: the rescue wave, uploaded as steps (#40)
            f"testfleet reconcile --plan {plan_file} --expect-digest {digest} "
            f"--rescue-out {RESCUE_FILE} --rescue-pipeline rescue-pipeline.json {STATUS_DIR}",
            "if [ -s rescue-pipeline.json ]; then",
            f"  buildkite-agent artifact upload {RESCUE_FILE}",
            "  buildkite-agent pipeline upload rescue-pipeline.json",
            "fi",
        ],
        "timeout_in_minutes": 10,
    }


def tree_errors_step(plan: Plan) -> dict[str, Any] | None:
    """The last step when registrations were rejected (fate ``invalid``): every valid
    test ran; the build still fails, naming the cause."""
    invalid = sum(1 for s in plan.skipped if s.reason == "invalid")
    if not invalid:
        return None
    return {
        "label": ":x: testfleet: registrations rejected",
        "key": TREE_ERRORS_KEY,
        "commands": [
            f"echo 'testfleet: {invalid} registration(s) were rejected; the plan ran every valid "
            "test and left them out as invalid (testfleet check lists them)' >&2",
            "exit 1",
        ],
        "timeout_in_minutes": 5,
    }


def _dependencies(plan: Plan, job: Job, keys: dict[str, str]) -> list[str]:
    by_stage: dict[str, list[Job]] = {}
    for other in plan.jobs:
        by_stage.setdefault(other.stage, []).append(other)
    stage_wave = {s.name: s.wave for s in plan.stages}
    deps: set[str] = set()
    for need in job.needs:
        if by_stage.get(need):
            deps.update(keys[j.id] for j in by_stage[need])
        else:
            limit = stage_wave.get(need, job.wave)
            deps.update(keys[j.id] for j in plan.jobs if j.wave < limit)
    return sorted(deps)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(lines: list[str], limit: int) -> list[str]:
    """``lines`` up to ``limit`` characters in all, then one line saying how many
    were left out (never silently dropped)."""
    kept: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        if size + len(line) + 1 > limit:
            kept.append(f"… and {len(lines) - i} more (see the plan file)")
            break
        kept.append(line)
        size += len(line) + 1
    return kept


def notice_texts(plan: Plan) -> tuple[str, str] | None:
    """The plan's coverage holes and other warnings as (plain log text, Markdown
    annotation body), or ``None`` when the plan has nothing to warn about."""
    from testfleet.mdtext import md

    holes = [
        f"{s.lane} ({s.backend}): {s.status}" + (f": {s.reason}" if s.reason else "")
        for s in plan.holes
    ]
    others = [w for w in plan.warnings if not w.startswith("coverage hole:")]
    if not holes and not others:
        return None
    # One line per item in the log too: a newline in a label must not forge a line.
    plain = [_clip(" ".join(f"coverage hole: {h}".split()), MAX_WARNING_CHARS) for h in holes]
    plain += [_clip(" ".join(f"warning: {w}".split()), MAX_WARNING_CHARS) for w in others]
    body: list[str] = []
    if holes:
        body += [f"**testfleet: {len(holes)} coverage hole(s)**: these stages run no "
                 "tests in this build", ""]
        body += [f"- {md(_clip(h, MAX_WARNING_CHARS))}" for h in holes]
        body.append("")
    if others:
        body += [f"**testfleet: {len(others)} plan warning(s)**", ""]
        body += [f"- {md(_clip(w, MAX_WARNING_CHARS))}" for w in others]
    return ("\n".join(_bounded(plain, MAX_NOTICE_CHARS)),
            "\n".join(_bounded(body, MAX_NOTICE_CHARS)).strip())


def notice_step(plan: Plan, key: str) -> dict[str, Any] | None:
    """The step that makes holes and warnings visible on the build page (see the
    module docstring); its commands are constants, the text is only in ``env``."""
    texts = notice_texts(plan)
    if texts is None:
        return None
    plain, annotation = texts
    holes, others = len(plan.holes), sum(
        1 for w in plan.warnings if not w.startswith("coverage hole:"))
    parts = [f"{holes} coverage hole(s)"] if holes else []
    parts += [f"{others} warning(s)"] if others else []
    return {
        "label": ":warning: testfleet: " + ", ".join(parts),
        "key": key,
        "commands": [
            "printf '%s\\n' \"$TESTFLEET_NOTICE\"",
            "printf '%s\\n' \"$TESTFLEET_ANNOTATION\" | buildkite-agent annotate "
            f"--style warning --context {ANNOTATION_CONTEXT}",
        ],
        "env": {"TESTFLEET_NOTICE": plain, "TESTFLEET_ANNOTATION": annotation},
        "soft_fail": True,
        "timeout_in_minutes": 5,
    }


def pipeline(plan: Plan, options: BuildkiteOptions | None = None) -> dict[str, Any]:
    """The pipeline as data (what :func:`emit` serialises)."""
    opts = options or BuildkiteOptions()
    taken: set[str] = {NOTICE_KEY, HISTORY_KEY, TREE_ERRORS_KEY, RECONCILE_KEY}
    keys = {job.id: step_key(job.id, taken) for job in plan.jobs}
    bypass = bool(plan.policy.get("bypass_fastfail", False))
    before, run = _command(plan, opts)
    steps: list[dict[str, Any]] = []
    notice = notice_step(plan, NOTICE_KEY)
    if notice is not None:
        steps.append(notice)
    for job in plan.jobs:
        step = _job_step(plan, job, opts, keys, before, run, bypass=bypass)
        if opts.agent_lost_retries:
            step["retry"] = {"automatic": [
                {"exit_status": -1, "limit": opts.agent_lost_retries},
                {"signal_reason": "agent_stop", "limit": opts.agent_lost_retries},
            ]}
        # an agent lost after its retries does not fail the build by itself: its files go
        # to the rescue wave, and the reconcile after it fails the build unless each of
        # them then has exactly one final report
        step["soft_fail"] = [{"exit_status": -1}]
        steps.append(step)
    final = [s for s in (history_step() if plan.jobs and writes_history(plan) else None,
                         reconcile_step(plan, opts), tree_errors_step(plan)) if s is not None]
    if final and steps:
        steps.append({"wait": None, "continue_on_failure": True})  # after every job, failed too
    steps += final
    if not steps:
        # Nothing to run: a wait step is valid and asks for no agent.
        steps.append({"wait": None})
    env = {"TESTFLEET_PLAN_DIGEST": plan.digest or plan.to_json()["digest"],
           "TESTFLEET_COVERAGE_HOLES": ",".join(s.lane for s in plan.holes)}
    escaped = _escape_all(steps)
    for step in escaped:
        # Concurrency groups are organisation-wide; the one '$' left unescaped is
        # interpolated at upload: the build's id keeps a stage's limit to this build's
        # jobs, the pipeline's slug serialises history merges across its builds.
        if step.get("key") == HISTORY_KEY:
            step["concurrency_group"] = "${BUILDKITE_PIPELINE_SLUG}/" + step["concurrency_group"]
        elif "concurrency_group" in step:
            step["concurrency_group"] = "${BUILDKITE_BUILD_ID}/" + step["concurrency_group"]
    return {"env": _escape_all(env), "steps": escaped}


def _job_step(plan: Plan, job: Job, opts: BuildkiteOptions, keys: dict[str, str],
              before: list[str], run: list[str], *, bypass: bool) -> dict[str, Any]:
    """The command step of one plan job (a rescue step starts from its origin's)."""
    step: dict[str, Any] = {
        "label": f"{job.lane} {job.shard}/{job.shards}",
        "key": keys[job.id],
        "commands": [*before, *machine_commands(job), *setup_commands(job), *run],
        "env": {"TESTFLEET_JOB_ID": job.id,
                **{k: v for k, v in sorted(job.env.items())}},
        "artifact_paths": [f"{JUNIT_DIR}/*.xml", f"{STATUS_DIR}/*.json"],
        "timeout_in_minutes": job.timeout_minutes,
    }
    secrets = [*job.ci.secrets, *(c.token_secret for c in job.ci.checkouts
                                  if c.token_secret and c.token_secret not in job.ci.secrets)]
    if secrets:
        step["secrets"] = secrets
    if job.ci.fail_fast:
        step["cancel_on_build_failing"] = True
    if job.ci.max_parallel:
        step["concurrency"] = job.ci.max_parallel
        step["concurrency_group"] = f"testfleet/{job.lane}"  # made per build below
    agents = agents_for(job.runs_on)
    if agents:
        step["agents"] = agents
    deps = _dependencies(plan, job, keys)
    if deps:
        step["depends_on"] = deps
        if bypass:
            step["allow_dependency_failure"] = True
    plugins = _plugins(job, opts)
    if plugins:
        step["plugins"] = plugins
    return step


def rescue_pipeline(plan: Plan, rescue: Any, options: BuildkiteOptions | None = None
                    ) -> dict[str, Any]:
    """The rescue wave (#40) as the pipeline the reconcile step uploads: one step per rescue
    job, on its origin's agents with its origin's container, setup, secrets and timeout,
    running ``testfleet run --rescue`` (one attempt: no automatic retry); then, after a
    ``wait`` that continues on failure, the reconcile of the plan with its rescue."""
    opts = options or BuildkiteOptions()
    taken: set[str] = {NOTICE_KEY, HISTORY_KEY, TREE_ERRORS_KEY, RECONCILE_KEY, RESCUED_KEY,
                       RESCUE_HISTORY_KEY}
    keys = {job.id: step_key(job.id, taken) for job in plan.jobs}
    before, run = _command(plan, opts)
    plan_file = shlex.quote(opts.plan_file)
    steps: list[dict[str, Any]] = []
    for rjob in rescue.jobs:
        origin = plan.job(rjob.origin)
        step = _job_step(plan, origin, opts, keys, before, run, bypass=False)
        step.pop("depends_on", None)
        step.pop("allow_dependency_failure", None)
        step["key"] = step_key(rjob.id, taken)
        step["label"] = f"{origin.lane} {origin.shard}/{origin.shards} rescue"
        step["env"] = {**step["env"], "TESTFLEET_JOB_ID": rjob.id,
                       "TESTFLEET_RESCUE_DIGEST": rescue.digest}
        step["commands"] = [f"buildkite-agent artifact download {RESCUE_FILE} .",
                            *step["commands"]]
        steps.append(step)
    digest = shlex.quote(plan.digest)
    steps.append({"wait": None, "continue_on_failure": True})
    if writes_history(plan):
        # the first history step ran before this wave: merge again, now with the rescue
        # jobs' bundles (a merge is idempotent; a run already folded into a breaker is not
        # folded in twice)
        again = history_step()
        again["key"] = RESCUE_HISTORY_KEY
        again["label"] = ":card_file_box: testfleet history after the rescue"
        steps.append(again)
    steps += [{
        "label": ":white_check_mark: testfleet reconcile after the rescue",
        "key": RESCUED_KEY,
        "commands": [
            f"buildkite-agent artifact download {plan_file} .",
            f"buildkite-agent artifact download {RESCUE_FILE} .",
            f"mkdir -p {STATUS_DIR}",
            f"buildkite-agent artifact download '{STATUS_DIR}/*.json' .",
            f"testfleet reconcile --plan {plan_file} --expect-digest {digest} "
            f"--rescue {RESCUE_FILE} {STATUS_DIR}",
        ],
        "timeout_in_minutes": 10,
    }]
    escaped = _escape_all(steps)
    for step in escaped:  # one merge at a time per pipeline, as the first history step
        if step.get("key") == RESCUE_HISTORY_KEY:
            step["concurrency_group"] = "${BUILDKITE_PIPELINE_SLUG}/" + step["concurrency_group"]
    return {"steps": escaped}


def _escape_all(value: Any) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, list):
        return [_escape_all(v) for v in value]
    if isinstance(value, dict):
        return {escape(k): _escape_all(v) for k, v in value.items()}
    return value


def emit(plan: Plan, options: BuildkiteOptions | None = None) -> str:
    """The pipeline as JSON text (JSON is YAML, so ``buildkite-agent pipeline upload``
    reads it as it is); deterministic for a given plan."""
    return json.dumps(pipeline(plan, options), indent=2, ensure_ascii=False) + "\n"


# -- the bootstrap pipeline (.buildkite/pipeline.yml) --------------------------

BOOTSTRAP_PATH = ".buildkite/pipeline.yml"

_BOOTSTRAP_SCRIPT = r"""
set -euo pipefail
slug() { printf '%s' "$1" | sed -E 's#\.git$##; s#^.*[:/]([^/:]+/[^/:]+)$#\1#' | tr '[:upper:]' '[:lower:]'; }
args=()
if [ "${BUILDKITE_PULL_REQUEST:-false}" != "false" ]; then
  args+=(--event pull_request)
  if [ -n "${BUILDKITE_PULL_REQUEST_REPO:-}" ] \
     && [ "$(slug "$BUILDKITE_PULL_REQUEST_REPO")" != "$(slug "${BUILDKITE_REPO:-}")" ]; then
    # a fork's trust settings come from the base branch's config, not the fork's
    args+=(--fork --trust-base "origin/${BUILDKITE_PULL_REQUEST_BASE_BRANCH:-HEAD}")
  fi
  labels="${TESTFLEET_PR_LABELS:-${BUILDKITE_PULL_REQUEST_LABELS:-}}"
  if [ -n "$labels" ]; then args+=(--labels "$labels"); fi
elif [ -n "${TESTFLEET_CADENCE:-}" ]; then
  args+=(--cadence "$TESTFLEET_CADENCE")
elif [ "${BUILDKITE_SOURCE:-}" = "schedule" ]; then
  echo "testfleet: a scheduled build needs TESTFLEET_CADENCE in the schedule's environment" >&2
  exit 2
else
  args+=(--event push)
fi
# Exit 1: the plan was made, but registrations were rejected (fate 'invalid'). Every
# valid test still runs; the pipeline's last step fails the build on it.
status=0
testfleet plan "${args[@]}" --format buildkite --plan-file plan.json > pipeline.json || status=$?
if [ "$status" -gt 1 ]; then exit "$status"; fi
buildkite-agent artifact upload plan.json
buildkite-agent pipeline upload pipeline.json
"""


def bootstrap(install: str | None = None) -> str:
    """The static pipeline a Buildkite project uploads first: it plans once, keeps
    the plan as an artifact and uploads the per-job pipeline :func:`emit` made.

    The trigger comes from Buildkite's own variables (PR number, head repository
    for forks, ``BUILDKITE_PULL_REQUEST_LABELS`` or ``TESTFLEET_PR_LABELS``) and,
    for scheduled builds, ``TESTFLEET_CADENCE`` set in the schedule. Labels reach
    the planner as one quoted argument, never as shell code; ``$`` is doubled so
    Buildkite leaves every variable to run time.
    """
    from testfleet.integrations.install import index_install
    from testfleet.integrations.yaml_doc import dump

    if install is None:  # init passes the install of the testfleet that generated it
        install = index_install().command
    body = _BOOTSTRAP_SCRIPT.strip().split("\n")
    script = escape("\n".join([body[0], install.strip(), *body[1:]])) + "\n"
    return dump({"steps": [{"label": "testfleet plan", "key": "testfleet-plan",
                            "command": script}]},
                ("Generated by 'testfleet init --buildkite'. Plans once, then uploads one step",
                 "per job of the plan; every step runs its job from the same plan.json.",
                 "Fork builds: keep this bootstrap in the pipeline settings (not only in the",
                 "repository) so a fork cannot change what plans its build."))
