"""``testfleet init``: scaffold a configuration and the CI workflow that consumes the plan.

Every file is decided before anything is written, then all are written or none
(a command that fails writes nothing). An existing configuration is never touched
unless ``--rederive-config`` asks for it; ``--force`` only replaces the workflow or
pipeline, so regenerating CI keeps the maintainer's ``[tool.testfleet]``.
``--from-existing`` adopts a tree that already uses ``register_*_ci(...)`` markers
(see :mod:`testfleet.adopt`).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from testfleet.ci_keys import PYTHON_VERSION
from testfleet.errors import ConfigError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib



@dataclass(frozen=True)
class Write:
    """One file ``init`` will write, with a word for the report."""

    path: Path
    text: str
    what: str


def strip_testfleet_section(text: str) -> str:
    """``pyproject.toml`` text without its ``tool.testfleet`` tables, everything else kept.

    Edited with tomlkit, so the rest of the file -- comments, order, formatting, a
    ``testfleet.*`` dotted key under ``[tool]`` -- comes out as it went in.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
        tool = doc.get("tool")
        if tool is not None and "testfleet" in tool:
            del tool["testfleet"]
            if not tool:
                del doc["tool"]
        result = tomlkit.dumps(doc)
    except TOMLKitError as exc:
        raise UsageError(f"cannot edit pyproject.toml: {exc}") from None
    return result.rstrip("\n") + "\n" if result.strip() else ""


def _existing_config(root: Path, explicit: Path | None) -> Path | None:
    if explicit is not None:
        return explicit if explicit.is_file() and _has_section(explicit) else None
    for name in ("testfleet.toml", "pyproject.toml"):
        path = root / name
        if path.is_file() and _has_section(path):
            return path
    return None


def _has_section(path: Path) -> bool:
    if path.name != "pyproject.toml":
        return True
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    return isinstance(data.get("tool"), dict) and "testfleet" in data["tool"]


def _config_write(root: Path, explicit: Path | None, existing: Path | None,
                  data: dict[str, Any], use_toml: bool, comment: str) -> Write:
    """The configuration file's new text: a ``testfleet.toml`` of its own, or
    ``pyproject.toml`` with only its ``tool.testfleet`` tables replaced.

    The edited ``pyproject.toml`` is read back before anything is written: every
    other table must come out equal and the new section must hold exactly ``data``.
    """
    from testfleet.adopt.toml_text import render_toml

    pyproject = root / "pyproject.toml"
    if explicit is not None:
        target = explicit
    elif existing is not None:
        target = existing
    elif use_toml or not pyproject.is_file():
        target = root / "testfleet.toml"
    else:
        target = pyproject
    if target.name != "pyproject.toml":
        fresh = render_toml(data, "", comment)
        if existing is not None and target.is_file():
            fresh = _with_comments(target, _read_text(target), fresh, "")
        return Write(target, fresh, target.name)
    try:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        before = tomllib.loads(current)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {target}: {exc}") from None
    kept = strip_testfleet_section(current)
    section = render_toml(data, "tool.testfleet", comment)
    text = (kept.rstrip("\n") + "\n\n" if kept.strip() else "") + section
    try:
        after = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{target.name} would not parse after replacing [tool.testfleet] "
                         f"({exc}); nothing written") from None
    tool_before = dict(before.get("tool") or {}) if isinstance(before.get("tool"), dict) else {}
    tool_before.pop("testfleet", None)
    tool_after = dict(after.get("tool") or {})
    written = tool_after.pop("testfleet", None)
    others_before = {k: v for k, v in before.items() if k != "tool"}
    others_after = {k: v for k, v in after.items() if k != "tool"}
    expected = tomllib.loads(section)["tool"]["testfleet"]
    if written != expected or tool_before != tool_after or others_before != others_after:
        raise UsageError(f"editing {target.name} would change more than [tool.testfleet]; "
                         "nothing written (move the section to testfleet.toml with --toml)")
    if current:
        text = _with_comments(target, current, text, "[tool.testfleet]")
    return Write(target, text, f"[tool.testfleet] in {target.name}")


