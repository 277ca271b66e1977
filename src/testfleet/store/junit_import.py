"""Turn archived JUnit XML into execution rows for one stage.

``testcase`` elements map to registered files by their ``file`` attribute (pytest's
xunit1 family) or by ``classname`` (``tests.e2e.foo.TestX`` -> ``tests/e2e/foo.py``,
also when the classname is relative to a sub-directory, as long as the match is
unique). Cases of one file are summed into one execution; its outcome is the worst
of its cases. Cases that match no registered file of the stage are returned, never
silently dropped. Bad input is refused as a whole with every problem listed: XML
that is not well-formed, a document that is not JUnit, a DTD or entity declaration
(never needed, and the door to entity-expansion attacks; refused by defusedxml), a
negative or non-finite ``time``. Each execution's identity derives from the file's
content, so importing the same file again under another ``--run-id`` is caught. A
failed file's execution carries the failure signature its failing cases' messages share
(incidents, #29), so imported history groups into incidents like recorded history.
"""

from __future__ import annotations

import hashlib
import math
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from testfleet.documents.vocabulary import MAX_EST_TIME
from testfleet.errors import UsageError
from testfleet.store.durations import FUTURE_SKEW, Execution
from testfleet.textsafe import printable

MAX_BYTES = 256 * 1024 * 1024
_RANK = {"PASSED": 0, "NOT_RUN": -1, "FAILED": 2, "ERROR": 3}


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    file: str | None
    time: float
    outcome: str  # PASSED | FAILED | ERROR | NOT_RUN (skipped)
    timestamp: float | None
    message: str = ""  # a failure's or error's message and text (the last MESSAGE_MAX characters)

    @property
    def label(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


MESSAGE_MAX = 4000


@dataclass
class ImportResult:
    executions: list[Execution] = field(default_factory=list)
    signatures: list[Any] = field(default_factory=list)  # the failure signatures they name
    unmatched: list[str] = field(default_factory=list)  # "case: why"
    cases: int = 0
    matched_cases: int = 0


def read_cases(path: Path, *, now: float | None = None) -> list[Case]:
    """Every testcase in a JUnit file; raises :class:`UsageError` on bad input."""
    return parse_cases(read_bytes(path), path, now=now)


def read_bytes(path: Path) -> bytes:
    """A JUnit file's bytes (at most :data:`MAX_BYTES`); :class:`UsageError` otherwise.
    Only a regular file (or a link to one) is read: a FIFO would block forever."""
    from testfleet.fileio import read_regular

    try:
        return read_regular(path, MAX_BYTES, follow=True)
    except OSError as exc:
        raise UsageError(f"cannot read {printable(str(path))}: {exc.strerror or exc}") from None


#: The XML declaration's encoding, in a document whose prolog is ASCII-compatible.
_DECLARED = re.compile(rb"""(?:\xef\xbb\xbf)?<\?xml\s[^>]*?\bencoding\s*=\s*(["'])([^"'>]{0,64})\1""")
#: What expat decodes itself (``codecs.lookup`` names); any other declared encoding is
#: decoded here, since pyexpat refuses multi-byte ones (Shift-JIS, GB2312, Big5, ...).
_EXPAT_NATIVE = frozenset({"utf-8", "ascii", "iso8859-1"})


def _for_expat(data: bytes, name: str) -> bytes:
    """``data`` as expat can read it: a document declaring an encoding expat does not know
    natively is decoded with Python's codec and handed over as UTF-8, declaration and all.
    Decoding first also means markup hidden by the encoding (UTF-7's ``+ADw-!DOCTYPE``)
    is what the DTD check sees."""
    import codecs

    declared = _DECLARED.match(data)
    if declared is None:
        return data
    encoding = declared.group(2).decode("ascii", "replace")
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        raise UsageError(f"{name}: the XML declaration names an unknown encoding "
                         f"{printable(encoding)!r}") from None
    if codec.name in _EXPAT_NATIVE:
        return data
    try:
        text = data.decode(codec.name)
    except LookupError:  # a bytes-to-bytes codec (base64, zlib): not a text encoding
        raise UsageError(f"{name}: the XML declaration names {encoding!r}, which is not a "
                         "text encoding") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name}: not valid {encoding} ({exc.reason} at byte {exc.start})") from None
    text = re.sub(r"""(<\?xml\s[^>]*?\bencoding\s*=\s*)(["'])[^"'>]*\2""", r"\1\2UTF-8\2",
                  text.removeprefix("\ufeff"), count=1)
    return text.encode("utf-8", "surrogatepass")


