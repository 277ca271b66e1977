"""The rescue wave in the generated GitHub workflows (#40): a planned file is never left
unrun because its runner died.

After the stage jobs, the ``reconcile`` job runs ``testfleet reconcile --rescue-out``
(``TESTFLEET_RESCUE_OUT`` in its env): the files whose shard never reported (runner lost,
job cancelled before it started, killed) become the rescue wave, one rescue job per lost
shard, uploaded as the ``testfleet-rescue`` artifact and given as its outputs
``has_rescue`` and ``rescue`` (per stage lane ``{has_jobs, matrix}``, as the plan's
``stages``). Each stage lane has a rescue job, ``<lane job>-rescue``: the stage job's own
runner, container, env and steps (the very same YAML, through anchors: ``steps:
*<job>-steps``), its matrix from ``rescue``, ``fail-fast: false`` and one attempt. A
matrix entry carries ``rescue`` (the rescue file's digest), so the shared job action
downloads the rescue file and runs ``testfleet run --rescue``; a stage job's entry has
none. In the trusted workflow the rescue job is gated exactly as its stage job is: the
same steps, so the same checkout of the verified merge commit and the same secrets only
for an authorized plan.

Then ``rescued`` (the reconcile job's steps again, with ``TESTFLEET_RESCUE``) reconciles
the plan, every status and the rescue: every planned file exactly one final report, none
failed, the rescued ones named. A lost runner fails its stage job as a test failure does,
so when ``rescued`` ran and passed, it is the run's verdict on the stage jobs; a run
without a rescue is judged as before.
"""

from __future__ import annotations

from typing import Any

from testfleet.integrations.github_options import unique_id
from testfleet.integrations.yaml_doc import Alias, Anchor, Flow, Note
from testfleet.integrations.yaml_text import expr_str

RESCUE_ARTIFACT = "testfleet-rescue"
RESCUE_FILE = "rescue.json"
#: the job that reconciles the plan after its rescue wave
RESCUED_JOB = "rescued"
SUFFIX = "-rescue"


def rescue_job_ids(job_ids: dict[str, str], reserved: set[str]) -> dict[str, str]:
    """Each lane's rescue job id: its stage job's id and ``-rescue``, unique against every
    other job id of the workflow (case-insensitively)."""
    taken = {j.lower() for j in job_ids.values()} | {r.lower() for r in reserved}
    out: dict[str, str] = {}
    for lane in sorted(job_ids):
        out[lane] = unique_id(job_ids[lane] + SUFFIX, taken)
    return out


def _shared(job: dict[str, Any], key: str, name: str) -> Any:
    """Mark ``job[key]`` to be written once (an anchor, or the anchor it already aliases)
    and return the alias that repeats it."""
    raw = job[key]
    note = raw if isinstance(raw, Note) else None
    value = note.value if note is not None else raw
    if isinstance(value, (Anchor, Alias)):
        return Alias(value.name, value.value)
    anchor = Anchor(name, value)
    job[key] = Note(anchor, note.before, note.eol) if note is not None else anchor
    return Alias(name, value)


def with_rescue(stage: Note, lane: str, job_id: str, *, pr_excluded: bool) -> tuple[Note, Note]:
    """(the stage job with its container, env and steps anchored, its rescue job): the
    rescue job runs on the stage job's runner with its container, env and steps."""
    job = dict(stage.value)
    rescue_of = f"fromJSON(needs.reconcile.outputs.rescue)[{expr_str(lane)}]"
    cond = ["!cancelled()", "needs.reconcile.result == 'success'", f"{rescue_of}.has_jobs"]
    if pr_excluded:
        cond.insert(0, "github.event_name != 'pull_request'")
    strategy: dict[str, Any] = {"fail-fast": Note(False, eol="one lost file must not cancel "
                                                             "another's rescue")}
    if "max-parallel" in job["strategy"]:
        strategy["max-parallel"] = job["strategy"]["max-parallel"]
    strategy["matrix"] = f"${{{{ {rescue_of}.matrix }}}}"
    rescue: dict[str, Any] = {
        "name": "${{ matrix.id }}",
        "needs": Flow(["plan", "reconcile"]),
        "if": f"${{{{ {' && '.join(cond)} }}}}",
        "strategy": strategy,
        "runs-on": job["runs-on"],
    }
    if "container" in job:
        rescue["container"] = _shared(job, "container", f"{job_id}-container")
    rescue["timeout-minutes"] = job["timeout-minutes"]
    rescue["env"] = _shared(job, "env", f"{job_id}-env")
    rescue["steps"] = _shared(job, "steps", f"{job_id}-steps")
    return (Note(job, stage.before, stage.eol),
            Note(rescue, before=(f"{job_id}'s unreported files, when its runner was lost: the "
                                 "same runner, container, env and steps.",)))


def rescued_job(reconcile: Note, rescue_ids: list[str]) -> tuple[Note, Note]:
    """(the reconcile job with its steps anchored, the job that reconciles after the rescue
    wave with the same steps and the rescue file)."""
    job = dict(reconcile.value)
    steps = _shared(job, "steps", "reconcile-steps")
    return Note(job, reconcile.before, reconcile.eol), Note({
        "name": "reconcile after the rescue",
        "needs": Flow(["plan", "reconcile", *rescue_ids]),
        "if": "${{ always() && needs.reconcile.result == 'success' && "
              "needs.reconcile.outputs.has_rescue == 'true' }}",
        "runs-on": job["runs-on"],
        "timeout-minutes": job["timeout-minutes"],
        "env": {"TESTFLEET_RESCUE": RESCUE_FILE},
        "steps": steps,
    }, before=("Every planned file exactly one final report (its shard's or its rescue's), "
               "none failed.",))
