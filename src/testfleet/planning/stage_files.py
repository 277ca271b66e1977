"""Path-only registrations bound to the stages whose ``files`` name them.

Planning, not configuration: it needs the loaded ``Config`` and the registry's
``Registration`` s, and the configuration floor imports neither the registry nor the
planner.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from testfleet.config.triggers import files_match

if TYPE_CHECKING:
    from testfleet.config import Config
    from testfleet.registry.model import Registration


def bind_stage_files(registrations: list[Registration], config: Config) -> list[Registration]:
    """A path-only registration (suite "") whose file a stage's ``files`` names is a
    registration of that stage (of each such stage of its backend): planned under its gates,
    counted in its coverage, like any other."""
    takers = [(n, st) for n, st in config.stages.items() if st.files]
    if not takers or not any(r.suite == "" for r in registrations):
        return registrations
    out: list[Registration] = []
    for reg in registrations:
        if reg.suite == "":
            taken = {r.suite for r in registrations if r.file == reg.file and r.backend == reg.backend}
            bound = [replace(reg, suite=n) for n, st in takers
                     if reg.backend in st.accepted_backends() and n not in taken
                     and files_match(st.files, reg.file)]
            if bound:
                out.extend(bound)
                continue
        out.append(reg)
    return out
