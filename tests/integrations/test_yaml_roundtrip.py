"""#28 item 4: every value written into a generated workflow parses back as what it was.

The workflows are written from data (testfleet.integrations.yaml_doc): these tests give
the emitter and the two workflows values that hand-written YAML got wrong (``- foo``
broke the file; ``0x1F``, ``.inf`` and ``0b101`` became numbers) and then anything
hypothesis finds, and read the result back with PyYAML.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from testfleet.config import validate_config
from testfleet.integrations.github_stages import render_stages_workflow
from testfleet.integrations.github_trusted import render_trusted_workflow
from testfleet.integrations.github_workflow import render_workflow
from testfleet.integrations.setup_scripts import script_path, setup_scripts
from testfleet.integrations.workflow_fit import SETTINGS_ENV
from testfleet.integrations.yaml_doc import Flow, Note, RoundTripError, check, dump

TRICKY = ["- foo", "0x1F", ".inf", "0b101", "null", "yes", "on", "No", "~", "", " lead", "trail ",
          "a: b", "#x", "x #y", "'q'", '"d"', "*alias", "&anchor", "!tag", "%dir", "@at", "`tick`",
          "{a}", "[a]", "a\nb", "a\nb\n", "a\n\nb\n\n", "  indented\nnext", "tab\tin", "1e3",
          "0o17", "+1", "-1", ".NaN", "2026-12-03", "12:30", "é ü 中", "$HOME", "${{ x }}"]


@pytest.mark.parametrize("value", TRICKY)
def test_a_tricky_value_round_trips_everywhere_it_can_stand(value: str) -> None:
    key = value if value and "\n" not in value else "k"
    doc = {"key": value, "list": [value, Note(value, before=(value.replace("\n", " "),))],
           "flow": Flow([value]) if "\n" not in value else [value], "nested": {key: value}}
    text = dump(doc)
    assert yaml.safe_load(text) == {"key": value, "list": [value, value], "flow": [value],
                                    "nested": {key: value}}


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(min_size=1, max_size=20).filter(lambda k: "\n" not in k))
@example("\x85", "\x85")
@example("a\u2028b", "k\r")
def test_any_text_round_trips(value: str, key: str) -> None:
    text = dump({key: value, "seq": [value, {"inner": value}]})
    assert yaml.safe_load(text) == {key: value, "seq": [value, {"inner": value}]}


def test_the_check_refuses_a_document_that_does_not_round_trip() -> None:
    with pytest.raises(RoundTripError):
        check("key: 0x1F\n", {"key": "0x1F"})
    with pytest.raises(RoundTripError):
        check("key: - foo\n", {"key": "- foo"})


# Values a configuration accepts for env and setup (no control character but newline and
# tab, no '${{'), as hypothesis finds them.
CONFIG_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029").filter(
    lambda c: c in "\n\t" or (ord(c) >= 32 and c != "\x7f")), max_size=40).filter(
    lambda v: "${{" not in v)


def _parsed(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    assert "on" in data and True not in data  # the key `on` is written so YAML 1.1 keeps it
    return data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True),
                           CONFIG_TEXT, max_size=4),
       setup=st.lists(CONFIG_TEXT.filter(lambda v: v.strip() != ""), max_size=3),
       python=st.sampled_from([None, "", "3.11", "3.x", "pypy3.10"]),
       options=CONFIG_TEXT.filter(lambda v: "\n" not in v and "\t" not in v))
def test_every_generated_workflow_parses_back_to_the_values_given(
        env: dict[str, str], setup: list[str], python: str | None, options: str) -> None:
    gpu: dict[str, Any] = {"backend": "cuda", "runs_on": ["self-hosted", "gpu"], "env": env,
                           "setup": setup, "container": {"image": "img:1", "options": options},
                           "checkouts": [{"repository": "NVIDIA/Megatron-LM", "ref": "core_v0.12.0",
                                          "path": "Megatron-LM"}]}
    if python is not None:
        gpu["python"] = python
    config = validate_config({"stages": {"unit": {"backend": "cpu", "env": env, "setup": setup},
                                         "gpu": gpu}})
    for caller in (render_workflow(config), render_trusted_workflow(config)):
        assert caller is not None and _parsed(caller)["jobs"]["stages"]
    for text in (render_stages_workflow(config),):  # every stage job, written once
        assert text is not None
        jobs = _parsed(text)["jobs"]
        job = jobs["gpu"]
        assert {k: v for k, v in job.get("env", {}).items() if k != SETTINGS_ENV} == env
        assert job["container"].get("options", "") == options
        # each setup item is a script file, written as it was given (after its header)
        runs = [line for s in job["steps"] if s.get("run", "").startswith("bash .github/")
                for line in s["run"].splitlines()]
        assert runs == [f"bash {script_path('gpu', i)}" for i in range(1, len(setup) + 1)]
        files = setup_scripts(config).files
        for i, value in enumerate(setup, 1):
            body = files[script_path("gpu", i)].split("set -eo pipefail\n", 1)[1]
            assert body.rstrip("\n") == value.rstrip("\n")
        pythons = [s["with"]["python-version"] for s in job["steps"]
                   if s.get("uses", "").startswith("actions/setup-python@")]
        assert pythons == ([python] if python else [])  # a container job: none by default
        checkout = next(s for s in job["steps"]
                        if s.get("with", {}).get("repository") == "NVIDIA/Megatron-LM")
        assert checkout["with"] == {"repository": "NVIDIA/Megatron-LM", "ref": "core_v0.12.0",
                                    "path": "Megatron-LM", "persist-credentials": False}
    unit = _parsed(render_stages_workflow(config) or "")["jobs"]["unit"]
    assert {k: v for k, v in unit.get("env", {}).items() if k != SETTINGS_ENV} == env
