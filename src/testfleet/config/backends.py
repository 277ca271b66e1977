"""Hardware families: the built-in backends, a project's own (``[backends.<name>]``), the
directories registered without a marker, and how a project's markers are called
(``[markers.<marker>]``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from testfleet.config.base import _relative_path, _Strict
from testfleet.config.triggers import MarkerRoles
from testfleet.documents.vocabulary import MAX_EST_TIME
from testfleet.failures.keys import BackendIncidentKeys

BUILTIN_BACKENDS: dict[str, dict[str, Any]] = {
    "cpu": {"markers": ["register_cpu_ci"], "labels_required": False, "gpu": False},
    "cuda": {"markers": ["register_cuda_ci"], "labels_required": True, "gpu": True},
    "rocm": {"markers": ["register_rocm_ci", "register_amd_ci"], "labels_required": True, "gpu": True},
}

GATE_MARKER = "register_ci_gate"

GATE_MARKER = "register_ci_gate"


class ImplicitDir(_Strict):
    """A directory whose files are registered without a marker (e.g. fast CPU tests)."""

    path: str
    backend: str = "cpu"
    suite: str
    est_time: float = Field(gt=0, le=MAX_EST_TIME)
    labels: list[str] = Field(default_factory=list)
    pattern: str | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        return _relative_path(v)


# The docstring below is the published JSON Schema's description of [backends.<name>]
# (schemas/testfleet-config.schema.json), so it keeps its words; the incident keys it
# names are defined in testfleet.failures.keys.
class BackendConfig(BackendIncidentKeys, _Strict):
    """An extra hardware family (npu, xpu, ...), or keys over a built-in one's (the keys
    a built-in's table omits keep the built-in values; incidents' keys: incidents/config)."""

    markers: list[str] = Field(default_factory=list)  # required unless built in
    labels_required: bool = True
    gpu: bool = True
    # #12: how this backend's markers are called, when they take other arguments than the
    # built-in ones (the same table as [markers.<marker>], which wins for its own marker)
    signature: MarkerSignature | None = None

    @field_validator("markers")
    @classmethod
    def _identifiers(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name.isidentifier():
                raise ValueError(f"marker name {name!r} is not a Python identifier")
        return v


# --- marker signatures (#12): a project's own marker keywords, described in config ---

# Keyword types a marker signature may declare; ``None`` is accepted for each
# (a Python default of None means "not given").
KEYWORD_TYPES = ("str", "int", "number", "bool", "list[str]")
# The keywords every registration marker understands; a signature may reorder the
# positional ones and add its own.
BASE_KEYWORDS = ("est_time", "suite", "labels", "nightly", "disabled")


class MarkerSignature(MarkerRoles, _Strict):
    """How a project's marker is called: ``[tool.testfleet.markers.<marker>]``
    (``"*"`` applies to every registration marker without a table of its own)."""

    positional: list[str] = Field(default_factory=lambda: ["est_time", "suite"])
    keywords: dict[str, Literal["str", "int", "number", "bool", "list[str]"]] = Field(default_factory=dict)
    suite_template: str | None = None
    ignore: list[str] = Field(default_factory=list)
    allow_zero_est_time: bool = False
    allow_empty_suite: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> MarkerSignature:
        import string

        known = set(BASE_KEYWORDS) | set(self.keywords) | set(self.ignore)
        for name in [*self.keywords, *self.ignore]:
            if not name.isidentifier():
                raise ValueError(f"keyword {name!r} is not a Python identifier")
        clash = sorted(set(BASE_KEYWORDS) & (set(self.keywords) | set(self.ignore)))
        if clash:
            raise ValueError(f"{', '.join(map(repr, clash))} is a built-in keyword; declare only extra ones")
        both = sorted(set(self.keywords) & set(self.ignore))
        if both:
            raise ValueError(f"{', '.join(map(repr, both))} is both declared and ignored")
        for name in self.positional:
            if name not in known or name in self.ignore:
                raise ValueError(f"positional {name!r} is not a keyword of this marker; "
                                 f"valid: {', '.join(sorted(known - set(self.ignore)))}")
        if len(set(self.positional)) != len(self.positional):
            raise ValueError("positional lists a keyword twice")
        if self.suite_template is not None:
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(self.suite_template) if f is not None]
            except ValueError as exc:
                raise ValueError(f"suite_template {self.suite_template!r}: {exc}") from None
            if not fields:
                raise ValueError("suite_template names no keyword (write e.g. \"{stage}-test-{runner_config}\")")
            for name in fields:
                if self.keywords.get(name) not in ("str", "int"):
                    raise ValueError(f"suite_template field {{{name}}} must be a declared keyword of "
                                     "type str or int")
        return self

# BackendConfig.signature names MarkerSignature, defined after it: resolve it now, so that
# config errors under [backends.<name>.signature] list the valid keys.
BackendConfig.model_rebuild(force=True)
