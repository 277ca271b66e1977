"""The root model (``Config``) and a loaded project (``Project``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from testfleet import globs
from testfleet.config.backends import BUILTIN_BACKENDS, BackendConfig, ImplicitDir, MarkerSignature
from testfleet.config.base import _NAME, MAX_NAME, _relative_path, _Strict, _unsafe_in_ci_path
from testfleet.config.policy import PolicyConfig
from testfleet.config.sections import (
    BreakerConfig,
    CheckConfig,
    CIConfig,
    DurationsConfig,
    FlakyConfig,
    GateConfig,
    ResultsConfig,
    RunnerConfig,
)
from testfleet.config.stages import StageConfig
from testfleet.failures.keys import patched_backend


class Config(_Strict):
    roots: list[str] = Field(default_factory=lambda: ["tests"], min_length=1)
    pattern: str = Field(default="test_*.py", min_length=1)
    exclude: list[str] = Field(default_factory=list)
    cache_dir: str = ".testfleet"
    database: str | None = None
    implicit: list[ImplicitDir] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    backends: dict[str, BackendConfig] = Field(default_factory=dict)
    stages: dict[str, StageConfig] = Field(default_factory=dict)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    durations: DurationsConfig = Field(default_factory=DurationsConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    check: CheckConfig = Field(default_factory=CheckConfig)
    # marker signatures (#12)
    markers: dict[str, MarkerSignature] = Field(default_factory=dict)
    # results (issue #14)
    flaky: FlakyConfig = Field(default_factory=FlakyConfig)
    results: ResultsConfig = Field(default_factory=ResultsConfig)
    ci: CIConfig = Field(default_factory=CIConfig)
    # the runner-class breaker (#41): its counts; a stage or variant opts in
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)

    @field_validator("roots")
    @classmethod
    def _roots(cls, v: list[str]) -> list[str]:
        return [_relative_path(r) for r in v]

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, v: list[str]) -> list[str]:
        # A pattern gitignore cannot read ("!") crashed discovery in every command.
        return globs.checked(v)

    @field_validator("cache_dir")
    @classmethod
    def _cache_dir(cls, v: str) -> str:
        # Caches are written here: never outside the project (a PR could set "/etc").
        # Normalised ("./tests/unit/" -> "tests/unit"): discovery compares paths with it.
        # The generated workflow hands it to actions/cache, whose ``path`` is a list of glob
        # patterns, one a line, and where GitHub evaluates ``${{ }}``: it must be a path there.
        import posixpath

        path = posixpath.normpath(_relative_path(v))
        what = _unsafe_in_ci_path(v, path)
        if what is not None:
            raise ValueError(f"{v[:60]!r} holds {what}; use a plain directory name (default '.testfleet')")
        return path

    @field_validator("labels", "stages", "backends")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not _NAME.match(name):
                raise ValueError(
                    f"name {name!r} must start with an ASCII letter or digit and use only "
                    "ASCII letters, digits, '.', '_' and '-'"
                )
            if len(name) > MAX_NAME:
                # Names become job ids and PR labels (GitHub allows 50 characters).
                raise ValueError(f"name {name[:40]!r}... is {len(name)} characters long; "
                                 f"at most {MAX_NAME}")
        return v

    def backend_specs(self) -> dict[str, BackendConfig]:
        specs = {name: BackendConfig(**raw) for name, raw in BUILTIN_BACKENDS.items()}
        specs.update({n: patched_backend(specs.get(n), b) for n, b in self.backends.items()})
        return specs

    def backend_names(self) -> set[str]:
        return set(BUILTIN_BACKENDS) | set(self.backends)

    def marker_signatures(self) -> dict[str, MarkerSignature]:
        """Each marker's signature, in one place: its own ``[markers.<marker>]`` table, else
        its backend's ``[backends.<name>.signature]``; ``"*"`` (every other marker) as given."""
        out, specs = dict(self.markers), self.backend_specs()
        for spec in (specs[name] for name in self.backends):
            if spec.signature is not None:
                for marker in spec.markers:
                    out.setdefault(marker, spec.signature)
        return out

    def marker_backends(self) -> dict[str, str]:
        """Marker function name -> backend, including aliases such as ``register_amd_ci``."""
        out: dict[str, str] = {}
        for backend, spec in self.backend_specs().items():
            for marker in spec.markers:
                out[marker] = backend
        return out


@dataclass(frozen=True)
class Project:
    """A loaded configuration and the directory it governs (the repository root)."""

    root: Path
    config_path: Path
    config: Config
    raw_config_text: str

    def relpath(self, path: Path) -> str:
        return path.resolve().relative_to(self.root.resolve()).as_posix()
