"""Discover test files, parse their literal registrations, validate them.

``collect(project, *, use_cache=True, thorough=False) -> Registry`` is the entry
point; it is imported lazily so that importing the data model stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from testfleet.registry.model import GateCall, Registration, Registry

if TYPE_CHECKING:
    from testfleet.registry.collector import collect as collect

__all__ = ["GateCall", "Registration", "Registry", "collect"]


def __getattr__(name: str) -> Any:
    if name == "collect":
        from testfleet.registry.collector import collect

        return collect
    raise AttributeError(f"module 'testfleet.registry' has no attribute {name!r}")
