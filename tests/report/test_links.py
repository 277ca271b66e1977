"""Links to the repository host under GitHub Actions, and never a guessed or unsafe URL."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from report_helpers import NOW, config, fleet

from testfleet.report.collect import build_report
from testfleet.report.links import github_links
from testfleet.report.render_html import render_html
from testfleet.report.render_markdown import render_markdown

SHA = "0123456789abcdef0123456789abcdef01234567"
ENV = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "example/fleet",
       "GITHUB_SHA": SHA}


def test_links_from_the_actions_environment(tmp_path: Path) -> None:
    project = tmp_path / "checkout" / "examples" / "fleet"
    project.mkdir(parents=True)
    links = github_links({**ENV, "GITHUB_WORKSPACE": str(tmp_path / "checkout")}, project)
    assert links is not None and links.prefix == "examples/fleet/"
    assert links.file("tests/a b(1).py", 7) == (
        f"https://github.com/example/fleet/blob/{SHA}/examples/fleet/tests/a%20b%281%29.py#L7")
    assert links.issue(12) == "https://github.com/example/fleet/issues/12"
    assert links.issue(3, "other/repo") == "https://github.com/other/repo/issues/3"
    assert github_links(ENV, project).prefix == ""


def test_incomplete_or_hostile_environments_give_no_links(tmp_path: Path) -> None:
    assert github_links({}, tmp_path) is None
    assert github_links({**ENV, "GITHUB_SHA": "HEAD"}, tmp_path) is None
    assert github_links({**ENV, "GITHUB_REPOSITORY": 'x/y"><script>'}, tmp_path) is None
    assert github_links({**ENV, "GITHUB_SERVER_URL": "javascript:alert(1)//"}, tmp_path) is None
    assert github_links({**ENV, "GITHUB_SERVER_URL": "https://evil.example/\"x"}, tmp_path) is None


def test_ledger_files_and_issue_numbers_become_links(tmp_path: Path) -> None:
    report = build_report(project="p", config=config(), registrations=fleet(), now=NOW)
    plain = render_html(report)
    assert "/blob/" not in plain and "/issues/2230" not in plain
    linked = replace(report, links=github_links(ENV, tmp_path))
    html = render_html(linked)
    assert f'href="https://github.com/example/fleet/blob/{SHA}/tests/e2e/test_x.py#L3"' in html
    assert 'href="https://github.com/example/fleet/issues/2230"' in html
    md = render_markdown(linked)
    assert f"](https://github.com/example/fleet/blob/{SHA}/tests/e2e/test_x.py#L3)" in md
