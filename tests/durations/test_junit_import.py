"""JUnit import: mapping cases to registered files, aggregation, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.errors import UsageError
from testfleet.store.junit_import import (
    FileMatcher,
    parse_cases,
    read_cases,
    run_id_for,
    to_executions,
)

REGISTERED = {
    "tests/e2e/megatron/test_dense.py": {"stage-c-h200"},
    "tests/e2e/fsdp/test_fsdp.py": {"stage-c-h200", "stage-c-mi300x"},
    "tests/unit/test_args.py": {"stage-a-cpu"},
    "tests/a/test_same.py": {"stage-c-h200"},
    "tests/b/test_same.py": {"stage-c-h200"},
}


def write(tmp_path: Path, body: str, name: str = "r.xml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def convert(tmp_path: Path, body: str, stage: str = "stage-c-h200"):  # type: ignore[no-untyped-def]
    cases = read_cases(write(tmp_path, body))
    matcher = FileMatcher(REGISTERED, tmp_path)
    return to_executions(cases, matcher, stage=stage, backend="cuda", commit="abc",
                         ci_run_id="run-1", default_time=1234.0)


def test_maps_by_classname_file_and_suffix_and_reports_the_rest(tmp_path: Path) -> None:
    result = convert(tmp_path, """<?xml version="1.0"?>
<testsuites>
  <testsuite name="pytest" timestamp="2026-11-30T10:00:00">
    <testcase classname="tests.e2e.megatron.test_dense.TestDense" name="test_a" time="100.5"/>
    <testcase classname="tests.e2e.megatron.test_dense" name="test_b" time="50"/>
    <testcase classname="whatever" file="./tests/e2e/fsdp/test_fsdp.py" name="t" time="30"/>
    <testcase classname="test_dense" name="t_suffix" time="1"/>
    <testcase classname="e2e.megatron.test_dense" name="t_rel" time="2"/>
    <testcase classname="test_same" name="ambiguous" time="1"/>
    <testcase classname="tests.unit.test_args" name="other_stage" time="1"/>
    <testcase classname="tests.nowhere.test_x" name="unknown" time="1"/>
  </testsuite>
</testsuites>""")
    by_file = {e.file: e for e in result.executions}
    assert set(by_file) == {"tests/e2e/megatron/test_dense.py", "tests/e2e/fsdp/test_fsdp.py"}
    dense = by_file["tests/e2e/megatron/test_dense.py"]
    assert dense.duration == pytest.approx(153.5)
    assert (dense.stage, dense.backend, dense.outcome, dense.commit, dense.ci_run_id) == (
        "stage-c-h200", "cuda", "PASSED", "abc", "run-1")
    assert dense.timestamp == pytest.approx(1796032800.0)  # 2026-11-30T10:00:00 read as UTC
    assert result.cases == 8 and result.matched_cases == 5
    assert len(result.unmatched) == 3
    joined = "\n".join(result.unmatched)
    assert "test_same::ambiguous: no registered file matches" in joined
    assert "tests/unit/test_args.py is registered for stage-a-cpu, not stage-c-h200" in joined
    assert "tests.nowhere.test_x::unknown" in joined


def test_worst_outcome_wins_and_skipped_only_is_not_run(tmp_path: Path) -> None:
    result = convert(tmp_path, """<testsuite name="s">
  <testcase classname="tests.e2e.megatron.test_dense" name="a" time="1"/>
  <testcase classname="tests.e2e.megatron.test_dense" name="b" time="1"><failure message="x"/></testcase>
  <testcase classname="tests.e2e.fsdp.test_fsdp" name="c" time="0.1"><skipped/></testcase>
