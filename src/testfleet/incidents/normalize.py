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
_HEX = re.compile(r"\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b")
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
# ``node17-2:36748:36748 [0] NCCL INFO ...`` / ``UVOSLinux:19402:19419 [0] ...``
_PROC_PREFIX = re.compile(r"^\S+:\d+:\d+(?= \[\d+\])")
_HOST_NAMED = re.compile(r"(?i)\b(host(?:name)?|node(?:name)?)(\s*[:=]\s*)(?!<)([\w.-]+)")
_FQDN = re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|local|internal|lan|cluster|"
                   r"svc|cloud|ai|dev|corp|intra)\b")
_WINPATH = re.compile(r"\b[A-Za-z]:\\[^\s'\"<>|]+")
_ABSPATH = re.compile(r"(?<![\w.:/<>-])/(?:[\w.@+~%=,-]+/)*[\w.@+~%=,-]+/?")
_RELPATH = re.compile(r"(?<![\w/<>])(?:\.{1,2}/)*(?:[\w.@+-]+/)+[\w.@+-]+\.[A-Za-z]\w*\b")
_TEMP = re.compile(r"\b(?:tmp|temp)[\w-]{5,}\b|\bpytest-(?:of-[\w-]+|\d+)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w<])[-+]?\d+(?:[.,]\d+)*(?![\w>])")
_SPACE = re.compile(r"\s+")


def normalize(line: str) -> str:
    """The shape of one failure line (see the module docstring)."""
    text = _CONTROL.sub(" ", _ANSI.sub("", line[:MAX_INPUT]))
    text = _PYTEST_E.sub("", text.strip())
    text = _RANK.sub("", text) if "rank" in text else text
    text = _URL.sub("<url>", text)
    text = _UUID.sub("<uuid>", text)
    text = _PROC_PREFIX.sub("<proc>", text)
    text = _DATETIME.sub("<time>", text)
    text = _IP.sub("<ip>", text)
    text = _WINPATH.sub("<path>", text)
    text = _ABSPATH.sub("<path>", text)
    text = _RELPATH.sub("<path>", text)
    text = _HEX.sub("<hex>", text)
    text = _HOST_NAMED.sub(_host, text)
    text = _FQDN.sub("<host>", text)
    text = _TEMP.sub("<tmp>", text)
    text = _NUMBER.sub("<n>", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:MAX_TEXT]


def _host(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}<host>"
