"""Shell completion of stage, label and backend names from the project's configuration.

Completion runs on every <TAB>, so it reads the TOML directly (no pydantic, no registry)
and never fails: a missing or broken configuration completes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

BUILTIN_BACKENDS = ("cpu", "cuda", "rocm")


def _config_table(ctx: click.Context) -> dict[str, Any]:
    from testfleet.configfile import find_config, parse_toml

    root = ctx.find_root()
    directory = root.params.get("directory")
    config_file = root.params.get("config_file")
    try:
        base = Path.cwd() if directory is None else (Path.cwd() / directory).resolve()
        path = Path(config_file) if config_file is not None else find_config(base)
        if path is None:
            return {}
        data = parse_toml(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if path.name != "testfleet.toml":
        tool = data.get("tool")
        data = tool.get("testfleet", {}) if isinstance(tool, dict) else {}
    return data if isinstance(data, dict) else {}


def _items(names: Any, incomplete: str, prefix: str = "") -> list[CompletionItem]:
    from click.shell_completion import CompletionItem  # only when completing

    if not isinstance(names, dict | list | tuple):
        return []
    return [CompletionItem(prefix + str(n)) for n in sorted(names)
            if (prefix + str(n)).startswith(incomplete)]


def complete_stages(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return _items(_config_table(ctx).get("stages", {}), incomplete)


def complete_labels(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return _items(_config_table(ctx).get("labels", {}), incomplete)


def complete_pr_labels(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """PR labels are the label registry's names behind the policy's prefix (run-ci-...)."""
    data = _config_table(ctx)
    policy = data.get("policy", {})
    prefix = policy.get("label_prefix", "run-ci-") if isinstance(policy, dict) else "run-ci-"
    return _items(data.get("labels", {}), incomplete, prefix=str(prefix))


def complete_backends(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    extra = _config_table(ctx).get("backends", {})
    names = set(BUILTIN_BACKENDS) | (set(extra) if isinstance(extra, dict) else set())
    return _items(sorted(names), incomplete)
