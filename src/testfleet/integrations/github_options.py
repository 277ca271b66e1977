"""What both generated GitHub workflows share: the options, job ids, waves, the history
and collection caches, and which stages a pull request may only reach through the
trusted workflow.

Which runner a pull request's job gets must not be decided by anything the pull request
can edit. A ``pull_request`` workflow is the pull request's own file (GitHub reads it
from the merge commit), so a fork that edits it, or the action it runs, can ask for any
runner. Stages on self-hosted (or any non-GitHub-hosted) runners, and ``trusted_only``
stages, are therefore planned and dispatched for pull requests by a second workflow
triggered by ``pull_request_target``, whose definition GitHub reads from the base branch
(:mod:`testfleet.integrations.github_trusted`); the ``pull_request`` workflow runs only
the stages on GitHub-hosted runners. :func:`trusted_stages` is that split.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testfleet.config import Config
from testfleet.errors import UsageError
from testfleet.integrations.github_steps import pinned
from testfleet.integrations.yaml_doc import Note
from testfleet.integrations.yaml_text import expr_str
from testfleet.planning.lanes import all_lanes

HISTORY_ARTIFACT = "testfleet-history"
HISTORY_CACHE = "testfleet-history"
COLLECTION_CACHE = "testfleet-collection"
WORKFLOW_PATH = ".github/workflows/testfleet.yml"
ACTIONLINT_PATH = ".github/actionlint.yaml"
TRUSTED_WORKFLOW_PATH = ".github/workflows/testfleet-trusted.yml"
#: Every stage job, written once; both workflows call it (:mod:`.github_stages`).
STAGES_WORKFLOW_PATH = ".github/workflows/testfleet-stages.yml"
PLAN_ARTIFACT = "testfleet-plan"
STATUS_ARTIFACT = "testfleet-status"
JUNIT_DIR = "testfleet-junit"
STATUS_DIR = "testfleet-status"
#: Where the trusted workflow's plan job checks out the pull request, as data only.
PR_PATH = "pull-request"
MAX_MATRIX = 256  # GitHub's limit of jobs per matrix


@dataclass(frozen=True)
class WorkflowOptions:
    """What a project may choose about its workflows; the defaults suit most trees.

    ``install`` is the shell command that puts ``testfleet`` on PATH (None: the composite
    action's own default, the pinned version from the index; ``testfleet init`` passes the
    install of the testfleet that generated the workflow, see
    :mod:`testfleet.integrations.install`). ``history`` closes the history loop;
    ``database_secret`` makes jobs write to PostgreSQL instead, ``database_read_secret``
    lets the plan job read it, ``queue_secret`` gives a pull request's queue runners the
    queue tables (never the history's write secret). ``push_branches`` adds post-merge runs; ``diff_pruning``
    lets PR plans skip GPU stages that the PR's changes cannot affect (the merge commit's
    first parent is the base, so no extra fetch of a PR-named ref is needed).
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
    queue_secret: str | None = None
    history: bool = True
    config: str | None = None  # repo-relative config file, when it is not found from the root


# -- which stages a pull request reaches only through the trusted workflow -------------

_HOSTED = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.]*)(-[\w.]+)*$")


def github_hosted(runs_on: Sequence[str]) -> bool:
    """Whether ``runs_on`` names only GitHub-hosted runner images (``ubuntu-latest``,
    ``ubuntu-24.04``, ``macos-14``, ...). Anything else (``self-hosted``, a custom or
    larger-runner label, a runner group) is a machine someone pays for and guards."""
    return bool(runs_on) and all(_HOSTED.match(label) for label in runs_on)


def trusted_stages(config: Config) -> list[str]:
    """The stages whose pull-request jobs only the trusted workflow dispatches: any lane
    off GitHub-hosted runners, or ``trusted_only``. Dormant stages count too, so that
    restoring one never moves it to the other workflow."""
    lanes = all_lanes(config)
    return sorted(name for name, stage in config.stages.items()
                  if stage.trusted_only or any(
                      not github_hosted(lane.config.runs_on)
                      for lane in lanes.values() if lane.stage == name))


