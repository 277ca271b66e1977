"""``testfleet check``: validate the configuration and every registration, all at once.

Findings come from several producers (collection here; gate specs and check
rules from their own modules). Each producer is a function
``(project, registry, scope) -> list[Finding]``; add one to :data:`PRODUCERS` and its
findings are merged, sorted and shown with everything else. ``scope`` says which files
``check FILES`` asks about (a producer that reads files reads only those, since findings
on other files would not be shown) and whether caches may be used (``--no-cache``).

Exit status: 0 clean (warnings allowed), 1 on any error, 2 on usage errors
(no configuration found, bad options).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from testfleet import color
from testfleet.cli._common import human_format_option, loaded
from testfleet.cli._options import META_OUTPUT, output_option
from testfleet.config import Project, find_config, load_project
from testfleet.errors import ConfigError
from testfleet.findings import Finding
from testfleet.registry.model import Registry
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.check import CheckDoc


@dataclass(frozen=True)
class Scope:
    """What one ``check`` run covers: ``only`` the given files (None: all), with or without caches."""

    only: frozenset[str] | None = None
    use_cache: bool = True


FindingProducer = Callable[[Project, Registry, Scope], list[Finding]]

# Extra validators, run after collection (e.g. gate specs, disabled-test rules).
PRODUCERS: list[FindingProducer] = []


def _report_rules(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """[tool.testfleet.check] rules (disabled references and ages, dormant stages, holes)."""
    from testfleet.app.check import check_rules  # lazy: only 'check' pays for it

    return check_rules(project, registry, use_cache=scope.use_cache,
                       partial=scope.only is not None)


PRODUCERS.append(_report_rules)


def _gate_specs(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """register_ci_gate declarations: arguments, steps, constraints, duplicates."""
    from testfleet.gate.spec import parse_gate_specs

    return parse_gate_specs(project, registry.gates)[1]


PRODUCERS.append(_gate_specs)


def _command_fit(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """Files that would run no test under their stage's command (pytest on a script)."""
    from testfleet.registry.collectable import command_findings

    return command_findings(project, registry, only=scope.only, use_cache=scope.use_cache)


PRODUCERS.append(_command_fit)


