"""What collection needs from the configuration, and a snapshot of it for fast start-up.

Loading the configuration means importing pydantic and building the schema
(about 100 ms, a third of a warm ``testfleet list`` on 10,000 files).
Collection needs only a handful of derived values (:class:`Settings`), so after
a full, validated load they are written to ``<cache_dir>/config-snapshot.json``,
keyed by the config file's name and exact text, the testfleet and Python
versions and the content of testfleet's own config/registry source files.
``testfleet list`` finds the config file with the same
:func:`testfleet.configfile.find_config` as the validated load, and when the snapshot's key matches it
skips pydantic entirely. Any doubt (no snapshot, other key, damaged file, a
value of an unexpected type) means the normal validated load: the snapshot can
only ever be a copy of a configuration that validated.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.configfile import find_config, parse_toml
from testfleet.findings import Finding
from testfleet.registry import cache
from testfleet.registry.rules import ImplicitRule, Rules, Signature, StageRule, compile_pattern

if TYPE_CHECKING:
    from testfleet.config import Project

KIND = "testfleet-config-snapshot"
NAME = "config-snapshot.json"
_SOURCES = ("config/__init__.py", "config/backends.py", "config/base.py", "config/crossref.py",
            "config/gate_keys.py", "config/keyloc.py", "config/load.py", "config/policy.py",
            "config/root.py", "config/sections.py", "config/stages.py", "config/triggers.py",
            "configfile.py", "registry/rules.py", "registry/settings.py", "registry/scan.py",
            "registry/validate.py", "registry/collector.py", "registry/cache.py", "registry/discover.py",
            "registry/suppress.py")


@dataclass(frozen=True)
class Settings:
    """The configuration as collection sees it."""

    root: Path
    config_path: Path
    raw_config_text: str
    roots: tuple[str, ...]
    exclude: tuple[str, ...]
    cache_dir: str
    rules: Rules
    exclude_regex: str | None = None

    @property
    def config_name(self) -> str:
        try:
            return self.config_path.relative_to(self.root).as_posix()
        except ValueError:
            return self.config_path.name


@functools.cache
def code_fingerprint() -> str:
    """A digest of the sources whose behaviour a cache depends on.

    Editing testfleet itself (an editable install, a development checkout) must not
    leave results computed by older code in a cache. Their content decides, not their
    mtimes: pip writes every file of a wheel anew, so a CI job that installs the same
    testfleet again would otherwise never reuse the collection cache it restored.
    Read once per process (about 180 KB).
    """
    return sources_digest(Path(__file__).resolve().parent.parent)


def sources_digest(base: Path) -> str:
    """The digest of :data:`_SOURCES` under ``base`` (a missing one counts as missing)."""
    h = hashlib.blake2b(digest_size=16)
    for rel in _SOURCES:
        h.update(rel.encode())
        try:
            data = (base / rel).read_bytes()
        except OSError:
            h.update(b"\0-")
            continue
        h.update(b"\0%d\0" % len(data))
        h.update(data)
    return h.hexdigest()



def from_project(project: Project) -> Settings:
    from testfleet.registry.discover import exclude_regex
    from testfleet.registry.rules import build_rules

    config = project.config
    return Settings(
        root=project.root, config_path=project.config_path, raw_config_text=project.raw_config_text,
        roots=tuple(config.roots), exclude=tuple(config.exclude), cache_dir=config.cache_dir,
        rules=build_rules(config), exclude_regex=exclude_regex(config.exclude),
    )


def config_key(config_path: Path, raw_config_text: str, kind: str) -> str:
    """The key of a cache made from the configuration (the registry cache, this snapshot):
    the config file's name and text, the versions and testfleet's own code."""
    return cache.cache_key(config_path.name, raw_config_text + "\0" + code_fingerprint(), kind)


def _to_json(s: Settings) -> dict[str, Any]:
    r = s.rules
    return {
        "roots": list(s.roots), "exclude": list(s.exclude), "cache_dir": s.cache_dir,
        "exclude_regex": s.exclude_regex,
        "marker_backend": r.marker_backend, "labels": list(r.labels), "labels_required": r.labels_required,
        "gpu": r.gpu, "pattern": r.pattern_text, "python_main_check": r.python_main_check,
        "gate_marker": r.gate_marker,
        "signatures": [[name, sig.to_json()] for name, sig in r.signatures],
        "per_file_ignores": [[glob, list(codes)] for glob, codes in r.per_file_ignores],
        "stages": [[st.name, st.backend, st.command, st.dormant, list(st.backends)]
                   for st in r.stages.values()],
        "implicit": [[i.path, i.backend, i.suite, i.est_time, list(i.labels), i.pattern_text] for i in r.implicit],
    }


def save_snapshot(s: Settings) -> Finding | None:
    """Write the snapshot unless an identical one is already there; a warning when
    something else (a FIFO, ...) stood in its place (see :func:`cache.displaced`)."""
    key = config_key(s.config_path, s.raw_config_text, KIND)
    path = s.root / s.cache_dir / NAME
    doc = _to_json(s)
    if cache.load(path, key, KIND) == doc:
        return None
    displaced = cache.displaced(s.root, path)
    cache.save(path, key, doc, KIND)
    return displaced


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(type(x) is str for x in v):
        raise TypeError("expected a list of strings")
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise TypeError("expected a string")
    return v


def _signature(d: Any) -> Signature:
    positional, extra, template, ignore, zero, empty = d
    pairs = []
    for pair in extra:
        name, kind = pair
        pairs.append((_str(name), _str(kind)))
    if (template is not None and type(template) is not str) or type(zero) is not bool or type(empty) is not bool:
        raise TypeError("signature")
    return Signature(tuple(_strs(positional)), tuple(pairs), template, tuple(_strs(ignore)), zero, empty)


def _from_json(root: Path, config_path: Path, raw: str, d: dict[str, Any]) -> Settings:
    marker_backend = d["marker_backend"]
    if not isinstance(marker_backend, dict) or not all(
        type(k) is str and type(v) is str for k, v in marker_backend.items()
    ):
        raise TypeError("marker_backend")
    stages = {}
    for name, backend, command, dormant, backends in d["stages"]:
        if not (type(name) is str and type(backend) is str and type(command) is str and type(dormant) is bool):
            raise TypeError("stage")
        stages[name] = StageRule(name, backend, command, dormant, tuple(_strs(backends)))
    implicit = []
    for i, (path, backend, suite, est, labels, pattern) in enumerate(d["implicit"]):
        if not (type(path) is str and type(backend) is str and type(suite) is str and type(est) is float
                and type(pattern) is str):
            raise TypeError("implicit")
        implicit.append(ImplicitRule(i, path, backend, suite, est, tuple(_strs(labels)),
                                     compile_pattern(pattern), pattern))
    flags = (d["labels_required"], d["gpu"])
    for flag in flags:
        if not isinstance(flag, dict) or not all(type(k) is str and type(v) is bool for k, v in flag.items()):
            raise TypeError("backend flags")
    pattern, cache_dir, main_check, gate = d["pattern"], d["cache_dir"], d["python_main_check"], d["gate_marker"]
    if (type(pattern) is not str or type(cache_dir) is not str or type(main_check) is not bool
            or type(gate) is not str):
        raise TypeError("scalars")
    signatures = tuple((_str(name), _signature(sig)) for name, sig in d["signatures"])
    ignores = tuple((_str(glob), tuple(_strs(codes))) for glob, codes in d["per_file_ignores"])
    rules = Rules(
        marker_backend=marker_backend, markers=frozenset(marker_backend) | {gate},
        stages=stages, labels=tuple(_strs(d["labels"])), labels_required=flags[0], gpu=flags[1],
        implicit=tuple(implicit), pattern=compile_pattern(pattern), pattern_text=pattern,
        python_main_check=main_check, gate_marker=gate, signatures=signatures,
        per_file_ignores=ignores,
    )
    regex = d["exclude_regex"]
    if regex is not None and type(regex) is not str:
        raise TypeError("exclude_regex")
    return Settings(root=root, config_path=config_path, raw_config_text=raw, roots=tuple(_strs(d["roots"])),
                    exclude=tuple(_strs(d["exclude"])), cache_dir=cache_dir, rules=rules, exclude_regex=regex)


def fast(directory: Path, config_file: Path | None) -> Settings | None:
    """Settings from the snapshot if it matches the config file found; otherwise None."""
    try:
        path = config_file if config_file is not None else find_config(directory)
        if path is None:
            return None
        path = path if path.is_absolute() else directory / path
        raw = path.read_text(encoding="utf-8")
        data = parse_toml(raw)
        if data is None:
            return None
        if path.name == "pyproject.toml" or ("tool" in data and isinstance(data["tool"], dict)
                                              and "testfleet" in data["tool"]):
            tool = data.get("tool")
            if not isinstance(tool, dict) or not isinstance(tool.get("testfleet"), dict):
                return None
            data = tool["testfleet"]
        cache_dir = data.get("cache_dir", ".testfleet")
        if type(cache_dir) is not str or not cache_dir or cache_dir.startswith("/") or ".." in cache_dir.split("/"):
            return None
        root = path.parent.resolve()
        config_path = path.resolve()
        blob = cache.load_blob(root / cache_dir / NAME, config_key(config_path, raw, KIND), KIND)
        if blob is None:
            return None
        doc = json.loads(blob[1])
        settings = _from_json(root, config_path, raw, doc)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, RecursionError):
        return None
    return settings if settings.cache_dir == cache_dir else None
