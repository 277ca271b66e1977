"""The step that runs the tests, beyond its runner command: its own environment, the
commands before the runner in its ``run:``, its time limit, and a wrapper the runner is
started through.

The stage job's other steps are carried by :func:`testfleet.adopt.job._setup_steps`; the
test step used to be read for its runner call only, so a ``CUDA_VISIBLE_DEVICES`` in its
``env:``, a ``pip install`` before ``python3 run_suite.py`` or its ``timeout-minutes`` were
dropped without a word. Each is now carried where the configuration can hold it (stage
``env``, a last ``setup`` item, ``job_timeout_minutes``) or listed as not carried over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from testfleet.adopt.ci_model import CIStage, NotCarried
from testfleet.adopt.workflow_yaml import has_expr, short

#: where the runner starts in a command line: ``python3 run_suite.py``, ``pytest``, ...
_RUNNER_START = re.compile(
    r"(?:\bpython3?(?:\s+-\w+)*\s+(?:-m\s+)?)?(?:[\w./-]*/)?"
    r"\b(?:run_suite\.py|pytest|py\.test|unittest|testfleet\s+run|tox|nox)\b")
#: a ``cd DIR &&`` or ``VAR=value`` in front of the runner: nothing testfleet needs, since
#: it starts every file itself from the repository root by its path
_HARMLESS = re.compile(r"""^(?:\s*(?:cd\s+\S+\s*&&|[A-Za-z_]\w*=\S*)\s*)*$""")
#: a line that installs packages: ``pip install pytest`` names a runner without running it
_INSTALL = re.compile(r"\b(?:pip3?\s+(?:install|uninstall)|uv\s+(?:pip|add|sync)|apt(?:-get)?\s|conda\s+install)\b")


def runner_lines(run: str) -> list[str]:
    """The lines of a ``run:`` script that start a test runner (an install line that only
    names one does not)."""
    return [ln for ln in run.replace("\\\n", " ").splitlines()
            if _RUNNER_START.search(ln) and not _INSTALL.search(ln)
            and not ln.strip().startswith("#")]


def carry_test_step(step: Mapping[str, Any], where: str, stage: CIStage,
                    not_carried: list[NotCarried],
                    shell_item: Any) -> list[str]:
    """Carry the test step's settings into ``stage``; the setup items it adds (the
    commands before the runner), in order. ``shell_item`` makes one setup item of a step
    (:func:`testfleet.adopt.job._shell_item`)."""
    label = short(step.get("name") or step.get("run"))
    _env(step, where, label, stage, not_carried)
    limit = step.get("timeout-minutes")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
        if float(limit).is_integer() and (stage.timeout_minutes is None
                                          or limit < stage.timeout_minutes):
            stage.timeout_minutes = float(limit)  # the test step's limit bounds the job's tests
        elif not float(limit).is_integer():
            not_carried.append(NotCarried(where, f"step {label}: timeout-minutes {limit:g}",
                                          "job_timeout_minutes takes whole minutes"))
    elif limit is not None:
        not_carried.append(NotCarried(where, f"step {label}: timeout-minutes {short(limit)}",
                                      "not a literal number of minutes"))
    run = step.get("run")
    if not isinstance(run, str):
        return []
    lines = [ln for ln in run.replace("\\\n", " ").splitlines() if ln.strip()
             and not ln.strip().startswith("#")]
    at = next((i for i, ln in enumerate(lines) if _RUNNER_START.search(ln)
               and not _INSTALL.search(ln)), None)
    if at is None:
        return []
    items: list[str] = []
    before = [ln for ln in lines[:at] if not re.fullmatch(r"\s*cd\s+\S+\s*", ln)]
    if before:
        cwd = {"working-directory": step["working-directory"]} \
            if "working-directory" in step else {}
        item, why = shell_item(cwd, "\n".join(lines[:at]), True)
        if why is None:
            items.append(item)
        else:
            not_carried.append(NotCarried(where, f"step {label}: the commands before the runner",
                                          why))
    m = _RUNNER_START.search(lines[at])
    assert m is not None
    prefix = lines[at][:m.start()]
    if not _HARMLESS.match(prefix):
        not_carried.append(NotCarried(
            where, f"step {label}: the runner is started through {short(prefix.strip())}",
            "testfleet starts each file itself; a wrapper (a container exec, a script) goes "
            "into the stage's command or setup by hand"))
    return items


def _env(step: Mapping[str, Any], where: str, label: str, stage: CIStage,
         not_carried: list[NotCarried]) -> None:
    env = step.get("env")
    if not isinstance(env, Mapping):
        return
    for key, value in env.items():
        name = str(key)
        if isinstance(value, bool):
            value = str(value).lower()  # what GitHub puts in the environment
        if not isinstance(value, (str, int, float)) or has_expr(value):
            not_carried.append(NotCarried(where, f"step {label}: env {name}",
                                          "computed at run time (a ${{ }} expression)"))
        elif name in stage.env and stage.env[name] != str(value):
            not_carried.append(NotCarried(where, f"step {label}: env {name}={short(value)}",
                                          f"the job's env sets it to {short(stage.env[name])}; "
                                          "a stage has one value"))
        else:
            stage.env[name] = str(value)