def _probe_files(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """A dormant stage's probe names only files registered in that stage (#14)."""
    from testfleet.results.probe_check import probe_findings

    return probe_findings(project, registry)


PRODUCERS.append(_probe_files)


def _repeated_disabled(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """One disabled reason on many files names the incident instead (#29)."""
    from testfleet.incidents.disabled_check import findings

    return findings(project, registry)


PRODUCERS.append(_repeated_disabled)


def _workflows(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """The repository's GitHub workflows: none may let a fork choose its runner (#27)."""
    from testfleet.integrations.workflow_audit import audit_tree

    return audit_tree(project.root, scope.only)


PRODUCERS.append(_workflows)


#: The configured pattern lists, what each is for, and what a catastrophic one loses.
_PATTERN_KEYS = (
    ("runner", "retriable_patterns", "a failure it should retry is not retried"),
    ("runner", "fatal_patterns", "a fatal failure it should stop on is retried"),
    ("check", "reference_patterns", "a reference it should recognise is not found"),
)


def _catastrophic_patterns(project: Project, registry: Registry, scope: Scope) -> list[Finding]:
    """Retriable, fatal and reference patterns that backtrack catastrophically (#36): the
    runner and the report cut such a pattern off at its first slow search, so it stops
    working silently on the very output that triggers it; say so before it runs."""
    from testfleet.regexrisk import catastrophic

    prefix = "tool.testfleet." if project.config_path.name == "pyproject.toml" else ""
    out: list[Finding] = []
    for table, key, loses in _PATTERN_KEYS:
        for index, pattern in enumerate(getattr(getattr(project.config, table), key)):
            how = catastrophic(pattern)
            if how is not None:
                out.append(Finding(
                    _config_name(project), 0, 0, "error", "pattern-catastrophic",
                    f"pattern {printable(pattern)!r} backtracks catastrophically ({how}); at "
                    "run time such a search is cut off and the pattern dropped for the rest of "
                    f"the job, so {loses}; rewrite it so that each "
                    "part of a line can be matched in one way only (e.g. '(a|aa)+' as 'a+', "
                    "'(a|a)*' as 'a*')", f"{prefix}{table}.{key}.{index}"))
    return out


def _config_name(project: Project) -> str:
    try:
        return project.relpath(project.config_path)
    except ValueError:
        return project.config_path.name


PRODUCERS.append(_catastrophic_patterns)

JSON_SCHEMA: Final = "testfleet.check/1"


def run_check(project: Project, *, use_cache: bool = True,
              only: frozenset[str] | None = None) -> tuple[Registry, list[Finding]]:
    """Collect thoroughly and run every producer; a producer that crashes is a finding too.

    ``only`` (repo-relative paths): the files whose findings are wanted. The tree is still
    collected whole (a deleted registration opens a hole elsewhere), but the per-file work
    (the full syntax check above all, ~1 ms a file) is done for those files alone.
    """
    from testfleet.registry import collect

    registry = collect(project, use_cache=use_cache, thorough=True, syntax_only=only)
    findings = list(registry.findings)
    scope = Scope(only, use_cache)
    for producer in PRODUCERS:
        try:
            findings.extend(producer(project, registry, scope))
        except Exception as exc:  # one broken validator must not hide the rest
            name = getattr(producer, "__qualname__", repr(producer))
            findings.append(Finding("", 0, 0, "error", "internal",
                                    f"validator {name} failed: {type(exc).__name__}: {exc}"))
    ignores = project.config.check.per_file_ignores
    if registry.suppressions or ignores:
        from testfleet.registry.suppress import apply_suppressions

        config_name = project.config_path.name
        findings, _, problems = apply_suppressions(
            [*findings, *registry.suppressed], registry.suppressions,
            [(glob, tuple(codes)) for glob, codes in ignores.items()], config_name=config_name)
        findings.extend(problems)
    return registry, sorted(set(findings))


@click.command("check")
@human_format_option("testfleet.check/1")
@output_option()
@click.option("--no-cache", is_flag=True, help="Ignore and do not write the caches (collection, syntax, file style).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path),
                metavar="[FILE...]")
@click.pass_context
def command(ctx: click.Context, fmt: str, no_cache: bool, strict: bool, files: tuple[Path, ...]) -> int:
    """Validate config and every registration; report all problems at once.

    With FILES (as a pre-commit hook passes them), only findings on those files and on the
    project as a whole (configuration, stages, coverage) are shown and counted; files that
    are not test files of the project are ignored. When FILES include the configuration
    file itself, the whole tree is judged: a renamed stage breaks files nobody touched.

    Exits 0 when there are no errors (warnings allowed; not with --strict), 1 on errors.
    Under GitHub Actions (GITHUB_ACTIONS=true) it also prints workflow
    annotations so that each problem shows on its file and line.

    \b
    Examples:
      testfleet check
      testfleet check --strict --format json -o check.json
      testfleet check tests/unit/test_rollout_buffer.py tests/fast/test_kl.py
      testfleet check --no-cache
    """
    app = ctx.find_root().obj
    registry: Registry | None = None
    try:
        project = load_project(app.directory, app.config_file)
    except ConfigError as exc:
        if not exc.findings:
            raise
        findings = sorted(exc.findings)
        found = app.config_file or find_config(app.directory)
        root = found.parent if found is not None else app.directory
    else:
        wanted = wanted_files(files, project) if files else None
        if wanted is not None and _config_rel(project) in wanted:
            wanted = None
        loaded(project)
        registry, findings = run_check(project, use_cache=not no_cache, only=wanted)
        root = project.root
        if wanted is not None:
            findings = only_files(findings, wanted, project)
    _emit(findings, registry, fmt, root, annotations_to_stderr=META_OUTPUT in ctx.meta)
    return 1 if any(f.severity == "error" or strict for f in findings) else 0


def wanted_files(files: tuple[Path, ...], project: Project) -> frozenset[str]:
    """FILES as repo-relative paths; a file outside the project is not ours to judge."""
    root = project.root.resolve()
    wanted: set[str] = set()
    for f in files:
        try:
            wanted.add(Path(os.path.abspath(f)).resolve().relative_to(root).as_posix())
        except ValueError:
            continue
    return frozenset(wanted)


def only_files(findings: list[Finding], wanted: Collection[str], project: Project) -> list[Finding]:
    """Keep the findings a commit of FILES can be blamed for: those on the files, and the
    project-wide ones (a deleted last registration opens a coverage hole for its stage)."""
    config_rel = _config_rel(project)
    return [f for f in findings if not f.file or f.file in wanted or f.file == config_rel]


def _config_rel(project: Project) -> str:
    """The configuration file as a repo-relative path ("" when it lies outside the root)."""
    root = project.root.resolve()
    config = project.config_path.resolve()
    return config.relative_to(root).as_posix() if config.is_relative_to(root) else ""


def _emit(findings: list[Finding], registry: Registry | None, fmt: str, root: Path,
          annotations_to_stderr: bool = False) -> None:
    n_err = sum(1 for f in findings if f.severity == "error")
    n_warn = len(findings) - n_err
    if fmt == "json":
        doc: CheckDoc = {
            "schema": JSON_SCHEMA,
            "ok": n_err == 0,
            "errors": n_err,
            "warnings": n_warn,
            "files": len(registry.files) if registry else 0,
            "registrations": len(registry.registrations) if registry else 0,
            "findings": [f.to_json() for f in findings],
        }
        click.echo(json.dumps(doc, indent=2))
    github = os.environ.get("GITHUB_ACTIONS") == "true"
    if fmt == "table":
        # Styles on a terminal or with FORCE_COLOR, never with NO_COLOR (testfleet.color).
        # Under GitHub Actions each finding is shown once, as its annotation (below), not also
        # as a line; the summary line stays.
        click.echo(render_text([] if github else findings, registry, counted=findings), nl=False,
                   color=color.wanted())
    if github:
        prefix = _workspace_prefix(root)
        for f in findings:
            shown = Finding(prefix + f.file if f.file else f.file, f.line, f.col, f.severity,
                            f.code, f.message, f.key)
            # stdout carries the JSON document in json mode (and -o's file holds only the
            # document); the runner reads both streams.
            click.echo(shown.github_annotation(), err=fmt == "json" or annotations_to_stderr)


def render_text(findings: list[Finding], registry: Registry | None,
                counted: list[Finding] | None = None) -> str:
    """Findings grouped by file, then one summary line (counting ``counted``, default ``findings``)."""
    lines: list[str] = []
    current: str | None = None
    for f in findings:
        if f.file != current:
            current = f.file
            lines.append(click.style(printable(f.file or "(project)"), bold=True))
        where = f"{f.line}:{f.col}" if f.line and f.col else (str(f.line) if f.line else "-")
        sev = click.style(f.severity, fg="red" if f.severity == "error" else "yellow")
        key = f" [{printable(f.key)}]" if f.key else ""
        lines.append(f"  {where:>7}  {sev}  {printable(f.message)}{key} ({f.code})")
    counted = findings if counted is None else counted
    n_err = sum(1 for f in counted if f.severity == "error")
    n_warn = len(counted) - n_err
    scope = (f"{len(registry.files)} files, {len(registry.registrations)} registrations, "
             f"{len(registry.gates)} gates" if registry else "configuration")
    verdict = "FAILED" if n_err else "ok"
    lines.append(f"testfleet check: {verdict}: {n_err} error{'s' * (n_err != 1)}, "
                 f"{n_warn} warning{'s' * (n_warn != 1)} ({scope})")
    return "\n".join(lines) + "\n"




def _workspace_prefix(root: Path) -> str:
    """Annotations need paths relative to the checkout, not to a project inside it."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if not workspace:
        return ""
    try:
        rel = root.resolve().relative_to(Path(workspace).resolve()).as_posix()
    except (ValueError, OSError):
        return ""
    return "" if rel in ("", ".") else rel + "/"
