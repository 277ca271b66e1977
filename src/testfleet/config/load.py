"""Reading a configuration: find the file, parse TOML, validate every key at once and turn
pydantic's errors into findings with key paths."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from testfleet.config.crossref import cross_reference_problems
from testfleet.config.root import Config, Project
from testfleet.configfile import find_config
from testfleet.errors import ConfigError
from testfleet.fileio import read_capped
from testfleet.findings import Finding

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def load_project(cwd: Path, config_file: Path | None = None) -> Project:
    """Load and validate the configuration; raise :class:`ConfigError` with every finding."""
    path = config_file if config_file is not None else find_config(cwd)
    if path is None:
        raise ConfigError(
            f"no testfleet configuration found in {cwd} or any parent "
            "(add [tool.testfleet] to pyproject.toml or create testfleet.toml; "
            "'testfleet init' scaffolds one)"
        )
    path = path if path.is_absolute() else (cwd / path)
    name = path.name
    try:
        text = read_capped(path, 16 << 20).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    config = config_from_text(text, name)
    return Project(root=path.parent.resolve(), config_path=path.resolve(), config=config,
                   raw_config_text=text)


def config_from_text(text: str, name: str) -> Config:
    """Validate one configuration document (``name`` is the file name it came from,
    which decides whether the keys live under ``[tool.testfleet]``). Also used for a
    fork's base-branch configuration, read from git rather than from a file."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{name}: invalid TOML: nested too deeply (anywhere in the file, even "
                          "in another tool's section)",
                          [Finding(name, 0, 0, "error", "config-toml",
                                   "invalid TOML: nested too deeply")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{name}: invalid TOML: {exc}",
            [Finding(name, getattr(exc, "lineno", 0) or 0, getattr(exc, "colno", 0) or 0,
                     "error", "config-toml", f"invalid TOML: {exc}")],
        ) from None
    prefix = ""
    if name == "pyproject.toml" or ("tool" in data and "testfleet" in data.get("tool", {})):
        tool = data.get("tool")
        if not isinstance(tool, dict) or "testfleet" not in tool:
            raise ConfigError(f"{name} has no [tool.testfleet] table")
        data = tool["testfleet"]
        prefix = "tool.testfleet."
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: [tool.testfleet] must be a table")
    return validate_config(data, name, prefix, text)


def validate_config(data: dict[str, Any], file: str = "testfleet.toml", prefix: str = "",
                    text: str = "") -> Config:
    """``text``: the file's own text, when there is one, so each finding names its line."""
    findings: list[Finding] = []
    config: Config | None = None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        findings = config_findings(exc, file, prefix)
    seen = {(f.key, f.message) for f in findings}
    for key, message in cross_reference_problems(data):
        if (prefix + key, message) not in seen:
            findings.append(Finding(file, 0, 0, "error", "config", message, prefix + key))
    if text:
        findings = [_located(f, text) for f in findings]
    if findings or config is None:
        summary = "\n".join("  " + f.render() for f in findings)
        raise ConfigError(f"invalid configuration in {file}:\n{summary}", findings)
    return config


def config_findings(exc: ValidationError, file: str, prefix: str = "") -> list[Finding]:
    findings = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"] if p not in ("function-after", "function-before")]
        key = prefix + ".".join(loc) if loc else prefix.rstrip(".")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
            parent = _model_at(loc[:-1])
            if parent is not None:
                valid = sorted(parent.model_fields)
                if loc:
                    import difflib

                    close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.6)
                    if close:
                        msg += f" (did you mean {close[0]!r}?)"
                msg += f"; valid keys here: {', '.join(valid)}"
        elif err["type"] != "value_error" and "input" in err and not isinstance(err["input"], dict):
            msg += f" (got {err['input']!r})"
        findings.append(Finding(file, 0, 0, "error", "config", msg, key))
    return findings


def _located(finding: Finding, text: str) -> Finding:
    """The finding at the line of its key in ``text`` (the table's line when the key has
    none of its own); unchanged when it already has one or the key is not found."""
    if finding.line or not finding.key:
        return finding
    from dataclasses import replace

    from testfleet.config.keyloc import key_line

    line = key_line(text, finding.key.split("."))
    return replace(finding, line=line) if line else finding


def _model_at(loc: list[str]) -> type[BaseModel] | None:
    model: type[BaseModel] = Config
    i = 0
    while i < len(loc):
        field = model.model_fields.get(loc[i])
        if field is None:
            return None
        ann = field.annotation
        inner = _model_type(ann)
        if inner is None:
            return None
        model = inner
        i += 1
        if _is_container(ann):
            i += 1  # skip the dict key or list index
    return model


def _model_type(ann: Any) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _model_type(arg)
        if found is not None:
            return found
    return None


def _is_container(ann: Any) -> bool:
    return getattr(ann, "__origin__", None) in (dict, list)
