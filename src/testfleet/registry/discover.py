"""Find the test files under the configured roots, never following a symlink.

Walks with ``os.scandir`` (file types come from the directory entry, one ``lstat``
per matching file for the cache key). Directories named ``.*`` and
``__pycache__`` are not descended into. Excludes are gitignore-style patterns
(``pathspec``), matched against repo-relative paths; an excluded directory is
not walked at all.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from testfleet.findings import Finding
from testfleet.registry.rules import Rules, matches
from testfleet.textsafe import line_break, printable

StatKey = tuple[int, int, int, int, int]
_MASK = (1 << 63) - 1
SKIP_DIRS = frozenset({"__pycache__"})
STRAY_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "build", "dist"})


@dataclass
class Discovery:
    """The discovered files (repo-relative posix -> stat key) and what went wrong."""

    files: dict[str, StatKey] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def stat_key(st: os.stat_result) -> StatKey:
    """Anything that changes when a file's content may have changed (int64-safe)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino & _MASK, st.st_dev & _MASK)


def exclude_regex(patterns: list[str] | tuple[str, ...]) -> str | None:
    """One regex equivalent to the gitignore-style patterns, or None if it needs pathspec.

    Without negations (``!pattern``) a path is excluded when any pattern matches,
    so the patterns' regexes (as pathspec translates them) can be joined. The
    source text is cached in the config snapshot so a warm run needs no pathspec.
    """
    if not patterns:
        return None
    import re

    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(list(patterns))
    active = [p for p in spec.patterns if getattr(p, "include", None) is not None]
    regexes = [r for p in active if p.include and (r := getattr(p, "regex", None)) is not None]
    if len(regexes) != len(active):
        return None
    combined = "|".join(f"(?:{r.pattern})" for r in regexes) or "(?!)"
    combined = re.sub(r"\(\?P<\w+>", "(?:", combined)  # group names would clash once joined
    try:
        re.compile(combined)
    except re.error:
        return None
    return combined


def excluder(patterns: list[str] | tuple[str, ...], regex: str | None = None) -> Callable[[str], bool]:
    """A predicate for gitignore-style excludes; pathspec is imported only if needed."""
    if not patterns:
        return lambda _rel: False
    if regex is None:
        regex = exclude_regex(patterns)
    if regex is not None:
        import re

        return re.compile(regex).match  # type: ignore[return-value]
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns)).match_file


def discover(root: Path, roots: list[str], rules: Rules, exclude: list[str], cache_dir: str,
             regex: str | None = None) -> Discovery:
    out = Discovery()
    is_excluded = excluder(exclude, regex)
    root_str = str(root)
    starts = list(dict.fromkeys([*roots, *(imp.path for imp in rules.implicit)]))
    # An implicit directory under a root is walked as part of that root.
    starts = [s for s in starts if not any(s != o and s.startswith(o + "/") for o in starts)]
    if "." in starts:  # the whole project is a root
        starts = ["."]
    for start in starts:
        if is_excluded(start + "/"):
            continue
        problem = _symlinked_component(root, start)
        if problem:
            out.findings.append(Finding(start, 0, 0, "error", "symlink",
                                        f"{problem} is a symlink; testfleet does not follow symlinks"))
            continue
        if not os.path.isdir(os.path.join(root_str, start)):
            kind = "root" if start in roots else "implicit directory"
            out.findings.append(Finding(start, 0, 0, "warning", "missing-root",
                                        f"configured {kind} {start!r} does not exist"))
            continue
        _walk(root_str, start, rules, is_excluded, cache_dir, out)
    return out


def _symlinked_component(root: Path, rel: str) -> str | None:
    path = root
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            return path.relative_to(root).as_posix()
    return None


def _walk(root: str, start: str, rules: Rules, is_excluded: Callable[[str], bool],
          cache_dir: str, out: Discovery) -> None:
    stack = ["" if start == "." else start]
    pattern, pattern_text = rules.pattern, rules.pattern_text
    simple = "/" not in pattern_text
    implicit = rules.implicit
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel_dir) if rel_dir else root)
        except OSError as exc:
            out.findings.append(Finding(_shown(rel_dir), 0, 0, "error", "read-error",
                                        f"cannot list directory: {exc.strerror or exc}"))
            continue
        prefix = f"{rel_dir}/" if rel_dir else ""
        with it:
            for entry in it:
                name = entry.name
                if entry.is_file(follow_symlinks=False):
                    hit = pattern.match(name) is not None if simple else matches(pattern, pattern_text,
                                                                                  prefix + name)
                    rel = prefix + name
                    if not hit and (not implicit or rules.implicit_for(rel) is None):
                        continue
                    if is_excluded(rel):
                        continue
                    if not rel.isascii() and not _utf8(rel):
                        out.findings.append(Finding(_shown(rel), 0, 0, "error", "encoding",
                                                    "file name is not valid UTF-8; rename the file"))
                        continue
                    bad = line_break(rel)
                    if bad is not None:
                        # Its name would start a new line in every log that prints it (a
                        # workflow command under GitHub Actions): never a registration.
                        out.findings.append(Finding(
                            printable(rel), 0, 0, "error", "control-character",
                            f"path holds a control character (U+{ord(bad):04X}); it would forge "
                            "lines in logs and CI annotations; rename it"))
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        out.findings.append(Finding(_shown(rel), 0, 0, "error", "read-error",
                                                    f"cannot stat file: {exc.strerror or exc}"))
                        continue
                    out.files[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino & _MASK,
                                      st.st_dev & _MASK)
                elif entry.is_dir(follow_symlinks=False):
                    rel = prefix + name
                    if name.startswith(".") or name in SKIP_DIRS:
                        continue
                    if rel == cache_dir:
                        _cache_dir_tests(root, rel, rules, out)
                        continue
                    if is_excluded(rel + "/"):
                        continue
                    stack.append(rel)
                elif entry.is_symlink():
                    _symlink(entry, prefix + name, rules, is_excluded, out)
                elif (pattern.match(name) if simple else matches(pattern, pattern_text, prefix + name)) \
                        and not is_excluded(prefix + name):
                    # A fifo, socket or device named like a test: reading it could block forever.
                    out.findings.append(Finding(_shown(prefix + name), 0, 0, "error", "not-a-file",
                                                "named like a test file but is not a regular file; "
                                                "remove it or exclude this path"))


