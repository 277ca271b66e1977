"""One CLI style: the same option names for the same things, help on every option, and
every error (click's own included) as ``testfleet: error: ...`` with exit 2."""

from __future__ import annotations

import click
import pytest

from testfleet.cli.main import COMMANDS, LazyGroup, cli, main


def _all_commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    assert isinstance(cli, LazyGroup)
    out: list[tuple[str, click.Command]] = []
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


def test_every_visible_option_has_help() -> None:
    missing = [f"{name} {'/'.join(p.opts)}" for name, cmd in _all_commands()
               for p in cmd.params if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert not missing


def test_same_names_for_the_same_things() -> None:
    problems: list[str] = []
    for name, cmd in _all_commands():
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.hidden:
                continue
            if "--json" in p.opts:
                problems.append(f"{name}: --json (use --format json)")
            if "--suite" in p.opts:
                problems.append(f"{name}: --suite (use --stage)")
            if "--output" in p.opts and isinstance(p.type, click.Choice):
                problems.append(f"{name}: --output is a choice (it names a file everywhere)")
            if "--format" in p.opts and isinstance(p.type, click.Choice) \
                    and "text" in p.type.choices and name != "report":
                # the human form is `table` everywhere; only report writes text documents
                problems.append(f"{name}: --format offers text (call the human form table)")
    assert not problems


@pytest.mark.parametrize("argv", [
    ["list", "--format", "yaml"],
    ["plan", "--no-such-option"],
    ["nosuchcommand"],
    ["gate", "evaluate"],
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
    assert '"state"' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["db", "status", "--format", "json"])
    assert '"state"' in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["check"], ["gate", "evaluate"], ["history", "merge"],
                                  ["history", "show"]])
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
    assert list(fmt.type.choices) == ["table", "json"]
    assert fmt.type.convert("text", fmt, None) == "table"
    assert fmt.default == "table"
