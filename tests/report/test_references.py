"""Tracking references in disabled reasons."""

from __future__ import annotations

import pytest

from testfleet.report.references import describe, has_reference, parse_references


@pytest.mark.parametrize(
    ("reason", "texts"),
    [
        ("Flaky under the new rollout scheduler, see #2301", ["#2301"]),
        ("restore when #2230's follow-up closes", ["#2230"]),
        ("Waiting for the API to stabilise (#2190)", ["#2190"]),
        ("see https://github.com/example/fleet/issues/2234.", ["https://github.com/example/fleet/issues/2234"]),
        ("fixed by https://github.com/o/r/pull/77, then #78", ["https://github.com/o/r/pull/77", "#78"]),
        ("tracked in example/fleet#12", ["example/fleet#12"]),
        ("GH-5 regression", ["GH-5"]),
        ("see https://ci.example.com/job/3", ["https://ci.example.com/job/3"]),
        ("#1 and #1 again", ["#1"]),
        ("Disable due to failure", []),
        ("C#1 interop broken", []),
        ("html entity &#123; is not a ref", []),
        ("issue 123 without hash", []),
        ("", []),
    ],
)
def test_parse(reason: str, texts: list[str]) -> None:
    assert [r.text for r in parse_references(reason)] == texts


def test_kinds_numbers_and_repo() -> None:
    issue, pull, url, plain = parse_references(
        "https://github.com/a/b/issues/9 https://github.com/a/b/pull/10 https://x.org/y #11")
    assert (issue.kind, issue.number, issue.repo, issue.url) == ("issue", 9, "a/b", issue.text)
    assert (pull.kind, pull.number) == ("pull", 10)
    assert (url.kind, url.number, url.url) == ("url", None, "https://x.org/y")
    assert (plain.kind, plain.number, plain.repo, plain.url) == ("issue", 11, None, None)


def test_hash_inside_url_is_not_counted_twice() -> None:
    refs = parse_references("see https://example.com/page#123")
    assert [r.kind for r in refs] == ["url"]


def test_extra_patterns_and_describe() -> None:
    assert not has_reference("blocked by FLEET-42")
    refs = parse_references("blocked by FLEET-42", [r"\bFLEET-\d+\b"])
    assert [(r.kind, r.text) for r in refs] == [("custom", "FLEET-42")]
    assert describe(refs) == "FLEET-42"
    assert describe([]) == "none"
    assert has_reference(None) is False
