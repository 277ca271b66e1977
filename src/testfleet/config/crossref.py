"""Checks between sections (stage backends and needs, implicit directories, markers,
cadences, variants, ``cache_dir``), on the raw TOML data so they are reported in the same
pass as every field error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testfleet.config.backends import BUILTIN_BACKENDS
from testfleet.config.base import _did_you_mean
from testfleet.config.policy import _default_cadences
from testfleet.config.triggers import trigger_problems
from testfleet.failures.keys import backend_table_problems
from testfleet.graphs import find_cycle


def _labels_required(backend: str, extra_backends: Mapping[str, Any]) -> bool:
    """A backend's ``labels_required`` from the raw config: a ``[backends.<name>]`` key over
    the built-in value (as ``Config.backend_specs`` reads it; the default is true)."""
    spec, builtin = extra_backends.get(backend), BUILTIN_BACKENDS.get(backend, {})
    if isinstance(spec, Mapping):
        return spec.get("labels_required", builtin.get("labels_required", True)) is not False
    return bool(builtin.get("labels_required", True))


def cross_reference_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key path, message) for references between sections: stage backends and needs,
    implicit directories, marker names.

    Runs on the raw TOML data, not on the validated model, so that these problems are
    reported in the same pass as field errors elsewhere in the file (pydantic would skip
    a model-level check as soon as any field failed). Values of the wrong type are left
    to the field validation, which reports them.
    """
    problems: list[tuple[str, str]] = []
    raw_stages = data.get("stages")
    stages: dict[str, Mapping[str, Any]] = {
        k: v for k, v in raw_stages.items() if isinstance(v, Mapping)
    } if isinstance(raw_stages, Mapping) else {}
    raw_backends = data.get("backends")
    extra_backends = raw_backends if isinstance(raw_backends, Mapping) else {}
    backends = set(BUILTIN_BACKENDS) | {str(k) for k in extra_backends}
    raw_labels = data.get("labels")
    labels = set(raw_labels) if isinstance(raw_labels, Mapping) else set()

    def stage_backend(name: str) -> str | None:
        value = stages.get(name, {}).get("backend")
        return value if isinstance(value, str) else None

    for name, stage in stages.items():
        backend = stage_backend(name)
        if backend is not None and backend not in backends:
            problems.append((f"stages.{name}.backend",
                             f"unknown backend {backend!r}{_did_you_mean(backend, backends)}; "
                             f"valid: {', '.join(sorted(backends))}"))
        needs = stage.get("needs")
        if isinstance(needs, list):
            for need in needs:
                if isinstance(need, str) and need not in stages:
                    problems.append((f"stages.{name}.needs",
                                     f"unknown stage {need!r}{_did_you_mean(need, stages)}; "
                                     f"valid: {', '.join(sorted(stages))}"))
                elif need == name:
                    problems.append((f"stages.{name}.needs", "a stage cannot need itself"))
    problems += _cadence_problems(data, stages) + backend_table_problems(extra_backends, BUILTIN_BACKENDS)
    problems += _variant_problems(stages, backends)
    implicit = data.get("implicit")
    for i, imp in enumerate(implicit if isinstance(implicit, list) else []):
        if not isinstance(imp, Mapping):
            continue
        backend = imp.get("backend", "cpu")
        suite = imp.get("suite")
        if isinstance(backend, str) and backend not in backends:
            problems.append((f"implicit.{i}.backend", f"unknown backend {backend!r}; "
                             f"valid: {', '.join(sorted(backends))}"))
        if isinstance(suite, str):
            if suite not in stages:
                problems.append((f"implicit.{i}.suite",
                                 f"unknown stage {suite!r}{_did_you_mean(suite, stages)}; "
                                 f"valid: {', '.join(sorted(stages)) or '(no stages configured)'}"))
            elif isinstance(backend, str) and stage_backend(suite) not in (None, backend):
                problems.append((f"implicit.{i}.suite",
                                 f"stage {suite!r} is a {stage_backend(suite)} stage, not {backend}"))
        imp_labels = imp.get("labels")
        if isinstance(backend, str) and backend in backends and not imp_labels \
                and _labels_required(backend, extra_backends):
            # #17: the rule every explicit registration of this backend obeys; without it
            # a directory would put unlabelled GPU tests past the fork-authorization labels.
            problems.append((f"implicit.{i}.labels",
                             f"{backend} registrations need at least one label, and so does an "
                             f"implicit {backend} directory (labels = [...]); valid labels: "
                             f"{', '.join(sorted(labels)) or '(none configured)'}"))
        for label in imp_labels if isinstance(imp_labels, list) else []:
            if isinstance(label, str) and label not in labels:
                problems.append((f"implicit.{i}.labels",
                                 f"unknown label {label!r}{_did_you_mean(label, labels)}; "
                                 f"valid: {', '.join(sorted(labels)) or '(no labels configured)'}"))
    graph = {
        name: [n for n in stage.get("needs", []) if isinstance(n, str)]
        for name, stage in stages.items() if isinstance(stage.get("needs", []), list)
    }
    cycle = find_cycle(graph)
    if cycle:
        problems.append((f"stages.{cycle[0]}.needs",
                         "'needs' forms a cycle: " + " -> ".join(cycle)))
    seen: dict[str, str] = {}
    for name, raw in BUILTIN_BACKENDS.items():
        for marker in raw["markers"]:
            seen[marker] = name
    for backend, spec in extra_backends.items():
        markers = spec.get("markers") if isinstance(spec, Mapping) else None
        for marker in markers if isinstance(markers, list) else []:
            if isinstance(marker, str) and seen.get(marker, backend) != backend:
                problems.append((f"backends.{backend}.markers",
                                 f"{marker!r} is already the marker of {seen[marker]!r}"))
            if isinstance(marker, str):
                seen[marker] = str(backend)
    raw_markers = data.get("markers")
    for marker in raw_markers if isinstance(raw_markers, Mapping) else {}:
        if marker != "*" and marker not in seen:
            problems.append((f"markers.{marker}",
                             f"{marker!r} is not a registration marker{_did_you_mean(str(marker), seen)}; "
                             f"valid: {', '.join(sorted(seen))} or '*' (every marker)"))
    problems += _cache_dir_problems(data)
    return problems


