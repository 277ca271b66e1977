"""``check``: a file that would run no test under its stage's command.

``python -m pytest FILE`` on a script-style file (only an ``if __name__ == "__main__":``
block) collects nothing and fails with exit status 5 on the runner, long after the PR
merged; ``command = "auto"`` on a file with neither tests nor a main block runs nothing.
Both are found here statically: the file is parsed, never imported. (A ``python``
stage's file without a main block is the registry's ``no-main-call`` warning.)

Parsing is the expensive part (a script-style end-to-end file is large), so each
parsed file's style is cached by its content digest, as the syntax check's results are.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from testfleet.commands import AUTO, Style, file_style, is_pytest
from testfleet.config import Project
from testfleet.fileio import read_capped
from testfleet.findings import Finding
from testfleet.registry import cache
from testfleet.registry.model import Registry

MAX_SOURCE_BYTES = 8 << 20
KIND = "testfleet-style-cache"
NAME = "style-cache.json"
_STYLES = ("pytest", "python", "none")


def command_findings(project: Project, registry: Registry, *, only: Collection[str] | None = None,
                     use_cache: bool = True) -> list[Finding]:
    """One warning per (file, stage) whose command would run no test from the file.

    ``only``: the files whose findings are wanted (``check FILES``); the others are not read.
    """
    stages = project.config.stages
    findings: list[Finding] = []
    styles = style_cache(project.root, project.config.cache_dir, use_cache)
    if styles.displaced is not None:
        findings.append(styles.displaced)
    for reg in registry.registrations:
        stage = stages.get(reg.suite)
        if stage is None or reg.disabled or stage.dormant:
            continue
        if only is not None and reg.file not in only:
            continue
        command = stage.command
        if command != AUTO and not is_pytest(command):
            continue
        facts = file_facts(styles, project.root, reg.file, registry.digests.get(reg.file), command == AUTO)
        if facts is None:
            continue  # collection reports unreadable files
        candidates, style = facts
        if command != AUTO and candidates:
            continue
        if style is None or style == "pytest":
            continue
        if command == AUTO and style == "none":
            findings.append(Finding(
                reg.file, reg.line, reg.col, "warning", "no-tests-collected",
                f"stage {reg.suite!r} has command = 'auto', but this file has neither tests "
                "pytest would collect nor an `if __name__ == \"__main__\":` block: it would run "
                "nothing"))
        elif command != AUTO:
            what = ("only an `if __name__ == \"__main__\":` block" if style == "python"
                    else "no test functions or classes")
            findings.append(Finding(
                reg.file, reg.line, reg.col, "warning", "no-tests-collected",
                f"stage {reg.suite!r} runs files with pytest ({command!r}), which would collect "
                f"no tests from this file ({what}; pytest exits 5): use command = 'auto' or "
                "'python' for script-style files"))
    save_facts(styles, registry.digests, partial=only is not None)
    return findings


def save_facts(styles: cache.DigestCache, digests: Mapping[str, bytes], *, partial: bool) -> None:
    """Keep what a run learnt. A full ``check`` keeps what it used; a partial run (``check
    FILES``, a plan) adds to what was there, keeping only entries for the tree's current
    contents (``digests``, collection's), so the cache does not grow with every edit."""
    live = {digest.hex() for digest in digests.values()} if partial and digests else None
    styles.save(partial=partial, live=live)


def style_cache(root: Path, cache_dir: str, use_cache: bool = True) -> cache.DigestCache:
    """The file facts kept by content digest, shared by ``check`` and ``plan``."""
    return cache.DigestCache(root, root / cache_dir / NAME, KIND, use_cache)


def file_facts(styles: cache.DigestCache, root: Path, rel: str, known: bytes | None,
               auto: bool) -> tuple[bool, Style | None] | None:
    """(has test candidates, style) of a file; None when it cannot be read.

    Kept by content digest (and Python version, whose grammar decides what parses) as
    ``[candidates]``, or ``[candidates, style]`` once the style was needed (a file that
    does not parse has the style None). The digest is collection's when it has one, so a
    warm run reads nothing; what is computed is kept under the digest of the bytes read.
    """
    source: bytes | None = None
    if known is None:
        source = _read(root, rel)
        if source is None:
            return None
        digest = cache.content_digest(source)
    else:
        digest = known.hex()
    kept = styles.lookup(digest, _entry)
    if kept is not cache.MISS and (len(kept) == 2 or (kept[0] and not auto)):
        return kept[0], kept[1] if len(kept) == 2 else None
    if source is None:
        source = _read(root, rel)
        if source is None:
            return None
        read = cache.content_digest(source)
        if read != digest:  # edited since it was collected
            digest, kept = read, cache.MISS
    candidates = kept[0] if kept is not cache.MISS else _has_test_candidates(source)
    value: list[Any] = [candidates]
    if auto or not candidates:
        value.append(file_style(source))
    styles.put(digest, value)
    return candidates, value[1] if len(value) == 2 else None


def _read(root: Path, rel: str) -> bytes | None:
    try:
        return read_capped(root / rel, MAX_SOURCE_BYTES)
    except OSError:
        return None  # collection reports unreadable files


def _entry(value: Any) -> bool:
    return (type(value) is list and len(value) in (1, 2) and type(value[0]) is bool
            and (len(value) == 1 or value[1] is None or value[1] in _STYLES))


def _has_test_candidates(source: bytes) -> bool:
    """Cheap pre-filter: most pytest files are recognised without parsing them."""
    return bool(re.search(rb"^\s*(?:async\s+)?def\s+test", source, re.MULTILINE)
                or re.search(rb"^\s*class\s+Test|TestCase\b", source, re.MULTILINE))
