"""``testfleet init --from-existing --migrate``: a central suite list into in-file
registrations, shown as a diff first (``--dry-run``), written under the lock and the
all-or-nothing in-place edit of ``testfleet disable`` / ``enable``.

Kept apart from :mod:`testfleet.cli.init` so that the adoption command stays about
configuration; this one edits the project's test files and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import click

from testfleet.adopt.central import CentralError, CentralList, find_central_lists, read_central_list
from testfleet.adopt.migrate import (
    Migration,
    Vocabulary,
    backend_of_suite,
    marker_imports,
    plan_migration,
    read_vocabulary,
    targets,
    unified_diff,
)
from testfleet.errors import UsageError
from testfleet.findings import Finding
from testfleet.textsafe import printable


def looked_for(root: Path, roots: list[str]) -> str:
    """What adoption looked for and where, for a tree where it found nothing to adopt."""
    return (f"no register_<backend>_ci(...) calls under {', '.join(roots) or root.name} and no "
            "central suite list (a module-level dict of lists of entry calls such as "
            "suites = {\"per-commit\": [TestFile(\"test_x.py\", 60)]}) in any Python file of "
            f"{root}. A project that registers in each file: point at its tests with --root DIR. "
            "A project whose runner script lists its suites: check that the lists are dict "
            "literals of literal calls at the script's top level. A project with neither: "
            "'testfleet init' (without --from-existing) scaffolds a configuration")


def central_hint(root: Path) -> str | None:
    """A pointer to --migrate when the tree has central lists but no in-file registration."""
    found = find_central_lists(root)
    if not found:
        return None
    return (f"the tree lists its suites centrally ({', '.join(found)}), it does not register "
            "in each file. Review the migration into in-file registrations with "
            "'testfleet init --from-existing --migrate --dry-run', write it with "
            "'testfleet init --from-existing --migrate', then run 'testfleet init "
            "--from-existing' again to adopt the migrated tree")


def central_findings(root: Path, registered: set[tuple[str, str]],
                     ) -> tuple[list[Finding], list[str]]:
    """A tree read whole: central-list entries (active, on disk) that no in-file
    registration carries yet are an error each list, so adopting only the in-file half
    never drops the listed suites silently; a suite the list keeps empty is a note (its
    jobs run nothing, and no stage is adopted for it)."""
    out: list[Finding] = []
    notes: list[str] = []
    suites = {s for _, s in registered}
    for rel in find_central_lists(root):
        try:
            cl = read_central_list(root, rel, "seconds")  # the unit does not matter here
        except CentralError:
            continue
        notes += [f"suite {suite!r} of {rel} lists no file (its jobs run nothing): no stage "
                  "is adopted for it" for suite, entries in cl.suites.items()
                  if not entries and suite not in suites]
        missing = [e for e in cl.entries if not e.disabled and (root / e.file).is_file()
                   and (e.file, e.suite) not in registered]
        if missing:
            unregistered = sorted({e.suite for e in missing})
            out.append(Finding(rel, missing[0].line, 0, "error", "adopt-central-list",
                               f"{len(missing)} entries of its central suite lists "
                               f"({len(unregistered)} suites: {', '.join(unregistered[:5])}"
                               f"{', ...' if len(unregistered) > 5 else ''}) are not registered in "
                               "their files, so no stage would run them: review 'testfleet init "
                               "--from-existing --migrate --dry-run', then run it without "
                               "--dry-run"))
    return out, notes


def read_lists(root: Path, time_unit: str | None) -> list[CentralList]:
    found = find_central_lists(root)
    if not found:
        raise UsageError("--migrate: " + looked_for(root, []))
    lists: list[CentralList] = []
    problems: list[str] = []
    for rel in found:
        try:
            lists.append(read_central_list(root, rel, time_unit))
        except CentralError as exc:
            problems.append(str(exc))
    if problems:
        raise UsageError("--migrate: " + "; ".join(problems) + "; nothing was changed")
    return lists


def summary(lists: list[CentralList], vocab: Vocabulary, m: Migration) -> list[str]:
    """What the migration did, one line each, never repeated."""
    out: list[str] = []
    for cl in lists:
        entries = cl.entries
        out.append(f"{cl.script}: {len(cl.suites)} suites in {', '.join(cl.dicts)}, "
                   f"{len(entries)} entries ({sum(1 for e in entries if e.disabled)} commented "
                   f"out, kept as disabled); paths from {cl.base_dir}/ (the script's directory)")
        out.append(f"  time unit: {cl.unit_source}")
        backends: dict[str, list[str]] = {}
        for suite in cl.suites:
            backends.setdefault(backend_of_suite(suite, cl.dict_of.get(suite, "")), []).append(suite)
        for backend, suites in sorted(backends.items()):
            out.append(f"  {backend}: {', '.join(suites)}")
        for suite, entries_of in cl.suites.items():
            if not entries_of:
                out.append(f"  suite {suite!r} lists no file: it gets no registration "
                           "(adoption keeps its job's stage only if another tree part "
                           "registers to it)")
        if cl.not_in_ci:
            out.append(f"  {len(cl.not_in_ci)} file(s) of lists kept out of CI "
                       f"({', '.join(sorted({e.suite for e in cl.not_in_ci}))}) get no "
                       "registration: adoption excludes them")
        for e in entries:
            if e.extra:
                out.append(f"  not carried over: {cl.script}:{e.line} {e.listed} "
                           f"({', '.join(e.extra)}): a registration has no place for it")
        out += [f"  note: {n}" for n in cl.notes]
        out += [f"  {f.render()}" for f in cl.findings]
    source = vocab.module or "testfleet"
    out.append(f"markers from {source}" + ("" if vocab.module is None else
               "; a line its marker cannot take (disabled=..., a backend it has no marker "
               "for) imports testfleet's own"))
    for rel, why in m.left_alone:
        out.append(f"left alone: {rel}: {why}")
    if m.unchanged:
        out.append(f"{len(m.unchanged)} file(s) already hold their registrations: unchanged")
    return out


def migrate(root: Path, time_unit: str | None, dry_run: bool) -> int:
    """Run the migration; 0 when done (or nothing to do), 1 when a file was left alone."""
    from testfleet.results.inplace import edit_in_place, edit_lock

    lists = read_lists(root, time_unit)
    if any(f.severity == "error" for cl in lists for f in cl.findings) and not dry_run:
        for cl in lists:
            for f in cl.findings:
                click.echo(f.render(), err=True)
        raise UsageError("--migrate: some entries of the suite list cannot be read (above); "
                         "nothing was changed")
    vocab = read_vocabulary(root, marker_imports(root))
    wanted = targets(lists)
    result = Migration()

    def contents_of(rels: list[str]) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for rel in rels:
            path = root / rel
            out[rel] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        return out

    before = contents_of(sorted(wanted))
    if dry_run:
        result = plan_migration(before, wanted, vocab)
        for rel, new in sorted(result.new.items()):
            old = before[rel]
            assert old is not None
            click.echo(unified_diff(rel, old, new), nl=False)
    else:
        present = [rel for rel, data in before.items() if data is not None]

        def plan(current: Mapping[str, bytes]) -> dict[str, bytes]:
            nonlocal result
            result = plan_migration({**before, **current}, wanted, vocab)
            return {rel: data for rel, data in result.new.items() if rel in current}

        with edit_lock(root):
            edit_in_place(root, present, plan)
    for line in summary(lists, vocab, result):
        click.echo(printable(line))
    verb = "would write" if dry_run else "wrote"
    click.echo(f"{verb} {result.lines} registration line(s) into {len(result.new)} file(s); "
               "the central list is unchanged")
    if not dry_run and result.new:
        click.echo("next: testfleet init --from-existing [--github] --report adoption.md")
    return 1 if result.left_alone and any("not on disk" not in why
                                          for _, why in result.left_alone) else 0
