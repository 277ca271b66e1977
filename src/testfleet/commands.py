"""How a stage executes one file: shorthands, command templates, and ``auto``.

A stage's ``command`` is ``pytest``, ``python``, ``auto`` or a template such as
``"python3 {file} -f"``. A template is split once with :func:`shlex.split` and run
without a shell; ``{file}`` is replaced inside the argument it appears in, so a
file name becomes (part of) exactly one argv element whatever characters it holds.
``{python}`` names the runner's own interpreter. ``auto`` is decided per file from
its syntax tree (never by importing it): see :func:`file_style`.

Pure functions only; the runner and the planner call them with values.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections.abc import Sequence
from typing import Literal

SHORTHANDS = ("pytest", "python")
AUTO = "auto"
PLACEHOLDERS = ("{file}", "{python}")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
MAX_COMMAND = 1000

Style = Literal["pytest", "python", "none"]


def command_problem(command: str) -> str:
    """Why ``command`` is not a usable stage command, or ""."""
    if command in (*SHORTHANDS, AUTO):
        return ""
    if len(command) > MAX_COMMAND:
        return f"a command template is at most {MAX_COMMAND} characters (got {len(command)})"
    if any(ord(c) < 32 or ord(c) == 127 for c in command):
        return "a command template must not contain control characters (newlines, tabs, NUL)"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"command template {command!r} cannot be split like a shell line: {exc}"
    if not argv:
        return "empty command; use pytest, python, auto or a template such as 'python3 {file} -f'"
    unknown = sorted({p for arg in argv for p in _PLACEHOLDER.findall(arg)} - set(PLACEHOLDERS))
    if unknown:
        return (f"command template {command!r} has unknown placeholder(s) {', '.join(unknown)}; "
                f"valid: {', '.join(PLACEHOLDERS)}")
    if not any("{file}" in arg for arg in argv):
        return (f"command template {command!r} never names the file; put {{file}} where the "
                "test file goes (e.g. 'python3 {file} -f'), or use pytest, python or auto")
    if "{file}" in argv[0]:
        return f"command template {command!r}: the program itself cannot be {{file}}"
    return ""


def command_argv(command: str, file: str, extra_args: Sequence[str] = (),
                 python: str | None = None) -> list[str]:
    """The argv that executes ``file`` under a resolved command (never ``auto``).

    ``python`` defaults to ``sys.executable`` so shorthands use the runner's environment.
    """
    exe = python or sys.executable
    if command == "python":
        argv = [exe, file]
    elif command == "pytest":
        argv = [exe, "-m", "pytest", file]
    elif command == AUTO:
        raise ValueError("'auto' is resolved per file when planning; the plan names the command")
    else:
        argv = [arg.replace("{python}", exe).replace("{file}", file)
                for arg in shlex.split(command)]
    return [*argv, *extra_args]


def is_pytest(command: str) -> bool:
    """Whether a resolved command runs pytest (its exit status 5 means "collected nothing")."""
    if command == "pytest":
        return True
    if command in ("python", AUTO):
        return False
    return _after_pytest(shlex.split(command)) is not None


def with_pytest_plugin(argv: Sequence[str], plugin: str) -> list[str] | None:
    """``argv`` of a template that runs pytest (``pytest ...``, ``<python> -m pytest ...``,
    either behind ``env [VAR=value ...]``) with ``-p plugin`` right after the pytest
    program, so the plugin loads before pytest reads the template's own options; None
    when ``argv`` does not run pytest."""
    at = _after_pytest(argv)
    if at is None or any(a in _ENV_CLEARS for a in argv[:at]):
        return None  # ``env -i`` drops the PYTHONPATH the plugin is found on
    return [*argv[:at], "-p", plugin, *argv[at:]]


# ``env`` options that take the next argument (``env -u NAME``, ``env -C DIR``).
_ENV_OPTION_ARGS = ("-u", "--unset", "-C", "--chdir")
_ENV_CLEARS = ("-i", "-", "--ignore-environment")


def _after_pytest(argv: Sequence[str]) -> int | None:
    """Index just past the pytest program in ``argv`` (``pytest``/``py.test``, or
    ``<python> -m pytest``), looking through an ``env`` prefix that sets variables, since
    templates run without a shell (``env CUDA_VISIBLE_DEVICES=0 pytest {file}``)."""
    i = 0
    if argv and argv[0].rsplit("/", 1)[-1] == "env":
        i = 1
        while i < len(argv) and (argv[i].startswith("-") or "=" in argv[i]):
            i += 2 if argv[i] in _ENV_OPTION_ARGS else 1
    names = [a.rsplit("/", 1)[-1] for a in argv[i:i + 3]]
    if names and names[0] in ("pytest", "py.test"):
        return i + 1
    if len(names) > 2 and names[1] == "-m" and names[2] == "pytest":
        return i + 3
    return None


def resolve(command: str, style: Style | None) -> str:
    """The command a stage's file runs with: ``auto`` picks by the file's style."""
    if command != AUTO:
        return command
    return "python" if style == "python" else "pytest"


# -- static file style --------------------------------------------------------------------


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    consts = {s.value for s in sides if isinstance(s, ast.Constant)}
    return "__name__" in names and "__main__" in consts


def _is_test_class(node: ast.ClassDef) -> bool:
    def base_name(b: ast.expr) -> str:
        if isinstance(b, ast.Attribute):
            return b.attr
        return b.id if isinstance(b, ast.Name) else ""

    if any(base_name(b).endswith("TestCase") for b in node.bases):
        return True  # unittest classes are collected whatever their name
    if not node.name.startswith("Test"):
        return False
    # a Test* class with bases may inherit its tests; without, it needs a test method
    return bool(node.bases) or any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
        for n in node.body)


def tree_style(tree: ast.Module) -> Style:
    """``pytest`` if pytest would collect something (a ``test*`` function, a test class, an
    imported ``test*`` name), else ``python`` if the module has an ``if __name__ ==
    "__main__":`` block, else ``none`` (the file would run nothing under either)."""
    has_main = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return "pytest"
        if isinstance(node, ast.ClassDef) and _is_test_class(node):
            return "pytest"
        if isinstance(node, ast.ImportFrom) and any(
                (a.asname or a.name).startswith(("test", "Test")) for a in node.names):
            return "pytest"
        if _is_main_guard(node):
            has_main = True
    return "python" if has_main else "none"


def file_style(source: str | bytes) -> Style | None:
    """:func:`tree_style` of a source text; None when it does not parse (check reports it)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree_style(tree)
