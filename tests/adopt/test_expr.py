"""``runs-on`` expressions resolved statically for adoption (adopt_expr): literal labels
where every matrix combination gives one, the reason otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from testfleet.adopt.expr import Unresolved, matrix_combinations, resolve_runs_on

RESOLVED = [
    ("${{ matrix.runner }}",
     {"matrix": {"include": [{"runner": "mi325", "part": 0}, {"runner": "mi325", "part": 1}]}}, [["mi325"]]),
    ("${{ matrix.runner }}", {"matrix": {"runner": ["a", "b"], "part": [0, 1]}}, [["a"], ["b"]]),
    ("${{ matrix.runner }}", {"matrix": {"runner": ["a", "b"], "exclude": [{"runner": "b"}]}}, [["a"]]),
    ("${{ matrix.r }}", {"matrix": {"r": [["self-hosted", "h100"]]}}, [["self-hosted", "h100"]]),
    (["self-hosted", "${{ matrix.gpu }}"], {"matrix": {"gpu": ["h100"]}}, [["self-hosted", "h100"]]),
    ("gpu-${{ matrix.n }}", {"matrix": {"n": [1, 2]}}, [["gpu-1"], ["gpu-2"]]),
    # include merges into the combinations it matches, else adds one
    ("${{ matrix.os }}", {"matrix": {"py": ["3.10"], "include": [{"py": "3.10", "os": "x"}]}}, [["x"]]),
    ("${{ 'linux' }}", None, [["linux"]]),
    ("${{ format('{0}-gpu-{1}', 4, 'h100') }}", None, [["4-gpu-h100"]]),
    ("${{ fromJSON('[\"self-hosted\", \"a100\"]') }}", None, [["self-hosted", "a100"]]),
    ("${{ true && 'a' || 'b' }}", None, [["a"]]),
    ("${{ github.event_name == 'schedule' && 'x' || 'x' }}", None, [["x"]]),
]


@pytest.mark.parametrize(("runs_on", "strategy", "labels"), RESOLVED)
def test_literal_after_evaluation(runs_on: Any, strategy: Any, labels: list[list[str]]) -> None:
    assert resolve_runs_on(runs_on, strategy)[0] == labels


def test_a_fork_guard_takes_the_projects_own_repository() -> None:
    got = resolve_runs_on("${{ github.repository == 'org/x' && 'h100' || 'ubuntu-latest' }}", None)
    assert got == ([["h100"]], ["github.repository == 'org/x'"])
    got = resolve_runs_on("${{ github.repository_owner != 'org' && 'ubuntu-latest' || 'h100' }}", None)
    assert got[0] == [["h100"]]


UNRESOLVED = [
    ("${{ github.event_name == 'schedule' && 'big' || 'small' }}", None,
     "one of 'big', 'small', depending on github.event_name"),
    ("${{ needs.x.outputs.runner }}", None, "computed at run time from needs.x.outputs.runner"),
    ("${{ inputs.runner || 'ubuntu-22.04' }}", None, "computed at run time from inputs.runner"),
    ("${{ matrix.x }}", {"matrix": "${{ fromJson(needs.a.outputs.m) }}"}, "the job's matrix is computed"),
    ("${{ matrix.x }}", {"matrix": {"y": [1]}}, "matrix.x is not a dimension"),
    ("${{ matrix.x }}", {"matrix": {"x": "${{ fromJson(inputs.xs) }}"}}, "matrix.x is computed at run time"),
    ("${{ matrix.n }}", {"matrix": {"n": list(range(20)), "m": list(range(20))}}, "more than 256"),
    ("${{ 'a' ++ }}", None, "does not understand"),
    ("${{ '' }}", None, "not runner labels"),
]


@pytest.mark.parametrize(("runs_on", "strategy", "reason"), UNRESOLVED)
def test_anything_else_comes_back_with_its_reason(runs_on: Any, strategy: Any, reason: str) -> None:
    with pytest.raises(Unresolved, match=reason.replace("(", r"\(").replace(")", r"\)")):
        resolve_runs_on(runs_on, strategy)


def test_matrix_without_dimensions_is_its_include_list() -> None:
    assert matrix_combinations({"matrix": {"include": [{"a": 1}, {"a": 2}]}}) == [{"a": 1}, {"a": 2}]
    assert matrix_combinations(None) == [{}]


LABELS = "github.event.pull_request.labels.*.name"


def _pr(labels: list[str], draft: bool = False) -> dict[str, Any]:
    return {"github.event_name": "pull_request", LABELS: labels,
            "github.event.pull_request.draft": draft,
            "github.event.label.name": labels[0] if labels else ""}


@pytest.mark.parametrize(("condition", "unlabelled", "labelled", "draft"), [
    ("github.event_name != 'pull_request' || contains(github.event.pull_request.labels.*.name, 'run-ci')",
     [False], [True], [True]),
    ("${{ github.event.pull_request.draft == false && contains(github.event.pull_request.labels.*.name, 'run-ci') }}",
     [False], [True], [False]),
    ("always() && !failure() && !cancelled() && needs.changes.outputs.main == 'true'",
     [True, False], [True, False], [True, False]),
    ("github.event.label.name == 'run-ci' || contains(github.event.pull_request.labels.*.name, 'run-ci')",
     [False], [True], [True]),
])
def test_a_jobs_condition_on_a_pull_request(condition: str, unlabelled: list[Any], labelled: list[Any],
                                            draft: list[Any]) -> None:
    from testfleet.adopt.expr import job_condition

    assert job_condition(condition, _pr([])) == unlabelled
    assert job_condition(condition, _pr(["run-ci"])) == labelled
    assert job_condition(condition, _pr(["run-ci"], draft=True)) == draft
