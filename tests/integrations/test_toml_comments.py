"""``init --from-existing --rederive-config`` keeps the maintainer's comments: inside
the re-derived section (above a sub-table, above a key, inline, on an item of a list) and
the one directly above the table after it, which tomlkit files under the section."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from adopt.test_workflows import realistic_tree
from support import run_cli
from testfleet.integrations.toml_comments import carry_comments

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

OLD = """[project]
name = "x"

[tool.testfleet]
# Adopted by 'testfleet init --from-existing' from 3 registrations.
roots = ["tests"]  # where the tests are
exclude = [
    # kept out until #12 is fixed
    "tests/test_a.py",
    "tests/test_b.py",  # flaky
]
gone = 1  # this key is not derived any more

# GPU stages: ask infra before changing
[tool.testfleet.stages.gpu]
# the H100 pool
runs_on = ["h100"]

# our black settings
[tool.black]
line_length = 100
"""

NEW = """[project]
name = "x"

[tool.black]
line_length = 100

[tool.testfleet]
# Adopted by 'testfleet init --from-existing' from 4 registrations.
roots = ["tests"]
exclude = [
    "tests/test_a.py",
    "tests/test_b.py",
]

[tool.testfleet.stages.gpu]
runs_on = ["h100"]
"""


def test_comments_go_back_to_their_anchors() -> None:
    text, orphans = carry_comments(OLD, NEW, generated=("# Adopted by 'testfleet init",))
    assert tomllib.loads(text) == tomllib.loads(NEW)
    assert "# our black settings\n[tool.black]" in text
    assert "# GPU stages: ask infra before changing\n[tool.testfleet.stages.gpu]\n# the H100 pool\nruns_on" in text
    assert 'roots = ["tests"]  # where the tests are' in text
    assert '    # kept out until #12 is fixed\n    "tests/test_a.py",\n    "tests/test_b.py",  # flaky' in text
    assert text.count("# Adopted by") == 1 and "3 registrations" not in text
    assert orphans == []  # an inline comment of a gone key goes with it; see below
    again, _ = carry_comments(text, text)
    assert again == text  # idempotent


def test_a_comment_whose_key_is_gone_is_returned() -> None:
    old = OLD.replace("gone = 1  # this key is not derived any more", "# about gone\ngone = 1")
    _, orphans = carry_comments(old, NEW)
    assert orphans == ["# about gone"]


def test_rederive_config_keeps_the_maintainers_comments(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    tree = realistic_tree(tmp_path / "rl")
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text()
    first_sub = text.index("\n[[tool.testfleet.implicit]]")
    text = text[:first_sub] + "\n# registered by location, see tests/ci/ci_register.py" + text[first_sub:]
    text = text.replace('\n[tool.testfleet.stages.stage-c-4-gpu-h200]\n',
                        '\n# H200 pool: ask infra before changing\n[tool.testfleet.stages.stage-c-4-gpu-h200]\n'
                        '# two shards fit the pool\n')
    text = text.replace('\nshards = 2\n', '\nshards = 2  # pool size\n', 1)
    text += "\n# trailing note about nothing\n[tool.isort]\nprofile = \"black\"\n"
    pyproject.write_text(text)
    args = ["-C", str(tree), "init", "--from-existing", "--rederive-config"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, out + err
    after = pyproject.read_text()
    assert "# registered by location, see tests/ci/ci_register.py\n[[tool.testfleet.implicit]]" in after
    assert ("# H200 pool: ask infra before changing\n[tool.testfleet.stages.stage-c-4-gpu-h200]\n"
            "# two shards fit the pool\n") in after
    assert "shards = 2  # pool size" in after
    assert '# trailing note about nothing\n[tool.isort]\nprofile = "black"' in after
    assert "[tool.black]  # style" in after
    assert tomllib.loads(after) == tomllib.loads(text)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, out + err
    assert pyproject.read_text() == after  # idempotent
