"""A stage (``[stages.<name>]``): one CI job class, its container, probe and variants."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from testfleet.ci_keys import _SECRET_NAME, StageJobKeys, VariantJobKeys, _ci_text, _control_char
from testfleet.config.base import _NAME, MAX_NAME, _check_pr_label, _relative_path, _Strict
from testfleet.config.sections import BreakerOverride
from testfleet.config.triggers import StageTriggers, VariantTriggers
from testfleet.documents.vocabulary import MAX_EST_TIME

# pytest-xdist's worker count (-n 2, -n2, -nauto, --numprocesses[=N]): it cannot share a
# batch session, whose per-file timing needs files run one after another.
_XDIST_WORKERS = re.compile(r"-n\S*|--numprocesses(=.*)?")


# -- per-stage CI job settings (#11) ------------------------------------------------
# These land verbatim in generated CI files (GitHub YAML, Buildkite pipeline), where
# GitHub would evaluate a ``${{ }}`` as an expression: refused at load time, with
# control characters, so a value is only ever data in the file it lands in.


class ContainerConfig(_Strict):
    """A stage's job container: the image and what ``docker create`` needs for GPUs
    and caches (``options = "--gpus all --ipc=host --shm-size=32g"``, volumes
    ``"/models:/models:ro"``)."""

    image: str = Field(min_length=1)
    options: str = ""
    volumes: list[str] = Field(default_factory=list)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        _ci_text(v, "container image")
        if any(c.isspace() for c in v):
            raise ValueError(f"container image {v[:60]!r} contains whitespace")
        return v

    @field_validator("options")
    @classmethod
    def _options(cls, v: str) -> str:
        return _ci_text(v, "container options")

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: list[str]) -> list[str]:
        for volume in v:
            _ci_text(volume, "volume")
            if not volume.strip() or any(c.isspace() for c in volume):
                raise ValueError(f"volume {volume!r} must be 'source:target[:mode]' without spaces")
        return v


class ProbeConfig(_Strict):
    """A dormant stage's probe (results, #14): a few of its files, run on its runners on
    one cadence, never blocking, to tell when the stage can be restored."""

    files: list[str] = Field(default_factory=list)  # default: the `shortest` N files
    shortest: int = Field(default=2, ge=1, le=100)
    cadence: str = "nightly"
    restore_after: int = Field(default=3, ge=1, le=1000)  # clean probes in a row

    @field_validator("files")
    @classmethod
    def _files(cls, v: list[str]) -> list[str]:
        return [_relative_path(f) for f in v]


def _image_or_table(schema: dict[str, Any]) -> None:
    """The published JSON Schema accepts what the config does: an image string too."""
    schema.setdefault("anyOf", []).insert(0, {"type": "string", "minLength": 1})


# -- the lane validator: a stage and each of its variants are lanes, and a value is refused
# on a variant exactly as on its stage, by the same functions -------------------------


def lane_container(v: Any) -> Any:
    """``container = "rocm/x:1"``: just the image, made a table."""
    return {"image": v} if isinstance(v, str) else v


def lane_breaker(v: Any) -> Any:
    """``breaker = true`` or a table of counts (#41): "yes" is not a yes."""
    if v is not None and not isinstance(v, (bool, dict)) and not hasattr(v, "model_fields"):
        raise ValueError(f"want true, false or a table (open_after, close_after, "
                         f"max_open_days), got {str(v)[:40]!r}")
    return v


def lane_one_line(v: Any) -> Any:
    """#17: runner labels and container values land in CI files one per line."""
    for item in v if isinstance(v, list) else [v]:
        if isinstance(item, str) and _control_char(item) is not None:
            raise ValueError(f"{item!r} holds a newline or control character")
    return v


def lane_env(v: dict[str, str]) -> dict[str, str]:
    for name, value in v.items():
        if not _SECRET_NAME.match(name):  # also an empty name, '=' or NUL: Popen crashed
            raise ValueError(f"{name[:60]!r} is not an environment variable name")
        _ci_text(value, f"env.{name}", multiline=True)
    return v


def lane_setup(v: list[str]) -> list[str]:
    for command in v:
        if not command.strip():
            raise ValueError("a setup command is empty")
        _ci_text(command, "setup command", multiline=True)
    return v


def lane_secrets(v: list[str]) -> list[str]:
    for name in v:
        if not _SECRET_NAME.match(name) or name.upper().startswith("GITHUB_"):
            raise ValueError(f"{name[:60]!r} is not a secret name (letters, digits and '_', "
                             "not starting with a digit or GITHUB_)")
    if len(set(v)) != len(v):
        raise ValueError("secrets lists a name more than once")
    return v


def lane_extra_args(v: list[str]) -> list[str]:
    for arg in v:
        if "\x00" in arg:
            raise ValueError(f"extra argument {arg!r} contains a NUL character")
    return v


def lane_reason(v: str | None) -> str | None:
    if v is not None and not v.strip():
        raise ValueError("a dormant stage needs a non-empty reason (or remove the key)")
    return v


def lane_not_bool(v: Any) -> Any:
    if isinstance(v, bool):  # TOML true would otherwise be taken as 1
        raise ValueError(f"must be a whole number, not {str(v).lower()}")
    return v


def lane_one_job_timeout(minutes: int | None, factor: float | None) -> None:
    if minutes is not None and factor is not None:
        raise ValueError("use either 'job_timeout_minutes' or 'job_timeout_factor', not both")


# -- stage variants (#12): one suite on several runner classes or images ---------------


class VariantConfig(VariantJobKeys, VariantTriggers, _Strict):
    """``[tool.testfleet.stages.<stage>.variants.<name>]``: the stage's suite once more, on
    other runners or another image. Every key is optional and overrides the stage's own;
    ``env`` is merged over the stage's. A variant is planned as its own jobs (a *lane*,
    keyed ``<stage>.<name>``) with its own fates, counts and duration history.

    ``backend`` other than the stage's is the explicit opt-in for one suite name under two
    backends: the stage's registrations of that backend run on this variant only.
    """

    backend: str | None = None
    runs_on: list[str] | None = Field(default=None, min_length=1)
    container: ContainerConfig | None = Field(default=None, json_schema_extra=_image_or_table)
    env: dict[str, str] = Field(default_factory=dict)
    setup: list[str] | None = None
    secrets: list[str] | None = None
    fail_fast: bool | None = None
    max_parallel: int | None = Field(default=None, ge=1, le=256)
    job_timeout_minutes: int | None = Field(default=None, ge=1, le=4320)
    job_timeout_factor: float | None = Field(default=None, gt=0, le=100)
    file_timeout: float | None = Field(default=None, gt=0, le=MAX_EST_TIME)
    timeout_floor: float | None = Field(default=None, gt=0)
    timeout_factor: float | None = Field(default=None, gt=0, le=1000)
    max_attempts: int | None = Field(default=None, ge=1, le=10)
    extra_args: list[str] | None = None
    disabled: str | None = None
    # Elastic execution (#40): the stage's keys, per variant.
    execution: Literal["shards", "queue"] | None = None
    queue_lease_seconds: float | None = Field(default=None, ge=5, le=3600)
    # The runner-class breaker (#41): this variant's lane opts in (or out: false).
    breaker: bool | BreakerOverride | None = None

    @field_validator("breaker", mode="before")
    @classmethod
    def _breaker(cls, v: Any) -> Any:
        return lane_breaker(v)

    # The lane validator, so a value is refused here exactly as it is on the stage.
    @field_validator("container", mode="before")
    @classmethod
    def _container(cls, v: Any) -> Any:
        return lane_container(v)

    @field_validator("runs_on", "container")
    @classmethod
    def _one_line(cls, v: Any) -> Any:
        return v if v is None else lane_one_line(v)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        return lane_env(v)

    @field_validator("setup")
    @classmethod
    def _setup(cls, v: list[str] | None) -> list[str] | None:
        return v if v is None else lane_setup(v)

    @field_validator("secrets")
    @classmethod
    def _secrets(cls, v: list[str] | None) -> list[str] | None:
        return v if v is None else lane_secrets(v)

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, v: list[str] | None) -> list[str] | None:
        return v if v is None else lane_extra_args(v)

    @field_validator("disabled")
    @classmethod
    def _reason(cls, v: str | None) -> str | None:
        return lane_reason(v)

    @field_validator("max_parallel", mode="before")
    @classmethod
    def _not_bool(cls, v: Any) -> Any:
        return lane_not_bool(v)

    @model_validator(mode="after")
    def _one_timeout(self) -> VariantConfig:
        lane_one_job_timeout(self.job_timeout_minutes, self.job_timeout_factor)
        return self