def parse_cases(data: bytes, path: Path, *, now: float | None = None) -> list[Case]:
    """Every testcase in the JUnit document ``data`` (read from ``path``).

    Parsed by defusedxml with DTDs forbidden: a DOCTYPE or entity declaration is refused
    wherever it is and in whatever encoding the document declares (UTF-16 included), so
    no entity expansion or external fetch can happen. A ``timestamp`` in the future
    (beyond a few minutes of clock skew) is refused: it cannot be when the tests ran,
    and history must not hold a date nothing real can ever be newer than."""
    import time

    import defusedxml
    from defusedxml.ElementTree import fromstring
    from junitparser import Error, Failure, Skipped, TestCase

    now = time.time() if now is None else now
    where = printable(str(path))
    try:
        root = fromstring(_for_expat(data, where), forbid_dtd=True, forbid_entities=True,
                          forbid_external=True)
    except defusedxml.DefusedXmlException:
        raise UsageError(f"{where}: DTD or entity declarations are not accepted in JUnit XML") from None
    except ET.ParseError as exc:
        raise UsageError(f"{where}: not well-formed XML ({exc})") from None
    except (ValueError, LookupError) as exc:  # pyexpat on an encoding it cannot decode
        raise UsageError(f"{where}: cannot decode it: {printable(str(exc))}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise UsageError(f"{where}: not a JUnit report: root element is "
                         f"<{printable(str(root.tag))[:100]}>, expected <testsuites> or <testsuite>")
    problems: list[str] = []
    cases: list[Case] = []
    seen: set[int] = set()

    def take(elem: ET.Element, stamp: float | None) -> None:
        seen.add(id(elem))
        case = TestCase.fromelem(elem)
        classname = elem.get("classname", "") or ""
        name = elem.get("name", "") or ""
        raw = elem.get("time")
        label = printable(f"{classname}::{name}" if classname else name or "<unnamed testcase>")
        seconds = 0.0
        if raw is not None and raw.strip():
            try:
                seconds = float(raw.replace(",", ""))
            except ValueError:
                problems.append(f"testcase {label}: time {raw!r} is not a number")
            else:
                if not math.isfinite(seconds) or seconds < 0:
                    problems.append(f"testcase {label}: time {raw!r} must be finite and >= 0")
                elif seconds > MAX_EST_TIME:
                    problems.append(f"testcase {label}: time {raw!r} is more than "
                                    f"{MAX_EST_TIME:.0f} seconds (7 days)")
        results = case.result
        if any(isinstance(r, Error) for r in results):
            outcome = "ERROR"
        elif any(isinstance(r, Failure) for r in results):
            outcome = "FAILED"
        elif results and all(isinstance(r, Skipped) for r in results):
            outcome = "NOT_RUN"
        else:
            outcome = "PASSED"
        message = "\n".join(part for r in results if isinstance(r, (Error, Failure))
                            for part in (r.message or "", r.text or "") if part)
        cases.append(Case(classname, name, elem.get("file"), seconds, outcome, stamp,
                          message[-MESSAGE_MAX:]))

    for suite in root.iter("testsuite"):
        stamp = _timestamp(suite.get("timestamp"))
        if stamp is not None and stamp > now + FUTURE_SKEW:
            problems.append(f"testsuite {printable(suite.get('name') or '<unnamed>')}: timestamp "
                            f"{suite.get('timestamp')!r:.60} is in the future")
            stamp = None
        for elem in suite.findall("testcase"):
            take(elem, stamp)
    for elem in root.iter("testcase"):
        if id(elem) not in seen:
            take(elem, None)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise UsageError(f"{where}: {len(problems)} invalid testcase time(s), nothing imported:\n"
                         f"  {shown}{more}")
    return cases