def self_hosted_labels(config: Config) -> list[str]:
    """The runner labels GitHub does not host (actionlint must be told them)."""
    known = {"self-hosted", "linux", "x64", "arm", "arm64", "macos", "windows"}
    return sorted({label for lane in all_lanes(config).values() for label in lane.config.runs_on
                   if label not in known and not _HOSTED.match(label)})


def render_actionlint_config(config: Config) -> str:
    """``.github/actionlint.yaml``: the self-hosted runner labels the workflows name, so
    that actionlint checks them instead of calling them unknown."""
    from testfleet.integrations.yaml_doc import dump

    return dump({"self-hosted-runner": {"labels": self_hosted_labels(config)}},
                ("Written by 'testfleet init --github': the self-hosted runner labels of the",
                 "testfleet workflows (actionlint reports any other label as unknown)."))


# -- jobs and waves ---------------------------------------------------------------------

def workflow_needs(stage: Any) -> list[str]:
    """What a stage's workflow job waits for: a job's ``needs`` are the same on every event,
    so ``needs`` and every event's ``needs_on`` together (a plan waits per event; on an event
    where a needed stage has no jobs, that job is skipped and the stage still runs)."""
    from testfleet.config.triggers import needs_for

    return needs_for(stage.needs, getattr(stage, "needs_on", {}) or {}, None)


def stage_waves(config: Config) -> dict[str, int]:
    """Each stage's wave: 0 without needs, else one more than its deepest need.

    Dormant stages count too, so that re-enabling a stage never needs a new
    workflow. The config loader has already rejected cycles of one event's needs; needs
    of different events that close a cycle cannot be one workflow (UsageError).
    """
    waves: dict[str, int] = {}

    def wave(name: str, trail: tuple[str, ...] = ()) -> int:
        if name in waves:
            return waves[name]
        if name in trail:
            cycle = " -> ".join((*trail[trail.index(name):], name))
            raise UsageError(f"stages {cycle} wait for each other on different events "
                             "(needs_on); a GitHub workflow job waits the same way on every "
                             "event, so it cannot be generated: make the waits one order")
        if name not in config.stages:  # defensive: validated upstream
            return 0
        needs = workflow_needs(config.stages[name])
        value = 0 if not needs else 1 + max(wave(n, (*trail, name)) for n in needs)
        waves[name] = value
        return value

    for name in config.stages:
        wave(name)
    return waves


def wave_count(config: Config) -> int:
    """How many wave jobs the workflow needs (at least one, so it is never empty)."""
    return max(1, 1 + max(stage_waves(config).values(), default=0))


RESERVED_JOBS = {"plan", "testfleet", "reconcile", "history", "rescued"}


def stage_job_ids(config: Config) -> dict[str, str]:
    """Each lane's job id in the workflow (a stage, or one variant of a stage as
    ``<stage>.<variant>``): its name where GitHub allows it (letters, digits, ``-``, ``_``,
    starting with a letter or ``_``), else a cleaned form; unique, case-insensitively, and
    never one of the workflow's own jobs."""
    ids: dict[str, str] = {}
    taken = set(RESERVED_JOBS)
    for name in sorted(all_lanes(config)):
        base = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        if not (base[0].isalpha() or base[0] == "_") or base.lower() in RESERVED_JOBS:
            base = f"stage-{base}"
        ids[name] = unique_id(base, taken)
    return ids


