"""Links from a result to its CI run (#14): a URL template from the config, GitHub or
Buildkite, from the config or the CI environment; never a guessed link."""

from __future__ import annotations

import pytest

from testfleet.results.links import linker

from .conftest import CONFIG, as_json, cli


def test_template_wins_and_is_filled_with_run_id_and_commit() -> None:
    link = linker("https://ci.example.com/r/{run_id}?sha={commit}", "octo/fleet", "org/pipe", {})
    assert link.url("4 2", "abc") == "https://ci.example.com/r/4%202?sha=abc"


@pytest.mark.parametrize(("config", "env", "want"), [
    ((None, "octo/fleet", None), {}, "https://github.com/octo/fleet/actions/runs/7"),
    ((None, None, None), {"GITHUB_REPOSITORY": "o/r", "GITHUB_SERVER_URL": "https://ghe.example"},
     "https://ghe.example/o/r/actions/runs/7"),
    ((None, None, "acme/nightly"), {}, "https://buildkite.com/acme/nightly/builds/7"),
    ((None, None, None), {"BUILDKITE_ORGANIZATION_SLUG": "acme", "BUILDKITE_PIPELINE_SLUG": "ci"},
     "https://buildkite.com/acme/ci/builds/7"),
    ((None, "octo/fleet", None), {"GITHUB_REPOSITORY": "other/repo"},
     "https://github.com/octo/fleet/actions/runs/7"),  # the config wins over the environment
])
def test_github_and_buildkite_links(config, env, want) -> None:
    assert linker(*config, env).url("7") == want


@pytest.mark.parametrize(("config", "env"), [
    ((None, None, None), {}),  # nothing known: no link
    (("javascript:alert(1)/{run_id}", None, None), {}),  # not http(s): ignored
    ((None, "not a slug", None), {}),
    ((None, None, None), {"BUILDKITE_ORGANIZATION_SLUG": "acme"}),  # half a pipeline
])
def test_no_link_is_guessed(config, env) -> None:
    assert linker(*config, env).url("7") is None
    assert linker(None, "octo/fleet", None, {}).url(None) is None  # no run id: no link


def test_results_cli_links_to_a_template_and_to_buildkite(fleet) -> None:
    root = fleet(runs=1)
    cfg = root / "testfleet.toml"
    cfg.write_text(CONFIG.replace('github_repository = "octo/fleet"',
                                  'run_url = "https://ci.example.com/runs/{run_id}"'))
    doc = as_json(cli(root, "results", "--format", "json"))
    urls = {r["url"] for f in doc["files"] for r in f["runs"]}
    assert urls == {"https://ci.example.com/runs/101"}
    cfg.write_text(CONFIG.replace('github_repository = "octo/fleet"\n', ""))
    doc = as_json(cli(root, "results", "--format", "json",
                      env={"BUILDKITE_ORGANIZATION_SLUG": "acme", "BUILDKITE_PIPELINE_SLUG": "fleet"}))
    assert {r["url"] for f in doc["files"] for r in f["runs"]} == {
        "https://buildkite.com/acme/fleet/builds/101"}
    plain = as_json(cli(root, "results", "--format", "json"))
    assert {r["url"] for f in plain["files"] for r in f["runs"]} == {None}
