"""The smaller sections: durations, runner, gate, check, flaky, results, ci and breaker."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from testfleet import globs
from testfleet.ci_keys import _SECRET_NAME, _ci_text
from testfleet.config.base import RegexList, _Strict
from testfleet.config.gate_keys import validate_constraint, validate_steps

DEFAULT_RETRIABLE = [
    r"AssertionError.*(accuracy|score|latency|throughput|loss|reward|perplexity|tolerance)",
    r"(accuracy|score|latency|throughput).*(below|above|exceed|lower|higher|than)",
    r"Timed out waiting for (server|engine)",
    r"NCCL (error|timeout)",
    r"Connection (refused|reset)",
]
DEFAULT_FATAL = [
    r"\bSyntaxError\b",
    r"\bImportError\b",
    r"\bModuleNotFoundError\b",
    r"\bNameError\b",
    r"\bTypeError\b",
    r"\bAttributeError\b",
    r"(?i)out of memory",
    r"(?i)segmentation fault",
    r"(?i)core dumped",
]


class DurationsConfig(_Strict):
    """How measured history becomes a per-(file, stage) estimate."""

    statistic: Literal["median", "p90"] = "median"
    window: int = Field(default=10, ge=1, le=1000)
    min_samples: int = Field(default=1, ge=1)
    drift_factor: float = Field(default=2.0, gt=1)


class RunnerConfig(_Strict):
    """Defaults for executing a job; a stage may override the timeout and retry keys."""

    timeout_floor: float = Field(default=300.0, gt=0)
    timeout_factor: float = Field(default=3.0, gt=0, le=1000)
    grace_seconds: float = Field(default=30.0, ge=0)
    max_attempts: int = Field(default=1, ge=1, le=10)
    # Seconds between a failed attempt and its retry (devices settle, ports free up), and
    # the factor a retry's timeout is raised by (a retried file is often a slow one).
    retry_wait: float = Field(default=0.0, ge=0, le=3600)
    retry_timeout_factor: float = Field(default=1.0, ge=1, le=100)
    retriable_patterns: RegexList = Field(default_factory=lambda: list(DEFAULT_RETRIABLE))
    fatal_patterns: RegexList = Field(default_factory=lambda: list(DEFAULT_FATAL))


class GateDefault(_Strict):
    """What a ``register_ci_gate`` for a standard metric omits is filled from here.

    Validated by the same rules as a declaration, so a bad default is reported
    once, here, with its key path, instead of in every file that uses it.
    """

    steps: Any = None
    constraint: dict[str, Any] | None = None

    @field_validator("steps")
    @classmethod
    def _steps(cls, v: Any) -> Any:
        if v is not None:
            _, problem = validate_steps(v)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            _, problems = validate_constraint(v)
            if problems:
                raise ValueError("; ".join(problems))
        return v


class GateConfig(_Strict):
    """The metric gate: global enforcement switch, baseline window, environment identity."""

    enforce: bool = False
    window: int = Field(default=20, ge=1, le=10000)
    env_keys: list[str] = Field(default_factory=list)
    defaults: dict[str, GateDefault] = Field(default_factory=dict)

    @field_validator("env_keys")
    @classmethod
    def _env_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"{name!r} is not an environment variable name")
        if len(set(v)) != len(v):
            raise ValueError("env_keys lists a variable more than once")
        return v


class CheckConfig(_Strict):
    """Rules that keep disabled tests and dormant stages from being forgotten."""

    disabled_requires_reference: bool = False
    max_disabled_days: int | None = Field(default=None, ge=1)
    dormant_requires_reference: bool = False
    coverage_holes: Literal["off", "warning", "error"] = "warning"
    # A disabled reason's ``until YYYY-MM-DD`` that has passed (or is not a real date).
    disabled_expiry: Literal["off", "warning", "error"] = "warning"
    # Extra regular expressions that count as a tracking reference (e.g. Jira ``FLEET-\d+``).
    reference_patterns: RegexList = Field(default_factory=list)
    python_main_check: bool = True
    # suppressions (#12): glob of repo-relative paths -> finding codes silenced in those files
    per_file_ignores: Annotated[dict[str, list[str]], AfterValidator(globs.checked_keys)] = Field(
        default_factory=dict, alias="per-file-ignores")


# --- results: flaky detection, quarantine, links to CI runs (issue #14) ---------------


class FlakyConfig(_Strict):
    """``[tool.testfleet.flaky]``: how flakiness is judged per (file, stage) from history."""

    window: int = Field(default=30, ge=2, le=1000)  # newest final verdicts read
    threshold: float = Field(default=0.05, gt=0, le=1)  # runs with evidence / runs
    min_runs: int = Field(default=5, ge=1, le=1000)
    quarantine: bool = False  # a flaky file's plan fate is `quarantined`
    restore_after: int = Field(default=5, ge=1, le=1000)  # clean passes in a row lift it


class ResultsConfig(_Strict):
    """``[tool.testfleet.results]``: where a recorded CI run id links to."""

    run_url: str | None = None  # e.g. "https://ci.example.com/runs/{run_id}"
    github_repository: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    buildkite_pipeline: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

    @field_validator("run_url")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is not None and (not re.match(r"^https?://[^\s\"'<>]+$", v) or "{run_id}" not in v):
            raise ValueError("must be an http(s) URL without spaces or quotes that contains {run_id}")
        return v


class CIConfig(_Strict):
    """How the generated CI files install testfleet and where history lives (#11);
    ``testfleet init`` stores its ``--install`` / ``--database-secret`` flags here so a
    regenerated workflow keeps them."""

    install: str | None = None
    database_secret: str | None = None
    database_read_secret: str | None = None
    # a pull request's queue runners (#40): the database with a role limited to the queue
    # tables, so a pull request's code never holds the history's write credential
    queue_secret: str | None = None
    history: bool = True

    @field_validator("install")
    @classmethod
    def _install(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("install is empty (remove the key for the pinned default)")
        return v if v is None else _ci_text(v, "install command", multiline=True)

    @field_validator("database_secret", "database_read_secret", "queue_secret")
    @classmethod
    def _secret(cls, v: str | None) -> str | None:
        if v is not None and (not _SECRET_NAME.match(v) or v.upper().startswith("GITHUB_")):
            raise ValueError(f"{v[:60]!r} is not a secret name (letters, digits and '_', "
                             "not starting with a digit or GITHUB_)")
        return v


# --- the runner-class breaker (#41) --------------------------------------------------


class BreakerConfig(_Strict):
    """``[tool.testfleet.breaker]``: when an opted-in lane's breaker opens and closes (see
    testfleet.breaker). Counts are default-branch runs in a row; a breaker open longer
    than ``max_open_days`` fails ``testfleet check`` and asks for the tracked decision."""

    open_after: int = Field(default=2, ge=1, le=100)
    close_after: int = Field(default=2, ge=1, le=100)
    max_open_days: float = Field(default=7, gt=0, le=3650)


class BreakerOverride(_Strict):
    """``breaker = { open_after = 3 }`` on a stage or variant: opted in, with its own
    counts; a key it omits is the ``[breaker]`` section's."""

    open_after: int | None = Field(default=None, ge=1, le=100)
    close_after: int | None = Field(default=None, ge=1, le=100)
    max_open_days: float | None = Field(default=None, gt=0, le=3650)
