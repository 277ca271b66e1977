"""Collection: discover, scan (or reuse the cache), validate, and check the tree as a whole.

``collect`` is the fast path that ``list`` and ``plan`` use. ``thorough=True``
(what ``check`` uses) adds a full syntax check of every file (cached by content
hash) and a walk of the whole project for test files outside every root.
``collect_settings`` does the same from :class:`~testfleet.registry.settings.Settings`
(what ``list`` uses when the config snapshot lets it skip loading pydantic).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.findings import Finding
from testfleet.progress import task
from testfleet.registry import cache
from testfleet.registry.discover import StatKey, discover, strays
from testfleet.registry.model import GateCall, InvalidRegistration, Registration, Registry
from testfleet.registry.parallel import parallel_map
from testfleet.registry.result import FileResult
from testfleet.registry.rules import ImplicitRule, Rules
from testfleet.registry.settings import Settings, config_key, from_project, save_snapshot

if TYPE_CHECKING:
    from testfleet.config import Project

_INF = float("inf")
_REG_ORDER = attrgetter("file", "backend", "suite")


def collect(project: Project, *, use_cache: bool = True, thorough: bool = False,
            gates: bool = True, syntax_only: Collection[str] | None = None) -> Registry:
    """Every registration, gate call and finding of the project's tree, in one pass.

    Registrations are sorted by (file, backend), findings by location, ``files``
    lists every discovered test file (repo-relative, forward slashes).
    ``gates=False`` leaves ``registry.gates`` empty (their findings stay): commands
    that never read gate declarations (list, plan) skip rebuilding thousands of them.
    ``syntax_only`` limits a thorough run's full-file syntax check to those files.
    """
    settings = from_project(project)
    displaced = save_snapshot(settings) if use_cache else None
    registry = collect_settings(settings, use_cache=use_cache, thorough=thorough, gates=gates,
                                syntax_only=syntax_only)
    if displaced is not None:
        registry.findings.append(displaced)
    return registry


def collect_settings(settings: Settings, *, use_cache: bool = True, thorough: bool = False,
                     gates: bool = True, syntax_only: Collection[str] | None = None) -> Registry:
    """:func:`collect` from already derived settings (see :mod:`testfleet.registry.settings`)."""
    rules = settings.rules
    root = settings.root
    roots, exclude, cache_dir = list(settings.roots), list(settings.exclude), settings.cache_dir
    found = discover(root, roots, rules, exclude, cache_dir, settings.exclude_regex)
    cache_path = root / cache_dir / cache.NAME
    key = registry_key(settings.config_path, settings.raw_config_text)
    table = _load_table(cache_path, key) if use_cache else None
    displaced = cache.displaced(root, cache_path) if use_cache and table is None else None
    index: dict[str, int] = dict(zip(table.paths, range(len(table.paths)), strict=True)) if table else {}
    new_stats: list[StatKey] = []
    new_digests: list[bytes] = []
    new_gates: list[bytes] = []
    new_elements: list[Any] = []
    misses: list[tuple[str, StatKey]] = []
    moved: list[tuple[str, StatKey, int]] = []  # cached, but the stat key changed
    size = cache.DIGEST_SIZE
    refreshed = False
    root_str = str(root)
    now = time.time_ns()

    registry = Registry(findings=list(found.findings), files=sorted(found.files))
    if displaced is not None:
        registry.findings.append(displaced)
    kept: list[str] = []

    def keep(rel: str, st: StatKey, digest: bytes, element: Any, gate_text: bytes, result: FileResult) -> None:
        """One file's result goes into the registry and into the next cache table."""
        kept.append(rel)
        new_stats.append(st)
        new_digests.append(digest)
        new_gates.append(gate_text)
        new_elements.append(element)
        registry.registrations.extend(result.registrations)
        if gates:
            registry.gates.extend(result.gates)
        registry.findings.extend(result.findings)
        if result.invalid:
            registry.invalid.extend(result.invalid)
        if result.suppressions:
            registry.suppressions[rel] = result.suppressions

    for rel in registry.files:
        st = found.files[rel]
        result: FileResult | None = None
        element: Any = None
        digest = gate_text = b""
        i = index.get(rel)
        if i is not None and table is not None:
            j = 5 * i
            if tuple(table.stats[j:j + 5]) != st:
                moved.append((rel, st, i))
                continue
            element = table.elements[i]
            digest = table.digests[size * i:size * (i + 1)]
            if type(element) is int:
                # Fast path for the commonest file: an unchanged plain implicit one.
                rule = _implicit_rule(rules, rel, element)
                if rule is not None:
                    registry.registrations.append(Registration(
                        rel, rule.backend, rule.suite, rule.est_time, 0, 0, rule.labels, False, None, True,
                    ))
                    kept.append(rel)
                    new_stats.append(st)
                    new_digests.append(digest)
                    new_gates.append(b"")
                    new_elements.append(element)
                    continue
            gate_text = table.gates[i]
            result = _reuse(root_str, rel, rules, element, digest, gate_text if gates else b"")
            if result is not None and element[0] is not None and not cache.is_racy(st[1], now):
                # Verified by content and now old enough: drop the digest so later runs
                # trust the stat key alone instead of re-reading the file every time.
                element = [None, element[1]] if type(element[1]) is not int else element[1]
                refreshed = True
        if result is None:
            misses.append((rel, st))
            continue
        keep(rel, st, digest, element, gate_text, result)
    if table is not None:
        for rel, st, i in moved:
            digest = table.digests[size * i:size * (i + 1)]
            gate_text = table.gates[i]
            same = _same_content(root_str, rel, st, digest, table.elements[i], gate_text if gates else b"",
                                 rules, now)
            if same is None:
                misses.append((rel, st))
            else:
                keep(rel, st, digest, same[0], gate_text, same[1])
    changed = bool(misses) or bool(moved) or refreshed
    for rel, st, outcome in _scan_all(misses, rules, root_str, gates):
        if isinstance(outcome, str):
            registry.findings.append(Finding(rel, 0, 0, "error", "read-error", f"cannot read file: {outcome}"))
            continue
        result, element, digest, gate_text = outcome
        keep(rel, st, digest, element, gate_text, result)
    if use_cache and (changed or table is None or len(kept) != len(table.paths)):
        body, extra = cache.encode_table(kept, new_stats, new_digests, new_gates, new_elements)
        cache.save_blob(cache_path, key, cache.KIND, body, extra)

    registry.digests = dict(zip(kept, new_digests, strict=True))
    registry.findings.extend(_unused_stages(settings, registry.registrations, registry.invalid))
    if thorough:
        from testfleet.cachedir import cache_dir_problem
        from testfleet.registry.syntax import syntax_findings

        problem = cache_dir_problem(root, cache_dir)
        if problem is not None:  # `run` refuses it; say so before CI gets there
            registry.findings.append(Finding(settings.config_name, 0, 0, "error",
                                             "cache-dir-symlink", problem, key="cache_dir"))

        registry.findings.extend(syntax_findings(root, cache_dir, registry, use_cache=use_cache,
                                                 only=syntax_only))
        registry.findings.extend(strays(root, roots, rules, exclude, cache_dir, settings.exclude_regex))
    if registry.suppressions or rules.per_file_ignores:
        from testfleet.registry.suppress import apply_suppressions

        registry.findings, registry.suppressed, _ = apply_suppressions(
            registry.findings, registry.suppressions, rules.per_file_ignores)
    registry.registrations.sort(key=_REG_ORDER)
    registry.invalid.sort()
    registry.gates.sort(key=lambda g: (g.file, g.line))
    registry.findings.sort()
    return registry