#: The header comment ``init`` writes itself (never carried over as a maintainer's comment).
GENERATED_COMMENT = ("# Adopted by 'testfleet init", "# Review runs_on (your runner labels)",
                     "# Scaffolded by 'testfleet init'", "# Add stages and register GPU tests")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def _with_comments(target: Path, old: str, new: str, header: str) -> str:
    """``new`` with the maintainer's comments of ``old`` back in place (see
    :mod:`testfleet.integrations.toml_comments`); a comment whose key or table is gone is
    kept at the top of the section, after the generated header. The data must not change."""
    from testfleet.integrations.toml_comments import carry_comments

    text, orphans = carry_comments(old, new, generated=GENERATED_COMMENT)
    if orphans:
        lines = text.split("\n")
        start = next((i + 1 for i, line in enumerate(lines)
                      if line.split("#", 1)[0].strip() == header), 0) if header else 0
        while start < len(lines) and lines[start].startswith("#"):
            start += 1
        text = "\n".join(lines[:start] + orphans + lines[start:])
    try:
        same = tomllib.loads(text) == tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise UsageError(f"putting the comments of {target.name} back would change its data; "
                         "nothing written")
    return text


def _validate(data: dict[str, Any], file: str) -> Any:
    from testfleet.config import validate_config

    try:
        return validate_config(data, file)
    except ConfigError as exc:  # a bug in derivation, or a tree we could not represent
        raise ConfigError(f"the derived configuration is not valid: {exc}", exc.findings) from None




def _stopped_report(report: Path | None, why: str) -> None:
    """``--report`` is written whenever adoption stops, saying why (its help promises it)."""
    if report is None:
        return
    from testfleet.fileio import output_mode, replace_atomically

    text = f"# Adoption report\n\nAdoption stopped before deriving a configuration:\n\n{why}\n"
    try:
        replace_atomically(report, text.encode("utf-8"), mode=output_mode(report))
    except OSError as exc:
        raise UsageError(f"--report {report}: cannot write: {exc.strerror or exc}") from None


@click.command("init")
@click.option("--github", "github", is_flag=True,
              help="Also write .github/workflows/testfleet.yml (dynamic matrix from the plan) and, "
                   "for self-hosted or trusted_only stages, testfleet-trusted.yml (pull requests, "
                   "from the base branch's definition).")
@click.option("--buildkite", "buildkite", is_flag=True,
              help="Also write .buildkite/pipeline.yml (plans, then uploads one step per job).")
@click.option("--from-existing", "from_existing", is_flag=True,
              help="Derive stages, backends and labels from the tree's register_*_ci(...) calls.")
@click.option("--force", is_flag=True,
              help="Replace an existing workflow / pipeline. Never touches the configuration.")
@click.option("--rederive-config", "rederive", is_flag=True,
              help="Replace an existing [tool.testfleet] with one derived from the tree again "
                   "(edits made to it are lost).")
@click.option("--allow-findings", "allow_findings", is_flag=True,
              help="Write the adopted configuration even when some registrations could not be "
                   "adopted (they are listed; 'testfleet check' reports them until fixed).")
