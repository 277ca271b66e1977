"""What the CI engine's job needs around ``testfleet run``: container, setup, secrets,
fail-fast, parallelism and the job timeout.

Built from a stage's table by :func:`job_ci` (a variant of a stage can override
fields with :func:`dataclasses.replace`), carried by every job of a plan, and read
by the GitHub workflow and Buildkite pipeline emitters. It is kept apart from the
runner's per-file settings: those act inside ``testfleet run``, these act on the
machine the CI engine gives the job.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from testfleet.documents.vocabulary import MAX_JOB_TIMEOUT_MINUTES as MAX_JOB_TIMEOUT_MINUTES

if TYPE_CHECKING:  # the config (pydantic) is not needed to read a plan
    from collections.abc import Mapping

    from testfleet.config import StageConfig
    from testfleet.documents.plan import CheckoutDoc, ContainerDoc, JobCIDoc

#: Today's job timeout when a stage sets neither minutes nor a factor (GitHub's default).
DEFAULT_JOB_TIMEOUT_MINUTES = 360
#: A factor-sized timeout adds this for checkout, install, container pull and setup,
#: and is never below it: a 20-second shard still needs a machine to start.
JOB_OVERHEAD_MINUTES = 15


@dataclass(frozen=True)
class Container:
    image: str
    options: str = ""
    volumes: tuple[str, ...] = ()

    def to_json(self) -> ContainerDoc:
        return {"image": self.image, "options": self.options, "volumes": list(self.volumes)}


@dataclass(frozen=True)
class Checkout:
    """One more repository the job checks out (a stage's ``checkouts``)."""

    repository: str
    path: str
    ref: str = ""
    token_secret: str | None = None

    def to_json(self) -> CheckoutDoc:
        return {"repository": self.repository, "ref": self.ref, "path": self.path,
                "token_secret": self.token_secret}


@dataclass(frozen=True)
class JobCI:
    """A stage's CI job settings (see the module docstring).

    ``fail_fast`` applies within the stage only (None: fail fast unless the run's
    policy bypasses fast-fail); stages never cancel each other's running jobs.
    """

    container: Container | None = None
    setup: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    fail_fast: bool | None = None
    max_parallel: int | None = None
    timeout_minutes: int | None = None
    timeout_factor: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: the stage's file retries (None: the [runner] default); `testfleet run --plan` takes
    #: them from the plan, so a job retries exactly as planned
    max_attempts: int | None = None
    retry_wait: float | None = None
    #: the job's machine (ci_keys): setup-python's version ("" none; None: the default),
    #: setup-uv, extra repositories. Written to a plan only when set, so a plan (and its
    #: digest) without them is what it was before they existed.
    python: str | None = None
    uv: bool = False
    checkouts: tuple[Checkout, ...] = ()

    def to_json(self) -> JobCIDoc:
        out: JobCIDoc = {
            "container": self.container.to_json() if self.container else None,
            "setup": list(self.setup),
            "secrets": list(self.secrets),
            "fail_fast": self.fail_fast,
            "max_parallel": self.max_parallel,
            "timeout_minutes": self.timeout_minutes,
            "timeout_factor": self.timeout_factor,
            "max_attempts": self.max_attempts,
            "retry_wait": self.retry_wait,
        }
        if self.python is not None:
            out["python"] = self.python
        if self.uv:
            out["uv"] = True
        if self.checkouts:
            out["checkouts"] = [c.to_json() for c in self.checkouts]
        return out

    def fingerprint(self) -> str:
        """A short digest of what a generated workflow writes statically for the stage
        (everything but the timeout, which travels per job in the matrix), so a plan
        job can tell that the workflow is older than the configuration."""
        return static_fingerprint(self.to_json(), self.env)


#: Keys of a plan job's ``ci`` that a generated workflow does not write statically: the
#: timeout travels per job in the matrix, retries act inside ``testfleet run``. Changing
#: them never asks for the workflow to be regenerated.
PER_JOB_KEYS = ("timeout_minutes", "timeout_factor", "max_attempts", "retry_wait")


def static_fingerprint(ci: Mapping[str, Any], env: dict[str, str]) -> str:
    """The digest :meth:`JobCI.fingerprint` names; written out so the workflow's own
    guard script (plain Python reading plan.json) computes the same value."""
    body = {k: v for k, v in ci.items() if k not in PER_JOB_KEYS}
    body["env"] = dict(sorted(env.items()))
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def job_ci(stage: StageConfig) -> JobCI:
    """The CI job settings a stage's table declares."""
    c = stage.container
    container = Container(c.image, c.options, tuple(c.volumes)) if c is not None else None
    return JobCI(
        container=container,
        setup=tuple(stage.setup),
        secrets=tuple(stage.secrets),
        fail_fast=stage.fail_fast,
        max_parallel=stage.max_parallel,
        timeout_minutes=stage.job_timeout_minutes,
        timeout_factor=stage.job_timeout_factor,
        env=dict(stage.env),
        max_attempts=stage.max_attempts,
        retry_wait=stage.retry_wait,
        python=stage.python,
        uv=stage.uv,
        checkouts=tuple(Checkout(c.repository, c.path, c.ref, c.token_secret)
                        for c in stage.checkouts),
    )


def job_timeout(ci: JobCI, estimate_seconds: float) -> int:
    """The CI job's timeout in whole minutes for a shard estimated at ``estimate_seconds``.

    Fixed minutes win; a factor scales the estimate and adds the start-up overhead;
    neither keeps the engine's usual 360 minutes. Always within GitHub's 1..4320.
    """
    if ci.timeout_minutes is not None:
        minutes = ci.timeout_minutes
    elif ci.timeout_factor is not None:
        minutes = math.ceil(estimate_seconds * ci.timeout_factor / 60) + JOB_OVERHEAD_MINUTES
    else:
        minutes = DEFAULT_JOB_TIMEOUT_MINUTES
    return max(1, min(MAX_JOB_TIMEOUT_MINUTES, minutes))
