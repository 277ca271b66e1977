"""Which stage lanes share one job of a generated GitHub workflow.

A job's container, secrets, setup, env and fail-fast are keys GitHub reads before any
matrix value exists, so lanes with different settings need jobs of their own. Lanes with
the same settings do not: SGLang's 259 lanes have 69 distinct settings, and one job per
lane made its generated CI 9,131 lines long. A group of lanes is one job whose matrix is
the plan's jobs of all of them (the plan's ``stages`` output keyed by the group's first
lane), and whose ``runs-on`` picks each lane's runners from a map written in the file
from the configuration: the plan says which lane a matrix entry belongs to, never which
runners it gets.

Lanes are grouped only when that changes nothing a stage is promised:

* the same CI settings (:meth:`~testfleet.planning.jobci.JobCI.fingerprint`: container,
  setup, secrets, env, Python, uv, checkouts, fail-fast, max-parallel), the same stages
  waited for, the same workflow (a pull request's self-hosted lanes run only in the
  trusted one), and shard mode (a queue lane's job is its own);
* the same stages wait for them (a stage that waits for one lane of a job waits for all
  of them, so only lanes it waits for anyway may share one);
* and a failure in one lane cancels no job of another: either the lanes' ``fail_fast`` is
  false, or each lane runs exactly one job (``shards`` fixed at 1, or no sharding settings
  at all), so there is nothing of its own left to cancel and the group's job writes
  ``fail-fast: false``. ``max_parallel`` is per job, so lanes that set it stay alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from testfleet.config import Config
from testfleet.integrations.github_options import workflow_needs
from testfleet.planning.jobci import job_ci
from testfleet.planning.lanes import Lane, all_lanes

#: The env key of a group's job that names its lanes (the plan job reads it back).
LANES_ENV = "TESTFLEET_LANES"


@dataclass(frozen=True)
class JobGroup:
    """Lanes that share one job; ``key`` (the first lane) names the job's entry in the
    plan's ``stages`` output. ``one_job_each``: the lanes would fail fast but each runs
    one job, so the group's job is written ``fail-fast: false``."""

    key: str
    lanes: tuple[str, ...]
    one_job_each: bool = False


def runs_one_job(lane: Lane) -> bool:
    """Whether the lane's configuration makes every plan give it exactly one job."""
    stage = lane.config
    return stage.shards in (None, 1) and stage.target_minutes is None and \
        stage.max_shards is None and (stage.execution or "shards") == "shards"


def _class(lane: Lane) -> str | None:
    """How the lane may share a job: ``"false"`` (it never fails fast), ``"one"`` (each of
    its plans has one job), or None (alone)."""
    ci = job_ci(lane.config)
    if (lane.config.execution or "shards") != "shards" or ci.max_parallel:
        return None
    if ci.fail_fast is False:
        return "false"
    return "one" if runs_one_job(lane) else None


def job_groups(config: Config, order: Iterable[str], excluded: Iterable[str] = ()) -> list[JobGroup]:
    """The jobs for the lanes in ``order`` (their written order; a group takes the place of
    its first lane). ``excluded``: lanes this workflow skips on ``pull_request``."""
    lanes = all_lanes(config)
    skip = set(excluded)
    waiting: dict[str, set[str]] = {}
    for lane in lanes.values():
        for need in workflow_needs(lane.config):
            waiting.setdefault(need, set()).add(lane.stage)
    members: dict[object, list[str]] = {}
    classes: dict[object, str | None] = {}
    for key in order:
        lane = lanes[key]
        cls = _class(lane)
        sig: object = key if cls is None else (
            cls, job_ci(lane.config).fingerprint(), tuple(sorted(workflow_needs(lane.config))),
            tuple(sorted(waiting.get(lane.stage, ()))), key in skip)
        members.setdefault(sig, []).append(key)
        classes[sig] = cls
    return [JobGroup(keys[0], tuple(keys), classes[sig] == "one" and len(keys) > 1)
            for sig, keys in members.items()]