@click.option("--report", "report", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Markdown adoption report to FILE (also with --dry-run, and when "
                   "adoption stops on findings: it is where they are explained).")
@click.option("--runner-selection", "runner_selection", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="With --report: the project's runner's saved --list-only / dry-run output, "
                   "one '== trigger=<id> stage=<stage> ==' block each (docs/adopt.md); the "
                   "report compares the files with it.")
@click.option("--toml", "use_toml", is_flag=True,
              help="Write testfleet.toml even when pyproject.toml exists.")
@click.option("--root", "roots", multiple=True, metavar="DIR",
              help="Test root to scan (repeatable; default: detected).")
@click.option("--install", "install", default=None, metavar="CMD",
              help="Command that installs testfleet in CI jobs (default: the way this testfleet "
                   "is installed: its version from the index, or the git commit pip recorded); "
                   "kept in [tool.testfleet.ci] install.")
@click.option("--python", "python_version", default="3.12", show_default=True, metavar="VERSION",
              help="Python version for hosted jobs.")
@click.option("--push-branch", "push_branches", multiple=True, metavar="BRANCH",
              help="Also run on pushes to BRANCH (repeatable).")
@click.option("--no-diff-pruning", "no_pruning", is_flag=True,
              help="Do not pass the PR's diff to the planner (no pruning of unaffected stages).")
@click.option("--database-secret", "database_secret", default=None, metavar="NAME",
              help="Secret holding a PostgreSQL URL that default-branch test jobs write history "
                   "to (no merge job); kept in [tool.testfleet.ci].")
@click.option("--database-read-secret", "database_read_secret", default=None, metavar="NAME",
              help="Secret holding a read-only URL of that database for the plan job (else it "
                   "reads the cached history); kept in [tool.testfleet.ci].")
@click.option("--no-history", "no_history", is_flag=True,
              help="No history loop in the workflow (kept as [tool.testfleet.ci] history = false).")
@click.option("--switch", "switch", is_flag=True,
              help="Turn off the existing workflows' jobs whose stages testfleet's workflow now "
                   "runs (one 'if: false' line each, with a comment); every other job is left "
                   "as it is. Recorded in .github/testfleet-switch.json (docs/adopt.md).")
@click.option("--unswitch", "unswitch", is_flag=True,
              help="Undo --switch: put every switched workflow back byte for byte.")
@click.option("--migrate", "migrate", is_flag=True,
              help="With --from-existing: write one registration line per suite into each file "
                   "the runner script's central suite lists name (shown as a diff with --dry-run); "
                   "the list itself is kept. Then run --from-existing again to adopt.")
@click.option("--time-unit", "time_unit", type=click.Choice(["seconds", "minutes"]), default=None,
              help="With --migrate: the unit of the lists' estimates when the code does not show it.")
@click.option("--dry-run", is_flag=True,
              help="Print what would be written and every finding; write nothing; same exit status.")
@click.pass_context
def command(ctx: click.Context, github: bool, buildkite: bool, from_existing: bool, force: bool,
            rederive: bool, allow_findings: bool, report: Path | None,
            runner_selection: Path | None, use_toml: bool,
            roots: tuple[str, ...], install: str | None, python_version: str,
            push_branches: tuple[str, ...], no_pruning: bool, database_secret: str | None,
            database_read_secret: str | None, no_history: bool, switch: bool, unswitch: bool,
            migrate: bool, time_unit: str | None,
            dry_run: bool) -> int:
    """Scaffold [tool.testfleet] (or testfleet.toml) and, with --github / --buildkite,
    the CI pipeline that consumes the plan.

    Without a configuration, one is written: adopted from the tree's marker calls
    when it has any (as --from-existing), else a single implicit CPU stage. An
    existing configuration is never changed unless --rederive-config; --force
    only replaces the workflow / pipeline. Every file is decided before anything
    is written, and a command that fails writes nothing.

    \b
    Examples:
      testfleet init
      testfleet init --github --dry-run
      testfleet init --from-existing --github --report adoption.md --dry-run
      testfleet init --github --force --database-secret TESTFLEET_DATABASE_URL
      testfleet init --switch --dry-run
      testfleet init --unswitch
    """
    from testfleet.adopt.derive import derive
    from testfleet.adopt.scaffold import scaffold
    from testfleet.adopt.scan import scan
    from testfleet.integrations.ci_files import CIFiles, buildkite_files, github_files
    from testfleet.integrations.github_options import WorkflowOptions

    app = ctx.find_root().obj
    explicit: Path | None = app.config_file
    # The configuration's directory is the project root (as load_project has it);
    # CI files go to the directory init runs in (the repository root).
    repo: Path = app.directory
    root: Path = explicit.parent.resolve() if explicit is not None else repo
    if switch or unswitch:
        return _switch(repo, root, explicit, undo=unswitch, dry_run=dry_run,
                       others=(github, buildkite, from_existing, force, rederive, report, switch and unswitch))
    for flag, name in (("--database-secret", database_secret),
                       ("--database-read-secret", database_read_secret)):
        if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"{flag} {name!r}: not a valid secret name")
    if database_read_secret is not None and database_secret is None:
        raise UsageError("--database-read-secret needs --database-secret (the database it reads)")
    ci_flags = _ci_flags(install, database_secret, database_read_secret, no_history)
    if not PYTHON_VERSION.fullmatch(python_version):
        raise UsageError(f"--python {python_version[:60]!r}: not a Python version for setup-python "
                         "(e.g. 3, 3.12, 3.12.1, 3.x, 3.13-dev, pypy3.10)")
    for branch in push_branches:
        if not branch.strip() or any(ord(c) < 32 for c in branch):
            raise UsageError(f"--push-branch {branch!r}: not a valid branch name")
    for r in roots:
        if r.startswith("/") or ".." in Path(r).parts or not (root / r).is_dir():
            raise UsageError(f"--root {r}: not a directory inside {root}")

    if report is not None and not (from_existing or rederive or
                                   _existing_config(root, explicit) is None):
        raise UsageError("--report describes an adoption: use it with --from-existing "
                         "(and --rederive-config when a configuration exists)")
    if runner_selection is not None and report is None:
        raise UsageError("--runner-selection is compared in the adoption report: add --report FILE")
    selection = _runner_selection(runner_selection)  # a malformed file stops before any work
    if migrate or time_unit:
        from testfleet.cli import _migrate

        if not (from_existing and migrate):
            raise UsageError("--migrate and --time-unit go with --from-existing --migrate")
        return _migrate.migrate(root, time_unit, dry_run)
    writes: list[Write] = []
    messages: list[str] = []
    existing = _existing_config(root, explicit)
    config = None
    adoption = None
    if existing is not None and not rederive:
        if from_existing:
            raise UsageError(f"{existing.name} already has a testfleet configuration; "
                             "use --rederive-config to replace it with one derived from the tree "
                             "(--force only replaces the workflow / pipeline)")
        from testfleet.config import load_project

        config = load_project(root, existing).config
        messages.append(f"kept the existing configuration in {existing.name}")
        ci_write = _store_ci_flags(existing, config, ci_flags)
        if ci_write is not None:
            writes.append(ci_write)
            config = config.model_copy(update={"ci": config.ci.model_copy(update=ci_flags)})
    else:
        result = scan(root, list(roots) if roots else None)
        if result.calls or from_existing:
            if not result.calls:
                from testfleet.cli._migrate import central_hint, looked_for

                why = central_hint(root) or looked_for(root, result.roots)
                _stopped_report(report, f"--from-existing: {why}")
                raise UsageError(f"--from-existing: {why}")
            adoption = derive(result)
            from testfleet.cli._migrate import central_findings

            found, notes = central_findings(root, {(c.file, c.suite) for c in result.calls})
            adoption.findings += found
            adoption.notes += notes
            if buildkite:
                _buildkite_container_options(adoption, keep=github)
            data = adoption.data
            comment = _adopted_comment(result, adoption)
            if not from_existing:
                messages.append(f"found {adoption.registrations} register_*_ci calls; "
                                "derived the configuration from them (as --from-existing)")
        else:
            if report is not None:
                raise UsageError("--report: the tree has no register_*_ci(...) calls to adopt")
            data = scaffold(root)
            comment = ("Scaffolded by 'testfleet init': every test file under "
                       f"{data['roots'][0]}/ is a CPU test.\nAdd stages and register GPU tests "
                       "with register_cuda_ci / register_rocm_ci.")
        if ci_flags:
            data = {**data, "ci": {**data.get("ci", {}), **ci_flags}}
        write = _config_write(root, explicit, existing, data, use_toml, comment)
        config = _validate(data, write.path.name)
        writes.append(write)

    ci = CIFiles()
    if github:
        config_file = writes[0].path if writes else existing
        assert config_file is not None
        in_root = config_file.parent.resolve() == repo.resolve()
        opts = WorkflowOptions(
            config=None if in_root else os.path.relpath(config_file.resolve(), repo.resolve()),
            python_version=python_version,
            push_branches=tuple(push_branches),
            diff_pruning=not no_pruning,
            database_secret=config.ci.database_secret,
            database_read_secret=config.ci.database_read_secret,
            queue_secret=config.ci.queue_secret,
            history=config.ci.history,
        )
        part = github_files(repo, config, opts, force=force)
        ci.files += part.files
        ci.notes += part.notes
        ci.warnings += part.warnings
        ci.warnings += _queue_warnings(config, opts)
    if buildkite:
        part = buildkite_files(repo, config, force=force)
        ci.files += part.files
        ci.notes += [n for n in part.notes if n not in ci.notes]
        ci.warnings += [w for w in part.warnings if w not in ci.warnings]
    writes += [Write(path, text, what) for path, text, what in ci.files]

    errors = [f for f in adoption.findings if f.severity == "error"] if adoption else []
    blocked = bool(errors) and not allow_findings
    if report is not None and adoption is not None:
        from testfleet.adopt.report import build_report
        from testfleet.fileio import output_mode, replace_atomically

        events = ({"pull_request", "workflow_dispatch", *(["schedule"] if config.policy.schedules
                                                          else []), *(["push"] if push_branches else [])}
                  if github else None)
        text = build_report(root, result, adoption, config, *selection, workflow_events=events)
        try:
            replace_atomically(report, text.encode("utf-8"), mode=output_mode(report))
        except OSError as exc:
            raise UsageError(f"--report {report}: cannot write: {exc.strerror or exc}; "
                             "nothing was written") from None
        messages.append(f"wrote the adoption report {report}")
    if adoption is not None:
        from testfleet.adopt.report import registration_counts
        from testfleet.adopt.summary import summary_lines

        for line in summary_lines(adoption, registration_counts(result, adoption)):
            click.echo(line)
        if report is not None:
            click.echo(f"  the full list ({len(adoption.notes)} note(s), {len(adoption.not_carried)} "
                       f"thing(s) not carried over) is in {report}")
    if dry_run:
        for w in writes:
            shown = w.path.relative_to(repo) if w.path.is_relative_to(repo) else w.path
            click.echo(f"--- {shown}")
            click.echo(w.text, nl=False)
    elif not blocked and writes:
        from testfleet.fileio import replace_all_or_nothing

        try:
            replace_all_or_nothing([(w.path, w.text.encode("utf-8"), _mode(w.path)) for w in writes])
        except OSError as exc:
            failed = getattr(exc, "filename", None) or "?"
            raise UsageError(f"cannot write {failed}: {exc.strerror or exc}; nothing was written "
                             f"({', '.join(w.what for w in writes)})") from None
        messages += [f"wrote {w.what}" for w in writes]
    if not dry_run:
        for m in messages:
            click.echo(m)
    for note in ci.notes:
        click.echo(note)
    for warning in ci.warnings:
        click.echo(warning, err=True)
    if adoption is not None and report is None:  # with a report, the long list is there
        for note in dict.fromkeys(adoption.notes):
            click.echo(f"note: {note}")
        if adoption.not_carried:
            click.echo(f"not carried over from the existing CI ({len(adoption.not_carried)}):")
            for item in adoption.not_carried:
                click.echo(f"  - {item.render()}")
    if adoption is not None:
        for f in adoption.findings:
            click.echo(f.render(), err=True)
    if blocked:
        would = "would stop" if dry_run else "stopped"
        click.echo(f"testfleet init: {len(errors)} problem(s) in the tree stand between it and a "
                   f"clean 'testfleet check'; init {would} before writing anything. Fix them, or "
                   "pass --allow-findings to write the configuration as far as it could be "
                   "adopted", err=True)
        return 1
    if errors:
        click.echo(f"testfleet init: {len(errors)} problem(s) remain; 'testfleet check' reports "
                   "them until they are fixed", err=True)
    if not writes:
        click.echo("nothing to write (use --github or --buildkite for CI, --rederive-config to "
                   "replace the config)")
    elif not dry_run and not errors:
        click.echo("next: testfleet check && testfleet plan")
    return 0


