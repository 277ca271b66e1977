"""Full-file syntax validation for ``testfleet check``, cached by content hash.

The fast collector parses only registration statements, so a syntax error
elsewhere in a file does not stop ``list`` or ``plan`` (the file is still
registered where it says). ``check`` compiles every discovered file (without
running it) so such a file is reported before CI spends a runner on it. Results
are cached by BLAKE2b of the file's bytes and keyed by the Python version,
because what is valid syntax depends on it.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

from testfleet.findings import Finding
from testfleet.progress import task
from testfleet.registry import cache
from testfleet.registry.model import Registry
from testfleet.registry.parallel import parallel_map
from testfleet.registry.scan import decode

KIND = "testfleet-syntax-cache"
NAME = "syntax-cache.json"


def syntax_error(data: bytes, rel: str) -> tuple[int, int, str] | None:
    """(line, col, message) of the first syntax error, or None; never executes anything."""
    text, _ = decode(data)
    if text is None:
        return None  # collection already reports the encoding
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, rel, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return (exc.lineno or 0, exc.offset or 0, exc.msg or "invalid syntax")
    except (ValueError, RecursionError, MemoryError) as exc:
        return (0, 0, f"cannot be compiled: {exc}")
    return None


def syntax_findings(root: Path, cache_dir: str, registry: Registry, *, use_cache: bool = True,
                    only: Collection[str] | None = None) -> list[Finding]:
    """Compile every file (``only``: those files, as ``check FILES`` asks); cached by digest.

    A file's digest comes from collection (``registry.digests``) when it has one, so a
    warm run reads no file; a file is read here only to be compiled, and its result is
    kept under the digest of the bytes that were compiled (an edit since collection
    must not file one content's verdict under another's digest).
    """
    already = {f.file for f in registry.findings if f.code in ("syntax", "encoding", "read-error")}
    kept = cache.DigestCache(root, root / cache_dir / NAME, KIND, use_cache)
    out: list[Finding] = [kept.displaced] if kept.displaced is not None else []
    todo: list[str] = []
    for rel in registry.files:
        if rel in already or (only is not None and rel not in only):
            continue
        known = registry.digests.get(rel)
        if known is not None:
            digest = known.hex()
        else:
            try:
                digest = cache.content_digest((root / rel).read_bytes())
            except OSError:
                continue
        cached = kept.lookup(digest, lambda v: v is None or _well_formed(v))
        if cached is cache.MISS:
            todo.append(rel)
        elif cached is not None:
            out.append(_finding(rel, cached))
    with task("checking syntax", len(todo)) as progress:
        answers = parallel_map(_check_one(root), todo, min_items=PARALLEL_MIN, progress=progress)
    for rel, answer in zip(todo, answers, strict=True):
        if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], str)):
            continue  # unreadable now: collection says so if it stays that way
        digest, result = answer
        found = result if _well_formed(result) else None
        kept.put(digest, found)
        if found is not None:
            out.append(_finding(rel, found))
    kept.save(partial=only is not None)
    return out


PARALLEL_MIN = 200


def _check_one(root: Path) -> Any:
    def check(rel: str) -> list[Any] | None:
        """[digest of the bytes compiled, (line, col, message) or None]; None: unreadable."""
        try:
            data = (root / rel).read_bytes()
        except OSError:
            return None
        found = syntax_error(data, rel)
        return [cache.content_digest(data), None if found is None else list(found)]

    return check


def _finding(rel: str, cached: list[Any]) -> Finding:
    line, col, msg = cached
    return Finding(rel, line, col, "error", "syntax", f"syntax error: {msg}")


def _well_formed(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 3 and isinstance(value[0], int)
            and isinstance(value[1], int) and isinstance(value[2], str))
