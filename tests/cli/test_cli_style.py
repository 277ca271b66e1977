"""One CLI convention (docs/cli.md, "One spelling for one thing"), held for every command and
group: the same option names and metavars for the same things, help on every option, an
Examples block whose lines parse against the command, ``-o/--output`` wherever a document is
printed, ``--format table|json...``, ``-q``/``-v`` everywhere, old spellings hidden, and every
error (click's own included) as ``testfleet: error: ...`` with exit 2.

The convention is written out here, independently of the code that implements it, so that a
change to the shared option factories cannot quietly change what is checked.
"""

from __future__ import annotations

import itertools
import shlex
import sys
from pathlib import Path

import click
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from testfleet.cli.main import COMMANDS, LazyGroup, cli, main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"

#: One metavar for one kind of value, whichever command takes it.
METAVARS = {
    "--stage": "STAGE", "--file": "FILE", "--label": "LABEL", "--labels": "LABEL[,LABEL...]",
    "--backend": "BACKEND", "--database": "URL", "--output": "FILE", "--plan": "FILE",
    "--plan-file": "FILE", "--junit": "FILE", "--status-file": "FILE", "--report": "FILE",
    "--commit": "SHA", "--run-id": "ID", "--ci-run-id": "ID", "--job": "ID", "--runs": "N",
    "--keep": "N", "--max-rows": "N", "--max-attempts": "N", "--width": "N",
    "--cadence": "CADENCE", "--event": "EVENT", "--ref": "URL|#N", "--older-than": "DAYS",
    "--diff-base": "REF", "--trust-base": "REF", "--require-ref": "REF", "--git-ref": "REF",
    "--pr-head": "SHA",
}

#: Names that say the same thing as another: each may exist only as a hidden old spelling.
SYNONYMS = {"--test": "--file", "--suite": "--stage", "--json": "--format json",
            "--out": "--output", "--output-file": "--output", "--stages": "--stage",
            "--files": "--file", "--db": "--database", "--plan-path": "--plan"}

#: The only one-letter options: help, output, quiet, verbose, and the root's -C DIR.
SHORT = {"-h", "-o", "-q", "-v", "-C"}

#: Commands that print or write a document without a --format option.
DOCUMENT_COMMANDS = {"schema", "history export"}

#: Spellings users have, kept working as old names of the option that replaced them.
OLD_SPELLINGS = {("gate evaluate", "--test"): "--file", ("gate history", "--test"): "--file",
                 ("gate evaluate", "--suite"): "--stage", ("run", "--output"): "--display",
                 ("db status", "--json"): "--format", ("history export", "--ref"): "--git-ref"}

#: Where a shell example stops being testfleet's arguments.
SHELL_OPERATORS = {">", ">>", "|", "&&", "||", ";", "2>", "<"}


def _all_commands() -> list[tuple[str, click.Command]]:
    """Every command and group, the root included (as ""), as a user reaches them."""
    ctx = click.Context(cli)
    assert isinstance(cli, LazyGroup)
    out: list[tuple[str, click.Command]] = [("", cli)]
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            sub_ctx = click.Context(cmd)
            for sub in cmd.list_commands(sub_ctx):
                found = cmd.get_command(sub_ctx, sub)
                assert found is not None
                out.append((f"{name} {sub}", found))
    return out


def _options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


def _long(p: click.Option) -> str:
    return next((o for o in p.opts if o.startswith("--")), p.opts[0])


def _visible(cmd: click.Command) -> list[click.Option]:
    return [p for p in _options(cmd) if not p.hidden]


def test_every_visible_option_has_help() -> None:
    missing = [f"{name} {'/'.join(p.opts)}" for name, cmd in _all_commands()
               for p in _visible(cmd) if not p.help]
    assert not missing


# -- names and metavars -----------------------------------------------------------------


def test_same_names_for_the_same_things() -> None:
    """``--file`` everywhere a test file is named (not ``--test``), ``--stage`` (not
    ``--suite``), ``--format json`` (not ``--json``); ``--output`` always names a file."""
    problems: list[str] = []
    for name, cmd in _all_commands():
        for p in _visible(cmd):
            for opt in p.opts:
                if opt in SYNONYMS:
                    problems.append(f"{name}: {opt} (use {SYNONYMS[opt]})")
            if "--output" in p.opts and isinstance(p.type, click.Choice):
                problems.append(f"{name}: --output is a choice (it names a file everywhere)")
    assert not problems, "\n".join(problems)