def _adopted_comment(scan: Any, adoption: Any) -> str:
    """The configuration's header: the registrations counted as the adoption report counts
    them (marker calls and files registered by location)."""
    from testfleet.adopt.report import registration_counts

    calls, implicit = registration_counts(scan, adoption)
    where = f" ({calls} marker calls, {implicit} by location)" if implicit else ""
    return (f"Adopted by 'testfleet init --from-existing' from {calls + implicit} "
            f"registrations{where}.\nReview runs_on (your runner labels), shards and needs.")


def _switch(repo: Path, root: Path, explicit: Path | None, *, undo: bool, dry_run: bool,
            others: tuple[object, ...]) -> int:
    """``--switch`` / ``--unswitch`` (see :mod:`testfleet.adopt.switch`): the old jobs the
    configuration owns, turned off or back on; every file or none."""
    from testfleet.adopt.switch import classify_jobs, switch, unswitch
    from testfleet.fileio import replace_all_or_nothing

    if any(others):
        raise UsageError("--switch and --unswitch are commands of their own: give one, with "
                         "--dry-run at most")
    if undo:
        result = unswitch(repo)
    else:
        from testfleet.adopt.derive import derive
        from testfleet.adopt.scan import scan
        from testfleet.config import load_project

        existing = _existing_config(root, explicit)
        if existing is None:
            raise UsageError("--switch: no testfleet configuration; adopt first "
                             "('testfleet init --from-existing --github')")
        config = load_project(root, existing).config
        result = switch(repo, classify_jobs(repo, derive(scan(root)), config))
        _shadow_verdict(repo)
    for job in result.jobs:
        if not undo:
            click.echo(f"{job['action']:<10} {job['workflow']} job {job['job']}: {job['why']}")
        elif job["action"] == "replaced":
            click.echo(f"restored   {job['workflow']} job {job['job']}")
    for note in result.notes:
        click.echo(f"note: {note}")
    shown = [p.relative_to(repo).as_posix() if p.is_relative_to(repo) else str(p)
             for p, _ in result.writes]
    deleted = result.delete.relative_to(repo).as_posix() if result.delete is not None else None
    if dry_run:
        click.echo(f"would write: {', '.join(shown) or 'nothing'}"
                   + (f"; would delete {deleted}" if deleted else ""))
        return 0
    try:
        replace_all_or_nothing([(p, data, _mode(p)) for p, data in result.writes])
        if result.delete is not None:
            result.delete.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write {getattr(exc, 'filename', None) or '?'}: "
                         f"{exc.strerror or exc}") from None
    click.echo(f"wrote {', '.join(shown) or 'nothing'}" + (f"; deleted {deleted}" if deleted else ""))
    click.echo("next: commit the change; 'testfleet init --unswitch' undoes it" if not undo
               else "the old workflows run again as before the switch")
    return 0