# Below this many files to parse, a second process costs more than it saves.
PARALLEL_MIN = 800

Outcome = tuple[FileResult, Any, bytes, bytes] | str  # (result, element, digest, gate text) or an error


def _same_content(root: str, rel: str, st: StatKey, digest: bytes, element: Any, gate_text: bytes,
                  rules: Rules, now: int) -> tuple[Any, FileResult] | None:
    """(element, result) when the file's bytes are still the ones the entry was made from,
    only its stat key changed (a fresh checkout, a cache restored in CI): hashing a file
    is an order of magnitude cheaper than scanning it. None: scan it."""
    try:
        data = _read(f"{root}/{rel}", st[0])
    except OSError:
        return None
    if cache.content_digest_bytes(data) != digest:
        return None
    payload = element[1] if type(element) is list and len(element) == 2 else element
    result = _from_element(rel, payload, rules, gate_text)
    if result is None:
        return None
    if cache.is_racy(st[1], now):  # the new key is too fresh to trust alone next time
        return [True, payload], result
    return (payload if type(payload) is int else [None, payload]), result


def _scan_all(misses: list[tuple[str, StatKey]], rules: Rules, root: str,
              gates: bool) -> list[tuple[str, StatKey, Outcome]]:
    """Parse every file the cache could not answer for: (result, cache element) or an error.

    A cold run of a large tree splits the work with forked children
    (:func:`~testfleet.registry.parallel.parallel_map`); the children's results
    travel as cache elements and are rebuilt by the same decoder a warm run uses
    (without their gate arguments when the run does not want gates: their text goes
    into the cache as it came).
    """
    if not misses:
        return []
    scanner = _Scanner(rules, root)

    def encode(outcome: Outcome) -> Any:
        if isinstance(outcome, str):
            return outcome
        return [outcome[1], outcome[2].hex(), outcome[3].decode("utf-8", "surrogatepass")]

    def decode(item: tuple[str, StatKey], data: Any) -> Outcome | None:
        if isinstance(data, str):
            return data
        try:
            element, digest = data[0], bytes.fromhex(data[1])
            gate_text = data[2].encode("utf-8", "surrogatepass")
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            return None
        result = _from_element(item[0], element, rules, gate_text if gates else b"")
        if result is None or len(digest) != cache.DIGEST_SIZE:
            return None
        return result, element, digest, gate_text

    with task("scanning test files", len(misses)) as progress:
        outcomes = parallel_map(lambda item: scanner(*item), misses, min_items=PARALLEL_MIN,
                                encode=encode, decode=decode, progress=progress)
    return [(rel, st, outcome) for (rel, st), outcome in zip(misses, outcomes, strict=True)]


