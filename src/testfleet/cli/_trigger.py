"""The trigger options shared by ``testfleet plan`` and ``testfleet run``, and the
one function that turns them into a :class:`~testfleet.planning.request.PlanRequest`.

Usage::

    @click.command()
    @trigger_options
    @click.pass_context
    def command(ctx, trigger_options: TriggerOptions, ...):
        project = project_from(ctx)
        request = build_request(project, ctx.find_root().obj.directory, trigger_options)

Every conflicting combination of flags is refused here with a message that
names both flags; path checks for ``--file`` happen here too (symlinks, escapes).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from testfleet.cli._options import file_option, stage_option
from testfleet.cli.completion import complete_pr_labels
from testfleet.config import Project
from testfleet.documents.vocabulary import Event
from testfleet.errors import TestfleetError, UsageError
from testfleet.planning.policy import EVENTS, PR_EVENTS, Trigger, show

F = TypeVar("F", bound=Callable[..., Any])

_NAMES = (
    "event", "labels", "cadence", "schedule", "fork", "match_all_labels", "changed_files",
    "diff_base", "files", "stages", "include_disabled", "github", "draft", "trust_base",
    "pr_head",
)
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


@dataclass(frozen=True)
class TriggerOptions:
    """The raw values of the trigger flags, as click parsed them."""

    event: Event | None = None
    labels: tuple[str, ...] = ()
    cadence: str | None = None
    schedule: str | None = None
    fork: bool = False
    match_all_labels: bool = False
    changed_files: Path | None = None
    diff_base: str | None = None
    files: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    include_disabled: bool = False
    github: bool = False
    draft: bool = False
    trust_base: str | None = None
    pr_head: str | None = None


class PullRequestMoved(TestfleetError):
    """The checkout is not the merge commit of the pull request head the event named: a
    push came after the event (after the label), and what was authorized is not this."""


def trigger_options(f: F) -> F:
    """Add the trigger flags to a click command; the command receives ``trigger_options``."""
    options = [
        click.option("--event", type=click.Choice(EVENTS), default=None, metavar="EVENT",
                     help=f"The CI event ({', '.join(EVENTS)}). Default: pull_request when "
                          "--labels/--fork are given, schedule with --schedule, else push."),
        click.option("--labels", "labels", multiple=True, metavar="LABEL[,LABEL...]",
                     shell_complete=complete_pr_labels,
                     help="Raw PR labels (repeat or comma-separate), e.g. run-ci-megatron."),
        click.option("--cadence", default=None, metavar="CADENCE",
                     help="Cadence override (regular, nightly, weekly, release, ...); wins over "
                          "everything else."),
        click.option("--schedule", default=None, metavar="CRON",
                     help="The cron string of a schedule trigger; must map to a cadence in "
                          "[tool.testfleet.policy] schedules."),
        click.option("--fork", is_flag=True, help="The pull request comes from a fork."),
        click.option("--match-all-labels", is_flag=True,
                     help="Include every registered label (manual runs)."),
        click.option("--changed-files", type=click.Path(path_type=Path), default=None,
                     metavar="FILE",
                     help="`git diff --name-status -z` output; prunes unaffected GPU stages. "
                          "An unreadable or malformed file prunes nothing (with a warning)."),
        click.option("--diff-base", default=None, metavar="REF",
                     help="Compute the changed files as `git diff REF...HEAD`."),
        file_option("Plan exactly these registered test files (repeatable; labels and "
                    "cadence do not apply).", multiple=True, dest="files"),
        stage_option("Only these stages (repeatable); others are 'not-requested'.",
                     multiple=True, dest="stages"),
        click.option("--include-disabled", is_flag=True,
                     help="With --file/--stage: run disabled registrations too."),
        click.option("--github", is_flag=True,
                     help="Read the trigger from GITHUB_EVENT_NAME / GITHUB_EVENT_PATH."),
        click.option("--draft", is_flag=True,
                     help="The pull request is a draft (see policy.drafts)."),
        click.option("--trust-base", default=None, metavar="REF",
                     help="With --fork: take the trust settings (trusted_only, runs_on, "
                          "container, authorize_labels, ...) from the configuration at this "
                          "commit, not from the checkout. --github reads it from the payload "
                          "unless this names it (e.g. HEAD^1 of the PR's merge commit)."),
        click.option("--pr-head", default=None, metavar="SHA",
                     help="The pull request head the event named (pull_request.head.sha): "
                          "plan only if the checkout is the merge commit whose second parent "
                          "is SHA, so that a push after the event (after a label) is never "
                          "planned under it."),
    ]

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _NAMES if name in kwargs}
        kwargs["trigger_options"] = TriggerOptions(**values)
        return f(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def _split_labels(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(out)


def _conflicts(opts: TriggerOptions) -> None:
    def given(name: str) -> bool:
        value = getattr(opts, name)
        return bool(value) if not isinstance(value, (str, Path)) else True

    flag = {n: "--" + n.replace("_", "-") for n in _NAMES}
    flag["files"], flag["stages"] = "--file", "--stage"
    pairs = [("changed_files", "diff_base")]
    pairs += [("github", n) for n in ("event", "labels", "schedule", "fork", "match_all_labels",
                                      "draft")]
    pairs += [("files", n) for n in ("labels", "match_all_labels", "changed_files", "diff_base")]
    for a, b in pairs:
        if given(a) and given(b):
            why = {
                "github": "--github reads it from the event payload",
                "files": "an explicit file request ignores labels and changed files",
                "changed_files": "give the changed files one way",
            }[a]
            raise UsageError(f"conflicting flags: {flag[a]} and {flag[b]} ({why})")


def safe_ref(ref: str, flag: str = "--diff-base") -> str:
    """A git revision as an argument, never an option or something with control characters."""
    if not ref or ref.startswith("-") or any(ord(c) < 33 or ord(c) == 127 for c in ref) \
            or len(ref) > 256:
        raise UsageError(f"{flag} {show(ref)}: not a usable git revision")
    return ref


def bind_to_head(root: Path, trigger: Trigger, pr_head: str) -> None:
    """Refuse unless the checkout at ``root`` is the merge commit of ``pr_head``.

    The trusted workflow checks out ``refs/pull/<n>/merge`` when its job starts, and the
    pull request may have moved since the event: a label a maintainer added to one commit
    would then authorize a push nobody looked at. The merge commit's second parent is the
    head it merges, so comparing it with the event's head binds the run to that commit."""
    if not trigger.is_pull_request:
        raise UsageError("--pr-head applies only to a pull request's event")
    want = pr_head.strip().lower()
    if not _SHA.match(want):
        raise UsageError(f"--pr-head {show(pr_head)}: not a full commit id")
    from testfleet.vcs import merge_head

    now = merge_head(root)
    if now is None:
        raise PullRequestMoved(
            f"the checkout is not a pull request's merge commit (HEAD has no second parent), "
            f"so nothing shows that it merges {want}: check out refs/pull/<n>/merge with "
            "fetch-depth 2")
    if now.lower() == want:
        return
    if trigger.authorizing:
        raise PullRequestMoved(
            f"the pull request moved after it was labelled (labelled {want}, now {now}): a "
            "maintainer must label it again (a label authorizes only the commit it was set on)")
    raise PullRequestMoved(
        f"the pull request moved after this event (the event named {want}, now {now}): the "
        "run of the newer push plans it")


