"""The per-stage keys that prepare a CI job's machine: ``python``, ``uv``, ``checkouts``.

They sit in ``[tool.testfleet.stages.<name>]`` (and a variant's table) beside the older CI
keys (``container``, ``setup``, ``secrets``), and like them they are written into the
generated workflow as job steps, so their values obey the same text rules: no ``${{``
(GitHub would evaluate it) and no control character. Those rules live here, and
``testfleet.config`` imports them, so both kinds of key refuse a value the same way.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, field_validator

SECRET_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"
_SECRET_NAME = re.compile(SECRET_NAME_RE)
#: What actions/setup-python accepts that a generated workflow should carry: a version
#: (3, 3.12, 3.12.1), an "x" range (3.x, 3.12.x), a "-dev" pre-release, or PyPy/GraalPy.
PYTHON_VERSION = re.compile(r"(?:pypy|graalpy)?[0-9]+(?:\.(?:[0-9]+|x)){0,2}(?:-dev)?", re.ASCII)
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")


def _control_char(value: str, allowed: str = "") -> str | None:
    """The first C0 control character or DEL in ``value`` that is not ``allowed``."""
    return next((c for c in value if (ord(c) < 32 or c == "\x7f") and c not in allowed), None)


def _ci_text(value: str, what: str, *, multiline: bool = False) -> str:
    if "${{" in value:
        raise ValueError(f"{what} {value[:60]!r} contains '${{{{': GitHub would evaluate it as an "
                         "expression; read the value from an environment variable instead")
    bad = _control_char(value, "\n\t" if multiline else "")
    if bad is not None:
        raise ValueError(f"{what} {value[:60]!r} contains a control character ({bad!r})")
    return value


def secret_name_problem(name: str) -> str | None:
    """Why ``name`` is not a secret a generated job may read, or None."""
    if not _SECRET_NAME.match(name) or name.upper().startswith("GITHUB_"):
        return (f"{name[:60]!r} is not a secret name (letters, digits and '_', "
                "not starting with a digit or GITHUB_)")
    return None


class CheckoutConfig(BaseModel):
    """One more repository the stage's jobs check out after the project's own: GitHub
    ``actions/checkout`` with ``repository``, ``ref`` and ``path``; Buildkite ``git clone``.
    ``token_secret`` names the secret holding a token for a private repository."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str
    ref: str = ""
    path: str
    token_secret: str | None = None

    @field_validator("repository")
    @classmethod
    def _repository(cls, v: str) -> str:
        if not _REPOSITORY.fullmatch(v):
            raise ValueError(f"repository {v[:80]!r} is not 'owner/name'")
        return v

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str) -> str:
        _ci_text(v, "ref")
        if v.startswith("-") or any(c.isspace() for c in v) or ".." in v:
            raise ValueError(f"ref {v[:80]!r} is not a branch, tag or commit")
        return v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        _ci_text(v, "path")
        parts = v.replace("\\", "/").split("/")
        if not v.strip() or v.startswith(("/", "-")) or ".." in parts or any(
                c.isspace() for c in v):
            raise ValueError(f"path {v[:80]!r} must be a relative directory inside the "
                             "workspace (no '..', no spaces)")
        return v

    @field_validator("token_secret")
    @classmethod
    def _token(cls, v: str | None) -> str | None:
        problem = None if v is None else secret_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v


def _python(v: str | None) -> str | None:
    if v is not None and v != "" and not PYTHON_VERSION.fullmatch(v):
        raise ValueError(f"python {v[:60]!r} is not a version for setup-python "
                         "(e.g. 3, 3.12, 3.12.1, 3.x, 3.13-dev, pypy3.10; \"\" for none)")
    return v


def _checkouts(v: list[CheckoutConfig] | None) -> list[CheckoutConfig] | None:
    if v is not None:
        paths = [c.path.rstrip("/") for c in v]
        if len(set(paths)) != len(paths):
            raise ValueError("two checkouts write the same path")
    return v


#: The keys' validated types, shared by the stage's table and a variant's.
Python = Annotated[str | None, AfterValidator(_python)]
Checkouts = Annotated[list[CheckoutConfig], AfterValidator(_checkouts)]


class StageJobKeys(BaseModel):
    """``python`` (``"3.11"``; ``""`` for none; unset: 3.12 on a job without a container,
    none in one), ``uv`` (astral-sh/setup-uv before the setup steps), ``checkouts``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Python = None
    uv: StrictBool = False
    checkouts: Checkouts = Field(default_factory=list)


class VariantJobKeys(BaseModel):
    """The same keys in a variant's table; each set key replaces the stage's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Python = None
    uv: StrictBool | None = None
    checkouts: Checkouts | None = None
def checkout_json(c: CheckoutConfig) -> dict[str, Any]:
    return {"repository": c.repository, "ref": c.ref, "path": c.path,
            "token_secret": c.token_secret}
