"""Planning: trigger + registry + estimates -> a plan of jobs and the fate of every registration.

``make_plan`` is imported lazily so that ``import testfleet.planning.sharding``
(the durations engineer's benchmarks) stays free of the config and pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testfleet.planning.planner import make_plan as make_plan

__all__ = ["make_plan"]


def __getattr__(name: str) -> Any:
    if name == "make_plan":
        from testfleet.planning.planner import make_plan

        return make_plan
    raise AttributeError(name)