def resolve_file(project: Project, base: Path, raw: str) -> str:
    """Check one ``--file`` argument and return it repo-relative (posix).

    Refused: NUL or control characters, paths that leave the repository (``..``
    or absolute elsewhere), symlinks anywhere below the repository root, paths
    outside the configured roots, and paths that are not files.
    """
    if not raw or any(ord(c) < 32 for c in raw):
        raise UsageError(f"--file {show(raw)}: not a usable path")
    root = project.root.resolve()
    candidate = Path(os.path.normpath(base.resolve() / raw))
    try:
        rel = candidate.relative_to(root)
    except ValueError:
        # An absolute path may reach the repository through a symlinked prefix
        # (/tmp -> /private/tmp); resolve the directory, never the file itself.
        try:
            alt = Path(os.path.normpath(candidate.parent.resolve() / candidate.name))
            rel = alt.relative_to(root)
        except (ValueError, OSError):
            raise UsageError(f"--file {show(raw)}: escapes the repository ({root})") from None
    if not rel.parts:
        raise UsageError(f"--file {show(raw)}: is the repository root, not a test file")
    if rel.parts[0] == "..":
        raise UsageError(f"--file {show(raw)}: escapes the repository ({root})")
    here = root
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            raise UsageError(
                f"--file {show(raw)}: {here.relative_to(root).as_posix()} is a symlink; "
                "plan the real path"
            )
    relpath = rel.as_posix()
    roots = project.config.roots
    if not any(relpath == r or relpath.startswith(r.rstrip("/") + "/") for r in roots):
        raise UsageError(
            f"--file {relpath}: outside the test roots ({', '.join(roots)})"
        )
    if not here.is_file():
        raise UsageError(f"--file {relpath}: no such file")
    return relpath