def _from_element(rel: str, element: Any, rules: Rules, gate_text: bytes) -> FileResult | None:
    """An element known to match the file's bytes (just made from them, or proved by digest),
    so no racy check is needed. ``gate_text``: the file's gate arguments (``b""``: none, or
    not wanted)."""
    try:
        if type(element) is list and len(element) == 2:
            element = element[1]
        if type(element) is int:
            rule = _implicit_rule(rules, rel, element)
            return None if rule is None else FileResult([Registration(
                rel, rule.backend, rule.suite, rule.est_time, 0, 0, rule.labels, False, None, True)])
        return _decode(rel, element, rules, gate_text)
    except (TypeError, ValueError, KeyError, IndexError, RecursionError, MemoryError):
        return None


class _Scanner:
    """Read, scan and validate one file. Imported lazily: a warm run never needs the parser."""

    def __init__(self, rules: Rules, root: str) -> None:
        from testfleet.registry import scan, validate

        self.scan = scan
        self.validate = validate.validate_file
        self.rules = rules
        self.root = root
        self.pattern = scan.marker_pattern(rules.markers)
        self.needles = scan.needles_for(rules.markers)
        self.now = time.time_ns()

    def __call__(self, rel: str, st: StatKey) -> Outcome:
        try:
            data = _read(f"{self.root}/{rel}", st[0])
        except OSError as exc:
            return str(exc.strerror or exc)
        result = self.validate(rel, self.scan.scan_source(data, self.pattern, self.needles), self.rules)
        digest = cache.content_digest_bytes(data)
        element, gate_text = _encode(result, cache.is_racy(st[1], self.now), self.rules)
        return result, element, digest, gate_text


def _load_table(path: Path, key: str) -> cache.Table | None:
    blob = cache.load_blob(path, key, cache.KIND)
    return cache.decode_table(*blob) if blob is not None else None


_O_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read(path: str, size: int) -> bytes:
    """Read a whole file without buffered-IO overhead; O_NOFOLLOW: a file swapped for a
    symlink after discovery is refused, never followed."""
    fd = os.open(path, _O_FLAGS)
    try:
        first = os.read(fd, size + 1)
        if len(first) <= size:  # a short read of a regular file means end of file
            return first
        chunks = [first]  # it grew since it was stat-ed: read on to the end
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _implicit_rule(rules: Rules, rel: str, index: int) -> ImplicitRule | None:
    if 0 <= index < len(rules.implicit):
        rule = rules.implicit[index]
        if rule.contains(rel):
            return rule
    return None


