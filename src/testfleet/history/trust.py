"""Who may write history: the rule ``history merge`` enforces on each bundle.

Only runs of the default branch write history (push, schedule, manual dispatch there);
a pull request -- a fork's above all -- reads it and never writes. The CI engine is
what really enforces this (the merge job runs only on the default branch and sees
only its own run's artifacts; GitHub's cache scoping keeps a PR's caches out of the
default branch's), but a bundle also records where it came from, so a bundle that
slips through anyway is refused by ``merge`` itself:

- a bundle whose event is not a trusted one (``pull_request``, ``pull_request_target``,
  ``merge_group``, anything but push / schedule / workflow_dispatch / workflow_call) is
  refused unless ``--allow-untrusted``; then its gate runs are stored untrusted;
- ``merge --require-ref REF`` also refuses a bundle exported on another ref;
- gate runs of a bundle whose cadence does not write metric baselines
  (``write_baseline`` false) are stored untrusted, whatever they claim.

A bundle that says nothing about its origin (exported by hand, outside CI) is
accepted: the person merging it is the trust decision.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from testfleet.history.bundle import Source

#: Events whose runs may write history (on the default branch: see --require-ref).
TRUSTED_EVENTS = ("push", "schedule", "workflow_dispatch", "workflow_call")


def source_from_env(environ: Mapping[str, str] | None = None, **overrides: object) -> Source:
    """The origin of the records a job exports: GitHub Actions or Buildkite variables,
    each overridden by an explicit value (``None`` overrides leave the variable's)."""
    env = os.environ if environ is None else environ
    event = env.get("GITHUB_EVENT_NAME") or None
    ref = env.get("GITHUB_REF") or None
    run_id = env.get("GITHUB_RUN_ID") or None
    repository = env.get("GITHUB_REPOSITORY") or None
    if event is None and env.get("BUILDKITE"):
        pr = env.get("BUILDKITE_PULL_REQUEST", "false")
        event = "pull_request" if pr not in ("", "false") else (
            "schedule" if env.get("BUILDKITE_SOURCE") == "schedule" else "push")
        branch = env.get("BUILDKITE_BRANCH")
        ref = f"refs/heads/{branch}" if branch else None
        run_id = env.get("BUILDKITE_BUILD_NUMBER") or None  # what the runner records
        repository = env.get("BUILDKITE_REPO") or None
    values: dict[str, object] = {"event": event, "ref": ref, "ci_run_id": run_id,
                                 "repository": repository}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Source.model_validate(values)


@dataclass(frozen=True)
class Admission:
    """What ``merge`` does with one bundle: refused (with why), and whether its gate
    runs may stay trusted (with why not)."""

    refused: str | None
    baselines_trusted: bool
    note: str | None = None


def admit(source: Source, *, allow_untrusted: bool = False,
          require_ref: str | None = None) -> Admission:
    """Apply the rule above to one bundle's source (pure)."""
    problem = None
    if source.event is not None and source.event not in TRUSTED_EVENTS:
        problem = (f"exported by a {source.event!r} run; only default-branch runs "
                   f"({', '.join(TRUSTED_EVENTS)}) write history")
    elif require_ref is not None and source.ref != require_ref:
        problem = (f"exported on ref {source.ref!r}, not {require_ref!r}; only the default "
                   "branch writes history")
    if problem is not None and not allow_untrusted:
        return Admission(problem + " (--allow-untrusted merges it with untrusted gate runs)",
                         False)
    if problem is not None:
        return Admission(None, False, f"merged as untrusted: {problem}")
    if source.write_baseline is False:
        return Admission(None, False,
                         f"gate runs stored untrusted: cadence {source.cadence or '?'} does not "
                         "write metric baselines")
    return Admission(None, True)
