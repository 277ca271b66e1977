"""The on-disk collection cache: per-file results, never trusted blindly.

Layout of ``<root>/<cache_dir>/registry-cache.json`` (schema 1)::

    {"kind": "testfleet-registry-cache", "schema": 1, "key": "<hex>", "digest": "<hex>"}\\n
    {"<file>": [size, mtime_ns, ctime_ns, ino, dev, racy_digest|null, payload], ...}

``key`` hashes the cache schema, the testfleet and Python versions, the project
root, the config file's path and its raw text, so any config change drops the
whole cache. An entry is used only when the file's ``lstat`` key (size,
mtime_ns, ctime_ns, inode, device) is unchanged; an entry whose mtime was
within :data:`RACY_NS` of the write also carries a content digest that must
match (the "racy clean" problem: an edit inside one timestamp tick). ``digest``
is the BLAKE2b of the body, so a truncated, corrupt or foreign file is ignored.
Writes go to a temporary file in the same directory and ``os.replace`` it, so a
concurrent reader sees the old or the new file, never half of one. JSON, not
pickle: loading a cache must never be able to run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testfleet import __version__

SCHEMA = 1
KIND = "testfleet-registry-cache"
NAME = "registry-cache.json"
RACY_NS = 3_000_000_000


def cache_key(root: Path, config_path: Path, raw_config_text: str, kind: str = KIND) -> str:
    h = hashlib.sha256()
    for part in (kind, str(SCHEMA), __version__, f"{sys.version_info[0]}.{sys.version_info[1]}",
                 str(root), str(config_path), raw_config_text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def load(path: Path, key: str, kind: str = KIND) -> dict[str, Any]:
    """The cache body, or ``{}`` for a missing, foreign, stale or damaged file."""
    try:
        if path.is_symlink():
            return {}
        raw = path.read_bytes()
    except OSError:
        return {}
    head, sep, body = raw.partition(b"\n")
    if not sep:
        return {}
    try:
        header = json.loads(head)
        if (not isinstance(header, dict) or header.get("kind") != kind
                or header.get("schema") != SCHEMA or header.get("key") != key
                or header.get("digest") != content_digest(body)):
            return {}
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def save(path: Path, key: str, entries: dict[str, Any], kind: str = KIND) -> bool:
    """Write atomically; a cache that cannot be written is only a slower next run."""
    directory = path.parent
    try:
        if not _usable_dir(directory):
            return False
        body = json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        header = json.dumps({"kind": kind, "schema": SCHEMA, "key": key, "digest": content_digest(body)})
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(header.encode() + b"\n" + body)
            os.replace(tmp, path)
        except BaseException:
            with _suppress():
                os.unlink(tmp)
            raise
    except (OSError, ValueError, UnicodeEncodeError):
        return False
    return True


def _usable_dir(directory: Path) -> bool:
    """Create the cache directory (ignored by git); refuse one that is a symlink."""
    if directory.is_symlink():
        return False
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        gitignore = directory / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# created by testfleet\n*\n", encoding="utf-8")
    return True


def is_racy(mtime_ns: int, now_ns: int | None = None) -> bool:
    now = time.time_ns() if now_ns is None else now_ns
    return mtime_ns >= now - RACY_NS


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True
