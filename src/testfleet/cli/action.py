"""``testfleet action``: one step of the GitHub Action, its inputs read from the
environment (:mod:`testfleet.integrations.action_step` decides the command lines)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click


@click.command("action")
def command() -> int:
    """Run one step of testfleet's GitHub Action; its inputs come from the TESTFLEET_*
    variables the action sets (TESTFLEET_COMMAND=plan, run, reconcile, ...; see action.yml).

    \b
    Examples:
      testfleet action
    """
    from testfleet.integrations.action_step import ActionError, invocations

    found = invocations(os.environ)
    if isinstance(found, ActionError):
        click.echo(f"::error title=testfleet::{found.message}")
        return 2
    steps, notices = found
    for notice in notices:
        click.echo(f"::notice title=testfleet::{notice}")
    summary = os.environ.get("GITHUB_STEP_SUMMARY", "")
    # the testfleet the action installed, as the step's own script would call it
    found_exe = shutil.which("testfleet")
    program = [found_exe] if found_exe else [sys.executable, "-m", "testfleet"]
    for step in steps:
        argv = [*program, *step.argv]
        if step.summary:
            if not summary:
                continue
            with open(summary, "a", encoding="utf-8") as fh:
                code = subprocess.run(argv, stdout=fh, check=False).returncode
        else:
            code = subprocess.run(argv, check=False).returncode
        if code not in step.passes:
            return code
    return 0
