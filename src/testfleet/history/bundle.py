"""The history bundle: one job's (or a whole database's) records as one portable file.

On disk a bundle is gzip of one canonical JSON document (sorted keys, no spaces,
UTF-8, no NaN)::

    {"payload": {...}, "schema": "testfleet.bundle/2", "sha256": "<hex>"}

``sha256`` is the digest of the canonical JSON of ``payload``, so any change to a
record after export -- a flipped bit, an edited value, a forged ``trusted`` -- is
caught before anything is written. The payload carries the history schema version
the records were read from, where they came from (event, ref, cadence: see
:mod:`testfleet.history.trust`) and the rows: executions, gate runs, gate
values that name their run by uid, per-testcase results that name their execution
by uid, and the failure signatures that executions and testcases name by digest.

Format 2 (schema step 8, incidents) added the signatures; a format-1 bundle (written
before it) is still read: its rows simply carry none. A testfleet that knows only
format 1 refuses a format-2 bundle by its schema, saying it is newer.

Decoding is strict and bounded: the compressed file and the decompressed JSON are
read only up to a cap, every problem is a :class:`BundleError` naming the file,
and a bundle that passes :func:`decode` is consistent on its own (no value of an
unknown run, no identity used twice for different content).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from testfleet.documents.history import BundleHeaderDoc, RecordCountsDoc

from testfleet.errors import TestfleetError
from testfleet.store.durations import CASE_OUTCOMES, GATE_MODES, GATE_STATUSES, OUTCOMES
from testfleet.store.identity import UID_PATTERN
from testfleet.textsafe import printable

SCHEMA_PREFIX = "testfleet.bundle/"
FORMAT_VERSION = 3
#: Formats read (1: before failure signatures; 2: before the breaker log; each one's
#: records are a subset of the next one's).
READS_FORMATS = (1, 2, 3)
SCHEMA = f"{SCHEMA_PREFIX}{FORMAT_VERSION}"

#: The most compressed bytes read from a bundle file (a whole 100k-execution history
#: is ~4 MiB compressed), and the most JSON they may inflate to (a gzip bomb stops here).
MAX_COMPRESSED = 64 << 20
MAX_JSON = 512 << 20

_GZIP_MAGIC = b"\x1f\x8b"
#: The largest value of the history's INTEGER columns (attempt, step): a bundle's larger
#: number would overflow SQLite's 64-bit and PostgreSQL's 32-bit integers at insert time.
INT32_MAX = 2**31 - 1


class BundleError(TestfleetError):
    """A bundle that cannot be used; the message names the file and the problem."""


# --------------------------------------------------------------------------- model

_UID = Field(pattern=UID_PATTERN.pattern)
_DIGEST = r"^[0-9a-f]{16}$"


class _Row(BaseModel):
    # Strict: "1.5" is not a number, 1 is not true. Non-finite floats are refused by
    # pydantic itself; NUL characters are refused on the raw text (see decode).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ExecutionRecord(_Row):
    """One row of ``executions`` (every column but the local ``id``)."""

    uid: str = _UID
    file: str = Field(min_length=1, max_length=1024)
    stage: str = Field(min_length=1, max_length=255)
    backend: str = Field(min_length=1, max_length=64)
    duration: float = Field(ge=0)
    outcome: Literal[OUTCOMES]  # type: ignore[valid-type]
    attempt: int = Field(ge=1, le=INT32_MAX)
    commit_sha: str | None = Field(default=None, max_length=64)
    ci_run_id: str | None = Field(default=None, max_length=255)
    ts: float
    recorded_at: float
    # The gate's verdict recorded beside the final outcome (schema step 3; None before it).
    gate_status: Literal[GATE_STATUSES] | None = None  # type: ignore[valid-type]
    gate_mode: Literal[GATE_MODES] | None = None  # type: ignore[valid-type]
    reason: str | None = Field(default=None, max_length=500)
    # The row that holds the file's final verdict in its run (schema step 5; None before it):
    # without it a merged history would count a retried failure as a failed run.
    final: bool | None = None
    # The failure's signature digest (schema step 8, bundle format 2; None on a pass).
    signature: str | None = Field(default=None, pattern=_DIGEST)


class GateRunRecord(_Row):
    """One row of ``gate_runs`` (every column but ``id`` and the derived ``test_hash``)."""

    uid: str = _UID
    run_id: str = Field(min_length=1, max_length=255)
    test_path: str = Field(min_length=1, max_length=1024)
    backend: str = Field(min_length=1, max_length=64)
    suite: str = Field(min_length=1, max_length=255)
    env_key: str
    ci_run_id: str | None = Field(default=None, max_length=255)
    commit_sha: str | None = Field(default=None, max_length=64)
    trusted: bool
    recorded_at: float
    untrusted_at: float | None = None
    untrusted_by: str | None = Field(default=None, max_length=300)


class GateValueRecord(_Row):
    """One gate value: its run (by uid), its coordinate and the value."""

    run: str = _UID
    metric_key: str = Field(min_length=1)
    steps_key: str = Field(min_length=1)
    constraint_key: str = Field(min_length=1)
    step: int = Field(ge=-1, le=INT32_MAX)
    value: float
    actual_step: int | None = Field(default=None, ge=-INT32_MAX - 1, le=INT32_MAX)

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return (self.run, self.metric_key, self.steps_key, self.constraint_key, self.step)


class TestcaseRecord(_Row):
    """One row of ``testcases`` (schema step 5), carried with the execution it belongs to.

    A testcase row has no identity of its own: it is one test of one attempt of a file,
    recorded together with that attempt's execution (same file, stage, attempt, run and
    time). It travels under its execution's uid and is merged exactly when that
    execution is, so merging twice adds nothing here either.
    """

    __test__ = False  # not a pytest class, whatever its name

    execution: str = _UID
    name: str = Field(min_length=1, max_length=1024)
    outcome: Literal[CASE_OUTCOMES]  # type: ignore[valid-type]
    duration: float = Field(ge=0)
    final: bool
    recorded_at: float
    signature: str | None = Field(default=None, pattern=_DIGEST)  # format 2


class SignatureRecord(_Row):
    """One failure signature (format 2), named by executions and testcases by digest."""

    digest: str = Field(pattern=_DIGEST)
    kind: Literal["infra", "timeout", "exception", "fatal", "output", "exit"]
    label: str = Field(max_length=120)
    text: str = Field(min_length=1, max_length=300)


class BreakerEventRecord(_Row):
    """One event of a lane's breaker log (format 3, schema step 10): the lane's state after
    it as its canonical JSON (checked as a ``testfleet.breaker-state/1`` document)."""

    uid: str = _UID
    lane: str = Field(min_length=1, max_length=255)
    seq: int = Field(ge=0, le=INT32_MAX)
    at: float
    kind: Literal["observed", "opened", "closed", "forced-open", "forced-close"]
    run: str | None = Field(default=None, max_length=255)
    state: str = Field(min_length=2, max_length=64_000)


class Source(_Row):
    """Where the records came from, as the exporting job saw it (see ``history.trust``)."""

    event: str | None = Field(default=None, max_length=100)
    ref: str | None = Field(default=None, max_length=1024)
    cadence: str | None = Field(default=None, max_length=100)
    write_baseline: bool | None = None
    ci_run_id: str | None = Field(default=None, max_length=255)
    repository: str | None = Field(default=None, max_length=300)


class Payload(_Row):
    store_schema: int = Field(ge=1, le=INT32_MAX)
    created_at: float
    testfleet: str = Field(max_length=100)
    source: Source
    executions: list[ExecutionRecord] = Field(default_factory=list)
    gate_runs: list[GateRunRecord] = Field(default_factory=list)
    gate_values: list[GateValueRecord] = Field(default_factory=list)
    testcases: list[TestcaseRecord] = Field(default_factory=list)
    signatures: list[SignatureRecord] = Field(default_factory=list)
    breakers: list[BreakerEventRecord] = Field(default_factory=list)  # format 3


@dataclass(frozen=True)
class Bundle:
    """A decoded, verified bundle and the file it came from (for messages)."""

    payload: Payload
    sha256: str
    name: str = "<bundle>"

    def counts(self) -> RecordCountsDoc:
        p = self.payload
        return {"executions": len(p.executions), "gate_runs": len(p.gate_runs),
                "gate_values": len(p.gate_values), "testcases": len(p.testcases),
                "signatures": len(p.signatures)}

    def header(self) -> BundleHeaderDoc:
        """What ``history show`` prints: everything but the rows."""
        p = self.payload
        s = p.source
        return {"format": SCHEMA, "sha256": self.sha256, "store_schema": p.store_schema,
                "created_at": p.created_at, "testfleet": p.testfleet,
                "source": {"event": s.event, "ref": s.ref, "cadence": s.cadence,
                           "write_baseline": s.write_baseline, "ci_run_id": s.ci_run_id,
                           "repository": s.repository},
                "counts": self.counts()}


# --------------------------------------------------------------------------- encoding


def canonical(obj: Any) -> bytes:
    """The one JSON form a bundle and its checksum are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def encode(payload: Payload) -> bytes:
    """The file bytes of a bundle (deterministic: the gzip header carries no time)."""
    data = payload.model_dump(mode="json")
    body = canonical(data)
    digest = hashlib.sha256(body).hexdigest()
    # The envelope is spliced around the already-canonical payload instead of dumping
    # it again: sorted keys put "payload" before "schema" and "sha256".
    doc = b'{"payload":' + body + b',"schema":' + canonical(SCHEMA) + b',"sha256":' + \
        canonical(digest) + b"}"
    return gzip.compress(doc, compresslevel=6, mtime=0)


