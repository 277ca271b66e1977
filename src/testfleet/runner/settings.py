"""Resolve a stage's execution settings from the config: stage overrides, runner defaults.

Pure: a :class:`~testfleet.config.Config` in, a :class:`StageSettings` out, so the rules
(``max(floor, factor x estimate)``, stage keys beat ``[runner]`` keys) are unit-tested
without running anything.
"""

from __future__ import annotations

from collections.abc import Mapping

from testfleet.config import Config, StageConfig
from testfleet.errors import UsageError
from testfleet.runner.model import Command, RunOptions, StageSettings


def stage_settings(
    config: Config,
    stage: str,
    *,
    backend: str | None = None,
    command: Command | None = None,
    env: Mapping[str, str] | None = None,
    variant: str = "",
) -> StageSettings:
    """The settings for ``stage`` (as its ``variant`` overrides them); a plan job's
    ``backend``/``command``/``env`` win if given. A variant's settings name the lane
    ``<stage>.<variant>``: its results and durations are recorded under that key."""
    spec = _spec(config, stage, variant)
    runner = config.runner
    return StageSettings(
        stage=f"{stage}.{variant}" if variant else stage,
        backend=backend or spec.backend,
        command=command or spec.command,
        timeout_floor=spec.timeout_floor if spec.timeout_floor is not None else runner.timeout_floor,
        timeout_factor=(
            spec.timeout_factor if spec.timeout_factor is not None else runner.timeout_factor
        ),
        grace_seconds=spec.grace_seconds if spec.grace_seconds is not None else runner.grace_seconds,
        env=dict(spec.env if env is None else env),
        file_timeout=spec.file_timeout,
        retry_wait=spec.retry_wait if spec.retry_wait is not None else runner.retry_wait,
        retry_timeout_factor=(spec.retry_timeout_factor if spec.retry_timeout_factor is not None
                              else runner.retry_timeout_factor),
        extra_args=tuple(spec.extra_args),
        batch=spec.batch,
        batch_max_files=spec.batch_max_files,
        batch_max_seconds=spec.batch_max_seconds,
    )


def _spec(config: Config, stage: str, variant: str) -> StageConfig:
    spec = config.stages.get(stage)
    if spec is None:
        valid = ", ".join(sorted(config.stages)) or "(none configured)"
        raise UsageError(f"unknown stage {stage!r}; valid: {valid}")
    if variant:
        if variant not in spec.variants:
            valid = ", ".join(sorted(spec.variants)) or "(it has none)"
            raise UsageError(f"stage {stage!r} has no variant {variant!r}; valid: {valid}")
        return spec.with_variant(variant)
    return spec


def run_options(
    config: Config,
    *,
    max_attempts: int | None = None,
    continue_on_error: bool = False,
    bypass_fastfail: bool = False,
    stage: str | None = None,
    variant: str = "",
) -> RunOptions:
    """Attempts and fast-fail from the command line and policy, patterns from ``[runner]``;
    attempts: the command line, else the stage's ``max_attempts``, else ``[runner]``'s."""
    runner = config.runner
    spec = _spec(config, stage, variant) if stage is not None and stage in config.stages else None
    default = spec.max_attempts if spec is not None and spec.max_attempts is not None \
        else runner.max_attempts
    attempts = default if max_attempts is None else max_attempts
    if attempts < 1:
        raise UsageError(f"--max-attempts must be at least 1 (got {attempts})")
    backend = config.backend_specs().get(spec.backend) if spec is not None else None
    return RunOptions(
        max_attempts=attempts,
        fast_fail=not (continue_on_error or bypass_fastfail),
        retriable_patterns=tuple(runner.retriable_patterns),
        fatal_patterns=tuple(runner.fatal_patterns),
        infra_patterns=tuple(backend.infra_patterns) if backend is not None else (),
        infra_defaults=backend.infra_defaults if backend is not None else True,
        config_table=f"stages.{stage}" + (f".variants.{variant}" if variant else "")
        if spec is not None else "",
    )
