"""What the existing CI ran in one run, read from the records its jobs leave: each job of
the old workflow appends one block to a record file (or writes a file of its own), a
header line naming its stage, then its runner's listing output or a JUnit file.

    == stage=stage-a-cpu shard=1/2 runs_on=ubuntu-latest ==
    <output of: python tests/ci/run_suite.py --hw cpu --suite stage-a-cpu ... --list-only>
    == stage=stage-c-4-gpu-h200 runs_on=h200,4gpu junit=results/h200.xml ==

Header keys: ``stage`` (required), ``variant``, ``shard=I/N`` (the job's partition and the
partition count), ``runs_on`` (the job's runner labels, comma-separated), ``junit`` (a
JUnit XML file, relative to the record, whose testcases are the block's files instead
of listing text). The listing's lines are read by :mod:`testfleet.listing_text`, as the
adoption report reads ``--runner-selection``. A block with ``shard`` but other blocks of
the same lane without it, two blocks for one shard, or partition counts that disagree
are errors naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from testfleet.errors import UsageError
from testfleet.listing_text import ListingLines
from testfleet.textsafe import printable

HEADER = re.compile(r"^==\s*(stage=.*?)\s*==\s*$")
KEYS = ("stage", "variant", "shard", "runs_on", "junit")
MAX_RECORD_BYTES = 16 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class ObservedLane:
    """One stage (or variant) as the existing CI ran it in this run."""

    stage: str
    variant: str
    files: set[str] = field(default_factory=set)
    runs_on: tuple[str, ...] | None = None
    #: the partition count the jobs said (``shard=I/N``); None: not said
    shards: int | None = None
    #: the partitions seen, and the blocks that said none
    partitions: set[int] = field(default_factory=set)
    unpartitioned: int = 0
    where: str = ""  # file:line of the lane's first block


@dataclass
class _Block:
    lane: ObservedLane
    listing: ListingLines | None


def parse_record(text: str, source: str, base: Path,
                 lanes: dict[tuple[str, str], ObservedLane], known_files: set[str]) -> None:
    """Add the blocks of one record file to ``lanes`` (``(stage, variant) -> lane``).

    ``base``: the directory a block's ``junit=`` path is relative to; ``known_files``: the
    repository's test files, to map a JUnit ``classname`` to its file."""
    block: _Block | None = None
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{source}:{number}"
        # a header (or a mistyped one: '== stag=x =='); a runner's own '=====' rules are text
        if re.match(r"==\s*[A-Za-z_]+=\S*.*==\s*$", line):
            m = HEADER.match(line)
            if m is None:
                raise UsageError(f"{where}: expected '== stage=<stage> [shard=I/N] "
                                 f"[runs_on=a,b] [junit=FILE] ==', got {printable(line[:80])!r}")
            block = _header(m.group(1), where, base, lanes, known_files)
            continue
        if not line.strip():
            continue
        if block is None:
            raise UsageError(f"{where}: text before the first '== stage=<stage> ==' line")
        if block.listing is None:
            raise UsageError(f"{where}: a block with junit= holds no listing text")
        block.listing.feed(line)
        block.lane.files |= block.listing.files


