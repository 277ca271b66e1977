"""A failure's signature: the one line of its output that says what went wrong, in its
normalized shape, and a short digest of it that history stores.

Which line (first rule that applies, over the last :data:`CHUNK` characters of output):

1. ``infra``: a start-up pattern of the stage's backend matches a line (built-in
   defaults and ``[backends.<name>] infra_patterns``): that line, whatever else failed
   after it;
2. ``timeout``: the file timed out (the output of a hung process says little);
3. ``exception``: pytest's short summary (``FAILED path::test - Type: message``), the
   message most of its lines share; else the last Python exception line
   (``Type: message``, pytest's ``E   `` lines included; an ``assert`` rewritten by
   pytest takes its type from the ``path:line: AssertionError`` line after it);
4. ``fatal``: a crash without a Python exception (``Fatal Python error``, an uncaught
   C++ exception, a signal);
5. ``output``: the last line printed; ``exit``: the runner's reason when nothing was.

Pure: the matcher is handed in, and the same text and patterns give the same signature.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, get_args

from testfleet.documents.vocabulary import SignatureKind
from testfleet.failures.normalize import normalize

if TYPE_CHECKING:
    from testfleet.documents.results import SignatureDoc
    from testfleet.failures.patterns import InfraMatcher

CHUNK = 16 * 1024  # characters of output looked at, from the end
DIGEST_LENGTH = 16  # hex digits stored per signature
KINDS: tuple[SignatureKind, ...] = get_args(SignatureKind)
LABEL_MAX = 120

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) \S+(?: - (.+))?$", re.MULTILINE)
_TYPE = r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)|Failed)"
_EXCEPTION = re.compile(rf"^(?:E\s+)?(?:\[?rank\d+\]?:\s*)?({_TYPE})(?::[ \t]*(.*))?$", re.MULTILINE)
_CRASH = re.compile(rf"^\S+\.py:\d+: ({_TYPE})$", re.MULTILINE)
_E_LINE = re.compile(r"^E\s+(\S.*)$", re.MULTILINE)
_FATAL = re.compile(
    r"^.*?(Fatal Python error: .+|terminate called after throwing an instance of '[^']+'"
    r"|Segmentation fault|Bus error|Illegal instruction|core dumped|\bKilled\b).*$",
    re.MULTILINE)


@dataclass(frozen=True)
class Signature:
    """What history stores for a failure: ``digest`` on its execution (and testcase),
    ``kind``, ``label`` and ``text`` once per digest."""

    digest: str
    kind: SignatureKind
    text: str  # the normalized key line
    label: str = ""  # a short name: the matched words, the exception type, the marker
    pattern: str = ""  # the infra pattern that matched (kind "infra"); not stored

    @property
    def short(self) -> str:
        return self.label or self.text[:60]

    def to_json(self) -> SignatureDoc:
        return {"signature": self.digest, "kind": self.kind, "label": self.label,
                "text": self.text}


def digest_of(kind: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_LENGTH]


def make(kind: SignatureKind, text: str, label: str = "", pattern: str = "") -> Signature:
    text = text or kind
    return Signature(digest_of(kind, text), kind, text, (label or "")[:LABEL_MAX], pattern)


def failure_signature(output: str, *, outcome: str = "FAILED", reason: str = "",
                      matcher: InfraMatcher | None = None) -> Signature:
    """The signature of one failed attempt (or one test's failure message)."""
    chunk = _tail(output)
    if matcher is not None and not matcher.empty:
        found = matcher.first(chunk)
        if found is not None:
            return make("infra", normalize(found.line), normalize(found.matched), found.pattern)
    if outcome == "TIMEOUT":
        return make("timeout", "timed out", "timeout")
    for find in (_from_summary, _from_exception, _from_fatal):
        found_sig = find(chunk)
        if found_sig is not None:
            return found_sig
    last = next((line for line in reversed(chunk.splitlines()) if line.strip()), "")
    if last:
        return make("output", normalize(last))
    text = normalize(reason or outcome.lower())
    return make("exit", text, text[:60])


def _tail(output: str) -> str:
    chunk = output[-CHUNK:] if len(output) > CHUNK else output
    if len(output) > CHUNK:
        cut = chunk.find("\n")
        chunk = chunk[cut + 1:] if cut >= 0 else chunk
    if "\x1b" in chunk:
        chunk = _ANSI.sub("", chunk)
    return chunk.replace("\r\n", "\n").replace("\r", "\n")


def _from_summary(chunk: str) -> Signature | None:
    if "FAILED " not in chunk and "ERROR " not in chunk:
        return None
    header = chunk.rfind("short test summary info")  # pytest's: the lines are after it
    part = chunk[header:] if header >= 0 else chunk
    messages = [m.group(1) for m in _SUMMARY.finditer(part) if m.group(1)]
    if not messages:
        return None
    counts = Counter(_typed(normalize(m)) for m in messages[:200])
    text = max(counts, key=lambda t: counts[t])  # first of the most common (dict order)
    return make("exception", text, _type_of(text))


def _typed(text: str) -> str:
    """pytest's rewritten ``assert`` has no type in its message: it is an AssertionError."""
    return f"AssertionError: {text}" if text.startswith("assert ") else text


def _type_of(text: str) -> str:
    m = re.match(_TYPE, text)
    return m.group(0) if m else text[:60]


def _from_exception(chunk: str) -> Signature | None:
    last = None
    for last in _EXCEPTION.finditer(chunk):  # noqa: B007 - the last one is wanted
        pass
    crash = None
    for crash in _CRASH.finditer(chunk):  # noqa: B007
        pass
    if crash is not None and (last is None or (crash.start() > last.end()
                                               and crash.group(1) != last.group(1))):
        message = _first_e_line(chunk, crash.start())
        text = normalize(f"{crash.group(1)}: {message}" if message else crash.group(1))
        return make("exception", text, crash.group(1))
    if last is None:
        return None
    kind = last.group(1)
    message = (last.group(2) or "").strip()
    return make("exception", normalize(f"{kind}: {message}" if message else kind), kind)


def _first_e_line(chunk: str, before: int) -> str:
    """The first of the ``E   `` lines that end right before position ``before``."""
    block = chunk[max(0, before - 4000):before].rstrip("\n").split("\n")
    lines: list[str] = []
    for line in reversed(block):
        m = _E_LINE.match(line)
        if m is None:
            if lines:
                break
            continue
        lines.append(m.group(1))
    return lines[-1] if lines else ""


def _from_fatal(chunk: str) -> Signature | None:
    m = _FATAL.search(chunk)
    if m is None:
        return None
    marker = m.group(1)
    return make("fatal", normalize(m.group(0)), normalize(marker)[:60])
