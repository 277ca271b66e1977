"""How long a test has been disabled: when its ``disabled=`` line last changed in git.

The age is the committer date of the commit that last touched the line holding the
``disabled=`` keyword (``git blame --porcelain``), so re-wording a reason restarts the
clock on purpose: the reason is what the team agreed to. A project that is not a git
repository, a file git does not track, or a missing ``git`` executable gives an age of
"unknown" with the reason why; a shallow clone gives a lower bound.

Files are read as text and parsed with :mod:`ast`; nothing is imported or executed.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import tokenize
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from testfleet.registry import cache
from testfleet.registry.model import Registration
from testfleet.report.ages import LineAge, RepoInfo

_ZERO_SHA = "0" * 40


def disabled_span(source: str, reg: Registration) -> tuple[int, int]:
    """The lines of the ``disabled=`` keyword of ``reg``'s marker call.

    Tokenizes from the call's first line only as far as its closing parenthesis
    (a whole-file parse per disabled test would dominate on large trees). Falls
    back to the call's own line when the keyword cannot be located (a file that no
    longer tokenizes, a registration from an implicit directory).
    """
    fallback = (max(reg.line, 1), max(reg.line, 1))
    if reg.line <= 0:
        return fallback
    lines = source.splitlines(keepends=True)
    if reg.line > len(lines):
        return fallback
    first = reg.line
    it = iter(lines[first - 1:])
    depth = 0
    kw: int | None = None
    last = 0
    prev: tokenize.TokenInfo | None = None
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    try:
        for tok in tokenize.generate_tokens(lambda: next(it, "")):
            op = tok.string if tok.type == tokenize.OP else ""
            if op in ("(", "[", "{"):
                depth += 1
            elif op in (")", "]", "}"):
                depth -= 1
                if depth <= 0:
                    break
            elif depth == 1 and op == "," and kw is not None:
                break
            elif (depth == 1 and op == "=" and kw is None and prev is not None
                  and prev.type == tokenize.NAME and prev.string == "disabled"):
                kw = prev.start[0] + first - 1
            if tok.type not in skip:
                prev = tok
                if kw is not None:
                    last = tok.end[0] + first - 1
    except (tokenize.TokenError, SyntaxError, ValueError):
        return fallback
    return (kw, max(kw, last)) if kw is not None else fallback


def repo_info(root: Path) -> RepoInfo:
    if shutil.which("git") is None:
        return RepoInfo(False, note="git is not installed")
    try:
        out = _git(root, "rev-parse", "--is-inside-work-tree", "--is-shallow-repository")
    except _GitFailed as exc:
        if "not a git repository" in exc.stderr.lower():
            return RepoInfo(False, note="not a git repository")
        return RepoInfo(False, note=f"git failed: {exc.short()}")
    lines = out.split()
    if not lines or lines[0] != "true":
        return RepoInfo(False, note="not inside a git work tree")
    return RepoInfo(True, shallow=len(lines) > 1 and lines[1] == "true")


def disabled_ages(root: Path, registrations: Iterable[Registration], *,
                  use_git: bool = True, spans: cache.DigestCache | None = None,
                  digests: Mapping[str, bytes] | None = None,
                  ) -> tuple[dict[Registration, LineAge], RepoInfo]:
    """The age of every disabled registration's ``disabled=`` line, one ``git blame`` per file.

    Each age carries the line of the keyword (``LineAge.line``) even when git cannot
    date it (or ``use_git`` is false), so findings point at the reason itself. Those
    lines are kept in ``spans`` by content digest (collection's ``digests``), so a warm
    ``check`` reads no disabled file again: reading and tokenizing them was half of a
    warm ``check`` of 100,000 files with 7,000 disabled (#36).
    """
    regs = [r for r in registrations if r.disabled is not None]
    info = repo_info(root) if use_git else RepoInfo(False, note="git not consulted")
    by_file: dict[str, list[Registration]] = defaultdict(list)
    for reg in regs:
        by_file[reg.file].append(reg)
    ages: dict[Registration, LineAge] = {}
    todo: list[tuple[str, dict[Registration, tuple[int, int]]]] = []
    for file, file_regs in sorted(by_file.items()):
        found = _kept_spans(spans, (digests or {}).get(file), file_regs)
        if found is None:
            try:
                data = (root / file).read_bytes()
                source = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                for reg in file_regs:
                    ages[reg] = LineAge("unknown", note=f"cannot read {file}: {exc}",
                                        line=reg.line)
                continue
            n_lines = source.count("\n") + 1
            found = {reg: _clamp(disabled_span(source, reg), n_lines) for reg in file_regs}
            if spans is not None:  # filed under the bytes it was made from
                spans.put(cache.content_digest(data),
                          {str(reg.line): list(span) for reg, span in found.items()})
        if info.is_repo:
            todo.append((file, found))
        else:
            for reg, span in found.items():
                ages[reg] = LineAge("unknown", note=info.note, line=span[0])
    # One ``git blame`` per file; they are independent processes, so run a few at once.
    workers = max(1, min(8, 2 * (os.cpu_count() or 1), len(todo)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda job: _blame_file(root, *job), todo))
    for (_file, file_spans), blamed in zip(todo, results, strict=True):
        for reg, (a, b) in file_spans.items():
            if isinstance(blamed, _GitFailed):
                note = ("not tracked by git" if "no such path" in blamed.stderr.lower()
                        else blamed.short())
                ages[reg] = LineAge("unknown", note=note, line=a)
            else:
                age = _newest([blamed[n] for n in range(a, b + 1) if n in blamed], info)
                ages[reg] = replace(age, line=a)
    return ages, info


def _kept_spans(spans: cache.DigestCache | None, digest: bytes | None,
                regs: list[Registration]) -> dict[Registration, tuple[int, int]] | None:
    """Each registration's kept span when the file's content has an entry for all of them."""
    if spans is None or digest is None:
        return None
    kept = spans.lookup(digest.hex(), _spans_entry)
    if kept is cache.MISS or not all(str(reg.line) in kept for reg in regs):
        return None
    return {reg: (kept[str(reg.line)][0], kept[str(reg.line)][1]) for reg in regs}


def _spans_entry(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, list) and len(v) == 2 and all(type(n) is int and n > 0 for n in v)
        for v in value.values())


def _blame_file(root: Path, file: str, spans: dict[Registration, tuple[int, int]]
                ) -> dict[int, LineAge] | _GitFailed:
    try:
        return blame_lines(root, file, set(spans.values()))
    except _GitFailed as exc:
        return exc


def blame_lines(root: Path, file: str, spans: set[tuple[int, int]]) -> dict[int, LineAge]:
    """``git blame --porcelain`` for the given line ranges of one file (working tree)."""
    args = ["blame", "--porcelain"]
    for a, b in sorted(spans):
        args += ["-L", f"{a},{b}"]
    out = _git(root, *args, "--", file)
    return parse_porcelain(out)


def parse_porcelain(text: str) -> dict[int, LineAge]:
    """Final line number -> age, from ``git blame --porcelain`` output."""
    commits: dict[str, dict[str, str]] = {}
    result: dict[int, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("\t"):
            current = None
            continue
        parts = line.split(" ")
        if current is None and len(parts) >= 3 and len(parts[0]) == 40 and _is_hex(parts[0]):
            current = parts[0]
            result[int(parts[2])] = current
            commits.setdefault(current, {})
            continue
        if current is not None:
            key, _, value = line.partition(" ")
            commits[current][key] = value
    ages: dict[int, LineAge] = {}
    for lineno, sha in result.items():
        meta = commits.get(sha, {})
        if sha == _ZERO_SHA:
            ages[lineno] = LineAge("uncommitted", note="changed in the working tree, not committed")
            continue
        stamp = meta.get("committer-time") or meta.get("author-time")
        if stamp is None or not stamp.strip().lstrip("-").isdigit():
            ages[lineno] = LineAge("unknown", commit=sha, note="git blame gave no date")
            continue
        when = dt.datetime.fromtimestamp(int(stamp), tz=dt.timezone.utc)
        ages[lineno] = LineAge("committed", when, sha, boundary="boundary" in meta)
    return ages


def _newest(ages: list[LineAge], info: RepoInfo) -> LineAge:
    if not ages:
        return LineAge("unknown", note="git blame returned nothing for the line")
    for age in ages:
        if age.status == "uncommitted":
            return age
    dated = [a for a in ages if a.changed is not None]
    if not dated:
        return ages[0]
    newest = max(dated, key=lambda a: a.changed or dt.datetime.min.replace(tzinfo=dt.timezone.utc))
    if info.shallow and newest.boundary:
        return LineAge("committed", newest.changed, newest.commit, True,
                       "shallow clone: at least this old (fetch full history for the exact age)")
    # In a full clone "boundary" only marks the root commit: the date is exact.
    return replace(newest, boundary=False)


def _clamp(span: tuple[int, int], n_lines: int) -> tuple[int, int]:
    a = min(max(span[0], 1), n_lines)
    return a, min(max(span[1], a), n_lines)


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)


class _GitFailed(Exception):
    def __init__(self, stderr: str) -> None:
        super().__init__(stderr)
        self.stderr = stderr

    def short(self) -> str:
        text = self.stderr.strip().splitlines()
        return text[0][:200] if text else "git failed"


def _git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["LC_ALL"] = "C"
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args], cwd=root, env=env,
            capture_output=True, text=True, timeout=60, check=False,
            encoding="utf-8", errors="replace",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _GitFailed(str(exc)) from None
    if proc.returncode != 0:
        raise _GitFailed(proc.stderr or f"git {args[0]} exited with {proc.returncode}")
    return proc.stdout