def read_file(path: Path, base: Path | None = None) -> Bundle:
    """Read, inflate, verify and validate one bundle file; :class:`BundleError` otherwise.

    A relative ``path`` is read from ``base`` (``-C DIR``) and named as given. The name,
    as every text of a bundle, is printed through the one escaping rule (a downloaded
    artifact's name comes from whoever uploaded it)."""
    name = printable(str(path))
    if base is not None and not path.is_absolute():
        path = base / path
    raw = _read_compressed(path, name)
    return decode(raw, name)


def _read_compressed(path: Path, name: str) -> bytes:
    """The file's bytes, only if it is a regular file (a FIFO would block the merge forever;
    opened non-blocking and checked with ``fstat``, so there is no race)."""
    import stat

    from testfleet.fileio import file_kind

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise BundleError(f"{name}: no such file") from None
    except OSError as exc:
        raise BundleError(f"{name}: cannot read it: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BundleError(f"{name}: is a directory, not a bundle file")
        raise BundleError(f"{name}: is {file_kind(st.st_mode)}, not a regular file")
    with os.fdopen(fd, "rb") as fh:
        try:
            head = fh.read(2)
            if head != _GZIP_MAGIC:
                # Decided from two bytes: 100 MB of junk is refused without reading it.
                what = "empty" if not head else "not gzip-compressed"
                raise BundleError(f"{name}: {what}; not a testfleet history bundle")
            if st.st_size > MAX_COMPRESSED:
                raise BundleError(f"{name}: {st.st_size} bytes, larger than the "
                                  f"{MAX_COMPRESSED >> 20} MiB a history bundle may be")
            data = head + fh.read(MAX_COMPRESSED - 1)
        except OSError as exc:
            raise BundleError(f"{name}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_COMPRESSED:
        raise BundleError(f"{name}: larger than the {MAX_COMPRESSED >> 20} MiB a history "
                          "bundle may be")
    return data


def _inflate(raw: bytes, name: str) -> bytes:
    inflater = zlib.decompressobj(wbits=31)  # gzip container, CRC and length checked at the end
    try:
        data = inflater.decompress(raw, MAX_JSON + 1)
    except zlib.error as exc:
        raise BundleError(f"{name}: damaged gzip data ({exc})") from None
    if len(data) > MAX_JSON:
        raise BundleError(f"{name}: inflates to more than {MAX_JSON >> 20} MiB; refused")
    if not inflater.eof:
        raise BundleError(f"{name}: truncated: the gzip stream ends early "
                          f"({len(raw)} bytes; incomplete download or upload?)")
    if inflater.unused_data:
        raise BundleError(f"{name}: {len(inflater.unused_data)} unexpected byte(s) after the "
                          "gzip stream")
    return data


_HEAD = b'{"payload":'
#: The envelope after the payload, as :func:`encode` writes it (looked for in the last bytes).
_TAIL = re.compile(rb',"schema":("(?:[^"\\]|\\.){0,200}"),"sha256":"([0-9a-f]{64})"\}$')


def decode(raw: bytes, name: str = "<bundle>") -> Bundle:
    """Verify and validate bundle bytes; the checks run cheapest first.

    The payload is checksummed and validated as the exact bytes the exporter wrote
    (its canonical JSON), found between the fixed head and tail of the envelope;
    anything else is parsed as generic JSON only to say precisely what is wrong.
    """
    if raw[:2] != _GZIP_MAGIC:
        raise BundleError(f"{name}: not gzip-compressed; not a testfleet history bundle")
    data = _inflate(raw, name)
    tail = _TAIL.search(data, max(0, len(data) - 400)) if data.startswith(_HEAD) else None
    if tail is None:
        _diagnose(data, name)  # always raises
        raise AssertionError("unreachable")
    version = _check_schema(json.loads(tail.group(1)), name)
    body = data[len(_HEAD):tail.start()]
    actual = hashlib.sha256(body).hexdigest()
    claimed = tail.group(2).decode("ascii")
    if actual != claimed:
        raise BundleError(f"{name}: checksum mismatch: the records were changed after export "
                          f"(bundle says sha256 {claimed[:16]}..., content is {actual[:16]}...)")
    if b"\\u0000" in body:
        raise BundleError(f"{name}: invalid records: a text value contains a NUL character")
    try:
        payload = Payload.model_validate_json(body)
    except ValidationError as exc:
        raise BundleError(f"{name}: invalid records:\n  " + "\n  ".join(_errors(exc))) from None
    _check_store_schema(payload, name)
    if version < 2 and (payload.signatures or any(r.signature for r in payload.executions)
                        or any(c.signature for c in payload.testcases)):
        raise BundleError(f"{name}: a format-1 bundle cannot carry failure signatures "
                          "(format 2 added them); the bundle is inconsistent")
    _check_consistency(payload, name)
    return Bundle(payload, actual, name)


def _diagnose(data: bytes, name: str) -> None:
    """Why ``data`` is not a bundle in the exporter's layout, as a :class:`BundleError`."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BundleError(f"{name}: not UTF-8 JSON ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"{name}: not valid JSON: {exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}") from None
    except RecursionError:
        raise BundleError(f"{name}: JSON nested too deeply") from None
    if not isinstance(doc, dict) or "schema" not in doc:
        raise BundleError(f"{name}: not a testfleet history bundle (no 'schema' field)")
    _check_schema(doc["schema"], name)
    raise BundleError(f"{name}: malformed bundle envelope: expected the canonical form "
                      '{"payload":{...},"schema":"' + SCHEMA + '","sha256":"<64 hex digits>"} '
                      "as 'testfleet history export' writes it")


def _check_schema(schema: Any, name: str) -> int:
    """The bundle's format version, or :class:`BundleError`."""
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise BundleError(f"{name}: foreign schema {str(schema)[:80]!r}; expected {SCHEMA!r}")
    version = schema[len(SCHEMA_PREFIX):]
    if not re.fullmatch(r"[1-9][0-9]{0,8}", version):  # ASCII digits: "¹" is a digit to isdigit()
        raise BundleError(f"{name}: foreign schema {schema[:80]!r}; expected {SCHEMA!r}")
    if int(version) > FORMAT_VERSION:
        raise BundleError(f"{name}: bundle format {schema!r} is newer than this testfleet reads "
                          f"({SCHEMA!r}); upgrade testfleet to merge it")
    if int(version) not in READS_FORMATS:  # pragma: no cover - every older format is read
        raise BundleError(f"{name}: bundle format {schema!r} is no longer read")
    return int(version)


def _check_store_schema(payload: Payload, name: str) -> None:
    from testfleet.store.schema import latest_version

    if payload.store_schema > latest_version():
        raise BundleError(f"{name}: records were exported from history schema version "
                          f"{payload.store_schema}, newer than the {latest_version()} this "
                          "testfleet knows; upgrade testfleet to merge it")


def _errors(exc: ValidationError, limit: int = 20) -> list[str]:
    out = []
    for err in exc.errors()[:limit]:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        out.append(printable(f"{loc or 'payload'}: {err['msg']}"))
    if exc.error_count() > limit:
        out.append(f"... and {exc.error_count() - limit} more")
    return out


def _duplicates(items: Iterable[tuple[Any, Any]], what: str, name: str) -> None:
    seen: dict[Any, Any] = {}
    for key, row in items:
        other = seen.setdefault(key, row)
        if other is not row and other != row:
            shown = key if isinstance(key, str) else "/".join(str(k) for k in key)
            raise BundleError(f"{name}: {what} {printable(str(shown)[:120])} appears twice with "
                              "different content; the bundle is inconsistent")


def _check_consistency(payload: Payload, name: str) -> None:
    """Identities unique (identical repeats are harmless), values only of runs it carries."""
    _duplicates(((r.uid, r) for r in payload.executions), "execution uid", name)
    _duplicates(((r.uid, r) for r in payload.gate_runs), "gate run uid", name)
    _duplicates(((v.key, v) for v in payload.gate_values), "gate value", name)
    runs = {r.uid for r in payload.gate_runs}
    for i, v in enumerate(payload.gate_values):
        if v.run not in runs:
            raise BundleError(f"{name}: gate_values[{i}] references run {v.run}, which the "
                              "bundle does not contain")
    executions = {r.uid for r in payload.executions}
    for i, c in enumerate(payload.testcases):
        if c.execution not in executions:
            raise BundleError(f"{name}: testcases[{i}] references execution {c.execution}, "
                              "which the bundle does not contain")
    _duplicates(((s.digest, s) for s in payload.signatures), "failure signature", name)
    _duplicates(((b.uid, b) for b in payload.breakers), "breaker event", name)
    _check_breakers(payload, name)
    known = {s.digest for s in payload.signatures}
    named = [(f"executions[{i}]", r.signature) for i, r in enumerate(payload.executions)] + \
        [(f"testcases[{i}]", c.signature) for i, c in enumerate(payload.testcases)]
    for where, digest in named:
        if digest is not None and digest not in known:
            raise BundleError(f"{name}: {where} names failure signature {digest}, which the "
                              "bundle does not contain")


def _check_breakers(payload: Payload, name: str) -> None:
    """Each breaker event's state is a breaker state of its own lane, and its uid is its
    content's (an edited state is a different event, never a silent replacement)."""
    from testfleet.breaker.model import StateError, state_from_json
    from testfleet.store.breakers import event_row

    for i, b in enumerate(payload.breakers):
        try:
            doc = json.loads(b.state)
            state = state_from_json(doc)
        except (ValueError, RecursionError, StateError) as exc:
            raise BundleError(f"{name}: breakers[{i}].state: {printable(str(exc))[:200]}") from None
        if state.lane != b.lane or state.seq != b.seq:
            raise BundleError(f"{name}: breakers[{i}]: its state is of lane {printable(state.lane)[:80]} "
                              f"seq {state.seq}, not the event's")
        if event_row(b.lane, b.seq, b.at, b.kind, b.run, doc).uid != b.uid:
            raise BundleError(f"{name}: breakers[{i}]: uid {b.uid} is not its content's")


def unique(rows: Iterable[Any], key: str = "uid") -> list[Any]:
    """Rows without identical repeats, first occurrence order."""
    seen: set[Any] = set()
    out = []
    for row in rows:
        k = getattr(row, key)
        if k not in seen:
            seen.add(k)
            out.append(row)
    return out
