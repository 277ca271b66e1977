"""The options several commands share, declared once so that one thing has one spelling.

docs/cli.md ("One spelling for one thing") is the convention; ``tests/cli/test_cli_style.py``
holds every command to it. In short: ``--stage STAGE``, ``--file FILE``, ``--label LABEL``,
``--database URL``, ``-o/--output FILE`` wherever a document is printed,
``--format table|json[|...]`` with ``table`` the human form, and a renamed option kept as a
old spelling that still works, is not shown, and says what it is now (a note on stderr).

Kept light (click only): ``testfleet list`` imports it on its fast path.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from testfleet.cli import _verbosity
from testfleet.cli.completion import complete_stages

_F = TypeVar("_F", bound=Callable[..., Any])

#: The file ``-o/--output`` names, while the command runs (None: standard output).
META_OUTPUT = "testfleet.output"

OUTPUT_HELP = "Write the output to FILE (atomically) instead of standard output ('-': standard output)."


class FormatChoice(click.Choice):  # type: ignore[type-arg]
    """``--format``'s choices, with old spellings still accepted but not offered.

    The human form of every command's output is ``table``; ``text`` (its 0.1 name in
    ``report``, ``check``, ``gate`` and ``history``) still works, with a note, so scripts
    keep running.
    """

    def __init__(self, choices: list[str], aliases: dict[str, str] | None = None) -> None:
        super().__init__(choices)
        self.aliases = dict(aliases or {})

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value in self.aliases:
            if ctx is not None and not ctx.resilient_parsing:
                _verbosity.old_spelling(ctx, f"--format {value}", f"--format {self.aliases[value]}")
            value = self.aliases[value]
        return super().convert(value, param, ctx)


class RenamedOption(click.Option):
    """An option that also answers to its old names (``old=("--test",)``), which help does
    not show: given, an old name sets the option as the new one would and the command
    notes the new name on stderr; both at once with different values is a usage error.
    ``old_value``: the old name is a flag that stood for a value (``--json`` for
    ``--format json``)."""

    def __init__(self, *args: Any, old: tuple[str, ...] = (), old_value: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old = tuple(old)
        self.old_value = old_value
        self._old_dest = f"{self.name}__old_spelling"

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        if not self.old:
            return
        if self.old_value is not None:
            parser.add_option(obj=self, opts=list(self.old), dest=self._old_dest,
                              action="store_const", const=self.old_value)
        else:
            parser.add_option(obj=self, opts=list(self.old), dest=self._old_dest,
                              action="append" if self.multiple else "store", nargs=self.nargs)

    def consume_value(self, ctx: click.Context, opts: Any) -> Any:
        if self.old and self._old_dest in opts:
            opts = dict(opts)
            value = opts.pop(self._old_dest)
            new = max(self.opts, key=len)
            if self.name in opts and self.multiple:
                opts[self.name] = [*opts[self.name], *value]
            elif self.name in opts and opts[self.name] != value:
                raise click.UsageError(f"{self.old[0]} is the old name of {new}; give one of them",
                                       ctx=ctx)
            else:
                opts[self.name] = value
            _verbosity.old_spelling(ctx, self.old[0], new if self.old_value is None
                                    else f"{new} {self.old_value}")
        return super().consume_value(ctx, opts)


def format_option(choices: list[str], help: str, *, aliases: dict[str, str] | None = None,
                  default: str = "table", **old: Any) -> Callable[[_F], _F]:
    """``--format``: ``table`` (the human form) first, ``json`` (the machine form) next;
    ``aliases``: old values still accepted; ``old``/``old_value``: see :class:`RenamedOption`."""
    return click.option("--format", "fmt", type=FormatChoice(choices, aliases), default=default,
                        show_default=True, help=help, cls=RenamedOption, **old)


def stage_option(help: str, *, multiple: bool = False, required: bool = False,
                 dest: str = "stage", old: tuple[str, ...] = ()) -> Callable[[_F], _F]:
    """``--stage STAGE``, completed from the configuration's stages."""
    return click.option("--stage", dest, multiple=multiple, required=required, metavar="STAGE",
                        shell_complete=complete_stages, help=help, cls=RenamedOption, old=old)


def file_option(help: str, *, multiple: bool = False, required: bool = False,
                dest: str = "file", old: tuple[str, ...] = ()) -> Callable[[_F], _F]:
    """``--file FILE``: a test file, repository-relative (or relative to ``-C DIR``)."""
    return click.option("--file", dest, multiple=multiple, required=required, metavar="FILE",
                        help=help, cls=RenamedOption, old=old)


def output_option(help: str = OUTPUT_HELP) -> Callable[[_F], _F]:
    """``-o/--output FILE`` for a command that prints a document or table: what it would
    print on standard output goes to FILE instead, written atomically (a reader never sees
    half of it) and only when the command got as far as printing it. Its stderr (notes,
    warnings, errors) and exit status do not change. The command itself never sees FILE."""

    def decorate(f: _F) -> _F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            target: Path | None = kwargs.pop("output")
            if target is None or str(target) == "-":
                return f(*args, **kwargs)
            ctx = click.get_current_context()
            path = resolve_output(ctx, target)
            ctx.meta[META_OUTPUT] = path
            with _captured() as buf:
                try:
                    result = f(*args, **kwargs)
                except BaseException:
                    if buf.getvalue():  # as much as standard output would have had
                        write_to(path, buf.getvalue())
                    raise
            write_to(path, buf.getvalue())
            return result

        return click.option("-o", "--output", "output", default=None, metavar="FILE",
                            type=click.Path(dir_okay=False, path_type=Path),
                            help=help)(wrapper)  # type: ignore[return-value]

    return decorate


def resolve_output(ctx: click.Context, target: Path) -> Path:
    """``-o FILE`` relative to ``-C DIR``, as every path a command is given; its directory
    must exist before any work is done."""
    from testfleet.errors import UsageError

    app = ctx.find_root().obj
    base = Path(app.directory) if app is not None else Path.cwd()
    path = target if target.is_absolute() else base / target
    if not path.parent.is_dir():
        raise UsageError(f"--output {target}: directory {path.parent} does not exist")
    if path.is_dir():
        raise UsageError(f"--output {target}: is a directory")
    return path


def write_to(path: Path, text: str) -> None:
    write_output(path, text.encode("utf-8"))
    _verbosity.note(f"wrote {path}")


def write_output(path: Path, data: bytes, what: str = "--output") -> None:
    """Write a file a command was asked for (``--output``, ``--plan-file``) atomically,
    so a reader (a CI step, a concurrent ``testfleet run``) never sees half of it; a
    bad target is a usage error naming the option, never a traceback."""
    from testfleet.errors import UsageError
    from testfleet.fileio import output_mode, replace_atomically

    directory = path.parent
    if not directory.is_dir():
        raise UsageError(f"{what} {path}: directory {directory} does not exist")
    if path.is_dir():
        raise UsageError(f"{what} {path}: is a directory")
    try:
        replace_atomically(path, data, mode=output_mode(path))
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write it: {exc.strerror or exc}") from None


@contextmanager
def _captured() -> Iterator[io.StringIO]:
    """Standard output into a buffer (click.echo and rich both write to ``sys.stdout``);
    not a terminal, so a pipe's layout, and never colour (see :mod:`testfleet.color`)."""
    from testfleet import color

    buf = io.StringIO()
    saved = sys.stdout
    sys.stdout = buf
    try:
        with color.off():
            yield buf
    finally:
        sys.stdout = saved
