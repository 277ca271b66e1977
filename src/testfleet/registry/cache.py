"""The on-disk collection caches: per-file results, never trusted blindly.

Every cache file is one JSON header line followed by a body::

    {"kind": "...", "schema": 1, "key": "<hex>", "crc": <crc32 of body>, "size": <len(body)>, ...}\n
    <body>

``key`` hashes the cache kind and schema, the testfleet and Python versions,
the project root, the config file's path and its raw text, so any config change
drops the whole cache. The CRC and size catch a truncated or corrupt file; a
header of another kind, schema or key (a foreign cache, e.g. restored from
another checkout) is ignored. Writes go to a temporary file in the same
directory and ``os.replace`` it, so a concurrent reader sees the old or the new
file, never half of one. Bodies are JSON or plain arrays of integers, never
pickle: loading a cache must not be able to run code.

The registry cache body is a table (see :func:`encode_table`): the file paths
(NUL-separated), their ``lstat`` keys (size, mtime_ns, ctime_ns, inode, device) as int64s,
each file's content digest (16 bytes), its gate arguments' JSON text (an int64 length
each, then the texts), and a JSON list of per-file results. An entry is used when the
file's key is unchanged; an entry whose mtime was within :data:`RACY_NS` of the run is
marked racy, and the file's bytes must still match its digest (the "racy clean" problem:
an edit inside one timestamp tick leaves size and mtime unchanged). When the key changed
but the content did not (a fresh checkout, a cache restored in CI), the digest proves
it and the entry is used without parsing the file again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from testfleet import __version__
from testfleet.findings import Finding

SCHEMA = 5  # 2: gate entries carry their duplicate constraint keys; 3: content digests;
# 4: gate arguments in their own region, a racy entry marked instead of carrying its digest again;
# 5: a file Python cannot read (NUL byte, encoding cookie) has invalid registrations
KIND = "testfleet-registry-cache"
NAME = "registry-cache.bin"
RACY_NS = 3_000_000_000
_MASK = (1 << 63) - 1


def cache_key(config_name: str, raw_config_text: str, kind: str = KIND) -> str:
    """What a cache's contents depend on, and nothing else: the project's location is not
    part of it (entries hold paths relative to the root, which is the config file's
    directory), so a tree copied or restored elsewhere, as by a CI runner whose workspace
    path differs, keeps its cache; a moved file's entry is then vouched for by its digest."""
    h = hashlib.sha256()
    for part in (kind, str(SCHEMA), __version__, f"{sys.version_info[0]}.{sys.version_info[1]}",
                 config_name, raw_config_text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def digest_cache_key(kind: str) -> str:
    """The key of a cache whose entries are keyed by content digest: no config, no place."""
    return cache_key("", "", kind)


DIGEST_SIZE = 16


def content_digest_bytes(data: bytes) -> bytes:
    """A file's content digest, as the registry table's digest column holds it."""
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def content_digest(data: bytes) -> str:
    """The same digest in hex: what keys the syntax and style caches."""
    return content_digest_bytes(data).hex()


def signed(value: int) -> int:
    """Inode and device numbers are unsigned 64-bit; the table stores int64."""
    return value & _MASK


def load_blob(path: Path, key: str, kind: str) -> tuple[dict[str, Any], bytes] | None:
    """(header, body) when the file is ours, whole and current; otherwise None.

    Only a regular file in a real directory is read: a FIFO would block every command,
    a symlinked cache directory would read whatever it points at (see ``cachedir``)."""
    from testfleet.fileio import read_regular

    try:
        if path.parent.resolve() != path.parent.absolute():
            return None
        raw = read_regular(path)
    except OSError:
        return None
    head, sep, body = raw.partition(b"\n")
    if not sep:
        return None
    try:
        header = json.loads(head)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if (not isinstance(header, dict) or header.get("kind") != kind or header.get("schema") != SCHEMA
            or header.get("key") != key or header.get("size") != len(body)
            or header.get("crc") != zlib.crc32(body)):
        return None
    return header, body


def displaced(root: Path, path: Path) -> Finding | None:
    """A warning when something other than a regular file (a FIFO, socket, device,
    directory or symlink) stands where a cache file belongs: it is not read, and the
    rebuilt cache replaces it (a directory stays, and the cache is simply not kept)."""
    import stat

    from testfleet.fileio import file_kind

    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    fate = ("the cache cannot be kept until it is removed" if stat.S_ISDIR(mode)
            else "the cache is rebuilt in its place")
    return Finding(shown, 0, 0, "warning", "cache-not-a-file",
                   f"{file_kind(mode)} stands where testfleet's cache file belongs; it was not "
                   f"read, and {fate}")


def save_blob(path: Path, key: str, kind: str, body: bytes, extra: dict[str, Any] | None = None) -> bool:
    """Write atomically; a cache that cannot be written only makes the next run slower."""
    directory = path.parent
    try:
        if not _usable_dir(directory):
            return False
        header = {"kind": kind, "schema": SCHEMA, "key": key, "crc": zlib.crc32(body), "size": len(body),
                  **(extra or {})}
        from testfleet.fileio import replace_atomically  # only when writing

        replace_atomically(path, json.dumps(header).encode() + b"\n" + body)
    except (OSError, ValueError):
        return False
    return True


def load(path: Path, key: str, kind: str) -> dict[str, Any]:
    """A JSON-object cache body, or ``{}`` for a missing, foreign, stale or damaged file."""
    blob = load_blob(path, key, kind)
    if blob is None:
        return {}
    try:
        data = json.loads(blob[1])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def save(path: Path, key: str, entries: dict[str, Any], kind: str) -> bool:
    try:
        body = json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    except (ValueError, TypeError, UnicodeEncodeError):
        return False
    return save_blob(path, key, kind, body)


MISS = object()


class DigestCache:
    """Per-file results keyed by content digest (the syntax check's, a file's style), kept
    between runs. A value counts only when ``valid`` accepts it (the file is data); a run
    keeps what it used, and a partial run (``check FILES``) adds to what was there."""

    def __init__(self, root: Path, path: Path, kind: str, use_cache: bool) -> None:
        self.path = path
        self.kind = kind
        self.key = digest_cache_key(kind)
        self.use_cache = use_cache
        self.old: dict[str, Any] = load(path, self.key, kind) if use_cache else {}
        self.new: dict[str, Any] = {}
        # Something other than a file where the cache belongs: said, then replaced by one.
        self.displaced = displaced(root, path) if use_cache else None

    def lookup(self, digest: str, valid: Callable[[Any], bool]) -> Any:
        """The kept value (now counted as used), or :data:`MISS`."""
        value = self.old.get(digest, MISS)
        if value is MISS or not valid(value):
            return MISS
        self.new[digest] = value
        return value

    def put(self, digest: str, value: Any) -> None:
        self.new[digest] = value

    def save(self, *, partial: bool, live: Collection[str] | None = None) -> None:
        """``partial``: keep what was there besides what this run used. ``live``: the
        digests of the tree's files now; an entry for any other content is dropped, so a
        cache that only partial runs write (``plan``) does not grow with every edit."""
        new = {**self.old, **self.new} if partial else self.new
        if live is not None:
            new = {k: v for k, v in new.items() if k in live}
        if self.use_cache and (new != self.old or self.displaced is not None):
            save(self.path, self.key, new, self.kind)


class Table(NamedTuple):
    """A decoded registry cache: per file (in ``paths`` order) its ``lstat`` key (5 int64
    each in ``stats``), its content digest (16 bytes each in ``digests``), its gate
    arguments as JSON text (``b""``: none) and its result element."""

    paths: list[str]
    stats: array[int]
    digests: bytes
    gates: list[bytes]
    elements: list[Any]


def encode_table(paths: list[str], stats: Sequence[tuple[int, ...]], digests: Sequence[bytes],
                 gates: Sequence[bytes], elements: list[Any]) -> tuple[bytes, dict[str, Any]]:
    """Body and header fields for the registry table.

    Gate arguments are most of a gate-heavy tree's cache (4.7 of 5.7 MB on the real-shaped
    10k tree) and only ``check`` and the gate read them, so they are a region of their
    own, after an int64 length per file: ``list`` and ``plan`` slice it, never parse it.
    """
    p = "\0".join(paths).encode("utf-8", "surrogatepass")
    a = array("q")
    for st in stats:
        a.extend(st)
    d = b"".join(digests)
    if len(d) != DIGEST_SIZE * len(paths) or len(gates) != len(paths):
        raise ValueError("one 16-byte digest and one gate text per path")
    lengths = array("q", map(len, gates))
    g = b"".join(gates)
    e = json.dumps(elements, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    extra = {"n": len(paths), "paths": len(p), "stats": len(a) * a.itemsize, "digests": len(d),
             "gates": len(g), "byteorder": sys.byteorder}
    return p + a.tobytes() + d + lengths.tobytes() + g + e, extra


def decode_table(header: dict[str, Any], body: bytes) -> Table | None:
    try:
        n, lp, ls, ld, lg = header["n"], header["paths"], header["stats"], header["digests"], header["gates"]
        if (header.get("byteorder") != sys.byteorder or not all(type(x) is int for x in (n, lp, ls, ld, lg))
                or ls != n * 5 * 8 or ld != n * DIGEST_SIZE or lp < 0 or lg < 0
                or lp + ls + ld + 8 * n + lg > len(body)):
            return None
        paths = body[:lp].decode("utf-8", "surrogatepass").split("\0") if n else []
        stats = array("q")
        lengths = array("q")
        if stats.itemsize != 8:
            return None
        at = lp
        stats.frombytes(body[at:at + ls])
        at += ls
        digests = body[at:at + ld]
        at += ld
        lengths.frombytes(body[at:at + 8 * n])
        at += 8 * n
        if min(lengths, default=0) < 0 or sum(lengths) != lg:
            return None
        gates = []
        for length in lengths:
            gates.append(body[at:at + length] if length else b"")
            at += length
        elements = json.loads(body[at:])
    except (KeyError, TypeError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if len(paths) != n or not isinstance(elements, list) or len(elements) != n:
        return None
    return Table(paths, stats, digests, gates, elements)


# Python literals as JSON data, so that a warm run rebuilds gate arguments without
# parsing Python again (``ast.literal_eval`` compiles its input: ~0.2 ms a value).
# str, int, float, bool and None are themselves; containers and the rest are lists
# whose first item is a tag. Anything else cannot be cached (TypeError).
_PACK_TAGS: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "f"}


def pack_literal(value: Any) -> Any:
    """A literal (what ``ast.literal_eval`` returns) as JSON-ready data."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    tag = _PACK_TAGS.get(kind)
    if tag is not None:
        return [tag, *(pack_literal(v) for v in value)]
    if kind is dict:
        out: list[Any] = ["d"]
        for k, v in value.items():
            out += (pack_literal(k), pack_literal(v))
        return out
    if kind is bytes:
        return ["b", value.hex()]
    if kind is complex:
        return ["c", value.real, value.imag]
    if value is Ellipsis:
        return ["e"]
    raise TypeError(f"not a literal: {kind.__name__}")


def unpack_literal(data: Any) -> Any:
    """The inverse of :func:`pack_literal`; malformed data raises (the caller re-scans)."""
    if type(data) is not list:
        if type(data) in (str, int, float, bool) or data is None:
            return data
        raise TypeError("bad literal")
    tag = data[0]
    if tag == "l":
        return [unpack_literal(v) for v in data[1:]]
    if tag == "t":
        return tuple(unpack_literal(v) for v in data[1:])
    if tag == "d":
        if len(data) % 2 != 1:
            raise ValueError("bad dict")
        return {unpack_literal(data[i]): unpack_literal(data[i + 1]) for i in range(1, len(data), 2)}
    if tag == "s":
        return {unpack_literal(v) for v in data[1:]}
    if tag == "f":
        return frozenset(unpack_literal(v) for v in data[1:])
    if tag == "b" and len(data) == 2 and type(data[1]) is str:
        return bytes.fromhex(data[1])
    if tag == "c" and len(data) == 3 and all(type(x) in (int, float) for x in data[1:]):
        return complex(data[1], data[2])
    if tag == "e" and len(data) == 1:
        return Ellipsis
    raise ValueError("bad literal tag")


def pack_kwargs(kwargs: dict[str, Any]) -> Any:
    """A call's literal arguments as JSON-ready data.

    Most gate arguments are JSON's own types (strings, numbers, lists of numbers, dicts
    keyed by strings): those are kept as they are, tagged once for the whole call, so a
    reader rebuilds them without walking every value; the rest value by value with
    :func:`pack_literal`."""
    if all(_json_native(v) for v in kwargs.values()):
        return ["j", kwargs]
    return {k: pack_literal(v) for k, v in kwargs.items()}


def unpack_kwargs(data: Any) -> dict[str, Any]:
    """The inverse of :func:`pack_kwargs` (JSON object keys are always strings)."""
    if type(data) is dict:
        return {k: unpack_literal(v) for k, v in data.items()}
    if type(data) is list and len(data) == 2 and data[0] == "j" and type(data[1]) is dict:
        return data[1]
    raise TypeError("bad arguments")


def _json_native(value: Any) -> bool:
    """True when JSON gives ``value`` back with the same types all the way down: no tuple
    (a list), no dict keyed by anything but strings (keys become strings)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if kind is list:
        return all(_json_native(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _json_native(v) for k, v in value.items())
    return False


def _usable_dir(directory: Path) -> bool:
    """Create the cache directory (ignored by git); refuse one reached through a symlink.

    The project root is already resolved, so any difference after resolving
    means a symlink inside the project (which a PR could point anywhere).
    """
    if directory.is_symlink() or directory.resolve() != directory.absolute():
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