def test_one_metavar_for_one_kind_of_value() -> None:
    """``--stage STAGE`` everywhere (not ``S``, ``TEXT``), ``--file FILE`` (not ``PATH``, ``F``),
    and any option that takes a value names it with an explicit metavar (never click's
    ``TEXT`` or ``INTEGER RANGE``), so one long name shows one metavar in every command."""
    problems: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    for name, cmd in _all_commands():
        for p in _visible(cmd):
            if p.is_flag or p.count:
                continue
            opt = _long(p)
            if opt == "--format" or (isinstance(p.type, click.Choice) and p.metavar is None):
                continue  # a choice shows its choices
            if p.metavar is None or p.metavar != p.metavar.upper():
                problems.append(f"{name} {opt}: metavar {p.metavar!r} (give an upper-case one)")
                continue
            if opt in METAVARS and p.metavar != METAVARS[opt]:
                problems.append(f"{name} {opt} {p.metavar} (the convention: {opt} {METAVARS[opt]})")
            first = seen.setdefault(opt, (name, p.metavar))
            if first[1] != p.metavar:
                problems.append(f"{name} {opt} {p.metavar}, but {first[0]} {opt} {first[1]}")
            if p.metavar == "STAGE" and opt != "--stage":
                problems.append(f"{name} {opt} STAGE: a stage is selected with --stage")
    assert not problems, "\n".join(problems)


def test_every_stage_and_label_option_completes_from_the_configuration() -> None:
    from testfleet.cli.completion import complete_labels, complete_stages

    problems = []
    for name, cmd in _all_commands():
        for p in _visible(cmd):
            want = {"--stage": complete_stages, "--label": complete_labels}.get(_long(p))
            if want is not None and getattr(p, "_custom_shell_complete", None) is not want:
                problems.append(f"{name} {_long(p)}")
    assert not problems


# -- output, format, verbosity ------------------------------------------------------------


def test_every_document_can_be_written_to_a_file() -> None:
    """``-o/--output FILE`` on every command that prints a document (it has ``--format``) or
    writes one, as ``ruff check -o`` and ``pytest --junitxml`` do."""
    problems: list[str] = []
    for name, cmd in _all_commands():
        opts = {o: p for p in _visible(cmd) for o in p.opts}
        prints_document = "--format" in opts or name in DOCUMENT_COMMANDS
        out = opts.get("--output")
        if prints_document and out is None:
            problems.append(f"{name}: no -o/--output FILE")
        if out is not None and (sorted(out.opts) != ["--output", "-o"] or out.metavar != "FILE"
                                or not isinstance(out.type, click.Path)):
            problems.append(f"{name}: {'/'.join(out.opts)} {out.metavar} (want -o/--output FILE)")
    assert not problems, "\n".join(problems)


def test_format_is_table_first_then_json() -> None:
    """``table`` is the human form everywhere (``report`` too), ``json`` the machine form."""
    problems: list[str] = []
    for name, cmd in _all_commands():
        for p in _visible(cmd):
            if "--format" not in p.opts:
                continue
            assert isinstance(p.type, click.Choice)
            choices = list(p.type.choices)
            if choices[:2] != ["table", "json"] or p.default != "table":
                problems.append(f"{name}: --format {'|'.join(choices)} (default {p.default})")
            if "text" in choices:
                problems.append(f"{name}: --format offers text (call the human form table)")
    assert not problems, "\n".join(problems)


def test_quiet_and_verbose_on_every_command_and_no_other_short_options() -> None:
    problems: list[str] = []
    for name, cmd in _all_commands():
        opts = {o for p in _visible(cmd) for o in p.opts}
        if not {"-q", "--quiet", "-v", "--verbose"} <= opts:
            problems.append(f"{name or 'testfleet'}: no -q/--quiet and -v/--verbose")
        short = {o for p in _options(cmd) for o in (*p.opts, *p.secondary_opts)
                 if len(o) == 2 and o[0] == "-"} - SHORT
        if short:
            problems.append(f"{name}: short option(s) {sorted(short)} outside {sorted(SHORT)}")
    assert not problems, "\n".join(problems)


def test_old_spellings_are_old_names_of_the_new_option() -> None:
    """A renamed option keeps its old name as an alias that ``--help`` does not show (no
    hidden option of its own that could drift from the new one); every spelling users had
    is still there."""
    problems: list[str] = []
    found: dict[tuple[str, str], str] = {}
    for name, cmd in _all_commands():
        ctx = click.Context(cmd)
        for p in _options(cmd):
            if p.hidden:
                problems.append(f"{name} {_long(p)}: a hidden option (make it an old name of "
                                "the option that replaced it)")
            for old in getattr(p, "old", ()):
                found[(name, old)] = _long(p)
                record = p.get_help_record(ctx)
                if record is not None and old in record[0]:
                    problems.append(f"{name} {old}: shown in --help")
    assert not problems, "\n".join(problems)
    assert found == OLD_SPELLINGS


# -- examples -----------------------------------------------------------------------------


def example_lines(cmd: click.Command) -> list[str]:
    """The command lines of ``cmd``'s Examples block (a trailing backslash continues one)."""
    text = cmd.help or ""
    block = text.split("Examples:", 1)[1] if "Examples:" in text else ""
    lines: list[str] = []
    for raw in block.splitlines():
        line = raw.strip()
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1].rstrip() + " " + line
        elif line.startswith("testfleet "):
            lines.append(line)
    return lines


