"""What one step of the GitHub Action runs, from the inputs it passes in the environment.

The composite action used to hold a 70-line bash ``case`` that turned its inputs into
``testfleet`` command lines; every project that vendors the action committed it, and it
was tested only by running it. Here it is data: :func:`invocations` maps the action's
``TESTFLEET_*`` variables to the command lines to run (``testfleet action`` runs them),
so the action's own script is one line and the mapping is unit-tested.

Inputs arrive through ``env:`` only, never through a ``${{ }}`` inside a script; ``args``
is one argument per line, so no value is ever split or evaluated by a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

#: The action's commands and the testfleet subcommand each runs.
COMMANDS = {
    "plan": ("plan",),
    "run": ("run",),
    "history-export": ("history", "export"),
    "history-merge": ("history", "merge"),
    "check": ("check",),
    "report": ("report",),
    "reconcile": ("reconcile",),
    "breaker-observe": ("breaker", "observe"),
}
#: Old command names, still run (with a notice in the log) so that workflows keep working.
OLD_COMMANDS = {"record": "history-export"}
#: Events ``plan --github`` reads; any other (a workflow_call's caller) plans as workflow_call.
_GITHUB_EVENTS = {"pull_request", "pull_request_target", "push", "schedule", "workflow_dispatch"}
_PR_EVENTS = {"pull_request", "pull_request_target"}


@dataclass(frozen=True)
class Invocation:
    """One ``testfleet`` command line. ``summary``: its output is appended to the step
    summary; ``passes``: the exit codes that let the step go on (plan's 1 is a plan made
    with rejected registrations: the valid tests must still run, the final check fails)."""

    argv: tuple[str, ...]
    summary: bool = False
    passes: frozenset[int] = frozenset({0})


@dataclass(frozen=True)
class ActionError:
    """An input the action cannot run with (shown as an ``::error`` annotation, exit 2)."""

    message: str


def _get(env: Mapping[str, str], name: str, default: str = "") -> str:
    return env.get(f"TESTFLEET_{name}", "") or default


def invocations(env: Mapping[str, str]) -> tuple[list[Invocation], list[str]] | ActionError:
    """The command lines for the action's inputs in ``env``, and notices to print."""
    command = _get(env, "COMMAND")
    notices: list[str] = []
    if command in OLD_COMMANDS:
        notices.append(f"the action's command '{command}' is now '{OLD_COMMANDS[command]}' "
                       f"(as the CLI's 'history export'); '{command}' is deprecated")
        command = OLD_COMMANDS[command]
    if command not in COMMANDS:
        return ActionError(f"unknown command '{command}' (valid: {', '.join(COMMANDS)})")
    base: tuple[str, ...] = ("--config", _get(env, "CONFIG")) if _get(env, "CONFIG") else ()
    extra = tuple(line for line in _get(env, "ARGS").split("\n") if line)
    plan_file = _get(env, "PLAN_FILE", "plan.json")
    status_dir = _get(env, "STATUS_DIR", "testfleet-status")
    verb = (*base, *COMMANDS[command])
    if command == "plan":
        event = env.get("GITHUB_EVENT_NAME", "")
        args: tuple[str, ...] = ("--github",) if event in _GITHUB_EVENTS else \
            ("--event", "workflow_call")
        if _get(env, "CADENCE"):
            args += ("--cadence", _get(env, "CADENCE"))
        if event in _PR_EVENTS and _get(env, "DIFF_BASE"):
            args += ("--diff-base", _get(env, "DIFF_BASE"))
        for stage in filter(None, _get(env, "STAGES").split(",")):
            args += ("--stage", stage)
        passes = frozenset({0, 1})
        return [Invocation((*verb, *args, *extra, "--format", "github", "--plan-file", plan_file),
                           passes=passes),
                Invocation((*verb, *args, *extra, "--format", "markdown"), summary=True,
                           passes=passes)], notices
    if command == "run":
        job = _get(env, "JOB")
        if not job:
            return ActionError("the run command needs the 'job' input")
        digest = ("--plan-digest", _get(env, "PLAN_DIGEST")) if _get(env, "PLAN_DIGEST") else ()
        # a rescue job (#40): rescue.json beside the plan file, checked against its digest
        rescue = ("--rescue", str(PurePosixPath(plan_file).parent / "rescue.json")) \
            if _get(env, "RESCUE_DIGEST") else ()
        junit = _get(env, "JUNIT_DIR", "testfleet-junit")
        return [Invocation((*verb, "--plan", plan_file, "--job", job,
                            "--junit", f"{junit}/{job}.xml",
                            "--status-file", f"{status_dir}/{job}.json", *digest, *rescue,
                            *extra))], notices
    if command == "reconcile":
        # status files or directories of them (downloaded artifacts); default status-dir
        return [Invocation((*verb, "--plan", plan_file, *(extra or (status_dir,))))], notices
    if command == "history-merge":
        # a directory stands for the bundles in it (downloaded artifacts, one folder each)
        return [Invocation((*verb, "--skip-empty", *extra))], notices
    return [Invocation((*verb, *extra))], notices
