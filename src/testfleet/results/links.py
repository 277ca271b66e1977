"""Links from a result to the CI run that produced it. Pure.

A link is made only where the run id and the place are known, never guessed:

1. ``[tool.testfleet.results] run_url``: a template with ``{run_id}`` (and optionally
   ``{commit}``), for any CI system;
2. GitHub Actions: ``github_repository`` in the config, else ``GITHUB_REPOSITORY``
   (with ``GITHUB_SERVER_URL``) in the environment -> ``.../actions/runs/<id>``;
3. Buildkite: ``buildkite_pipeline`` (``org/pipeline``) in the config, else
   ``BUILDKITE_ORGANIZATION_SLUG`` and ``BUILDKITE_PIPELINE_SLUG`` -> ``.../builds/<n>``.

The run id is the one recorded with the execution (``GITHUB_RUN_ID``, or
``BUILDKITE_BUILD_NUMBER`` under Buildkite).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

_SLUG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_HTTP = re.compile(r"^https?://[^\s\"'<>]+$")


@dataclass(frozen=True)
class RunLinker:
    """Turns a recorded CI run id into a URL (or ``None``)."""

    template: str | None = None
    github: str | None = None  # server/owner/repo
    buildkite: str | None = None  # org/pipeline

    def url(self, run_id: str | None, commit: str | None = None) -> str | None:
        if not run_id:
            return None
        rid = quote(run_id, safe="")
        if self.template:
            return self.template.replace("{run_id}", rid).replace(
                "{commit}", quote(commit or "", safe=""))
        if self.github:
            return f"{self.github}/actions/runs/{rid}"
        if self.buildkite:
            return f"https://buildkite.com/{self.buildkite}/builds/{rid}"
        return None


def linker(run_url: str | None, github_repository: str | None, buildkite_pipeline: str | None,
           environ: Mapping[str, str]) -> RunLinker:
    """The linker for a project's config and the environment (config wins)."""
    template = run_url if run_url and _HTTP.match(run_url) else None
    repo = github_repository or environ.get("GITHUB_REPOSITORY", "")
    server = (environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
    github = f"{server}/{repo}" if _SLUG.match(repo or "") and _HTTP.match(server) else None
    pipeline = buildkite_pipeline or (
        f"{environ.get('BUILDKITE_ORGANIZATION_SLUG', '')}/{environ.get('BUILDKITE_PIPELINE_SLUG', '')}")
    buildkite = pipeline if _SLUG.match(pipeline) else None
    return RunLinker(template, github, buildkite)
