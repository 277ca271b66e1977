"""``-q/--quiet`` and ``-v/--verbose``: one meaning for every command.

- stdout (a table, a document) and the exit status are the same at every verbosity.
- ``-q`` drops notes (``testfleet: note: ...``: confirmations, old spellings, where a plan
  was frozen) and the progress display; warnings and errors are always shown.
- ``-v`` shows what is otherwise summarised on stderr: every registration error rather
  than the first 20, every warning ``list`` only counts, and details such as the
  configuration file that was read.

Both are accepted before the command (``testfleet -q check``) and after it (``testfleet
check -q``), as ruff's and gh's global flags are: :func:`add_to` gives every command the
two options when the entry point loads it. The level lives here, module-wide, as the
progress switch does (one command per process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

QUIET, NORMAL, VERBOSE = -1, 0, 1

#: Lists on stderr (registration errors, unreadable files) show this many without -v.
SHOWN = 20

_level = NORMAL
_T = TypeVar("_T")

#: Where the old spellings a parse met wait until the command runs (when -q is known).
_META_OLD = "testfleet.old-spellings"

QUIET_HELP = "No notes and no progress display on stderr (warnings and errors stay)."
VERBOSE_HELP = "Show on stderr what is otherwise summarised (every error, every warning, details)."


def reset() -> None:
    global _level
    _level = NORMAL


def level() -> int:
    return _level


def verbose() -> bool:
    return _level == VERBOSE


def quiet() -> bool:
    return _level == QUIET


def set_level(ctx: click.Context, wanted: int, flag: str) -> None:
    """Raise or lower the level once; ``-q`` and ``-v`` together is a usage error."""
    global _level
    if _level != NORMAL and _level != wanted:
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other; give one",
                               ctx=ctx)
    _level = wanted
    if wanted == QUIET:
        from testfleet import progress

        progress.configure(quiet=True)


def note(message: str) -> None:
    """A line a person may like to read and a script never needs (dropped by ``-q``)."""
    if _level != QUIET:
        click.echo(f"testfleet: note: {message}", err=True)


def detail(message: str) -> None:
    """A note shown only with ``-v``."""
    if _level == VERBOSE:
        click.echo(f"testfleet: note: {message}", err=True)


def old_spelling(ctx: click.Context, old: str, new: str) -> None:
    """Remember, while parsing, that ``old`` was given for ``new``: the command notes it when
    it runs (see :func:`add_to`), once -q or -v, wherever they stand, is known."""
    if not ctx.resilient_parsing:
        pending = ctx.meta.setdefault(_META_OLD, [])
        if (old, new) not in pending:
            pending.append((old, new))


def _announcing(callback: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(callback, "_announces_old_spellings", False):
        return callback

    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            for old, new in ctx.meta.pop(_META_OLD, []):
                note(f"`{old}` is now `{new}` (the old spelling keeps working)")
        return callback(*args, **kwargs)

    wrapper._announces_old_spellings = True  # type: ignore[attr-defined]
    return wrapper


def cap(items: Sequence[_T], limit: int = SHOWN) -> tuple[Sequence[_T], int]:
    """``(shown, left out)``: the first ``limit`` items, or all of them with ``-v``."""
    if _level == VERBOSE or len(items) <= limit:
        return items, 0
    return items[:limit], len(items) - limit


def more(left_out: int) -> str:
    """The line that ends a capped list."""
    return f"... and {left_out} more (-v shows them all)"


def _quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        set_level(ctx, QUIET, "-q")


def _verbose(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        set_level(ctx, VERBOSE, "-v")


def options() -> list[click.Option]:
    """The two options, as every command carries them (the values go to this module)."""
    return [
        click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, callback=_quiet,
                     help=QUIET_HELP),
        click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, callback=_verbose,
                     help=VERBOSE_HELP),
    ]


def add_to(command: click.Command) -> click.Command:
    """Give ``command`` (and, for a group, each subcommand) ``-q`` and ``-v`` once, and the
    notes on old spellings its parse met."""
    names = {o for p in command.params for o in getattr(p, "opts", ())}
    if "--quiet" not in names:
        command.params.extend(options())
    if command.callback is not None:
        command.callback = _announcing(command.callback)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_to(sub)
    return command