</testsuite>""")
    outcomes = {e.file: e.outcome for e in result.executions}
    assert outcomes == {"tests/e2e/megatron/test_dense.py": "FAILED",
                        "tests/e2e/fsdp/test_fsdp.py": "NOT_RUN"}
    assert all(e.timestamp == 1234.0 for e in result.executions)  # no suite timestamp


def test_error_outranks_failure_and_nested_suites_are_read(tmp_path: Path) -> None:
    result = convert(tmp_path, """<testsuites><testsuite name="outer"><testsuite name="inner">
  <testcase classname="tests.e2e.megatron.test_dense" name="a" time="1"><failure/></testcase>
  <testcase classname="tests.e2e.megatron.test_dense" name="b" time="1"><error/></testcase>
</testsuite></testsuite></testsuites>""")
    assert [(e.outcome, e.duration) for e in result.executions] == [("ERROR", 2.0)]


@pytest.mark.parametrize(("body", "message"), [
    ("<testsuite><testcase name='a'", "not well-formed XML"),
    ("", "not well-formed XML"),
    ("<html><body>hi</body></html>", "root element is <html>"),
    ("<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'b'>]><testsuite/>", "DTD or entity"),
])
def test_corrupt_or_foreign_files_are_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        read_cases(write(tmp_path, body))


LATE_DOCTYPE = ("<?xml version='1.0'?><!--" + "x" * 5000 + "-->"
                "<!DOCTYPE testsuite SYSTEM 'http://example.invalid/junit.dtd'><testsuite/>")
UTF16_ENTITY = ("<?xml version='1.0' encoding='UTF-16'?><!DOCTYPE t [<!ENTITY a 'ENTITYTEXT'>]>"
                "<testsuite><testcase name='&a;'/></testsuite>")


@pytest.mark.parametrize("data", [
    LATE_DOCTYPE.encode(),  # the DOCTYPE after the first 4 KB
    UTF16_ENTITY.encode("utf-16"),  # "<!ENTITY" is not in the bytes as ASCII
    UTF16_ENTITY.replace("'UTF-16'", "'UTF-16LE'").encode("utf-16-le"),
    b"<?xml version='1.0'?><!DOCTYPE t SYSTEM 'file:///etc/passwd'><testsuite/>",
], ids=["doctype-after-4k", "utf16-bom", "utf16le", "external-dtd"])
def test_dtd_and_entities_are_refused_in_any_encoding_and_position(tmp_path: Path,
                                                                   data: bytes) -> None:
    """#17: the hand-written check looked for ASCII "<!doctype" in the first 4 KB only;
    defusedxml refuses a DTD wherever it is and however the document is encoded."""
    path = tmp_path / "r.xml"
    path.write_bytes(data)
    with pytest.raises(UsageError, match="DTD or entity declarations are not accepted"):
        read_cases(path)


def test_utf16_junit_without_a_dtd_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_bytes("<?xml version='1.0' encoding='UTF-16'?><testsuite><testcase classname='c' "
                     "name='ok' time='2'/></testsuite>".encode("utf-16"))
    assert [(c.name, c.time) for c in read_cases(path)] == [("ok", 2.0)]


def test_bad_times_are_all_listed_and_nothing_is_imported(tmp_path: Path) -> None:
    path = write(tmp_path, """<testsuite>
  <testcase classname="c" name="neg" time="-1"/>
  <testcase classname="c" name="nan" time="nan"/>
  <testcase classname="c" name="inf" time="inf"/>
  <testcase classname="c" name="word" time="abc"/>
  <testcase classname="c" name="ok" time="3"/>
</testsuite>""")
    with pytest.raises(UsageError) as info:
        read_cases(path)
    text = str(info.value)
    assert "4 invalid testcase time(s), nothing imported" in text
    for name in ("c::neg", "c::nan", "c::inf", "c::word"):
        assert name in text


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        read_cases(tmp_path / "nope.xml")


def test_missing_time_counts_as_zero_and_comma_thousands(tmp_path: Path) -> None:
    result = convert(tmp_path, """<testsuite>
  <testcase classname="tests.e2e.megatron.test_dense" name="a"/>
  <testcase classname="tests.e2e.megatron.test_dense" name="b" time="1,200.5"/>
