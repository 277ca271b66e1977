"""The plan's jobs as per-stage shard timelines (what each shard is estimated to take).

Reads the plan file the planner wrote (schema ``testfleet.plan/1``) with the planner's
``load_plan``, so a bad plan gets the same error everywhere; the timeline itself is
built from the documented JSON keys, which keeps the report independent of the plan's
in-memory classes.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from testfleet.documents.vocabulary import SOURCES, STATUSES
from testfleet.errors import UsageError
from testfleet.report.model import PlanSection, ShardBar, StageTimeline

if TYPE_CHECKING:
    from testfleet.documents.plan import PolicyDoc
    from testfleet.documents.vocabulary import Source

PLAN_SCHEMA_PREFIX = "testfleet.plan/"
# the planner's wording (planning/planner.py) for a stage hole and a backend with no coverage
_HOLE_WARNING = re.compile(r"coverage hole: stage \S+ |backend \S+ has no enabled coverage at all ")


def plan_section(data: Any, source: str) -> PlanSection:
    """Pure: the plan JSON (already parsed) as timelines; raises :class:`UsageError` on bad shape."""
    if not isinstance(data, Mapping):
        raise UsageError(f"{source}: a plan is a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(PLAN_SCHEMA_PREFIX):
        raise UsageError(f"{source}: not a testfleet plan (schema {schema!r}; "
                         f"expected '{PLAN_SCHEMA_PREFIX}1')")
    jobs = _list(data, "jobs", source)
    stages = _list(data, "stages", source)
    by_stage: dict[str, list[ShardBar]] = defaultdict(list)
    for i, job in enumerate(jobs):
        where = f"{source}: jobs[{i}]"
        if not isinstance(job, Mapping):
            raise UsageError(f"{where}: must be an object")
        stage = _str(job, "stage", where)
        tests = []
        for j, t in enumerate(_list(job, "tests", where)):
            if not isinstance(t, Mapping):
                raise UsageError(f"{where}.tests[{j}]: must be an object")
            origin = t.get("source")
            kind: Source = origin if isinstance(origin, str) and origin in SOURCES else "est_time"
            tests.append((_str(t, "file", f"{where}.tests[{j}]"),
                          _num(t, "estimate", f"{where}.tests[{j}]"), kind))
        estimate = job.get("estimate")
        total = (_num(job, "estimate", where) if estimate is not None
                 else sum(t[1] for t in tests))
        shard = job.get("shard", len(by_stage[stage]) + 1)
        if not isinstance(shard, int) or isinstance(shard, bool):
            raise UsageError(f"{where}.shard: must be an integer, got {shard!r}")
        by_stage[stage].append(ShardBar(shard, total, tuple(tests), str(job.get("id", ""))))
    meta: dict[str, Mapping[str, Any]] = {}
    for i, st in enumerate(stages):
        if not isinstance(st, Mapping):
            raise UsageError(f"{source}: stages[{i}]: must be an object")
        meta[_str(st, "name", f"{source}: stages[{i}]")] = st
    timelines = []
    for name in list(meta) + sorted(set(by_stage) - set(meta)):
        st = meta.get(name, {})
        bars = tuple(sorted(by_stage.get(name, []), key=lambda b: b.shard))
        makespan = _opt_num(st.get("makespan"))
        if makespan is None:
            makespan = max((b.estimate for b in bars), default=0.0)
        lower = _opt_num(st.get("lower_bound"))
        if lower is None:
            lower = _lower_bound(bars)
        ratio = _opt_num(st.get("ratio"))
        if ratio is None and lower > 0:
            ratio = makespan / lower
        status = st.get("status", "scheduled")
        timelines.append(StageTimeline(
            stage=name, backend=str(st.get("backend", "")),
            status=status if status in STATUSES else "scheduled",
            reason=st.get("reason") if isinstance(st.get("reason"), str) else None,
            shards=bars, makespan=makespan, lower_bound=lower, ratio=ratio,
        ))
    raw_policy = data.get("policy")
    # a plan load_plan validated holds a policy of the plan's type (a test's may not)
    policy = cast("PolicyDoc", dict(raw_policy) if isinstance(raw_policy, Mapping) else {})
    warnings = [w if isinstance(w, str) else json.dumps(w, sort_keys=True)
                for w in data.get("warnings", []) or []]
    warnings = [w for w in warnings if not is_hole_warning(w)]
    digest = data.get("digest") if isinstance(data.get("digest"), str) else None
    return PlanSection(source, digest, policy, tuple(timelines), tuple(warnings))


def is_hole_warning(warning: str) -> bool:
    """A plan warning that only restates a coverage hole. The report leaves it out: its
    holes section names every hole (from the same registry), once."""
    return bool(_HOLE_WARNING.match(warning))


def _lower_bound(bars: tuple[ShardBar, ...]) -> float:
    if not bars:
        return 0.0
    longest = max((t[1] for b in bars for t in b.files), default=0.0)
    return max(longest, sum(b.estimate for b in bars) / len(bars))


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise UsageError(f"{where}: '{key}' must be a list")
    return value


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value


def _num(obj: Mapping[str, Any], key: str, where: str) -> float:
    value = _opt_num(obj.get(key))
    if value is None or value < 0:
        raise UsageError(f"{where}: '{key}' must be a finite number >= 0, got {obj.get(key)!r}")
    return value


def _opt_num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
