"""``[backends.<name>] infra_patterns`` and ``infra_defaults``: the incident keys of a
backend table, and how a partial table for a built-in backend is read.

``testfleet.config`` takes :class:`BackendIncidentKeys` as a base of its
``BackendConfig`` (so the keys are validated, documented and published with every other
key) and calls the two functions below; the rules live here, beside the patterns.

A table for a built-in backend (``[backends.rocm]``) that gives only some keys keeps the
built-in values of the others, so ``[backends.rocm] infra_patterns = [...]`` neither
drops the ``register_amd_ci`` alias nor changes ``labels_required``. A backend that is
not built in still declares its ``markers``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from testfleet.failures.patterns import patterns_problems


class BackendIncidentKeys(BaseModel):
    """The incident keys of ``[backends.<name>]``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                              allow_inf_nan=False)

    # Regular expressions searched in each line of a failed file's output: a match makes
    # the failure an infrastructure failure (in addition to the built-in defaults of cuda
    # and rocm, unless infra_defaults is false). Screened here, matched with a timeout.
    infra_patterns: list[str] = Field(default_factory=list)
    infra_defaults: bool = True

    @field_validator("infra_patterns")
    @classmethod
    def _screened(cls, v: list[str]) -> list[str]:
        problems = patterns_problems(v)
        if problems:
            raise ValueError("; ".join(problems))
        return v


_B = TypeVar("_B", bound=BaseModel)


def patched_backend(base: _B | None, table: _B) -> _B:
    """A configured backend table over the built-in one it names (None: not built in):
    the keys the table gives win, the others stay the built-in's."""
    if base is None:
        return table
    return base.model_copy(update={key: getattr(table, key) for key in table.model_fields_set})


def backend_table_problems(tables: Mapping[Any, Any], builtin: Iterable[str]) -> list[tuple[str, str]]:
    """(key path, message): a backend that is not built in needs ``markers``; no backend
    may declare an empty list of them."""
    known = set(builtin)
    out = []
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            continue
        markers = table.get("markers")
        if markers == [] or (name not in known and "markers" not in table):
            out.append((f"backends.{name}.markers",
                        f"backend {name!r} needs at least one marker name (e.g. markers = "
                        f"[\"register_{name}_ci\"])" + ("" if name not in known else
                                                       "; omit the key to keep the built-in ones")))
    return out