class StageConfig(StageJobKeys, StageTriggers, _Strict):
    """One CI job class. A stage with ``disabled`` is dormant: kept, never scheduled."""

    backend: str
    runs_on: list[str] = Field(default_factory=lambda: ["ubuntu-latest"], min_length=1)
    # or just the image, container = "rocm/x:1" (made a table by _container below)
    container: ContainerConfig | None = Field(default=None, json_schema_extra=_image_or_table)
    # "pytest", "python", "auto" (per file, from its syntax tree) or a template such as
    # "python3 {file} -f"; see testfleet.commands and docs/stages.md.
    command: str = "pytest"
    shards: int | None = Field(default=None, ge=1, le=256)
    target_minutes: float | None = Field(default=None, gt=0, le=MAX_EST_TIME / 60)
    max_shards: int | None = Field(default=None, ge=1, le=256)
    timeout_floor: float | None = Field(default=None, gt=0)
    timeout_factor: float | None = Field(default=None, gt=0, le=1000)
    grace_seconds: float | None = Field(default=None, ge=0)
    trusted_only: bool = False
    disabled: str | None = None
    needs: list[str] = Field(default_factory=list)
    prune: bool | None = None
    env: dict[str, str] = Field(default_factory=dict)
    # Stages and triggers (#12): when the stage runs at all (cadences, PR label gates) and
    # how the runner executes its files (fixed per-file timeout, retries, extra arguments).
    cadences: list[str] | None = Field(default=None, min_length=1)
    requires_labels: list[str] = Field(default_factory=list)
    file_timeout: float | None = Field(default=None, gt=0, le=MAX_EST_TIME)
    max_attempts: int | None = Field(default=None, ge=1, le=10)
    retry_wait: float | None = Field(default=None, ge=0, le=3600)
    retry_timeout_factor: float | None = Field(default=None, ge=1, le=100)
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("command")
    @classmethod
    def _command(cls, v: str) -> str:
        from testfleet.commands import command_problem

        problem = command_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, v: list[str]) -> list[str]:
        return lane_extra_args(v)
    # Results (#14): a dormant stage's probe job.
    probe: ProbeConfig | None = None

    @field_validator("requires_labels")
    @classmethod
    def _gate_labels(cls, v: list[str]) -> list[str]:
        for label in v:
            _check_pr_label(label)
        return v

    # CI job settings (#11), see testfleet.planning.jobci: what the CI engine's job needs
    # around 'testfleet run' (the runner's own per-file settings are above).
    setup: list[str] = Field(default_factory=list)
    secrets: list[str] = Field(default_factory=list)
    fail_fast: bool | None = None
    max_parallel: int | None = Field(default=None, ge=1, le=256)
    job_timeout_minutes: int | None = Field(default=None, ge=1, le=4320)
    job_timeout_factor: float | None = Field(default=None, gt=0, le=100)

    @field_validator("container", mode="before")
    @classmethod
    def _container(cls, v: Any) -> Any:
        return lane_container(v)

    @field_validator("setup")
    @classmethod
    def _setup(cls, v: list[str]) -> list[str]:
        return lane_setup(v)

    @field_validator("secrets")
    @classmethod
    def _secrets(cls, v: list[str]) -> list[str]:
        return lane_secrets(v)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        return lane_env(v)

    @property
    def container_image(self) -> str | None:
        """The image alone (what a plan job's ``container`` field holds)."""
        return self.container.image if self.container is not None else None

    @field_validator("disabled")
    @classmethod
    def _reason(cls, v: str | None) -> str | None:
        return lane_reason(v)

    # -- hardening (#17): values that pass here must not crash `run` or inject lines ----
    # (env names and values: `_env` above refuses '=', empty names, NUL and newlines)
    @field_validator("runs_on", "container")
    @classmethod
    def _one_line(cls, v: Any) -> Any:
        return lane_one_line(v)

    @field_validator("shards", "max_shards", mode="before")
    @classmethod
    def _not_bool(cls, v: Any) -> Any:
        return lane_not_bool(v)

    @model_validator(mode="after")
    def _shard_mode(self) -> StageConfig:
        if self.shards is not None and (self.target_minutes is not None or self.max_shards is not None):
            raise ValueError("use either 'shards' or 'target_minutes'/'max_shards', not both")
        lane_one_job_timeout(self.job_timeout_minutes, self.job_timeout_factor)
        return self

    @property
    def dormant(self) -> bool:
        return self.disabled is not None

    # Session mode (#15): run a job's pytest files in one pytest process (or a few, cut by
    # file count or summed estimates) instead of one process per file; see runner.session
    # and docs/runner.md for when a fresh process per file is needed instead.
    batch: bool = False
    batch_max_files: int | None = Field(default=None, ge=1, le=10000)
    batch_max_seconds: float | None = Field(default=None, gt=0, le=MAX_EST_TIME)

    @model_validator(mode="after")
    def _batch_needs_pytest(self) -> StageConfig:
        if not self.batch:
            if self.batch_max_files is not None or self.batch_max_seconds is not None:
                raise ValueError("'batch_max_files'/'batch_max_seconds' size the sessions of "
                                 "a batch stage; set 'batch = true' too (or remove them)")
            return self
        if self.command not in ("pytest", "auto"):
            raise ValueError(f"'batch = true' runs files in one pytest session; it needs "
                             f"command = \"pytest\" or \"auto\" (got {self.command!r})")
        args = [*self.extra_args, *(a for v in self.variants.values() for a in v.extra_args or ())]
        parallel = next((a for a in args if _XDIST_WORKERS.fullmatch(a)), None)
        if parallel is not None:
            raise ValueError(f"'batch = true' times and blames files by the order their tests "
                             f"run in; pytest-xdist ({parallel!r} in extra_args) interleaves "
                             "files across workers: use one or the other")
        return self

    # Elastic execution (#40): "queue" lets any number of runners pull the lane's files
    # from one PostgreSQL queue under leases (see testfleet.queue); the shard count is then
    # a capacity. A runner heartbeats every third of the lease; a file whose last attempt
    # failed on an infrastructure signature is retried on another runner this many times.
    execution: Literal["shards", "queue"] = "shards"
    queue_lease_seconds: float = Field(default=120.0, ge=5, le=3600)
    queue_infra_retries: int = Field(default=1, ge=0, le=3)

    # The runner-class breaker (#41): the lane (each variant's, unless it says false) opts
    # in to be held back while its runners fail the same infrastructure way.
    breaker: bool | BreakerOverride | None = None

    @field_validator("breaker", mode="before")
    @classmethod
    def _breaker(cls, v: Any) -> Any:
        return lane_breaker(v)

    # Stage variants (#12): the same suite on other runner classes or images.
    variants: dict[str, VariantConfig] = Field(default_factory=dict)

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: dict[str, VariantConfig]) -> dict[str, VariantConfig]:
        for name in v:
            if not _NAME.match(name) or len(name) > MAX_NAME:
                raise ValueError(f"variant name {name[:40]!r} must start with an ASCII letter or "
                                 "digit and use only ASCII letters, digits, '.', '_' and '-' "
                                 f"(at most {MAX_NAME} characters)")
        return v

    @model_validator(mode="after")
    def _probe_without_variants(self) -> StageConfig:
        if self.probe is not None and self.variants:
            raise ValueError("'probe' is not supported on a stage with variants (a probe runs "
                             "on the stage's own runners, which no variant job has)")
        return self

    def accepted_backends(self) -> set[str]:
        """The backends whose registrations this stage takes: its lanes' (its own without
        variants; a variant without ``backend`` has the stage's). A variant of another
        backend is the explicit opt-in for one suite name under two backends."""
        if not self.variants:
            return {self.backend}
        return {v.backend or self.backend for v in self.variants.values()}

    def with_variant(self, name: str) -> StageConfig:
        """The stage's table as its variant ``name`` runs it: the variant's keys over the
        stage's (``env`` merged), no variants of its own. Either job timeout key of the
        variant replaces both of the stage's, so the pair never conflicts."""
        variant = self.variants[name]
        update: dict[str, Any] = {k: getattr(variant, k) for k in variant.model_fields_set
                                  if k not in ("env", "backend")}
        if "job_timeout_minutes" in update or "job_timeout_factor" in update:
            update.setdefault("job_timeout_minutes", None)
            update.setdefault("job_timeout_factor", None)
        if variant.backend is not None:
            update["backend"] = variant.backend
        if self.disabled is not None:
            update["disabled"] = self.disabled  # a dormant stage keeps every variant dormant
        update["env"] = {**self.env, **variant.env}
        update["variants"] = {}
        return self.model_copy(update=update)

    @model_validator(mode="after")
    def _probe_needs_dormant(self) -> StageConfig:
        if self.probe is not None and self.disabled is None and self.breaker in (None, False):
            raise ValueError("'probe' applies to a dormant stage (one with 'disabled') or to a "
                             "stage with 'breaker' (the probe its open breaker runs); an active "
                             "stage runs its files anyway")
        return self