def _header(body: str, where: str, base: Path, lanes: dict[tuple[str, str], ObservedLane],
            known_files: set[str]) -> _Block:
    values: dict[str, str] = {}
    for word in body.split():
        key, eq, value = word.partition("=")
        if not eq or key not in KEYS:
            raise UsageError(f"{where}: {printable(word[:60])!r} is not a header key; valid: "
                             f"{', '.join(f'{k}=' for k in KEYS)}")
        if key in values:
            raise UsageError(f"{where}: {key}= is given twice")
        values[key] = value
    stage, variant = values.get("stage", ""), values.get("variant", "")
    for key, value in (("stage", stage), ("variant", variant)):
        if (value or key == "stage") and not _NAME.match(value):
            raise UsageError(f"{where}: {key}={printable(value[:60])!r} is not a stage name")
    lane = lanes.setdefault((stage, variant), ObservedLane(stage, variant, where=where))
    if "shard" in values:
        index, count = _shard(values["shard"], where)
        if lane.shards is not None and lane.shards != count:
            raise UsageError(f"{where}: shard={values['shard']} says {count} partitions; "
                             f"{lane.where} said {lane.shards}")
        if index in lane.partitions:
            raise UsageError(f"{where}: shard {index} of {stage} is given twice")
        if lane.unpartitioned:
            raise UsageError(f"{where}: {stage} has blocks with and without shard=")
        lane.shards = count
        lane.partitions.add(index)
    else:
        if lane.partitions:
            raise UsageError(f"{where}: {stage} has blocks with and without shard=")
        lane.unpartitioned += 1
    if "runs_on" in values:
        labels = tuple(sorted(label for label in values["runs_on"].split(",") if label))
        if not labels:
            raise UsageError(f"{where}: runs_on= names no label")
        if lane.runs_on is not None and lane.runs_on != labels:
            raise UsageError(f"{where}: runs_on={values['runs_on']} differs from the labels "
                             f"{','.join(lane.runs_on)} of {lane.where}")
        lane.runs_on = labels
    if "junit" in values:
        path = base / values["junit"]
        lane.files |= junit_files(path, f"{where}: junit={values['junit']}", known_files)
        return _Block(lane, None)
    return _Block(lane, ListingLines())


def _shard(value: str, where: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,4})/(\d{1,4})", value)
    if m is None or not int(m.group(1)) < int(m.group(2)):
        raise UsageError(f"{where}: shard={printable(value[:20])!r}: expected I/N with "
                         "0 <= I < N (the job's partition of N)")
    return int(m.group(1)), int(m.group(2))


def junit_files(path: Path, where: str, known_files: set[str]) -> set[str]:
    """The files a JUnit report's testcases come from: pytest's ``file`` attribute, else
    the ``classname`` (``tests.e2e.test_x.TestX``) matched to a known file by its longest
    dotted prefix (``tests/e2e/test_x.py``). A testcase matching no file is an error:
    dropping it would hide a file the old CI ran."""
    import xml.etree.ElementTree as ET

    import defusedxml
    from defusedxml.ElementTree import fromstring

    from testfleet.fileio import read_regular

    try:
        data = read_regular(path, MAX_RECORD_BYTES * 16, follow=True)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    try:
        root = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException:
        raise UsageError(f"{where}: DTD or entity declarations are not accepted") from None
    except ET.ParseError as exc:
        raise UsageError(f"{where}: not well-formed XML ({exc})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise UsageError(f"{where}: not a JUnit report (root element <{printable(str(root.tag))[:60]}>)")
    out: set[str] = set()
    unmatched: list[str] = []
    for case in root.iter("testcase"):
        file = case.get("file")
        if file:
            out.add(PurePosixPath(file.replace("\\", "/")).as_posix().removeprefix("./"))
            continue
        found = _by_classname(case.get("classname") or "", known_files)
        if found is None:
            unmatched.append(printable(case.get("classname") or case.get("name") or "?")[:80])
        else:
            out.add(found)
    if unmatched:
        raise UsageError(f"{where}: {len(unmatched)} testcase(s) match no test file: "
                         f"{', '.join(sorted(set(unmatched))[:5])}")
    return out


def _by_classname(classname: str, known_files: set[str]) -> str | None:
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n]) + ".py"
        hits = [f for f in known_files if f == candidate or f.endswith("/" + candidate)]
        if len(hits) == 1:
            return hits[0]
    return None


def read_records(paths: list[Path], known_files: set[str]) -> dict[tuple[str, str], ObservedLane]:
    """Every block of the record files (a directory: each ``*.txt`` under it, sorted)."""
    from testfleet.fileio import read_regular

    lanes: dict[tuple[str, str], ObservedLane] = {}
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.txt") if p.is_file())
            if not found:
                raise UsageError(f"--observed {path}: no *.txt record in it")
            files += found
        else:
            files.append(path)
    for path in files:
        try:
            raw = read_regular(path, MAX_RECORD_BYTES, follow=True)
        except FileNotFoundError:
            raise UsageError(f"--observed {path}: no such file") from None
        except OSError as exc:
            raise UsageError(f"--observed {path}: cannot read it ({exc.strerror or exc})") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        parse_record(text, str(path), path.parent, lanes, known_files)
    return lanes