def _shadow_verdict(repo: Path) -> None:
    """What shadow mode's history says, when this checkout has one (the switch does not
    wait for it: a maintainer may have compared by other means)."""
    from testfleet.shadow.history import DEFAULT_PATH, load_history, verdict

    path = repo / DEFAULT_PATH
    if path.is_file():
        click.echo(f"shadow mode ({DEFAULT_PATH}): {verdict(load_history(path), 10)['message']}",
                   err=True)


def _queue_warnings(config: Any, opts: Any) -> list[str]:
    """Queue lanes (#40) in the generated workflow: their runners need the database URL,
    which only ``database_secret`` gives them (on default-branch runs)."""
    from testfleet.planning.lanes import all_lanes

    queue = sorted(k for k, lane in all_lanes(config).items()
                   if getattr(lane.config, "execution", "shards") == "queue")
    if not queue:
        return []
    if opts.database_secret is None:
        return [f"{', '.join(queue)} run(s) in queue mode, whose runners need the team's "
                "PostgreSQL (TESTFLEET_DATABASE_URL): set [tool.testfleet.ci] database_secret "
                "(testfleet init --github --force --database-secret NAME), and run 'testfleet "
                "db upgrade' once with the role that may change the schema"]
    prs = (f"a pull request's queue runners get secrets.{opts.queue_secret} (give it a role "
           "limited to the queue tables)" if opts.queue_secret else
           "a pull request plans them in shard mode until [tool.testfleet.ci] queue_secret "
           "names a credential limited to the queue tables")
    return [f"{', '.join(queue)} run(s) in queue mode: run 'testfleet db upgrade' once with the "
            "role that may change the schema before the first run; the runners get "
            f"secrets.{opts.database_secret} on default-branch runs only; {prs} "
            "(docs/execution-modes.md)"]


