"""What adoption takes from a project's existing CI, as data: per stage the job that
runs it, and what that CI does that a configuration does not carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from testfleet.adopt.runner import RunnerRead
from testfleet.findings import Finding


# What lookup.py reads from a partition script: a value of the model, defined here so that
# the model does not import the reader (lookup reads workflows, which speak of NotCarried).
@dataclass(frozen=True)
class PartitionRule:
    """What a project's partition script decides a stage's shard count from."""

    script: str
    #: the fraction of the stage's run timeout one shard may fill (``0.75 * timeout``)
    fraction: float | None = None
    #: ``max_parallel = max(size // divisor, 1)``
    divisor: int | None = None
    #: suites whose count the script pins (``_BASE_A_OVERRIDES = {"base-a-test-cpu": 8}``)
    fixed: Mapping[str, int] = field(default_factory=dict)



@dataclass(frozen=True)
class NotCarried:
    """Something the existing CI does that the adopted configuration does not."""

    where: str  # workflow file and job
    what: str
    why: str

    def render(self) -> str:
        return f"{self.where}: {self.what} -- {self.why}"


@dataclass
class CIStage:
    """What the existing CI says about one stage."""

    name: str
    workflow: str
    job: str
    events: tuple[str, ...]
    runs_on: list[str] | None = None
    container: str | None = None
    container_options: str | None = None
    container_volumes: list[str] = field(default_factory=list)
    shards: int | None = None
    timeout_minutes: float | None = None
    needs: list[str] = field(default_factory=list)
    #: per event, the stages the job waits for when they differ from ``needs``
    needs_on: dict[str, list[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    retry: dict[str, int] = field(default_factory=dict)
    file_timeout: int | None = None
    match_all_on_dispatch: bool = False
    #: secret name -> the env variable the job exposes it as (a stage's ``secrets``
    #: are exposed under their own names)
    secret_env: dict[str, str] = field(default_factory=dict)
    fail_fast: bool | None = None
    max_parallel: int | None = None
    setup: list[str] = field(default_factory=list)
    #: the job's setup-python version, setup-uv, and checkouts of other repositories
    #: (``{repository, ref, path, token_secret}``)
    python_version: str | None = None
    #: job env values a shell can compute (``${{ github.workspace }}/x``), as setup items
    #: writing them to ``$GITHUB_ENV`` before the job's own steps
    env_setup: list[str] = field(default_factory=list)
    uv: bool = False
    checkouts: list[dict[str, str]] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)
    #: the runner script the job runs, and its argparse defaults for the runner flags
    #: (``--timeout-per-file`` -> ``timeout_per_file``), read with ast
    runner_script: str | None = None
    runner_defaults: dict[str, int] = field(default_factory=dict)
    #: runner flags the command names without a literal value (inside a ``${{ }}``)
    runner_dynamic: set[str] = field(default_factory=set)
    #: the runner script the stage's test command starts, as read by :mod:`testfleet.adopt.runner`, and
    #: whether the job passes the runner's nightly switch (``--nightly``)
    runner: RunnerRead | None = None
    nightly_run: bool = False
    #: several runner label lists a matrix runs the stage's suite on (variants), and notes
    #: on how a computed runs-on was read
    runs_on_variants: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the runner's ``--hw NAME`` of the job, and the jobs that run the same suite for
    #: another hardware (one suite name under several backends)
    hw: str | None = None
    by_hw: dict[str, CIStage] = field(default_factory=dict)
    #: PR gates the job waits for (itself or through ``needs``): the labels a pull request
    #: must carry, and whether a draft pull request fails it
    pr_labels_required: set[str] = field(default_factory=set)
    draft_fails: bool = False
    #: the crons of the workflow that starts the job (through its callers); the events
    #: whose workflow trigger is filtered by changed paths (``pull_request: paths: [...]``)
    crons: list[str] = field(default_factory=list)
    event_paths: dict[str, list[str]] = field(default_factory=dict)
    #: where the job is defined (a reusable workflow's job for every caller): one job reached
    #: from two workflows is one job; other jobs for the same suite and hardware (another
    #: image, another workflow) are ``alternates``, adopted as variants
    definition: tuple[str, str] = ("", "")
    #: the job hands the runner a cadence chosen at run time (``--cadence ${{ ... }}``): a
    #: manual or called run may ask for any cadence
    cadence_input: bool = False
    alternates: list[CIStage] = field(default_factory=list)
    #: what the job computes at run time from data the repository keeps (adopt/lookup.py):
    #: how it was read, the partition script's rule, the test step's own timeout
    lookup_notes: list[str] = field(default_factory=list)
    partition_rule: PartitionRule | None = None
    test_timeout_minutes: float | None = None
    #: a ``runs-on`` no static reading settles: (the expression, why)
    runs_on_unresolved: tuple[str, str] | None = None
    #: what the job needs before its tests that adoption cannot carry (an install computed
    #: at run time, a wrapper script the tests run through): the stage is adopted dormant
    incomplete: list[str] = field(default_factory=list)


@dataclass
class CIRead:
    """Everything adoption takes from the existing workflows."""

    stages: dict[str, CIStage] = field(default_factory=dict)
    crons: dict[str, str] = field(default_factory=dict)  # cron -> workflow that runs tests
    ignored_crons: list[NotCarried] = field(default_factory=list)
    not_carried: list[NotCarried] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    test_workflows: list[str] = field(default_factory=list)
    test_commands: list[tuple[str, str, str]] = field(default_factory=list)  # (workflow, job, command)
    #: jobs that run test files by path (a matrix of ``test_case: test/.../test_x.py``,
    #: SGLang's nightly-test-npu.yml): the job as a stage, and the files its matrix names
    path_jobs: list[tuple[CIStage, list[str]]] = field(default_factory=list)
    #: every route to a test run, before jobs reached twice are merged: (workflow whose
    #: trigger starts it, its job id, the stage it runs or "" for a job that runs files by
    #: path, those files) -- what ``init --switch`` turns off
    job_runs: list[tuple[str, str, str, tuple[str, ...]]] = field(default_factory=list)
