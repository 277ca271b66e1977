"""A stage's parallelism when the existing CI sizes it at run time, and whether what the
job needs before its tests was carried at all.

SGLang sizes each stage as its check-changes job runs (``compute_partitions.py``): enough
partitions that each fits ``0.75 x`` the stage's ``run_timeout_minutes``, at most
``size // 3`` at once. Adopted as one job, its largest stage would run 214 minutes on one
runner. What decides the count is carried instead: the test step's own timeout times the
script's fraction is ``target_minutes`` (testfleet then picks the fewest shards that fit,
as the script does from the same estimates), the throttle is ``max_parallel`` (its value
for the count today's estimates give), and a count the script pins for a suite is
``shards``. A stage whose count cannot be carried, whose runners cannot be known, or
whose install or container entry cannot be carried is adopted dormant with the reason,
never as a job that would run its tests without them.
"""

from __future__ import annotations

from typing import Any

from testfleet.adopt.ci_model import CIStage
from testfleet.planning.sharding import choose_shards


def partition_keys(suite: str, ci: CIStage, seconds: list[float], notes: list[str]) -> dict[str, Any]:
    """``shards``, or ``target_minutes`` and ``max_parallel``, from the rule of the script
    that computes the stage's partition count (empty when neither can be carried)."""
    rule = ci.partition_rule
    if rule is None:
        return {}
    where = f"{ci.workflow} job {ci.job}"
    if suite in rule.fixed:
        n = rule.fixed[suite]
        notes.append(f"stage {suite}: {where} takes its partition count from {rule.script}, "
                     f"which pins it to {n}: shards = {n}, all at once")
        return {"shards": n}
    if ci.test_timeout_minutes is None:
        return {}
    fraction = rule.fraction if rule.fraction is not None else 1.0
    target = round(fraction * ci.test_timeout_minutes, 2)
    out: dict[str, Any] = {"target_minutes": target}
    size = choose_shards(seconds, shards=None, target_seconds=target * 60, max_shards=None)[0] \
        if seconds else 0
    said = (f"stage {suite}: {where} sizes its partitions at run time ({rule.script}); "
            f"target_minutes = {target:g}, "
            + (f"{fraction:g} x " if rule.fraction is not None else "")
            + f"its test step's {ci.test_timeout_minutes:g}-minute timeout")
    if rule.divisor is not None and size:
        out["max_parallel"] = max(size // rule.divisor, 1)
        said += (f"; max_parallel = {out['max_parallel']}, the script's size // {rule.divisor} "
                 f"for the {size} shard(s) today's estimates give (re-derive when they change)")
    notes.append(said)
    return out


def incomplete_reason(ci: CIStage, stage: dict[str, Any], unknown_runner: bool) -> str | None:
    """Why the stage cannot run as the existing CI runs it (None when it can): the reason
    of its ``disabled`` line, with what to change."""
    where = f"{ci.workflow} job {ci.job}"
    reasons: list[str] = []
    if unknown_runner and ci.runs_on_unresolved is not None:
        reasons.append(f"its runs-on {ci.runs_on_unresolved[0]} cannot be known without "
                       "running code: set runs_on")
    if ci.partition_rule is not None and not any(k in stage for k in ("shards", "target_minutes")):
        reasons.append(f"its partition count is computed at run time ({ci.partition_rule.script}) "
                       "and no timeout of its test step bounds a shard: set shards or "
                       "target_minutes")
    reasons += list(dict.fromkeys(ci.incomplete))
    if not reasons:
        return None
    return (f"adoption incomplete ({where}): " + "; ".join(reasons)
            + "; then remove this line")
