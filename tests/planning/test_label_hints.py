"""Unknown CI labels (#26, item 5): a near miss warns and names the closest known label, in
the plan's ``warnings`` and in every format; a label that is not a CI label at all is
silent; hostile label text stays inert in every output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support import run_cli
from testfleet.label_hints import closest_label
from testfleet.planning.policy import Trigger, resolve_policy

from .conftest import make_config

PR = "pull_request"


def warnings_for(*labels: str, **config: Any) -> list[str]:
    return resolve_policy(make_config(**config), Trigger(event=PR, labels=labels))[1]


@pytest.mark.parametrize(("raw", "hint"), [
    ("megatron", "run-ci-megatron"),          # the bare name of a registered label
    ("Megatron", "run-ci-megatron"),          # ... in another case
    ("megatorn", "run-ci-megatron"),          # ... misspelt
    ("run-ci-megatronn", "run-ci-megatron"),  # prefixed, misspelt
    ("run-ci-Megatron", "run-ci-megatron"),   # prefixed, another case
    ("Run-CI-megatron", "run-ci-megatron"),   # the prefix in another case
    ("run_ci_megatron", "run-ci-megatron"),   # the prefix mistyped
    ("run-ci-al", "run-ci-all"),              # a scope label
    ("run-ci-imag", "run-ci-image"),
    ("nighlty", "nightly"),                   # a workflow label
    ("bypass-fast-fail", "bypass-fastfail"),
])
def test_a_near_miss_warns_with_the_closest_known_label(raw: str, hint: str) -> None:
    warnings = warnings_for(raw)
    assert len(warnings) == 1, warnings
    assert repr(raw) in warnings[0] and f"did you mean {hint!r}?" in warnings[0]


@pytest.mark.parametrize("raw", ["bug", "documentation", "good first issue", "dependencies",
                                 "help wanted", "enhancement", "wontfix", "question",
                                 "duplicate", "invalid", "python", "ci", "github_actions",
                                 "needs-rebase", "lgtm", "size/XL", "area/amd-docs"])
def test_labels_that_are_not_ci_labels_are_silent(raw: str) -> None:
    policy, warnings = resolve_policy(make_config(), Trigger(event=PR, labels=(raw,)))
    assert warnings == []
    assert policy.include_labels == ()


def test_a_prefixed_label_that_names_nothing_still_warns_without_a_guess() -> None:
    [w] = warnings_for("run-ci-zzzzqqq")
    assert "grants nothing" in w and "did you mean" not in w


def test_known_labels_are_silent() -> None:
    assert warnings_for("run-ci-megatron", "run-ci-all", "nightly", "bypass-fastfail") == []


def test_closest_label_is_pure_and_case_blind() -> None:
    known = ["run-ci-megatron", "run-ci-fsdp", "nightly"]
    assert closest_label("MEGATRON", known, prefix="run-ci-", cutoff=0.8) == "run-ci-megatron"
    assert closest_label("bug", known, prefix="run-ci-", cutoff=0.8) is None
    assert closest_label("run-ci-fsd", known, prefix="run-ci-", cutoff=0.6) == "run-ci-fsdp"


def test_a_custom_prefix_is_suggested() -> None:
    [w] = warnings_for("megatron", policy={"label_prefix": "ci:"})
    assert "did you mean 'ci:megatron'?" in w
    assert warnings_for("bug", policy={"label_prefix": "ci:"}) == []


# -- every format, from a real pull_request event payload --------------------------------


def _payload(tmp_path: Path, labels: list[str]) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({
        "action": "labeled", "number": 7,
        "pull_request": {"number": 7, "draft": False,
                         "labels": [{"id": i, "name": n, "color": "ededed"}
                                    for i, n in enumerate(labels)],
                         "head": {"repo": {"full_name": "octo/fleet"}, "sha": "a" * 40},
                         "base": {"repo": {"full_name": "octo/fleet"}, "ref": "main"}},
        "repository": {"full_name": "octo/fleet"}}), encoding="utf-8")
    return {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(path)}


FORMATS = ("table", "json", "markdown", "github", "buildkite")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_names_the_closest_label_and_ignores_non_ci_labels(
        example_project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    for k, v in _payload(tmp_path, ["bug", "documentation", "megatron",
                                    "run-ci-megatronn"]).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--github",
                             "--format", fmt, "--plan-file", str(tmp_path / "plan.json"))
    assert code == 0, err
    plan = json.loads((tmp_path / "plan.json").read_text())
    labels = [w for w in plan["warnings"] if w.startswith("PR label")]
    assert len(labels) == 2, plan["warnings"]
    assert all("did you mean 'run-ci-megatron'?" in w for w in labels), labels
    # the JSON's trigger and policy echo the raw labels as data; its warnings do not
    shown = "\n".join(json.loads(out)["warnings"]) + err if fmt == "json" else out + err
    assert "run-ci-megatron'?" in shown or "run-ci-megatron'?" in shown.replace("\\", "")
    for noise in ("bug", "documentation"):
        assert noise not in shown, (noise, shown)


def test_the_step_summary_lists_the_label_warning(example_project: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels", "megatron",
                           "--format", "markdown")
    assert code == 0
    warnings = out[out.index("### Warnings"):]
    assert "PR label 'megatron' ignored" in warnings
    assert "did you mean 'run-ci-megatron'?" in warnings


def test_under_github_actions_a_near_miss_is_a_warning_not_a_notice(
        example_project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels",
                           "megatron,bug", "--format", "github")
    assert code == 0
    [warning] = [ln for ln in out.splitlines() if ln.startswith("::warning") and "PR label" in ln]
    assert "run-ci-megatron" in warning
    assert not [ln for ln in out.splitlines() if "bug" in ln]


HOSTILE = "run-ci-<img src=x onerror=alert(1)>|@octo/team **b** [l](https://e.x) `c`"


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_label_text_is_inert_in_every_format(
        example_project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    bare = "megatron<b>"  # close enough to a registered label to warn
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--labels", HOSTILE,
                             "--labels", bare, "--labels", "run-ci-megatron%0A::error::x",
                             "--format", fmt, "--plan-file", str(tmp_path / "plan.json"))
    assert code == 0, err
    warnings = json.loads((tmp_path / "plan.json").read_text())["warnings"]
    labels = [w for w in warnings if w.startswith("PR label")]
    assert len(labels) == 3, warnings
    assert any(w.startswith(f"PR label {HOSTILE[:40]!r}"[:-1]) for w in labels), labels
    assert any("'megatron<b>' ignored" in w and "'run-ci-megatron'?" in w for w in labels)
    if fmt in ("markdown", "buildkite"):  # Markdown: every special character escaped
        summary = out if fmt == "markdown" else next(
            ln for ln in out.splitlines() if '"TESTFLEET_ANNOTATION":' in ln)
        assert "PR label" in summary
        for unescaped in (r"(?<!\\)<", r"(?<!\\)@octo", r"(?<!\\)\]\(", r"(?<!\\)\*\*b"):
            assert not re.search(unescaped, summary.replace("<sub>", "").replace("</sub>", "")
                                 .replace("<details>", "").replace("</details>", "")
                                 .replace("<summary>", "").replace("</summary>", "")), unescaped
    for line in (out + err).splitlines():  # no line may start a workflow command but ours
        if line.startswith("::"):
            assert line.startswith(("::warning title=testfleet plan::",
                                    "::notice title=testfleet plan::")), line
            assert "%0A" not in line.replace("%250A", "")  # the label's own %0A is inert