def unique_id(base: str, taken: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``...: the first not in ``taken`` (compared
    case-insensitively, as GitHub compares job ids), which it then joins."""
    job_id, n = base, 2
    while job_id.lower() in taken:
        job_id = f"{base}-{n}"
        n += 1
    taken.add(job_id.lower())
    return job_id


# -- history and the collection cache -------------------------------------------------

#: Only these runs write history; everything else (pull requests above all) reads it.
DEFAULT_BRANCH_RUN = (
    "github.ref == format('refs/heads/{0}', github.event.repository.default_branch) && "
    "(github.event_name == 'push' || github.event_name == 'schedule' || "
    "github.event_name == 'workflow_dispatch')"
)


def history_mode(config: Config, opts: WorkflowOptions) -> str:
    """How this workflow keeps history: ``cache`` (bundles merged into the Actions
    cache), ``database`` (jobs write to PostgreSQL through ``database_secret``) or
    ``off`` (``history = false``, or the config names its own ``database``)."""
    if opts.database_secret:
        return "database"
    if not opts.history or config.database:
        return "off"
    return "cache"


def in_cache_dir(config: Config, opts: WorkflowOptions, name: str, under: str = "") -> str:
    base = posixpath.dirname(opts.config) if opts.config else ""
    return posixpath.join(under, base, config.cache_dir, name)


def history_path(config: Config, opts: WorkflowOptions, under: str = "") -> str:
    """The SQLite history file, relative to the repository root (next to the config)."""
    return in_cache_dir(config, opts, "history.db", under)


def collection_cache_paths(config: Config, opts: WorkflowOptions, under: str = "") -> list[str]:
    """What the plan job keeps between runs, relative to the repository root (next to the
    config): the registry cache, and with any ``command = "auto"`` lane the file styles too,
    which a plan would otherwise parse from every such file on every run."""
    from testfleet.commands import AUTO
    from testfleet.registry.cache import NAME
    from testfleet.registry.collectable import NAME as STYLES

    paths = [in_cache_dir(config, opts, NAME, under)]
    if any(lane.config.command == AUTO for lane in all_lanes(config).values()):
        paths.append(in_cache_dir(config, opts, STYLES, under))
    return paths


def reads_cache(config: Config, opts: WorkflowOptions) -> bool:
    """Whether the plan and test jobs restore the history from the Actions cache."""
    mode = history_mode(config, opts)
    return mode == "cache" or (mode == "database" and not opts.database_read_secret)


def restore_history(config: Config, opts: WorkflowOptions, *note: str, under: str = "") -> Note:
    return Note({
        "name": "Restore the history",
        "uses": pinned("actions/cache/restore"),
        "with": {"path": history_path(config, opts, under),
                 "key": f"{HISTORY_CACHE}-${{{{ github.run_id }}}}",
                 "restore-keys": f"{HISTORY_CACHE}-"},
    }, before=("The newest history this branch or the default branch saved (no pull request "
               "saves one).", *note))


def restore_collection(config: Config, opts: WorkflowOptions, under: str = "") -> Note:
    return Note({
        "name": "Restore the collection cache",
        "uses": pinned("actions/cache/restore"),
        "with": {"path": "\n".join(collection_cache_paths(config, opts, under)),
                 "key": f"{COLLECTION_CACHE}-${{{{ github.run_id }}}}",
                 "restore-keys": f"{COLLECTION_CACHE}-"},
    }, before=("The last collection: files whose content is unchanged are not scanned again.",))


def save_collection(config: Config, opts: WorkflowOptions) -> dict[str, Any]:
    return {
        "name": "Save the collection cache",
        "if": f"${{{{ {DEFAULT_BRANCH_RUN} }}}}",
        "uses": pinned("actions/cache/save"),
        "with": {"path": "\n".join(collection_cache_paths(config, opts)),
                 "key": f"{COLLECTION_CACHE}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"},
    }


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
    if policy.required_label:
        names.add(policy.required_label)
    names |= {label for stage in config.stages.values() for label in stage.requires_labels}
    parts += [f"github.event.label.name == {expr_str(n)}" for n in sorted(names)
              if n and not n.startswith(policy.label_prefix)]
    return f"(github.event.action == 'labeled' && !({' || '.join(parts)}))"