def _cache_dir_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """#17: ``cache_dir`` is testfleet's own directory (caches, history.db, runs/). The
    project itself, a test root or an implicit directory (or one holding either) would get
    those files among the tests, and discovery, which skips ``cache_dir``, would lose the
    tests. A non-hidden ``cache_dir`` inside a root that holds test files is reported by
    discovery, which sees the files (``cache-dir-holds-tests``)."""
    import posixpath

    raw = data.get("cache_dir", ".testfleet")
    if not isinstance(raw, str) or not raw.strip() or raw.startswith("/"):
        return []  # the field validation reports it
    cache = posixpath.normpath(raw.replace("\\", "/"))
    if cache == ".":
        return [("cache_dir", f"{raw!r} is the project directory itself; testfleet's caches, "
                 "history and run records need a directory of their own (default '.testfleet')")]
    dirs: list[tuple[str, str]] = []
    roots = data.get("roots", ["tests"])
    dirs += [("root", r) for r in (roots if isinstance(roots, list) else []) if isinstance(r, str)]
    implicit = data.get("implicit")
    dirs += [("implicit directory", imp["path"]) for imp in
             (implicit if isinstance(implicit, list) else [])
             if isinstance(imp, Mapping) and isinstance(imp.get("path"), str)]
    for what, path in dirs:
        other = posixpath.normpath(path.replace("\\", "/").strip("/") or ".")
        if other == cache or other.startswith(cache + "/"):
            return [("cache_dir", f"{raw!r} is or contains the {what} {path!r}; testfleet's "
                     "caches, history and run records must not be written among the tests "
                     "(default '.testfleet')")]
    return []


def _variant_problems(stages: Mapping[str, Mapping[str, Any]],
                      backends: set[str]) -> list[tuple[str, str]]:
    """A variant's lane key ``<stage>.<variant>`` names its jobs and its history, so it
    must not also be a stage's name; its ``backend`` must be a known one."""
    problems = []
    for name, stage in stages.items():
        variants = stage.get("variants")
        for variant, table in variants.items() if isinstance(variants, Mapping) else ():
            if f"{name}.{variant}" in stages:
                problems.append((f"stages.{name}.variants.{variant}",
                                 f"'{name}.{variant}' is also a stage's name; a variant's jobs "
                                 "and history are keyed '<stage>.<variant>', rename one of them"))
            backend = table.get("backend") if isinstance(table, Mapping) else None
            if isinstance(backend, str) and backend not in backends:
                problems.append((f"stages.{name}.variants.{variant}.backend",
                                 f"unknown backend {backend!r}{_did_you_mean(backend, backends)}; "
                                 f"valid: {', '.join(sorted(backends))}"))
    return problems


def _cadence_problems(data: Mapping[str, Any],
                      stages: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """A stage's ``cadences`` must name cadences the policy defines (default ones included)."""
    raw_policy = data.get("policy")
    raw_cadences = raw_policy.get("cadences") if isinstance(raw_policy, Mapping) else None
    known = ({str(k) for k in raw_cadences} if isinstance(raw_cadences, Mapping)
             else set(_default_cadences()))
    problems = []
    for name, stage in stages.items():
        wanted = stage.get("cadences")
        for cadence in wanted if isinstance(wanted, list) else []:
            if isinstance(cadence, str) and cadence not in known:
                problems.append((f"stages.{name}.cadences",
                                 f"unknown cadence {cadence!r}{_did_you_mean(cadence, known)}; "
                                 f"valid: {', '.join(sorted(known))} (policy.cadences)"))
        probe = stage.get("probe")
        cadence = probe.get("cadence", "nightly") if isinstance(probe, Mapping) else None
        if isinstance(cadence, str) and cadence not in known:
            problems.append((f"stages.{name}.probe.cadence",
                             f"unknown cadence {cadence!r}{_did_you_mean(cadence, known)}; "
                             f"valid: {', '.join(sorted(known))} (policy.cadences)"))
    return problems + trigger_problems(stages, known)
