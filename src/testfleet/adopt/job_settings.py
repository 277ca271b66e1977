"""The stage keys a stage job's settings map to (CI job and runner settings), and the
settings the configuration cannot hold as they are.
"""

from __future__ import annotations

from typing import Any

from testfleet.adopt.ci_model import CIStage, NotCarried


def job_settings(ci: CIStage, command: str, name: str, notes: list[str]) -> dict[str, Any]:
    """The stage keys a stage job's settings map to (CI job and runner settings).

    The runner flags come from the job's command, else from the runner script's own
    defaults: the per-file timeout only for a stage whose files the runner starts one by
    one (``command = "python"``; a runner that hands a CPU stage to one pytest call has
    no per-file timeout), the retry settings when the job enables retries. As miles' and
    SGLang's ``run_suite.py`` do, ``--retry-timeout-increase`` with retries enabled raises
    the per-file timeout of every attempt.
    """
    out: dict[str, Any] = {}
    defaults = ci.runner_defaults
    used: list[str] = []

    def flag(key: str) -> int | None:
        if key in ci.retry:
            return ci.retry[key]
        if key in defaults and key not in ci.runner_dynamic:
            used.append(f"--{key.replace('_', '-')} {defaults[key]}")
            return defaults[key]
        return None

    file_timeout: float | None = ci.file_timeout
    if (file_timeout is None and command not in ("pytest", "auto") and "timeout_per_file" in defaults
            and "timeout_per_file" not in ci.runner_dynamic):
        file_timeout = defaults["timeout_per_file"]
        used.append(f"--timeout-per-file {file_timeout}")
    if ci.python_version is not None:
        out["python"] = ci.python_version
    if ci.uv:
        out["uv"] = True
    if ci.checkouts:
        out["checkouts"] = [dict(c) for c in ci.checkouts]
    if ci.setup or ci.env_setup:
        out["setup"] = [*ci.env_setup, *ci.setup]
    secrets = carried_secrets(ci)
    if secrets:
        out["secrets"] = secrets
    if ci.fail_fast is not None:
        out["fail_fast"] = ci.fail_fast
    if ci.max_parallel is not None:
        out["max_parallel"] = min(256, ci.max_parallel)
    if ci.timeout_minutes is not None and float(ci.timeout_minutes).is_integer():
        out["job_timeout_minutes"] = max(1, min(4320, int(ci.timeout_minutes)))
    if ci.retry.get("enabled"):
        attempts = flag("max_attempts")
        out["max_attempts"] = min(10, max(1, attempts if attempts is not None else 2))
        wait = flag("retry_wait_seconds")
        if wait is not None:
            out["retry_wait"] = min(3600, wait)
        increase = flag("retry_timeout_increase") if file_timeout else None
        if increase and file_timeout:
            file_timeout += increase
    if file_timeout:
        out["file_timeout"] = file_timeout
    if used:
        verb = "is the default" if len(used) == 1 else "are the defaults"
        notes.append(f"stage {name}: {', '.join(used)} {verb} of {ci.runner_script}, which "
                     f"{ci.workflow} job {ci.job} runs without passing {'it' if len(used) == 1 else 'them'}")
    if ci.extra_args and command == "pytest":
        out["extra_args"] = list(ci.extra_args)
    return out


def carried_secrets(ci: CIStage) -> list[str]:
    """Secrets a stage can name: exposed under their own name (``X: ${{ secrets.X }}``,
    or used only inside the job's steps), and not GitHub's own token."""
    return sorted(name for name in set(ci.secrets)
                  if not name.upper().startswith("GITHUB_")
                  and ci.secret_env.get(name, name) == name)


def unmapped(stage: CIStage) -> list[NotCarried]:
    """Settings of a stage job that the configuration cannot hold as they are."""
    where = f"{stage.workflow} job {stage.job}"
    out = []
    if stage.timeout_minutes is not None and not float(stage.timeout_minutes).is_integer():
        out.append(NotCarried(where, f"timeout-minutes {stage.timeout_minutes:g}",
                              "job_timeout_minutes takes whole minutes"))
    if (stage.container_options or stage.container_volumes) and not stage.container:
        out.append(NotCarried(where, "container options and volumes",
                              "no literal container image to attach them to"))
    for name in sorted(set(stage.secrets) - set(carried_secrets(stage))):
        why = ("GitHub's own token is given to every job; it is not a repository secret"
               if name.upper().startswith("GITHUB_") else
               f"exposed as {stage.secret_env[name]!r}; a stage's secrets are exposed under "
               "their own names" if stage.secret_env.get(name) else
               "used inside a larger expression; a stage's secrets are exposed as variables "
               "of their own names")
        out.append(NotCarried(where, f"secret {name}", why))
    if stage.retry.get("enabled") and "max_attempts" not in stage.retry \
            and "max_attempts" not in stage.runner_defaults:
        out.append(NotCarried(where, "--enable-retry without --max-attempts",
                              "the runner's own default number of attempts is not read; "
                              "max_attempts = 2 adopted (edit it if the runner uses another)"))
    if "retry_timeout_increase" in stage.retry and not stage.file_timeout \
            and "timeout_per_file" not in stage.runner_defaults:
        out.append(NotCarried(where, f"retry timeout increase {stage.retry['retry_timeout_increase']}s",
                              "it raises a fixed per-file timeout (--timeout-per-file), and "
                              "the job has none"))
    if stage.retry and not stage.retry.get("enabled"):
        out.append(NotCarried(where, "retry flags without --enable-retry",
                              "retries are off for this job; nothing adopted"))
    return out


#: the stage keys that prepare the job's machine (``testfleet.ci_keys``, when this
#: testfleet has them)
JOB_KEYS = ("python", "uv", "checkouts")


def job_keys_supported() -> bool:
    """Does this testfleet's configuration have the ``python``/``uv``/``checkouts`` stage
    keys? Without them adoption lists the values instead of writing them."""
    from testfleet.config import StageConfig

    return all(k in StageConfig.model_fields for k in JOB_KEYS)


def unsupported_job_keys(table: dict[str, Any], where: str) -> list[NotCarried]:
    """Take the job keys out of ``table`` when this testfleet cannot hold them, and say so."""
    if job_keys_supported():
        return []
    out = []
    for key in JOB_KEYS:
        if key in table:
            out.append(NotCarried(where, f"{key} = {table.pop(key)!r}",
                                  f"this testfleet has no stage key {key!r} yet"))
    return out
