"""The one dialect of every path pattern in the configuration: gitignore's.

``exclude``, ``policy.no_impact`` and ``check.per-file-ignores`` all name repository-relative
paths, and a maintainer should not have to remember which of them lets ``*`` cross a ``/``.
gitignore's rules (via pathspec) are the ones every developer already knows: ``*`` stays
within one directory, ``**`` crosses them, a pattern without a ``/`` matches a name at any
depth, and a trailing ``/`` matches directories only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a gitignore-style pattern pathspec can use, or None."""
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except Exception as exc:  # pathspec raises several types for a bad pattern
        return f"{pattern!r} is not a gitignore-style pattern: {exc}"
    return None


@lru_cache(maxsize=256)
def spec(patterns: tuple[str, ...]) -> Any:
    """The compiled patterns (each pattern list is compiled once per process)."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def matches(patterns: tuple[str, ...], rel: str) -> bool:
    """Whether the repository-relative path ``rel`` matches the gitignore-style patterns."""
    return bool(spec(patterns).match_file(rel))


def checked(patterns: list[str]) -> list[str]:
    """A configuration validator: every pattern usable, else ValueError naming the first bad one."""
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise ValueError(problem)
    return patterns


def checked_keys(mapping: dict[str, T]) -> dict[str, T]:
    """:func:`checked` for a table keyed by patterns (``per-file-ignores``)."""
    checked(list(mapping))
    return mapping
