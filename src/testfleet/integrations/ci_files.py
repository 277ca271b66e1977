"""The CI files ``testfleet init`` writes, decided (not written) here.

GitHub: the workflow, the trusted workflow when any stage needs it, the vendored
composite action, the stage jobs' shared action, the setup scripts,
and ``.github/actionlint.yaml`` (the self-hosted labels, only when the
project has no actionlint config of its own). Buildkite: the bootstrap pipeline. Both
install testfleet the way it is installed here (:mod:`.install`) unless the configuration
names its own install. Alongside, the notes ``init`` prints: how testfleet will be
installed, and the GitHub settings the workflows rely on.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from testfleet.config import Config
from testfleet.errors import UsageError
from testfleet.integrations.install import Install, configured, this_install


@dataclass
class CIFiles:
    """Files to write as (path, text, what), and the notes and warnings to print."""

    files: list[tuple[Path, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def resolve_install(config: Config) -> Install:
    return configured(config.ci.install) if config.ci.install else this_install()


def _install_notes(install: Install, out: CIFiles) -> None:
    if install.problem and install.source == "config":
        raise UsageError(install.problem)
    if install.note:
        out.notes.append(f"note: {install.note}")
    if install.problem:
        out.warnings.append(f"warning: {install.problem}; the generated jobs stop with that "
                            "message until then")
    else:
        out.notes.append(f"CI jobs install testfleet from {install.detail}: {install.command}")


def _git(repo: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=20, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def repository_of(repo: Path) -> tuple[str, str]:
    """(owner/name, default branch) from the ``origin`` remote, best effort; the
    placeholders ``OWNER/REPO`` and ``main`` when git cannot tell."""
    import re

    url = _git(repo, "remote", "get-url", "origin")
    m = re.search(r"github\.com[:/]([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)(?:\.git)?/?$", url)
    head = _git(repo, "symbolic-ref", "--short", "refs/remotes/origin/HEAD")
    branch = head.split("/", 1)[1] if "/" in head else ""
    return (m.group(1) if m else "OWNER/REPO"), branch or "main"


def github_files(repo: Path, config: Config, opts: object, *, force: bool) -> CIFiles:
    """The GitHub files for ``config`` (``opts``: a WorkflowOptions whose ``install``
    is filled in here when the configuration names none)."""
    from testfleet.integrations.action import ACTION_PATH, render_action
    from testfleet.integrations.github_job_action import JOB_ACTION_PATH, render_job_action
    from testfleet.integrations.github_options import (
        ACTIONLINT_PATH,
        STAGES_WORKFLOW_PATH,
        TRUSTED_WORKFLOW_PATH,
        WORKFLOW_PATH,
        WorkflowOptions,
        render_actionlint_config,
        self_hosted_labels,
    )
    from testfleet.integrations.github_stages import render_stages_workflow
    from testfleet.integrations.github_trusted import github_settings, render_trusted_workflow
    from testfleet.integrations.github_workflow import render_workflow
    from testfleet.integrations.setup_scripts import SETUP_DIR, setup_scripts

    assert isinstance(opts, WorkflowOptions)
    out = CIFiles()
    for path in (WORKFLOW_PATH, TRUSTED_WORKFLOW_PATH, STAGES_WORKFLOW_PATH):
        if (repo / path).exists() and not force:
            raise UsageError(f"{path} already exists; use --force to replace it")
    install = resolve_install(config)
    _install_notes(install, out)
    opts = replace(opts, install=install.command)
    out.files.append((repo / WORKFLOW_PATH, render_workflow(config, opts), WORKFLOW_PATH))
    # every stage job once; both workflows call it
    stages = render_stages_workflow(config, opts)
    if stages is not None:
        out.files.append((repo / STAGES_WORKFLOW_PATH, stages, STAGES_WORKFLOW_PATH))
    elif (repo / STAGES_WORKFLOW_PATH).exists():
        out.warnings.append(f"warning: no stage is configured, so nothing calls "
                            f"{STAGES_WORKFLOW_PATH} any more; delete it")
    trusted = render_trusted_workflow(config, opts)
    if trusted is not None:
        out.files.append((repo / TRUSTED_WORKFLOW_PATH, trusted, TRUSTED_WORKFLOW_PATH))
    elif (repo / TRUSTED_WORKFLOW_PATH).exists():
        out.warnings.append(f"warning: no stage needs {TRUSTED_WORKFLOW_PATH} any more (every "
                            "stage is on GitHub-hosted runners and not trusted_only); delete it")
    # the workflows' plan/run/history steps are this action (one implementation)
    out.files.append((repo / ACTION_PATH, render_action(vendored=True), ACTION_PATH))
    # what every stage job shares, once, and each setup item as a script file
    out.files.append((repo / JOB_ACTION_PATH, render_job_action(config, opts), JOB_ACTION_PATH))
    scripts = setup_scripts(config)
    out.files += [(repo / path, text, path) for path, text in sorted(scripts.files.items())]
    out.notes += [f"note: {n}" for n in scripts.notes]
    stale = sorted(str(p.relative_to(repo)) for p in (repo / SETUP_DIR).glob("*/setup-*.sh")
                   if str(p.relative_to(repo)) not in scripts.files)
    if stale:
        out.warnings.append(f"warning: no stage runs these setup scripts any more; delete them: "
                            f"{', '.join(stale)}")
    labels = self_hosted_labels(config)
    own = [p for p in (".github/actionlint.yaml", ".github/actionlint.yml") if (repo / p).exists()]
    if labels and not own:
        out.files.append((repo / ACTIONLINT_PATH, render_actionlint_config(config), ACTIONLINT_PATH))
    elif labels and (repo / own[0]).read_text(encoding="utf-8", errors="replace") != \
            render_actionlint_config(config):
        out.notes.append(f"{own[0]} is yours and was left as it is: its self-hosted-runner "
                         f"labels must include {', '.join(labels)} for actionlint")
    repository, branch = repository_of(repo)
    out.notes.append("GitHub settings these workflows rely on (docs/recipes/github-actions.md):")
    out.notes += [f"  - {item}" for item in github_settings(config, repository, branch,
                                                             opts.push_branches)]
    return out


def buildkite_files(repo: Path, config: Config, *, force: bool) -> CIFiles:
    from testfleet.integrations.buildkite import BOOTSTRAP_PATH, bootstrap

    out = CIFiles()
    if (repo / BOOTSTRAP_PATH).exists() and not force:
        raise UsageError(f"{BOOTSTRAP_PATH} already exists; use --force to replace it")
    install = resolve_install(config)
    _install_notes(install, out)
    out.files.append((repo / BOOTSTRAP_PATH, bootstrap(install.command), BOOTSTRAP_PATH))
    return out
