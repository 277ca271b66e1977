"""Tracking references cited in a disabled reason: ``#123``, ``owner/repo#123``, URLs.

A disabled test that cites nothing is the one nobody comes back to; the ledger shows
the reference (or "none") and ``disabled_requires_reference`` can demand one.
Parsing is deliberately conservative: ``C#`` or an HTML entity ``&#123;`` is not a
reference, a bare number is not a reference.

A project's ``check.reference_patterns`` are matched with the ``regex`` engine under a
per-search timeout: the configuration and the reasons are both in a pull request's
hands, and ``(a+)+$`` against a 30-character reason took minutes with ``re``. A pattern
that times out once is not used again in the process, and :func:`dropped_patterns` says
so for the report's notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from testfleet.documents.vocabulary import RefKind

if TYPE_CHECKING:
    from testfleet.documents.report import ReferenceDoc

# An http(s) URL up to whitespace or a closing bracket/quote; trailing punctuation
# that usually ends a sentence is trimmed afterwards.
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]{}]+", re.IGNORECASE)
_GH_PATH = re.compile(
    r"^https?://[^/]+/(?P<repo>[^/\s]+/[^/\s]+)/(?P<kind>issues|pull|pulls|merge_requests)/(?P<num>\d+)",
    re.IGNORECASE,
)
# ``#123`` or ``owner/repo#123`` or ``GH-123``; not ``C#1``, not ``&#123;``, not ``a#1``.
_HASH = re.compile(
    r"(?<![\w&#/])(?:(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)#|#|GH-)(?P<num>\d{1,9})\b"
)
_TRAILING = ".,;:!?'\""
#: The longest one search of one project pattern in one reason may take (seconds).
SEARCH_TIMEOUT = 0.05
_DROPPED: dict[str, str] = {}


@dataclass(frozen=True)
class Reference:
    """One citation found in a reason.

    ``text`` is the citation exactly as written; ``number`` is the issue or pull
    request number when there is one; ``url`` is set for URL citations only.
    """

    kind: RefKind
    text: str
    number: int | None = None
    repo: str | None = None
    url: str | None = None

    def to_json(self) -> ReferenceDoc:
        return {"kind": self.kind, "text": self.text, "number": self.number,
                "repo": self.repo, "url": self.url}


def parse_references(reason: str | None, extra_patterns: Sequence[str] = ()) -> list[Reference]:
    """Every citation in ``reason``, in order of appearance, without duplicates.

    ``extra_patterns`` are project regular expressions (e.g. ``[A-Z]+-\\d+`` for Jira)
    whose matches count as references of kind ``custom``.
    """
    if not reason:
        return []
    found: list[tuple[int, Reference]] = []
    url_spans: list[tuple[int, int]] = []
    for m in _URL.finditer(reason):
        text = m.group(0).rstrip(_TRAILING)
        url_spans.append((m.start(), m.start() + len(text)))
        gh = _GH_PATH.match(text)
        if gh:
            kind: RefKind = "issue" if gh.group("kind").lower() == "issues" else "pull"
            found.append((m.start(), Reference(kind, text, int(gh.group("num")),
                                               gh.group("repo"), text)))
        else:
            found.append((m.start(), Reference("url", text, url=text)))
    for m in _HASH.finditer(reason):
        if _inside(m.start(), url_spans):
            continue
        found.append((m.start(), Reference("issue", m.group(0), int(m.group("num")),
                                           m.group("repo"))))
    for pattern in extra_patterns:
        for start, text in _custom_matches(pattern, reason):
            if text and not _inside(start, url_spans):
                found.append((start, Reference("custom", text)))
    found.sort(key=lambda item: item[0])
    return _unique(ref for _, ref in found)


@cache
def _compiled(pattern: str) -> Any:
    import regex

    try:
        return regex.compile(pattern, regex.VERSION0)
    except (regex.error, RecursionError, OverflowError) as exc:
        _DROPPED[pattern] = f"not a usable regular expression: {exc}"
        return None


def _custom_matches(pattern: str, reason: str) -> list[tuple[int, str]]:
    """(start, text) of each match, or none once the pattern was dropped."""
    if pattern in _DROPPED:
        return []
    rx = _compiled(pattern)
    if rx is None:
        return []
    try:
        return [(m.start(), m.group(0))
                for m in rx.finditer(reason, timeout=SEARCH_TIMEOUT)]
    except TimeoutError:
        _DROPPED[pattern] = (f"one search took more than {SEARCH_TIMEOUT * 1000:g} ms "
                             "(catastrophic backtracking?)")
        return []


def dropped_patterns() -> list[str]:
    """Notes about project reference patterns no longer matched in this process."""
    from testfleet.textsafe import printable

    return [f"check.reference_patterns {printable(p)[:80]!r} is not matched: {why}; simplify it"
            for p, why in sorted(_DROPPED.items())]


def has_reference(reason: str | None, extra_patterns: Sequence[str] = ()) -> bool:
    return bool(parse_references(reason, extra_patterns))


def describe(refs: Sequence[Reference]) -> str:
    """The ledger's one-cell form: the citations joined, or ``none``."""
    return ", ".join(r.text for r in refs) if refs else "none"


def _inside(pos: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _unique(refs: Iterable[Reference]) -> list[Reference]:
    seen: set[str] = set()
    out: list[Reference] = []
    for ref in refs:
        if ref.text not in seen:
            seen.add(ref.text)
            out.append(ref)
    return out