def _ci_flags(install: str | None, database_secret: str | None,
              database_read_secret: str | None, no_history: bool) -> dict[str, Any]:
    """The ``[tool.testfleet.ci]`` keys the flags set (so regenerating keeps them)."""
    flags: dict[str, Any] = {}
    if install is not None:
        flags["install"] = install
    if database_secret is not None:
        flags["database_secret"] = database_secret
    if database_read_secret is not None:
        flags["database_read_secret"] = database_read_secret
    if no_history:
        flags["history"] = False
    return flags


def _store_ci_flags(path: Path, config: Any, flags: dict[str, Any]) -> Write | None:
    """Keep CI flags given to ``init`` in an existing configuration.

    Only the ``ci`` table's keys that the flags name are set (tomlkit keeps the rest of
    the file as it is); the rest of the configuration a person edited is never touched.
    """
    if not flags:
        return None
    import tomlkit
    from pydantic import ValidationError
    from tomlkit.exceptions import TOMLKitError

    from testfleet.config import CIConfig, config_findings

    if all(config.ci.model_dump().get(k) == v for k, v in flags.items()):
        return None
    try:
        CIConfig.model_validate({**config.ci.model_dump(exclude_defaults=True), **flags})
    except ValidationError as exc:
        problems = "; ".join(f.message for f in config_findings(exc, path.name))
        raise UsageError(f"[tool.testfleet.ci] would not be valid: {problems}") from None
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
        section: Any = doc["tool"]["testfleet"] if path.name == "pyproject.toml" else doc
        if "ci" not in section:
            section["ci"] = tomlkit.table()
        for key, value in flags.items():
            section["ci"][key] = value
        text = tomlkit.dumps(doc)
    except (TOMLKitError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot add the CI flags to {path.name}: {exc}") from None
    table = "tool.testfleet.ci" if path.name == "pyproject.toml" else "ci"
    return Write(path, text, f"[{table}] in {path.name}")


def _buildkite_container_options(adoption: Any, *, keep: bool) -> None:
    """Container options adopted from GitHub jobs that the Buildkite Docker plugin has no
    key for (``--ulimit``) would stop every ``plan --format buildkite``. For a Buildkite
    pipeline alone they are left out and listed as not carried over; when the GitHub
    workflow (which carries them) is written too, they stay and are a finding to settle."""
    from testfleet.adopt.ci_model import NotCarried
    from testfleet.findings import Finding
    from testfleet.integrations.buildkite import docker_plugin_options

    for name, stage in adoption.data.get("stages", {}).items():
        container = stage.get("container")
        if not isinstance(container, dict) or not container.get("options"):
            continue
        _, unsupported = docker_plugin_options(container["options"])
        if not unsupported:
            continue
        ci = adoption.ci.stages.get(name)
        where = f"{ci.workflow} job {ci.job}" if ci else f"stage {name}"
        flags = " ".join(unsupported)
        if keep:
            adoption.findings.append(Finding(
                ci.workflow if ci else "pyproject.toml", 0, 0, "error", "adopt-buildkite-options",
                f"stage {name}: container options {flags!r} have no key in the Buildkite Docker "
                "plugin; 'plan --format buildkite' stops on them: remove them from the stage's "
                "container.options (set them on the agents) or adopt for one engine at a time"))
            continue
        words = _without(container["options"], unsupported)
        container["options"] = words
        if not words:
            del container["options"]
        adoption.not_carried.append(NotCarried(
            where, f"container options {flags!r}",
            "the Buildkite Docker plugin has no key for them; set them on the agents"))


def _without(options: str, unsupported: list[str]) -> str:
    """``options`` without the words the plugin rejects (and the value that follows one)."""
    import shlex

    words = shlex.split(options)
    out: list[str] = []
    drop = list(unsupported)
    i = 0
    while i < len(words):
        if words[i] in drop:
            drop.remove(words[i])
            # a rejected flag's separate value is rejected with it
            if i + 1 < len(words) and words[i + 1] in drop:
                drop.remove(words[i + 1])
                i += 1
            i += 1
            continue
        out.append(words[i])
        i += 1
    return shlex.join(out)


def _runner_selection(path: Path | None) -> tuple[dict[tuple[str, str], set[str]] | None, str]:
    if path is None:
        return None, ""
    from testfleet.adopt.runner_selection import parse_runner_selection

    return parse_runner_selection(_read_text(path), str(path)), path.name


def _mode(path: Path) -> int:
    """A replaced file keeps its permission bits; a new one is world-readable like any source."""
    return path.stat().st_mode & 0o777 if path.exists() else 0o644