def _timestamp(value: str | None) -> float | None:
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def run_id_for(data: bytes) -> str:
    """A stable run id for an import, so the same file is not imported twice."""
    return "junit:" + content_digest(data)[:16]


def content_digest(data: bytes) -> str:
    """The SHA-256 of an imported file: what identifies an import whatever its run id."""
    return hashlib.sha256(data).hexdigest()


def content_uid(digest: str, stage: str, file: str) -> str:
    """The identity of the execution an import of this content makes for ``file`` in
    ``stage``: the same content imported again (under any ``--run-id``) yields the same
    uids, which the store already holds, so the duplicate is found and refused."""
    from testfleet.store.identity import UID_LENGTH

    text = "\0".join(("junit-import", digest, stage, file))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:UID_LENGTH]


class FileMatcher:
    """Maps JUnit ``file``/``classname`` values to registered, repo-relative files."""

    def __init__(self, files: Mapping[str, set[str]], root: Path) -> None:
        self.files = files  # file -> stages it is registered in
        self.root = root
        self._by_suffix: dict[str, list[str]] = defaultdict(list)
        for f in files:
            parts = PurePosixPath(f).parts
            for i in range(len(parts)):
                self._by_suffix["/".join(parts[i:])].append(f)

    def _lookup(self, candidate: str) -> str | None:
        if candidate in self.files:
            return candidate
        hits = self._by_suffix.get(candidate, [])
        return hits[0] if len(hits) == 1 else None

    def match(self, case: Case) -> str | None:
        if case.file:
            path = case.file.replace("\\", "/")
            if path.startswith("/"):
                try:
                    path = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
                except ValueError:
                    path = path.lstrip("/")
            while path.startswith("./"):
                path = path[2:]
            hit = self._lookup(path)
            if hit:
                return hit
        parts = [p for p in case.classname.split(".") if p]
        for i in range(len(parts), 0, -1):
            hit = self._lookup("/".join(parts[:i]) + ".py")
            if hit:
                return hit
        return None


def to_executions(cases: list[Case], matcher: FileMatcher, *, stage: str, backend: str,
                  commit: str | None, ci_run_id: str, default_time: float,
                  content: str | None = None, infra: Any = None) -> ImportResult:
    """One execution per matched file (case times summed, worst outcome wins); with the
    file's ``content`` digest each execution gets its :func:`content_uid`. A failed file's
    signature is the one most of its failing cases' messages share (``infra``: the
    backend's start-up pattern matcher)."""
    result = ImportResult(cases=len(cases))
    per_file: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        file = matcher.match(case)
        if file is None:
            result.unmatched.append(f"{case.label}: no registered file matches "
                                    f"(file={case.file!r}, classname={case.classname!r})")
        elif stage not in matcher.files[file]:
            where = ", ".join(sorted(matcher.files[file]))
            result.unmatched.append(f"{case.label}: {file} is registered for {where}, not {stage}")
        else:
            per_file[file].append(case)
            result.matched_cases += 1
    for file in sorted(per_file):
        group = per_file[file]
        outcome = max((c.outcome for c in group), key=lambda o: _RANK[o])
        stamps = [c.timestamp for c in group if c.timestamp is not None]
        signature = _file_signature(group, infra) if outcome in ("FAILED", "ERROR") else None
        if signature is not None:
            result.signatures.append(signature)
        result.executions.append(Execution(
            file=file, stage=stage, backend=backend,
            duration=math.fsum(c.time for c in group), outcome=outcome, attempt=1,
            commit=commit, ci_run_id=ci_run_id,
            timestamp=min(stamps) if stamps else default_time,
            uid=None if content is None else content_uid(content, stage, file),
            signature=signature.digest if signature is not None else None,
        ))
    return result


def _file_signature(group: list[Case], infra: Any) -> Any:
    """The signature most failing cases of one file share (the first of equals)."""
    from collections import Counter

    from testfleet.failures.signature import failure_signature

    sigs = [failure_signature(c.message, outcome="FAILED", reason=f"{c.outcome.lower()} in JUnit",
                              matcher=infra)
            for c in group if c.outcome in ("FAILED", "ERROR")]
    if not sigs:
        return None
    counts = Counter(s.digest for s in sigs)
    return next(s for s in sigs if counts[s.digest] == max(counts.values()))