def _reuse(root: str, rel: str, rules: Rules, element: Any, digest: bytes, gate_text: bytes) -> FileResult | None:
    """The cached result if the element is well-formed (and, if racy, the content matches).

    Elements: an int ``k`` stands for the commonest file of all, one registration
    from implicit directory ``k`` and nothing else to say (rebuilt from the
    unchanged config); otherwise ``[racy, payload]``: ``racy`` is true when the file's
    mtime was too recent to trust its stat key alone (its bytes must still have the
    entry's ``digest``), else null; the payload is such an int, ``[registrations]``, or
    ``[registrations, findings, invalid registrations, suppressions]``. Gate arguments
    are ``gate_text``, from the table's own region (``b""``: none, or not wanted).
    """
    try:
        if type(element) is int:
            rule = _implicit_rule(rules, rel, element)
            if rule is None:
                return None
            return FileResult([Registration(rel, rule.backend, rule.suite, rule.est_time, 0, 0, rule.labels,
                                            False, None, True)])
        if type(element) is not list or len(element) != 2:
            return None
        racy, payload = element
        if racy is not None:
            if racy is not True:
                return None
            with open(f"{root}/{rel}", "rb") as fh:
                if cache.content_digest_bytes(fh.read()) != digest:
                    return None
        if type(payload) is int:
            return _reuse(root, rel, rules, payload, digest, b"")
        return _decode(rel, payload, rules, gate_text)
    except (OSError, TypeError, ValueError, KeyError, IndexError, RecursionError, MemoryError):
        return None


