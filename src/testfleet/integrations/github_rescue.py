"""The rescue wave in the generated GitHub workflows (#40): a planned file is never left
unrun because its runner died.

After the stage jobs, the ``reconcile`` job runs ``testfleet reconcile --rescue-out``
(``TESTFLEET_RESCUE_OUT`` in its env): the files whose shard never reported (runner lost,
job cancelled before it started, killed) become the rescue wave, one rescue job per lost
shard, uploaded as the ``testfleet-rescue`` artifact and given as its outputs
``has_rescue`` and ``rescue`` (per stage lane ``{has_jobs, matrix}``, as the plan's
``stages``). The ``rescue`` job then calls the stages workflow again with those matrices
(:mod:`testfleet.integrations.github_stages`): each lost shard runs on its stage's own
runner, container, env and steps, written once for both. A matrix entry carries
``rescue`` (the rescue file's digest), so the shared job action downloads the rescue file
and runs ``testfleet run --rescue``; a stage job's entry has none. In the trusted
workflow the rescue call is given what its stage call is: the verified merge commit and
the secrets only for an authorized plan.

Then ``rescued`` (the reconcile job's steps again, with ``TESTFLEET_RESCUE``) reconciles
the plan, every status and the rescue: every planned file exactly one final report, none
failed, the rescued ones named. A lost runner fails its stage job as a test failure does,
so when ``rescued`` ran and passed, it is the run's verdict on the stage jobs; a run
without a rescue is judged as before.
"""

from __future__ import annotations

from testfleet.integrations.yaml_doc import Alias, Anchor, Flow, Note

RESCUE_ARTIFACT = "testfleet-rescue"
RESCUE_FILE = "rescue.json"
#: the job that reconciles the plan after its rescue wave
RESCUED_JOB = "rescued"


def rescued_job(reconcile: Note, rescue_ids: list[str]) -> tuple[Note, Note]:
    """(the reconcile job with its steps anchored, the job that reconciles after the rescue
    wave with the same steps and the rescue file)."""
    job = dict(reconcile.value)
    job["steps"] = Anchor("reconcile-steps", job["steps"])
    return Note(job, reconcile.before, reconcile.eol), Note({
        "name": "reconcile after the rescue",
        "needs": Flow(["plan", "reconcile", *rescue_ids]),
        "if": "${{ always() && needs.reconcile.result == 'success' && "
              "needs.reconcile.outputs.has_rescue == 'true' }}",
        "runs-on": job["runs-on"],
        "timeout-minutes": job["timeout-minutes"],
        "env": {"TESTFLEET_RESCUE": RESCUE_FILE},
        "steps": Alias("reconcile-steps", job["steps"].value),
    }, before=("Every planned file exactly one final report (its shard's or its rescue's), "
               "none failed.",))

