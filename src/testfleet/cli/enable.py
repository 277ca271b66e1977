"""``testfleet enable``: restore disabled registrations in place, by issue or by file.

    testfleet enable --ref #N            # every registration whose reason cites #N
    testfleet enable FILE... [--stage STAGE] # the disabled registrations of these files

Each ``disabled=`` argument is removed (with its separator, or its line when it has a
line of its own), so enabling what ``disable`` inserted restores the file byte for
byte; an argument that cannot be removed cleanly (a comment beside it) becomes
``disabled=None``. Every edit is checked before anything is written (exit 2 and no
change when one cannot be made); exit 1 when nothing matched.
"""

from __future__ import annotations

import click

from testfleet.cli._common import project_from
from testfleet.cli._options import stage_option
from testfleet.errors import UsageError
from testfleet.textsafe import printable


@click.command("enable")
@click.argument("files", nargs=-1, metavar="[FILE...]")
@click.option("--ref", default=None, metavar="URL|#N",
              help="Enable every disabled registration whose reason cites this issue or URL.")
@stage_option("Only this stage's registrations.")
@click.pass_context
def command(ctx: click.Context, files: tuple[str, ...], ref: str | None, stage: str | None) -> int:
    """Enable disabled registrations: all that cite --ref, or those of FILE...

    \b
    Examples:
      testfleet enable --ref "#2230"
      testfleet enable --ref https://github.com/example/fleet/issues/2234
      testfleet enable tests/unit/test_fault_injection_cpu.py --stage stage-b-cpu
    """
    from testfleet.results.disabling import mentions_ref, valid_ref
    from testfleet.results.inplace import edit_lock
    from testfleet.results.restore import apply_edits, registrations

    if bool(ref) == bool(files):
        raise UsageError("say what to enable: --ref #N (or URL), or FILE...")
    if ref is not None and not valid_ref(ref):
        raise UsageError(f"--ref {ref!r}: expected #N (an issue or pull request) or an http(s) URL")
    project = project_from(ctx)
    if stage is not None and stage not in project.config.stages:
        raise UsageError(f"--stage {stage!r} is not a configured stage "
                         f"({', '.join(sorted(project.config.stages)) or 'none'})")
    with edit_lock(project.root):  # as disable: locked from before the registry is read
        disabled = [r for r in registrations(project)
                    if r.disabled and (stage is None or r.suite == stage)]
        if ref is not None:
            chosen = [r for r in disabled if mentions_ref(r.disabled, ref)]
            what = f"cites {ref}"
        else:
            wanted = {f.replace("\\", "/").removeprefix("./") for f in files}
            chosen = [r for r in disabled if r.file in wanted]
            what = "is in " + ", ".join(sorted(wanted))
        if not chosen:
            click.echo(printable(f"testfleet: no disabled registration"
                                 f"{f' of stage {stage}' if stage else ''} {what}; nothing "
                                 "changed"), err=True)
            return 1
        # A disabled=None that disable wrote over is put back, not removed (#36).
        from testfleet.results.originals import was_none
        from testfleet.results.restore import markers_of

        keep_none = {(r.file, r.suite) for r in chosen
                     if was_none(project.root, r.file, markers_of(project, r.backend), r.suite,
                                 r.disabled)}
        edits = apply_edits(project, [(r, None) for r in sorted(chosen,
                                                                key=lambda r: (r.file, r.line))],
                            keep_none)
    for e in edits:
        change = f"{e.edit.old} -> {e.edit.new}" if e.edit.new else f"removed {e.edit.old}"
        click.echo(printable(f"enabled {e.file}:{e.edit.line} ({e.suite}): {change}"))
    click.echo(f"{len(edits)} registration(s) enabled in {len({e.file for e in edits})} file(s)")
    return 0