</testsuite>""")
    assert [e.duration for e in result.executions] == [1200.5]


def test_absolute_file_attribute_inside_the_root(tmp_path: Path) -> None:
    absolute = tmp_path / "tests" / "e2e" / "fsdp" / "test_fsdp.py"
    result = convert(tmp_path, f'<testsuite><testcase file="{absolute}" classname="x" name="t" '
                               'time="5"/></testsuite>', stage="stage-c-mi300x")
    assert [(e.file, e.stage) for e in result.executions] == [("tests/e2e/fsdp/test_fsdp.py",
                                                               "stage-c-mi300x")]


def test_run_id_is_stable_per_content() -> None:
    assert run_id_for(b"abc") == run_id_for(b"abc") != run_id_for(b"abd")
    assert run_id_for(b"abc").startswith("junit:")


def test_absurd_time_is_refused(tmp_path: Path) -> None:
    """A finite but absurd time (1e308) would be stored and later overflow every timeout
    and estimate computed from it; a week is the most a testcase may claim."""
    path = write(tmp_path, """<testsuite>
  <testcase classname="c" name="huge" time="1e308"/>
  <testcase classname="c" name="week" time="604800"/>
</testsuite>""")
    with pytest.raises(UsageError) as info:
        read_cases(path)
    text = str(info.value)
    assert "1 invalid testcase time(s), nothing imported" in text
    assert "c::huge: time '1e308' is more than 604800 seconds (7 days)" in text


def test_pipes_devices_and_big_files_are_refused_unread(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO blocked the import forever when no writer came (#27) and /dev/zero is read
    without end: only a regular file (or a link to one) is read, up to the cap."""
    import os

    from testfleet.store import junit_import

    monkeypatch.setattr(junit_import, "MAX_BYTES", 1000)
    fifo = tmp_path / "stream.xml"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    with pytest.raises(UsageError, match=r"stream\.xml: is a FIFO, not a regular file"):
        read_cases(fifo)
    with pytest.raises(UsageError, match="is a character device, not a regular file"):
        read_cases(Path("/dev/zero"))
    big = tmp_path / "big.xml"
    big.write_bytes(b"<testsuite>" + b" " * 5000 + b"</testsuite>")
    with pytest.raises(UsageError, match="more than the 1000 bytes testfleet reads"):
        read_cases(big)
    (tmp_path / "link.xml").symlink_to(big)
    with pytest.raises(UsageError, match="more than the 1000 bytes"):  # followed, then capped
        read_cases(tmp_path / "link.xml")


@pytest.mark.parametrize(("encoding", "name"), [
    ("shift_jis", "テスト"), ("euc-jp", "テスト"), ("gb2312", "测试"), ("big5", "測試"),
    ("cp932", "テスト"), ("UTF-7", "tést"), ("cp1252", "tést"), ("latin-1", "tést"),
    ("utf-8", "tést"),
])
def test_a_declared_encoding_is_decoded(tmp_path: Path, encoding: str, name: str) -> None:
    """pyexpat raised ValueError on multi-byte encodings (#27): they are decoded here."""
    data = (f"<?xml version='1.0' encoding='{encoding}'?><testsuite><testcase classname='c' "
            f"name='{name}' time='1'/></testsuite>").encode(encoding)
    assert [c.name for c in parse_cases(data, tmp_path / "r.xml")] == [name]


@pytest.mark.parametrize(("data", "message"), [
    (b'<?xml version="1.0" encoding="x-nope"?><testsuite/>', "unknown encoding 'x-nope'"),
    (b'<?xml version="1.0" encoding="base64"?><testsuite/>', "not a text encoding"),
    (b'<?xml version="1.0" encoding="shift_jis"?><testsuite name="\x81"/>', "not valid shift_jis"),
    (b'<?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE t+AD4-<testsuite/>', "DTD or entity"),
])
def test_a_bad_or_hiding_encoding_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_cases(data, tmp_path / "r.xml")
