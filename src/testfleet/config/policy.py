"""``[policy]``: how triggers resolve to a policy (cadences, scope labels, schedules)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from testfleet import globs
from testfleet.config.base import _check_pr_label, _Strict


class CadenceConfig(_Strict):
    """How broad a run is: which labels it includes and what it is allowed to write."""

    include: Literal["all", "none"] = "none"
    exclude_labels: list[str] = Field(default_factory=list)
    admit_nightly: bool = False
    bypass_fastfail: bool = False
    write_baseline: bool = False
    rank: int = 0
    # "exact": a cadence that admits nightly=True registrations runs only those (and no
    # nightly=False ones), as projects with separate per-commit and nightly suites do.
    nightly_split: Literal["mixed", "exact"] = "mixed"


class ScopeLabelConfig(_Strict):
    """A PR label that widens scope (``run-ci-all``) without changing cadence."""

    exclude_labels: list[str] = Field(default_factory=list)
    rank: int = 0


def _default_cadences() -> dict[str, CadenceConfig]:
    return {
        "regular": CadenceConfig(),
        "nightly": CadenceConfig(
            include="all", exclude_labels=["long", "ft-long"], admit_nightly=True,
            bypass_fastfail=True, write_baseline=True, rank=2,
        ),
        "weekly": CadenceConfig(
            include="all", admit_nightly=True, bypass_fastfail=True, write_baseline=True, rank=3,
        ),
        "release": CadenceConfig(
            include="all", admit_nightly=True, bypass_fastfail=True, write_baseline=False, rank=3,
        ),
    }


def _default_scopes() -> dict[str, ScopeLabelConfig]:
    return {
        "run-ci-all": ScopeLabelConfig(rank=4),
        "run-ci-image": ScopeLabelConfig(exclude_labels=["long", "ft-short", "ft-long"], rank=1),
    }


class PolicyConfig(_Strict):
    """How triggers resolve to a policy; every name and set here is the project's to change."""

    label_prefix: str = "run-ci-"
    cadences: dict[str, CadenceConfig] = Field(default_factory=_default_cadences)
    scope_labels: dict[str, ScopeLabelConfig] = Field(default_factory=_default_scopes)
    nightly_label: str = "nightly"
    bypass_label: str = "bypass-fastfail"
    schedules: dict[str, str] = Field(default_factory=dict)
    authorize_labels: list[str] | None = None
    no_impact: Annotated[list[str], AfterValidator(globs.checked)] = Field(
        default_factory=lambda: ["docs/**", "*.md"])
    # Stages and triggers (#12): a PR label every pull request needs before the stages in
    # its scope run (GPU stages by default), and what a draft pull request runs.
    required_label: str | None = None
    required_label_scope: Literal["gpu", "all"] = "gpu"
    drafts: Literal["run", "skip-gpu", "skip"] = "run"

    @field_validator("required_label")
    @classmethod
    def _required_label(cls, v: str | None) -> str | None:
        if v is not None:
            _check_pr_label(v)
        return v

    @model_validator(mode="after")
    def _known_cadences(self) -> PolicyConfig:
        if "regular" not in self.cadences:
            raise ValueError("policy.cadences must define 'regular'")
        for cron, cadence in self.schedules.items():
            if cadence not in self.cadences:
                raise ValueError(
                    f"schedule {cron!r} maps to unknown cadence {cadence!r}; "
                    f"valid: {', '.join(sorted(self.cadences))}"
                )
            _check_cron(cron)
        return self


def _check_cron(cron: str) -> None:
    """A cron that passes here is written into the workflow's ``on.schedule``; GitHub
    rejects a bad one only when the workflow is pushed (or silently never fires it), so
    every field is checked by a maintained parser (cronsim) instead of counting fields."""
    if len(cron.split()) != 5:
        raise ValueError(f"schedule {cron!r} is not a 5-field cron expression")
    from datetime import datetime

    from cronsim import CronSim, CronSimError  # lazy: only configs with schedules pay

    try:
        CronSim(cron, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"schedule {cron!r} is not a valid cron expression: {exc}") from None