def example_argv(line: str) -> list[str]:
    """An example's words up to the first shell operator (``>> "$GITHUB_STEP_SUMMARY"``)."""
    words = shlex.split(line, comments=True)
    cut = next((i for i, w in enumerate(words) if w in SHELL_OPERATORS), len(words))
    return words[:cut]


def parse_example(argv: list[str]) -> tuple[click.Command, click.Context]:
    """Parse a command line as ``testfleet`` would, down to the command, without running
    anything: click's own parser, so unknown options, bad choices and missing required
    options fail here."""
    assert argv[0] == "testfleet"
    ctx = cli.make_context("testfleet", argv[1:])
    cmd: click.Command = cli
    while isinstance(cmd, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        assert rest, f"{shlex.join(argv)}: names no command"
        sub_name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None and sub_name is not None
        ctx = sub.make_context(sub_name, rest, parent=ctx)
        cmd = sub
    return cmd, ctx


def _example_config() -> tuple[set[str], set[str]]:
    data = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))
    table = data["tool"]["testfleet"]
    return set(table["stages"]), set(table["labels"])


def test_every_command_and_group_has_examples_that_parse() -> None:
    """Every ``--help`` ends with realistic examples; each parses against the command whose
    help shows it (a group's against one of its subcommands), and the stages, labels and
    test files it names exist in examples/fleet, where they can be run."""
    stages, labels = _example_config()
    problems: list[str] = []
    for name, cmd in _all_commands():
        if "Examples:" not in (cmd.help or ""):
            problems.append(f"{name or 'testfleet'}: no Examples block in --help")
            continue
        lines = example_lines(cmd)
        if not lines:
            problems.append(f"{name or 'testfleet'}: an empty Examples block")
        for line in lines:
            argv = example_argv(line)
            try:
                _cmd, ctx = parse_example(argv)
            except (click.ClickException, AssertionError) as exc:
                problems.append(f"{line}: does not parse ({exc})")
                continue
            path = ctx.command_path.removeprefix("testfleet").strip()
            if name and not (path == name or path.startswith(name + " ")):
                problems.append(f"{line}: shown by '{name} --help' but runs '{path}'")
            for flag, value in itertools.pairwise(argv):
                if flag == "--stage" and value not in stages:
                    problems.append(f"{line}: --stage {value} is not a stage of examples/fleet")
                if flag == "--label" and value not in labels:
                    problems.append(f"{line}: --label {value} is not a label of examples/fleet")
                if flag == "--file" and not (EXAMPLE / value).is_file():
                    problems.append(f"{line}: --file {value} is not a file of examples/fleet")
            if path in ("disable", "enable", "check"):
                for f in ctx.params.get("files") or ():
                    if not (EXAMPLE / str(f)).is_file():
                        problems.append(f"{line}: {f} is not a file of examples/fleet")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("line", [
    "testfleet plan --no-such-option",
    "testfleet list --format yaml",
    "testfleet gate history",  # --file is required
    "testfleet nosuchcommand",
])
def test_the_example_parser_is_not_vacuous(line: str) -> None:
    with pytest.raises(click.ClickException):
        parse_example(shlex.split(line))


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["list", "--format", "yaml"],
    ["plan", "--no-such-option"],
    ["nosuchcommand"],
    ["gate", "evaluate"],
    ["-q", "check", "-v"],
])
def test_click_errors_speak_in_the_house_style(argv: list[str], capsys: pytest.CaptureFixture[str],
                                               tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(str(tmp_path))
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("testfleet: error: "), err
    assert "Error: " not in err and "Traceback" not in err
    assert "--help" in err


def test_old_spellings_still_work_and_say_so(example_project: object, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(str(example_project))
    with pytest.raises(SystemExit) as info:
        main(["db", "status", "--json"])
    assert info.value.code in (0, 1)
    captured = capsys.readouterr()
    assert '"state"' in captured.out
    assert "`--json` is now `--format json`" in captured.err
    with pytest.raises(SystemExit):
        main(["db", "status", "--format", "json"])
    assert '"state"' in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["check"], ["gate", "evaluate"], ["history", "merge"],
                                  ["history", "show"], ["report"]])
def test_text_is_still_accepted_where_it_was_the_name(argv: list[str]) -> None:
    """0.1 scripts said `--format text`; it is taken as `table` but no longer offered."""
    ctx = click.Context(cli)
    cmd: click.Command | None = cli
    for word in argv:
        assert isinstance(cmd, click.Group)
        cmd = cmd.get_command(ctx, word)
    assert cmd is not None
    (fmt,) = [p for p in cmd.params if "--format" in getattr(p, "opts", ())]
    assert isinstance(fmt.type, click.Choice)
    assert list(fmt.type.choices)[:2] == ["table", "json"]
    assert fmt.type.convert("text", fmt, None) == "table"
    assert fmt.default == "table"
