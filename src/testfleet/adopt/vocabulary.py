"""The labels and backends a tree uses, as configuration: label descriptions from the
project's label registry, custom backends, and label requirements the tree does not meet.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from testfleet.adopt.calls import NAME, FoundCall
from testfleet.adopt.project import ProjectCI
from testfleet.config import BUILTIN_BACKENDS
from testfleet.findings import Finding


def adopted_labels(calls: list[FoundCall], project: ProjectCI, findings: list[Finding],
            notes: list[str]) -> dict[str, str]:
    """Every label the tree uses, described as the project's label registry describes it
    (its other labels too: a PR may already carry them)."""
    label_use = Counter(label for c in calls for label in set(c.labels))
    labels: dict[str, str] = {}
    for label, description in project.labels.items():
        if NAME.match(label):
            labels[label] = description
    missing = []
    for label, _ in sorted(label_use.items()):
        if label in labels:
            continue
        if NAME.match(label):
            labels[label] = ""
            missing.append(label)
        else:
            for c in calls:
                if label in c.labels:
                    findings.append(Finding(c.file, c.line, c.col, "error", "adopt-label",
                                            f"label {label!r} is not a valid label name "
                                            f"(letters, digits, '.', '_', '-')"))
    if project.labels_source:
        notes.append(f"label descriptions from {project.labels_source}")
        if missing:
            notes.append(f"label(s) used but not in {project.labels_source}: {', '.join(missing)} "
                         "(no description)")
    return labels


def adopted_backends(calls: list[FoundCall], notes: list[str]) -> dict[str, dict[str, Any]]:
    """Custom backends, and built-ins whose label requirement the tree does not meet."""
    by_backend: dict[str, list[FoundCall]] = defaultdict(list)
    markers: dict[str, set[str]] = defaultdict(set)
    for c in calls:
        by_backend[c.backend].append(c)
        markers[c.backend].add(c.marker)
    backends: dict[str, dict[str, Any]] = {}
    for backend, bcalls in sorted(by_backend.items()):
        all_labelled = all(c.labels for c in bcalls)
        builtin = BUILTIN_BACKENDS.get(backend)
        if builtin is None:
            backends[backend] = {"markers": sorted(markers[backend]),
                                 "labels_required": all_labelled, "gpu": True}
            notes.append(f"backend {backend!r} is not built in; declared with marker(s) "
                         f"{', '.join(sorted(markers[backend]))}")
        elif builtin["labels_required"] and not all_labelled:
            backends[backend] = {"markers": list(builtin["markers"]), "labels_required": False,
                                 "gpu": builtin["gpu"]}
            notes.append(f"some {backend} registrations have no labels; labels are made optional "
                         f"for {backend} (label-less tests run on every trigger, as before)")
    return backends
