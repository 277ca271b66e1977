"""One stage job of the existing CI read into a :class:`~testfleet.adopt.ci_model.CIStage`:
runner labels (a computed ``runs-on`` through :mod:`testfleet.adopt.expr`), container,
timeouts, env and secrets, matrix strategy, the setup steps before the tests, the pytest
options, the runner flags and the runner script's own defaults for them.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testfleet.adopt.ci_model import CIStage, NotCarried
from testfleet.adopt.gates import step_gates
from testfleet.adopt.lookup import JobLookups, job_lookups, resolve_condition, resolve_value
from testfleet.adopt.runner import script_candidates
from testfleet.adopt.test_step import carry_test_step, runner_lines
from testfleet.adopt.workflow_yaml import EXPR, SECRET_REF, has_expr, short, text_of

_INT_FLAG = r"--{name}[= ]+(\d+)"
TEST_COMMAND = re.compile(r"\b(?:pytest|py\.test|unittest|run_suite|testfleet\s+run|tox|nox)\b")
_MATRIX_REF = re.compile(r"\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}")


_NEEDS_OUTPUT = re.compile(r"^\$\{\{\s*needs\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$")
_STEP_OUTPUT = re.compile(r"^\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$")


#: GitHub contexts with an environment variable of the same value in every job
_CONTEXT_VARS = {"github.workspace": "$GITHUB_WORKSPACE", "github.sha": "$GITHUB_SHA",
                 "github.run_id": "$GITHUB_RUN_ID", "github.repository": "$GITHUB_REPOSITORY",
                 "runner.temp": "$RUNNER_TEMP"}


def _shell_value(value: str) -> str | None:
    """An env value whose only expressions are contexts with an environment variable of
    their own, written for a shell; else None."""
    out, last = [], 0
    for m in EXPR.finditer(value):
        var = _CONTEXT_VARS.get(m.group(1).strip())
        if var is None:
            return None
        out += [value[last:m.start()], var]
        last = m.end()
    out.append(value[last:])
    text = "".join(out)
    return text if '"' not in text and "`" not in text and "\\" not in text \
        and not any(ord(c) < 32 for c in text) else None


def output_default(jobs: Mapping[str, Any], expression: str) -> tuple[str, str] | None:
    """(value, job) of ``${{ needs.J.outputs.O }}`` when job J's step writes O as a literal
    with shell defaults only (miles' resolve-ci-image: ``[ -z "$TAG" ] && TAG="miles-x"``,
    then ``echo "container_image=rocm/sgl-dev:${TAG}" >> "$GITHUB_OUTPUT"``): what a run gets
    when no input overrides it. Anything less certain is None."""
    m = _NEEDS_OUTPUT.match(expression.strip())
    job = jobs.get(m.group(1)) if m else None
    outputs = job.get("outputs") if isinstance(job, Mapping) else None
    ref = outputs.get(m.group(2)) if isinstance(outputs, Mapping) and m else None
    step_ref = _STEP_OUTPUT.match(ref.strip()) if isinstance(ref, str) else None
    if m is None or step_ref is None or not isinstance(job, Mapping):
        return None
    raw = job.get("steps")
    steps: list[Any] = raw if isinstance(raw, list) else []
    step = next((s for s in steps if isinstance(s, Mapping) and s.get("id") == step_ref.group(1)), None)
    script = step.get("run") if isinstance(step, Mapping) else None
    if not isinstance(script, str):
        return None
    key = re.escape(step_ref.group(2))
    writes = re.findall(r'^\s*echo\s+"' + key + r'=([^"]*)"\s*>>\s*"?\$GITHUB_OUTPUT"?\s*$',
                        script, re.MULTILINE)
    if len(writes) != 1:
        return None
    value = writes[0]
    for var in set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", value)):
        defaults = re.findall(r'^\s*\[ -z "\$' + var + r'" \] && ' + var + r'="?([^"$\s]*)"?\s*$',
                              script, re.MULTILINE)
        if len(defaults) != 1:
            return None
        value = re.sub(r"\$\{" + var + r"\}|\$" + var + r"(?![A-Za-z0-9_])", defaults[0], value)
    if "$" in value or not value.strip():
        return None
    return value, m.group(1)


def _resolved_body(body: Mapping[str, Any], lookups: JobLookups) -> dict[str, Any]:
    """The job with what its lookups settle written in: ``runs-on``, ``env``, the
    container, and each step's ``run``, ``env``, ``timeout-minutes`` and ``if:``; a step
    whose outputs were read from data is marked (it is the lookup, not a setup step)."""
    out = dict(body)
    for key in ("runs-on", "env", "container", "timeout-minutes"):
        if key in out:
            out[key] = resolve_value(out[key], lookups)
    steps = out.get("steps")
    if isinstance(steps, list):
        resolved: list[Any] = []
        for step in steps:
            if not isinstance(step, Mapping):
                resolved.append(step)
                continue
            new = dict(step)
            for key in ("run", "env", "timeout-minutes", "with"):
                if key in new:
                    new[key] = resolve_value(new[key], lookups)
            if "if" in new:
                new["if"] = resolve_condition(new["if"], lookups)
            if new.get("id") in lookups.resolved_steps:
                new["\0lookup"] = lookups.resolved_steps[str(new["id"])]
            resolved.append(new)
        out["steps"] = resolved
    return out


def command_lines(commands: str) -> list[str]:
    return [" ".join(line.split()) for line in commands.replace(">-\n", " ").splitlines()
            if TEST_COMMAND.search(line)]


def read_stage_job(name: str, rel: str, job_id: str, events: tuple[str, ...], job: Mapping[str, Any],
                   called: list[dict[str, Any]], commands: str, not_carried: list[NotCarried],
                   workflow_jobs: Mapping[str, Any] | None = None, repo: Path | None = None,
                   cache: dict[str, Any] | None = None) -> CIStage:
    where = f"{rel} job {job_id}"
    stage = CIStage(name=name, workflow=rel, job=job_id, events=events)
    inner = called[0] if called else {}
    raw_job, raw_inner = job, inner
    lookups = None
    if repo is not None:
        # values the job looks up at run time in data the repository keeps (SGLang's
        # runner_configs.yml through runs_on_map and steps.rc.outputs): settled first
        lookups = job_lookups(repo, job, inner if called else None, workflow_jobs,
                              {} if cache is None else cache)
        if lookups.contexts:
            if called:
                inner = _resolved_body(inner, lookups)
            else:
                job = _resolved_body(job, lookups)
            commands = str(resolve_value(commands, lookups))
        stage.lookup_notes = list(lookups.notes)
        stage.partition_rule = lookups.partition_rule
    computed: Mapping[str, Any] = inner.get("\0computed", {})

    runs_on = job.get("runs-on", inner.get("runs-on"))
    written = raw_job.get("runs-on", raw_inner.get("runs-on"))
    if isinstance(runs_on, (str, list)) and lookups is not None and lookups.data_files \
            and has_expr(written) and not has_expr(runs_on):
        stage.notes.append(f"{where}: runs-on {short(written)} read from "
                           f"{', '.join(sorted(lookups.data_files))} with the job's own key: "
                           f"{json.dumps(runs_on if isinstance(runs_on, list) else [runs_on])}")
    if isinstance(runs_on, str) and not has_expr(runs_on):
        stage.runs_on = [runs_on]
    elif isinstance(runs_on, list) and all(isinstance(x, str) and not has_expr(x) for x in runs_on):
        stage.runs_on = [str(x) for x in runs_on]
    elif isinstance(runs_on, Mapping) and isinstance(runs_on.get("labels"), (str, list)):
        _computed_runs_on(runs_on["labels"], job.get("strategy", inner.get("strategy")),
                          where, stage, not_carried)
        if runs_on.get("group"):
            not_carried.append(NotCarried(where, f"runs-on group {runs_on['group']!r}",
                                          "runner groups have no configuration key; labels kept"))
    elif runs_on is not None:
        _computed_runs_on(runs_on, job.get("strategy", inner.get("strategy")),
                          where, stage, not_carried)

    container = job.get("container", inner.get("container"))
    image: Any = container.get("image") if isinstance(container, Mapping) else container
    if isinstance(image, str) and image and not has_expr(image):
        stage.container = image
        if "container_image" in computed:
            not_carried.append(NotCarried(
                where, f"container image {short(computed['container_image'])}",
                f"chosen at run time; adopted the called workflow's default {image!r}"))
    elif isinstance(image, str) and (found := output_default(workflow_jobs or {}, image)):
        stage.container = found[0]
        not_carried.append(NotCarried(
            where, f"container image {short(image)}",
            f"chosen at run time by job {found[1]}; adopted the image it chooses when nothing "
            f"overrides it, {found[0]!r}"))
    elif image is not None:
        not_carried.append(NotCarried(where, f"container image {short(image)}",
                                      "computed at run time; no literal image to adopt"))
    if isinstance(container, Mapping) and isinstance(container.get("options"), str):
        stage.container_options = " ".join(container["options"].split())
    volumes = container.get("volumes") if isinstance(container, Mapping) else None
    if isinstance(volumes, list):
        for volume in volumes:
            if isinstance(volume, str) and volume.strip() and not has_expr(volume):
                stage.container_volumes.append(volume.strip())
            else:
                not_carried.append(NotCarried(where, f"container volume {short(volume)}",
                                              "not a literal 'source:target' volume"))

    timeout = job.get("timeout-minutes", inner.get("timeout-minutes"))
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        stage.timeout_minutes = float(timeout)

    env: dict[str, str] = {}
    for source in (inner.get("env"), job.get("env")):
        for k, v in (source.items() if isinstance(source, Mapping) else []):
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and not has_expr(v):
                env[str(k)] = str(v)
            elif isinstance(v, str) and SECRET_REF.search(v):
                stage.secrets.extend(SECRET_REF.findall(v))
                whole = EXPR.fullmatch(v.strip())
                ref = SECRET_REF.fullmatch(whole.group(1)) if whole else None
                for name in SECRET_REF.findall(v):
                    stage.secret_env[name] = str(k) if ref else ""
            elif isinstance(v, str) and (shell := _shell_value(v)) is not None \
                    and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
                # ${{ github.workspace }}/x is $GITHUB_WORKSPACE/x to a shell: a setup item
                # sets it for the steps after it, as the job's env did
                stage.env_setup.append(f'echo "{k}={shell}" >> "$GITHUB_ENV"')
            else:
                not_carried.append(NotCarried(where, f"env {k}",
                                              "computed at run time (a ${{ }} expression)"))
    stage.env = env
    stage.secrets = sorted(set(stage.secrets) | set(SECRET_REF.findall(
        text_of(inner.get("steps") if called else job.get("steps")))))
    if job.get("secrets") == "inherit" and not stage.secrets:
        not_carried.append(NotCarried(where, "secrets: inherit",
                                      "the job inherits every secret; list the ones it needs"))

    strategy = job.get("strategy", inner.get("strategy"))
    if isinstance(strategy, Mapping):
        if isinstance(strategy.get("fail-fast"), bool):
            stage.fail_fast = strategy["fail-fast"]
        parallel = strategy.get("max-parallel")
        if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel >= 1:
            stage.max_parallel = parallel
        elif parallel is not None and stage.partition_rule is None:
            not_carried.append(NotCarried(where, f"max-parallel {short(parallel)}",
                                          "not a literal whole number"))
    steps = inner.get("steps") if called else job.get("steps")
    _setup_steps(steps if isinstance(steps, list) else [], where, stage, not_carried,
                 inner.get("\0inputs", {}) if called else {})
    stage.extra_args = _pytest_options(commands, where, not_carried)
    stage.shards = _shards(job, commands)
    if stage.shards is None and stage.partition_rule is None \
            and re.search(r"--(?:auto-partition-size|partition-size|shards|num-shards)\b", commands):
        not_carried.append(NotCarried(where, "partition count",
                                      "computed at run time; shards not set (one job): set shards "
                                      "or target_minutes for this stage"))
        # never one job where the project splits the stage
        stage.incomplete.append("its partition count is computed at run time and no script "
                                "adoption can read decides it: set shards or target_minutes")
    for name, key in (("max-attempts", "max_attempts"), ("retry-wait-seconds", "retry_wait_seconds"),
                      ("retry-timeout-increase", "retry_timeout_increase")):
        m = re.search(_INT_FLAG.format(name=name), commands)
        if m:
            stage.retry[key] = int(m.group(1))
    if "--enable-retry" in commands:
        stage.retry["enabled"] = 1
    m = re.search(_INT_FLAG.format(name="timeout-per-file"), commands)
    if m:
        stage.file_timeout = int(m.group(1))
    for flag in RUNNER_FLAGS:
        if f"--{flag}" in commands and not re.search(_INT_FLAG.format(name=flag), commands):
            stage.runner_dynamic.add(flag.replace("-", "_"))
            not_carried.append(NotCarried(where, f"--{flag}", "its value is computed at run time; "
                                          "the runner script's default is not assumed either"))
    stage.match_all_on_dispatch = "--match-all-labels" in commands
    return stage


def _computed_runs_on(runs_on: Any, strategy: Any, where: str, stage: CIStage,
                      not_carried: list[NotCarried]) -> None:
    """Labels computed by a ``${{ }}`` expression, adopted when they are literals after all
    (a matrix dimension or include list, a fork guard's ternary of literals): one label
    list is the stage's ``runs_on``, several (a matrix over runner classes) its variants.
    Anything else is listed with the reason; an expression is never written."""
    from testfleet.adopt.expr import Unresolved, resolve_runs_on

    if not has_expr(runs_on):
        stage.runs_on = [runs_on] if isinstance(runs_on, str) else [str(x) for x in runs_on]
        return
    # an input no caller gave is null on a push, a pull request or a schedule (a manual
    # run's form may fill it: said as an assumption)
    text = json.dumps(runs_on, default=str)
    names = sorted(set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", text)))
    contexts = {f"inputs.{n}": None for n in names}
    if "matrix." not in text:
        strategy = None  # a matrix computed at run time does not matter to labels it never reads
    try:
        found, assumed = resolve_runs_on(runs_on, strategy, contexts)
    except Unresolved as exc:
        not_carried.append(NotCarried(where, f"runs-on {short(runs_on)}",
                                      f"{exc}; runs_on needs literal labels"))
        stage.runs_on_unresolved = (short(runs_on), str(exc))
        return
    stage.runs_on = found[0]
    if len(found) > 1:
        stage.runs_on_variants = found
    shown = ' / '.join(json.dumps(f) for f in found)
    for assumption in assumed:
        stage.notes.append(f"{where}: runs-on {short(runs_on)} read as {shown}, taking "
                           f"{assumption} (the project's own repository)")
    if names:
        stage.notes.append(f"{where}: runs-on {short(runs_on)} read as {shown}, with "
                           + " and ".join(f"inputs.{n}" for n in names)
                           + " empty, as on a run not started by hand")


#: a step that installs what the tests need: a stage whose install cannot be carried is
#: not adopted as a job that would run its tests without it
_INSTALL = re.compile(r"(?i)\binstall")
#: ``bash scripts/ci/amd/amd_ci_exec.sh ... python3 run_suite.py``: the tests run inside
#: whatever the wrapper enters (a container, an environment)
_WRAPPER = re.compile(r"(?:^|[;&|]\s*|\n\s*)(?:bash|sh)\s+([\w./-]+\.sh)\b[^\n]*\b(?:run_suite|pytest)\b"
                      r"|\b(docker\s+exec)\b[^\n]*\b(?:run_suite|pytest)\b")


def _minutes(value: Any) -> float | None:
    """A literal ``timeout-minutes`` (a number, or a string of one after a lookup)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", value) and float(value) > 0:
        return float(value)
    return None


#: ``python3 -u ${{ inputs.test_case }}``: a Python file the workflow picks, the job's test
_PICKED_FILE = re.compile(r"\bpython3?(?:\s+-\w+)*\s+\$\{\{")
_LISTING = re.compile(r"(?<![\w-])--(?:list-only|dry-run|collect-only)\b")


def _setup_steps(steps: list[Any], where: str, stage: CIStage, not_carried: list[NotCarried],
                 inputs: Mapping[str, Any]) -> None:
    """The steps before the step that runs the tests, each its own ``setup`` item (so an
    ``exit 0`` in one cannot skip the next), or the stage key that does the same: a
    literal ``setup-python`` is ``python``, ``setup-uv`` is ``uv``, a checkout of another
    repository is one of ``checkouts``. A step's literal ``env`` and ``working-directory``
    go into its item (``export``, ``cd``); an ``if:`` true with the caller's inputs is
    carried, one false with them is said and left out. What a shell item cannot hold (an
    action, a value computed at run time, a step after the tests) is said, never dropped."""
    ran = False
    setup: list[str] = []
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        run, uses = step.get("run"), step.get("uses")
        label = short(step.get("name") or run or uses)
        if isinstance(run, str) and (TEST_COMMAND.search(run) or _PICKED_FILE.search(run)) \
                and not _LISTING.search(run) and (runner_lines(run) or _PICKED_FILE.search(run)):
            if not ran:  # its env, limit and the commands before the runner
                stage.test_timeout_minutes = _minutes(step.get("timeout-minutes"))
                wrapper = _WRAPPER.search(run.replace("\\\n", " "))
                if wrapper:
                    stage.incomplete.append(
                        f"its tests run through {wrapper.group(1) or wrapper.group(2)} (a container or environment "
                        "entered by a wrapper script), which a setup item cannot enter: carry "
                        "it into setup or container")
                job_limit = stage.timeout_minutes
                setup += carry_test_step(step, where, stage, not_carried, _shell_item)
                if stage.partition_rule is not None:
                    # partitioned at run time: the step's limit is the shard budget
                    # (target_minutes), and the job keeps its own, which covers its set-up
                    stage.timeout_minutes = job_limit
            ran = True
            continue
        data_file = step.get("\0lookup")
        if data_file:
            not_carried.append(NotCarried(where, f"step {label}", "its outputs were read from "
                                          f"{data_file} at adoption and written into the steps "
                                          "that use them"))
            continue
        if ran:
            not_carried.append(NotCarried(where, f"step {label} after the tests",
                                          "the generated job ends with 'testfleet run' and its "
                                          "own result upload"))
            continue
        runs = _step_runs(step.get("if"), inputs)
        if runs is False:
            not_carried.append(NotCarried(where, f"step {label}", "never runs in this job: its if: "
                                          f"{short(step.get('if'))} is false with the inputs the job "
                                          "gets when nothing overrides them"))
            continue
        if isinstance(uses, str):
            if runs is None:
                not_carried.append(NotCarried(where, f"step uses: {uses}",
                                              f"runs only when {short(step.get('if'))}"))
            else:
                _action_step(uses, step, where, stage, not_carried, label)
            continue
        if not isinstance(run, str) or not run.strip():
            continue
        if any(step_gates([step], {})):
            continue  # a pull-request gate (a label, a draft): adopted as the policy's gates
        if isinstance(run, str) and _LISTING.search(run) and TEST_COMMAND.search(run):
            not_carried.append(NotCarried(where, f"step {label}", "a listing preflight of the "
                                          "runner; the plan job lists what each job runs"))
            continue
        item, why = _shell_item(step, run, runs)
        if why is not None:
            not_carried.append(NotCarried(where, f"step {label}", why))
            if _INSTALL.search(str(step.get("name") or run)):
                stage.incomplete.append(f"its step {label} ({why}): carry it into setup")
            continue
        setup.append(item)
    if ran:  # without a step that runs the tests there is no "before" to carry
        stage.setup = setup


def _step_runs(condition: Any, inputs: Mapping[str, Any]) -> bool | None:
    """Whether a step's ``if:`` is true (True), false (False) or depends on the run
    (None), with the caller's inputs known and the steps before it succeeding."""
    if condition is None:
        return True
    if not isinstance(condition, str):
        return bool(condition)
    from testfleet.adopt.expr import Unknown, Unresolved, job_condition

    names = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", condition))
    try:
        values = job_condition(condition, {f"inputs.{n}": inputs.get(n) for n in names
                                           if n in inputs})
    except Unresolved:
        return None
    if not values or any(isinstance(v, Unknown) for v in values):
        return None
    truths = {v not in (False, None, "", 0) for v in values}
    return truths.pop() if len(truths) == 1 else None


def _shell_item(step: Mapping[str, Any], run: str, runs: bool | None) -> tuple[str, str | None]:
    """The step as one setup item (its literal env exported, its directory entered first),
    or why it cannot be one."""
    import shlex

    extra = sorted(set(step) - {"name", "run", "id", "env", "working-directory", "if",
                                "timeout-minutes", "continue-on-error"}
                   - ({"shell"} if step.get("shell") in ("bash", "sh") else set()))
    if extra:
        return "", f"the step's {', '.join(extra)} cannot be carried into a setup command"
    if runs is None:
        return "", f"runs only when {short(step.get('if'))}, known at run time"
    if step.get("continue-on-error"):
        return "", "continue-on-error: a setup item that fails stops the job"
    if has_expr(run):
        return "", "computed at run time (a ${{ }} expression)"
    env = step.get("env")
    lines: list[str] = []
    for k, v in (env.items() if isinstance(env, Mapping) else []):
        if isinstance(v, bool) or not isinstance(v, (str, int, float)) or has_expr(v) \
                or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
            return "", f"its env {k} is computed at run time (a ${{{{ }}}} expression)"
        lines.append(f"export {k}={shlex.quote(str(v))}")
    cwd = step.get("working-directory")
    if cwd is not None:
        if not isinstance(cwd, str) or has_expr(cwd) or not cwd.strip():
            return "", "its working-directory is computed at run time"
        lines.append(f"cd {shlex.quote(cwd)}")
    return "\n".join([*lines, _time_limited(run.strip(), step.get("timeout-minutes"))]), None


#: one simple command, after its variable assignments (``X=1 bash install.sh``)
_SIMPLE = re.compile(r"^((?:[A-Za-z_][A-Za-z0-9_]*=[^\s;&|<>`$()]*\s+)*)([^\s;&|<>`$()=]+(?:\s+[^;&|<>`$()]+)?)$")
_BUILTINS = {"cd", "export", "source", ".", "set", "unset", "exit", "eval", "exec", "echo", "["}


def _time_limited(run: str, minutes: Any) -> str:
    """A one-command step keeps its own ``timeout-minutes`` as ``timeout Nm`` (the install
    step's limit SGLang reads from runner_configs.yml); a longer script keeps only the
    job's limit."""
    limit = _minutes(minutes)
    m = _SIMPLE.match(run) if limit is not None and "\n" not in run else None
    if m is None or limit is None or m.group(2).split()[0] in _BUILTINS:
        return run
    return f"{m.group(1)}timeout {limit:g}m {m.group(2)}"


def _action_step(uses: str, step: Mapping[str, Any], where: str, stage: CIStage,
                 not_carried: list[NotCarried], label: str = "") -> None:
    """An action step: setup-python and setup-uv are the ``python`` and ``uv`` keys, a
    checkout of another repository one of ``checkouts``; the project's own checkout is the
    generated job's; any other action is said."""
    name = uses.split("@", 1)[0]
    with_ = step.get("with") if isinstance(step.get("with"), Mapping) else {}
    assert isinstance(with_, Mapping)
    if name == "actions/checkout" and not with_.get("repository"):
        return  # the project's own checkout: the generated job's first step
    if name == "actions/setup-python":
        version = with_.get("python-version")
        if isinstance(version, (str, int, float)) and not isinstance(version, bool) \
                and not has_expr(version) and str(version).strip():
            stage.python_version = str(version).strip()
            return
        not_carried.append(NotCarried(where, f"step uses: {uses}",
                                      "its python-version is not a literal (python needs one)"
                                      if version else "it names no python-version; python is "
                                      "left to testfleet's default"))
        return
    if name == "astral-sh/setup-uv":
        stage.uv = True
        if with_:
            not_carried.append(NotCarried(where, f"step uses: {uses} with {short(dict(with_))}",
                                          "uv = true installs uv with the action's defaults"))
        return
    if name == "actions/checkout":
        checkout: dict[str, str] = {}
        repository = with_.get("repository")
        if not isinstance(repository, str) or has_expr(repository):
            not_carried.append(NotCarried(where, f"step uses: {uses}", "the repository it "
                                          "checks out is computed at run time"))
            return
        checkout["repository"] = repository
        ref, path, token = with_.get("ref"), with_.get("path"), with_.get("token")
        if isinstance(ref, str) and ref and not has_expr(ref):
            checkout["ref"] = ref
        elif ref:
            not_carried.append(NotCarried(where, f"checkout of {repository}: ref {short(ref)}",
                                          "computed at run time; the checkout takes the "
                                          "repository's default branch (set ref)"))
        checkout["path"] = path if isinstance(path, str) and path and not has_expr(path) \
            else repository.rsplit("/", 1)[-1]
        whole = EXPR.fullmatch(token.strip()) if isinstance(token, str) else None
        secret = SECRET_REF.fullmatch(whole.group(1)) if whole else None
        if secret:
            checkout["token_secret"] = secret.group(1)
        elif token:
            not_carried.append(NotCarried(where, f"checkout of {repository}: token {short(token)}",
                                          "not a secret of its own name"))
        stage.checkouts.append(checkout)
        return
    named = f"step {label} (uses: {uses})" if step.get("name") else f"step uses: {uses}"
    not_carried.append(NotCarried(where, named, "an action step; setup holds shell commands only"))


#: pytest options that take the next word as their value
_PYTEST_VALUE_OPTIONS = {"-k", "-m", "-p", "-n", "-W", "-o", "-c", "--durations", "--maxfail",
                         "--timeout", "--tb", "--dist", "--reruns", "--rootdir", "--basetemp"}


#: options the runner sets itself: a second value would conflict with it
_PYTEST_OWN_OPTIONS = ("--junitxml", "--junit-xml", "--rootdir", "--basetemp")


def _pytest_options(commands: str, where: str, not_carried: list[NotCarried]) -> list[str]:
    """The options of the job's ``pytest`` command (``pytest tests/unit -x -q --durations=10``),
    appended after each file as ``extra_args``; only when the job has one pytest command."""
    import shlex

    lines = [line for line in command_lines(commands) if re.search(r"\bpytest\b", line)]
    if len(lines) != 1 or "${{" in lines[0]:
        return []
    tail = re.split(r"\s(?:&&|\|\||;|\|)\s", lines[0].split("pytest", 1)[1])[0]
    try:
        words = shlex.split(tail)
    except ValueError:
        return []
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        takes_value = word in _PYTEST_VALUE_OPTIONS
        value = [words[i + 1]] if takes_value and i + 1 < len(words) else []
        i += 1 + len(value)
        if not word.startswith("-"):
            continue  # a path: the stage's files come from the registrations
        if word.split("=", 1)[0] in _PYTEST_OWN_OPTIONS:
            not_carried.append(NotCarried(where, f"pytest {word}", "testfleet's runner sets it"))
            continue
        out += [word, *value]
    return out


_SCRIPT = re.compile(r"\bpython3?(?:\s+-[A-Za-z]+)*\s+([\w./-]+\.py)(?![\w/])")




RUNNER_FLAGS = ("timeout-per-file", "max-attempts", "retry-wait-seconds", "retry-timeout-increase")


def runner_defaults(repo: Path, commands: str) -> tuple[str | None, dict[str, int]]:
    """The defaults a job's runner script gives the runner flags it is not passed
    (``parser.add_argument("--max-attempts", type=int, default=2)``), read with ast from
    the script the command starts (``python tests/ci/run_suite.py``, or after ``cd DIR``)."""

    for m in _SCRIPT.finditer(commands):
        rel = m.group(1).removeprefix("./")
        candidates = script_candidates(commands, rel)
        for candidate in candidates:
            path = repo / candidate
            if not path.is_file() or repo.resolve() not in path.resolve().parents:
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            found = _argparse_defaults(str(path), stat.st_mtime_ns, stat.st_size)
            if found:
                return path.relative_to(repo).as_posix(), found
    return None, {}


@functools.lru_cache(maxsize=64)
def _argparse_defaults(path: str, mtime_ns: int, size: int) -> dict[str, int]:
    """The runner flags' ``default=`` in one script (keyed by its stat, so a script is
    parsed once however many jobs start it)."""
    try:
        tree = ast.parse(Path(path).read_bytes()[:1 << 20])
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant)):
            continue
        flag = str(node.args[0].value).removeprefix("--")
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if (flag in RUNNER_FLAGS and isinstance(default, ast.Constant)
                and isinstance(default.value, int) and not isinstance(default.value, bool)
                and default.value >= 0):
            found[flag.replace("-", "_")] = default.value
    return found


def _shards(job: Mapping[str, Any], commands: str) -> int | None:
    """A partition count: a literal ``--auto-partition-size N`` (or ``--shards N``), or the
    length of the matrix dimension whose value the command passes as the partition id."""
    m = re.search(r"--(?:auto-partition-size|partition-size|shards|num-shards)[= ]+(\d+)", commands)
    if m and int(m.group(1)) >= 1:
        return int(m.group(1))
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, Mapping) else None
    if isinstance(matrix, Mapping):
        for ref in _MATRIX_REF.findall(commands):
            values = matrix.get(ref)
            if isinstance(values, list) and values:
                return len(values)
    return None