def _cache_dir_tests(root: str, cache_dir: str, rules: Rules, out: Discovery) -> None:
    """``cache_dir`` is never walked for tests; if it holds files named like tests they
    would silently vanish from CI, so that is an error naming the key (#17)."""
    stack = [cache_dir]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir)))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                stack.append(rel)
            elif entry.is_file(follow_symlinks=False) and matches(rules.pattern,
                                                                  rules.pattern_text, rel):
                out.findings.append(Finding(
                    _shown(cache_dir), 0, 0, "error", "cache-dir-holds-tests",
                    f"cache_dir {cache_dir!r} holds test files ({_shown(rel)}, ...), which "
                    "testfleet never collects there; move the tests or set cache_dir to a "
                    "directory of its own (default '.testfleet')", key="cache_dir"))
                return


def _utf8(rel: str) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(rel: str) -> str:
    """A path as a finding names it: undecodable bytes replaced, control characters spelt out."""
    return printable(rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def _symlink(entry: os.DirEntry[str], rel: str, rules: Rules,
             is_excluded: Callable[[str], bool], out: Discovery) -> None:
    if is_excluded(rel) or is_excluded(rel + "/"):
        return
    try:
        target = os.readlink(entry.path)
    except OSError:
        target = "?"
    try:
        is_dir = entry.is_dir()  # stats the target; never descends into it
    except OSError:
        is_dir = False
    if is_dir:
        out.findings.append(Finding(_shown(rel), 0, 0, "error", "symlink",
                                    f"symlinked directory (-> {target!r}) is not followed; "
                                    "move the tests into the tree or exclude this path"))
    elif matches(rules.pattern, rules.pattern_text, rel) or rules.implicit_for(rel) is not None:
        out.findings.append(Finding(_shown(rel), 0, 0, "error", "symlink",
                                    f"symlinked test file (-> {target!r}) is not read; "
                                    "replace the link with the file or exclude this path"))


def strays(root: Path, roots: list[str], rules: Rules, exclude: list[str], cache_dir: str,
           regex: str | None = None) -> list[Finding]:
    """Files matching the pattern outside every root: tests that CI would never run.

    Walks the whole project except the roots, implicit directories, hidden and
    tool directories (``.*``, ``__pycache__``, ``node_modules``, ``site-packages``,
    ``venv``, ``build``, ``dist``, anything with a ``pyvenv.cfg``) and excluded paths.
    Symlinks are not followed here either. Used by ``testfleet check`` only.
    """
    if "." in roots:
        return []
    is_excluded = excluder(exclude, regex)
    covered = {*roots, *(imp.path for imp in rules.implicit), cache_dir}
    found: list[Finding] = []
    per_dir: dict[str, list[str]] = defaultdict(list)
    needles = tuple(sorted(m.encode() for m in rules.markers))
    stack = [""]
    root_str = str(root)
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(os.path.join(root_str, rel_dir) if rel_dir else root_str)
        except OSError:
            continue
        with it:
            entries = list(it)
        if rel_dir and any(e.name == "pyvenv.cfg" for e in entries):
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if (entry.name.startswith(".") or entry.name in STRAY_SKIP_DIRS or rel in covered
                        or is_excluded(rel + "/")):
                    continue
                stack.append(rel)
            elif (matches(rules.pattern, rules.pattern_text, rel) and not is_excluded(rel)
                  and _looks_like_a_test(root_str, rel, entry.name, needles)):
                per_dir[rel_dir].append(rel)
    for rel_dir, files in sorted(per_dir.items()):
        for rel in sorted(files)[:STRAYS_PER_DIR]:
            found.append(Finding(
                _shown(rel), 0, 0, "warning", "outside-roots",
                f"test file outside every root ({', '.join(roots)}): CI will never run it; "
                "add its directory to 'roots', or to 'exclude' if it is not a CI test",
            ))
        if len(files) > STRAYS_PER_DIR:
            found.append(Finding(
                _shown(rel_dir or "."), 0, 0, "warning", "outside-roots",
                f"... and {len(files) - STRAYS_PER_DIR} more test files in this directory outside every "
                f"root ({len(files)} in all); add the directory to 'roots' or to 'exclude'",
            ))
    return found


# outside-roots names at most this many files per directory, then one summary line.
STRAYS_PER_DIR = 5
# A file that may be a test: a name like a test, or (read up to this size) a marker in it.
_STRAY_READ_LIMIT = 1 << 20


def _looks_like_a_test(root: str, rel: str, name: str, needles: tuple[bytes, ...]) -> bool:
    """With a broad pattern (``*.py``) most matching files are helpers, not tests: only a
    test-like name (``test_*.py``, ``*_test.py``) or a file that names a marker counts."""
    if name.startswith("test_") or name.endswith("_test.py"):
        return True
    try:
        with open(os.path.join(root, rel), "rb") as fh:
            data = fh.read(_STRAY_READ_LIMIT)
    except OSError:
        return False
    return any(n in data for n in needles)
