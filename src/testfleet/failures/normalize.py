"""One failure line reduced to its shape: what stays the same when the same cause
fails again on another machine, another night, in another temporary directory.

Stripped (each replaced by a placeholder, so the sentence keeps its shape): URLs,
UUIDs, timestamps and dates, hexadecimal addresses and digests, IP addresses, the
``host:pid:tid`` prefix NCCL and RCCL put on their lines, host and node names where a
log names them as such (``host: ...``, ``hostname=...``, fully qualified names), the
``[rankN]:`` prefix of distributed workers, file paths, temporary names, and
numbers standing on their own (counts, sizes, line numbers, PIDs, versions).

Kept: the exception type, every word of the message, quoted values, and digits that
are part of a word (``float16`` is not ``bfloat16``, ``gfx942`` is not ``gfx90a``), so two
different causes do not become one signature.

Pure functions; every pattern here is linear (no nested quantifiers), and the input is
one line cut to :data:`MAX_INPUT` characters before it is looked at.
"""

from __future__ import annotations

import functools
import re

MAX_INPUT = 2000  # characters of a line considered
MAX_TEXT = 300  # characters of a normalized line kept

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_PYTEST_E = re.compile(r"^E\s+")
_RANK = re.compile(r"\[?\brank\d+\]?:?\s*")
_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`)\]]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_DATETIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]|_)\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\b"
    r"|\b\d{4}[-/]\d{2}[-/]\d{2}\b"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
_HEX_ADDRESS = re.compile(r"\b0[xX][0-9a-fA-F]+\b")
_HEX_RUN = re.compile(r"\b[0-9a-f]{8,}\b")  # a digest when it mixes digits and letters
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
# ``node17-2:36748:36748 [0] NCCL INFO ...`` / ``UVOSLinux:19402:19419 [0] ...``
_PROC_PREFIX = re.compile(r"^\S+:\d+:\d+(?= \[\d+\])")
_HOST_NAMED = re.compile(r"(?i)\b(host(?:name)?|node(?:name)?)(\s*[:=]\s*)(?!<)([\w.-]+)")
_TLD = r"\.(?:com|net|org|io|local|internal|lan|cluster|svc|cloud|ai|dev|corp|intra)\b"
_HAS_TLD = re.compile(_TLD)
_FQDN = re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*" + _TLD)
_WINPATH = re.compile(r"\b[A-Za-z]:\\[^\s'\"<>|]+")
_ABSPATH = re.compile(r"(?<![\w.:/<>-])/(?:[\w.@+~%=,-]+/)*[\w.@+~%=,-]+/?")
_RELPATH = re.compile(r"(?<![\w/<>])(?:\.{1,2}/)*(?:[\w.@+-]+/)+[\w.@+-]+\.[A-Za-z]\w*\b")
_TEMP = re.compile(r"\b(?:tmp|temp)[\w-]{5,}\b|\bpytest-(?:of-[\w-]+|\d+)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w<])[-+]?\d+(?:[.,]\d+)*(?![\w>])")
_HAS_RELPATH = re.compile(r"\w/[\w.@+-]")
_DIGIT = re.compile(r"\d")


def normalize(line: str) -> str:
    """The shape of one failure line (see the module docstring)."""
    return _normalize(line[:MAX_INPUT])


@functools.lru_cache(maxsize=8192)
def _normalize(line: str) -> str:
    # Each rule runs only when the characters it needs are there: most lines have no URL,
    # no path, no address, and a substring test costs a fraction of a regex pass.
    text = _ANSI.sub("", line) if "\x1b" in line else line
    if not text.isprintable():
        text = _CONTROL.sub(" ", text)
    text = _PYTEST_E.sub("", text.strip())
    lowered = text.lower()
    if "rank" in lowered:
        text = _RANK.sub("", text)
    if "://" in text:
        text = _URL.sub("<url>", text)
    digits = _DIGIT.search(text) is not None
    if digits and "-" in text:
        text = _UUID.sub("<uuid>", text)
    if digits and ":" in text:
        text = _PROC_PREFIX.sub("<proc>", text)
    if digits and (":" in text or "-" in text or "/" in text):
        text = _DATETIME.sub("<time>", text)
    if digits and "." in text:
        text = _IP.sub("<ip>", text)
    if ":\\" in text:
        text = _WINPATH.sub("<path>", text)
    if "/" in text:
        text = _ABSPATH.sub("<path>", text)
        if "." in text and _HAS_RELPATH.search(text):
            text = _RELPATH.sub("<path>", text)
    if digits:
        if "0x" in text or "0X" in text:
            text = _HEX_ADDRESS.sub("<hex>", text)
        text = _HEX_RUN.sub(_digest, text)
    if "host" in lowered or "node" in lowered:
        text = _HOST_NAMED.sub(_host, text)
    if "." in text and _HAS_TLD.search(text):
        text = _FQDN.sub("<host>", text)
    if "tmp" in lowered or "temp" in lowered or "pytest-" in lowered:
        text = _TEMP.sub("<tmp>", text)
    if digits:
        text = _NUMBER.sub("<n>", text)
    return " ".join(text.split())[:MAX_TEXT]


def _digest(m: re.Match[str]) -> str:
    run = m.group(0)
    return "<hex>" if not run.isdigit() and not run.isalpha() else run


def _host(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}<host>"
