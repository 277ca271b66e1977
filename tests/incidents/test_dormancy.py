"""The dormancy line: written into the stage's table, every other byte kept."""

from __future__ import annotations

import pytest

from testfleet.failures.signature import make
from testfleet.incidents.dormancy import DormancyError, dormant_line, dormant_reason, set_disabled
from testfleet.incidents.group import Failure, group

PYPROJECT = """\
[project]
name = "x"  # keep me

[tool.testfleet]
roots = ["tests"]

[tool.testfleet.stages.stage-c-4-gpu-mi300x]
backend = "rocm"
runs_on = ["self-hosted", "amd"]   # spacing kept
# this comment belongs to the next table

[tool.testfleet.stages.gpu]
backend = "cuda"

[tool.testfleet.stages.gpu.variants.h200]
runs_on = ["h200"]
"""
PATH = ["tool", "testfleet", "stages", "stage-c-4-gpu-mi300x"]


def _lines_changed(old: str, new: str) -> list[str]:
    import difflib

    return [d for d in difflib.ndiff(old.splitlines(), new.splitlines()) if d[:1] in "+-"]


def test_inserted_after_the_tables_last_key_and_nothing_else_changes() -> None:
    edit = set_disabled(PYPROJECT, PATH, 'broken "runners"\\')
    assert _lines_changed(PYPROJECT, edit.text) == ['+ disabled = "broken \\"runners\\"\\\\"']
    assert edit.text.splitlines()[edit.line - 1].startswith("disabled")
    assert edit.text.splitlines()[edit.line - 2].startswith("runs_on")


def test_a_variant_and_a_crlf_file() -> None:
    crlf = PYPROJECT.replace("\n", "\r\n")
    edit = set_disabled(crlf, ["tool", "testfleet", "stages", "gpu", "variants", "h200"], "down")
    assert edit.text.replace('disabled = "down"\r\n', "", 1) == crlf


def test_an_existing_reason_is_replaced_on_its_line() -> None:
    text = PYPROJECT.replace('backend = "rocm"\n', 'backend = "rocm"\ndisabled = "old"\n')
    edit = set_disabled(text, PATH, "new")
    assert _lines_changed(text, edit.text) == ['- disabled = "old"', '+ disabled = "new"']


@pytest.mark.parametrize(("text", "path", "message"), [
    (PYPROJECT, ["tool", "testfleet", "stages", "nope"], "no table"),
    ('stages = { a = { backend = "cpu" } }\n', ["stages", "a"], r"not written as a \[table\]"),
    ('[stages]\na.backend = "cpu"\n', ["stages", "a"], r"not written as a \[table\]"),
    ("[stages.a\n", ["stages", "a"], "cannot parse"),
])
def test_what_cannot_be_edited_safely_is_refused(text: str, path: list[str], message: str) -> None:
    with pytest.raises(DormancyError, match=message):
        set_disabled(text, path, "x")


def test_the_reason_names_the_incident_and_its_reference_and_holds_no_injection() -> None:
    sig = make("infra", "x", "hip`Error${{ secrets.X }}\nNoDevice")
    (incident,) = group([Failure("9", "mi300x", "rocm", f"t{i}.py", sig.digest, ci_run_id="9")
                         for i in range(8)], {sig.digest: sig}, {("9", "mi300x"): 8})
    reason = dormant_reason(incident, incident.lanes[0], url="https://ci/runs/9", ref="#2230")
    assert reason.startswith(f"infrastructure incident {incident.id}: hip Error secrets.X }}}} NoDevice "
                             "on 8 of 8 file(s) in CI run 9, see #2230, https://ci/runs/9")
    assert "`" not in reason and "${{" not in reason and "\n" not in reason
    assert dormant_line('a "b"') == 'disabled = "a \\"b\\""'