def _encode(result: FileResult, is_racy: bool, rules: Rules) -> tuple[Any, bytes]:
    """The file's cache element and its gate arguments' JSON text (``b""``: no gates)."""
    racy = True if is_racy else None
    index = _plain_implicit(result, rules)
    if index is not None:
        return (index if racy is None else [racy, index]), b""
    try:
        gates = [[g.line, g.col, cache.pack_kwargs(g.kwargs), g.positional,
                  list(g.non_literal), list(g.duplicate_keys)] for g in result.gates]
    except TypeError:
        return None, b""  # not cacheable: the file is scanned again next time
    gate_text = json.dumps(gates, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass") if gates else b""
    regs = [[r.backend, r.suite, r.est_time, r.line, r.col, list(r.labels), r.nightly, r.disabled, r.implicit,
             *([list(r.disabled_on)] if r.disabled_on else []),
             *([r.disabled_on_reason] if r.disabled_on_reason is not None else [])]
            for r in result.registrations]
    if not result.findings and not result.invalid and not result.suppressions:
        return [racy, [regs]], gate_text
    return [racy, [
        regs,
        [[f.line, f.col, f.severity, f.code, f.message] for f in result.findings],
        [[i.backend, i.suite, i.line, i.col, i.code, i.message] for i in result.invalid],
        [[line, list(codes)] for line, codes in result.suppressions.items()],
    ]], gate_text


def _plain_implicit(result: FileResult, rules: Rules) -> int | None:
    if result.gates or result.findings or result.invalid or result.suppressions or len(result.registrations) != 1:
        return None
    reg = result.registrations[0]
    if not reg.implicit:
        return None
    rule = rules.implicit_for(reg.file)
    return None if rule is None else rule.index


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("not a string")
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("not an int")
    return v


def _decode(rel: str, payload: Any, rules: Rules, gate_text: bytes) -> FileResult:
    """Rebuild a file's result, checking every type: a cache is data, never trusted.

    Any surprise raises (TypeError/ValueError), which the caller turns into a miss.
    Gate arguments are packed JSON data (:func:`~testfleet.registry.cache.pack_literal`):
    no Python is parsed on this path.
    """
    out = FileResult()
    if type(payload) is not list or len(payload) not in (1, 4):
        raise TypeError("bad payload")
    regs, finds, invalid, supp = payload if len(payload) == 4 else (payload[0], [], [], [])
    if type(regs) is not list or type(finds) is not list or type(invalid) is not list or type(supp) is not list:
        raise TypeError("bad payload")
    append = out.registrations.append
    for row in regs:
        if type(row) is not list or len(row) not in (9, 10, 11):
            raise TypeError("bad registration")
        backend, suite, est, line, col, labels, nightly, disabled, implicit = row[:9]
        disabled_on = row[9] if len(row) >= 10 else []
        runner_reason = row[10] if len(row) == 11 else None
        if type(disabled_on) is not list or not all(type(p) is str for p in disabled_on) or \
                not (runner_reason is None or type(runner_reason) is str):
            raise TypeError("bad registration")
        if not (type(backend) is str and backend in rules.gpu and type(suite) is str
                and (suite in rules.stages or suite == "")
                and type(est) in (int, float) and 0 <= est < _INF and type(line) is int and type(col) is int
                and type(labels) is list and type(nightly) is bool and type(implicit) is bool
                and (disabled is None or type(disabled) is str)):
            raise TypeError("bad registration")
        label_tuple = tuple(labels)
        for label in label_tuple:
            if type(label) is not str:
                raise TypeError("bad label")
        append(Registration(rel, backend, suite, float(est), line, col, label_tuple, nightly, disabled, implicit,
                            tuple(disabled_on), runner_reason))
    gates = json.loads(gate_text) if gate_text else []
    if type(gates) is not list:
        raise TypeError("bad gates")
    unpack = cache.unpack_kwargs
    for line, col, packed, positional, non_literal, duplicates in gates:
        if type(non_literal) is not list or type(duplicates) is not list:
            raise TypeError("bad gate")
        out.gates.append(GateCall(file=rel, line=_int(line), col=_int(col), kwargs=unpack(packed),
                                  positional=_int(positional),
                                  non_literal=tuple(_str(x) for x in non_literal),
                                  duplicate_keys=tuple(_str(x) for x in duplicates)))
    for line, col, severity, code, message in finds:
        if severity not in ("error", "warning"):
            raise ValueError("bad severity")
        out.findings.append(Finding(rel, _int(line), _int(col), severity, _str(code), _str(message)))
    for backend, suite, line, col, code, message in invalid:
        out.invalid.append(InvalidRegistration(rel, _str(backend), _str(suite), _int(line), _int(col),
                                               _str(code), _str(message)))
    for line, codes in supp:
        if type(codes) is not list:
            raise TypeError("bad suppression")
        out.suppressions[_int(line)] = tuple(_str(c) for c in codes)
    return out


def _unused_stages(settings: Settings, registrations: list[Registration],
                   invalid: list[InvalidRegistration]) -> list[Finding]:
    used = {r.suite for r in registrations}
    by_path = [r for r in registrations if r.suite == ""]
    if by_path:
        from testfleet.config.triggers import files_match

        # a stage that runs path-only registrations by path is used by them
        used |= {name for name, rule in settings.rules.stages.items() if rule.files and any(
            r.backend in rule.backends and files_match(rule.files, r.file) for r in by_path)}
    rejected: dict[str, int] = {}
    for bad in invalid:
        rejected[bad.suite] = rejected.get(bad.suite, 0) + 1
    name = settings.config_name
    out = []
    for stage in sorted(settings.rules.stages):
        if stage in used:
            continue
        n = rejected.get(stage, 0)
        if n:
            # Registrations exist but were rejected: say so, the fix is in the test files.
            message = (f"stage {stage!r} has no valid registration: {n} registration"
                       f"{' for this stage is' if n == 1 else 's for this stage are'} invalid "
                       "(see their errors; 'testfleet check' lists them)")
        else:
            message = (f"stage {stage!r} is configured but no test registers for it; register tests with "
                       f"suite={stage!r} or remove the stage")
        out.append(Finding(name, _stage_line(settings.raw_config_text, stage), 0, "warning", "unused-stage",
                           message, key=f"stages.{stage}"))
    return out


def _stage_line(text: str, stage: str) -> int:
    """Best effort: the line of ``[...stages.<name>]`` in the config text, else 0."""
    name = re.escape(stage)
    quoted = rf"(?:{name}|\"{name}\"|'{name}')"
    m = re.search(rf"^[ \t]*\[[ \t]*(?:tool\.testfleet\.)?stages\.{quoted}[ \t]*\]", text, re.MULTILINE)
    if m is None:
        m = re.search(rf"^[ \t]*{quoted}[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else 0


def registry_key(config_path: Path, raw_config_text: str) -> str:
    """The registry cache's key (:func:`~testfleet.registry.settings.config_key`)."""
    return config_key(config_path, raw_config_text, cache.KIND)


def registry_path(project: Project) -> Path:
    """Where collection keeps its cache (for tools and tests that need to find it)."""
    return project.root / project.config.cache_dir / cache.NAME
