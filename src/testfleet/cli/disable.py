"""``testfleet disable``: switch registrations off with a tracked reason, in place.

    testfleet disable FILE... --stage STAGE --reason "..." [--ref URL|#N] [--until DATE]

Only the bytes of each call's ``disabled=`` argument change (it is inserted after the
last argument when absent, on a line of its own in a call written one argument per
line). Every edit is checked before anything is written: one file that cannot be edited
or written means no file is changed (exit 2). Files are edited in place under a lock
(see ``testfleet.results.inplace``).
"""

from __future__ import annotations

import click

from testfleet.cli._common import project_from
from testfleet.cli._options import stage_option
from testfleet.errors import UsageError
from testfleet.textsafe import printable


@click.command("disable")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@stage_option("The stage (suite) whose registration to disable.", required=True)
@click.option("--reason", required=True, metavar="TEXT", help="Why: what is broken.")
@click.option("--ref", default=None, metavar="URL|#N", help="The issue that tracks the restore.")
@click.option("--until", default=None, metavar="YYYY-MM-DD",
              help="When the reason expires (the ledger and `check` flag it after that).")
@click.pass_context
def command(ctx: click.Context, files: tuple[str, ...], stage: str, reason: str,
            ref: str | None, until: str | None) -> int:
    """Disable FILE's registration for STAGE: `disabled="<reason>, see <ref>, until <date>"`.

    \b
    Examples:
      testfleet disable tests/unit/test_weight_sync.py --stage stage-b-cpu \
          --reason "NCCL 2.21 hang in weight sync" --ref "#2240"
      testfleet disable tests/e2e/megatron/test_qwen3_8B_dense.py --stage stage-c-4-gpu-h200 \
          --reason "H200 pool drained" --ref "#2241" --until 2026-12-01
    """
    from testfleet.results.disabling import EditError, compose_reason
    from testfleet.results.inplace import edit_lock
    from testfleet.results.restore import apply_edits, registrations

    project = project_from(ctx)
    if stage not in project.config.stages:
        raise UsageError(f"--stage {stage!r} is not a configured stage "
                         f"({', '.join(sorted(project.config.stages)) or 'none'})")
    try:
        text = compose_reason(reason, ref, until)
    except EditError as exc:
        raise UsageError(str(exc)) from None
    # Locked from before the registry is read: another disable/enable of this project
    # never has a file half-written while this one reads it, nor edits it meanwhile.
    with edit_lock(project.root):
        regs = {(r.file, r.suite): r for r in registrations(project)}
        wanted = [f.replace("\\", "/").removeprefix("./") for f in files]
        missing = [f for f in wanted if (f, stage) not in regs]
        if missing:
            raise UsageError("nothing was changed: no registration for stage "
                             f"{stage!r} in: {printable(', '.join(missing))}")
        edits = apply_edits(project, [(regs[(f, stage)], text) for f in dict.fromkeys(wanted)])
    for e in edits:
        click.echo(printable(f"disabled {e.file}:{e.edit.line} ({e.suite}): {e.edit.new}"))
    return 0