def _say_when_nothing_runs_on_push(project: Project) -> None:
    """A tree whose CI never runs on push (an adopted one, often) plans nothing for the
    event assumed without ``--event``: say which events to pass instead of leaving a
    bare "excluded" to explain an empty plan."""
    import click

    lanes = [stage for stage in project.config.stages.values() if not stage.dormant]
    lanes += [v for stage in lanes for v in getattr(stage, "variants", {}).values()]
    events: set[str] = set()
    for lane in lanes:
        if lane.events is None or "push" in lane.events:
            return
        events.update(lane.events)
        events.update(t.event for t in lane.run_on_changes)
    if events:
        first = "pull_request" if "pull_request" in events else sorted(events)[0]
        click.echo(f"testfleet: note: no stage runs on push, the event assumed without --event; "
                   f"pass --event {first} (this configuration's stages run on "
                   f"{', '.join(sorted(events))})", err=True)


def build_request(project: Project, base: Path, opts: TriggerOptions,
                  env: Mapping[str, str] | None = None) -> Any:
    """Turn the flags into a ``PlanRequest``; reads the GitHub event and the diff."""
    from testfleet.planning.changes import (
        git_changed_files,
        git_prefix,
        read_changed_files,
        within_project,
    )
    from testfleet.planning.request import PlanRequest

    env = os.environ if env is None else env
    _conflicts(opts)
    if opts.cadence is not None and not opts.cadence.strip():
        raise UsageError("--cadence: empty value")
    if opts.github:
        from testfleet.integrations.github_event import trigger_from_github

        trigger = trigger_from_github(env, cadence=opts.cadence)
        if opts.trust_base is not None:
            # the trusted workflow names the base it checked out (the PR merge commit's
            # first parent) instead of the payload's base.sha, which can be older
            trigger = replace(trigger, base_sha=safe_ref(opts.trust_base, "--trust-base"))
    else:
        labels = _split_labels(opts.labels)
        event = opts.event
        if event is None:
            if opts.schedule is not None:
                event = "schedule"
            elif labels or opts.fork or opts.draft:
                event = "pull_request"
            else:
                event = "push"
                _say_when_nothing_runs_on_push(project)
        if labels and event not in PR_EVENTS:
            raise UsageError(f"conflicting flags: --labels with --event {event} "
                             "(labels come only with pull_request events)")
        if opts.trust_base is not None and not opts.fork:
            raise UsageError("--trust-base applies only with --fork (a fork's pull request)")
        trigger = Trigger(event=event, labels=labels, cadence=opts.cadence,
                          schedule=opts.schedule, fork=opts.fork,
                          match_all_labels=opts.match_all_labels, draft=opts.draft,
                          base_sha=None if opts.trust_base is None else safe_ref(
                              opts.trust_base, "--trust-base"))

    if opts.pr_head is not None:
        bind_to_head(project.root, trigger, opts.pr_head)

    changes = None
    if opts.changed_files is not None:
        path = opts.changed_files if opts.changed_files.is_absolute() else base / opts.changed_files
        changes = read_changed_files(path)
    elif opts.diff_base is not None:
        changes = git_changed_files(project.root, safe_ref(opts.diff_base))
    if changes is not None and changes.error is None:
        # git reports paths from the top of the work tree; a project may live below it
        changes = within_project(changes, git_prefix(project.root))

    files = tuple(dict.fromkeys(resolve_file(project, base, f) for f in opts.files))
    trust = None
    # The trusted workflow (--github --trust-base) plans every pull request with the base's
    # trust settings, a same-repository one too: its jobs run with the base's definitions.
    base_trusted = opts.github and opts.trust_base is not None
    if trigger.is_pull_request and (trigger.fork or base_trusted) and (opts.github
                                                                       or trigger.base_sha):
        # The fork's checkout must not decide its own trust: read the base's config.
        # With --github a payload without base.sha fails closed inside read_base.
        from testfleet.planning.trust import read_base

        trust = read_base(project, trigger.base_sha,
                          from_payload=opts.github and opts.trust_base is None)
    return PlanRequest(
        trust=trust,
        trigger=trigger,
        files=files,
        stages=tuple(dict.fromkeys(opts.stages)),
        include_disabled=opts.include_disabled,
        changes=changes,
    )
