"""Coverage matrix, holes and the disabled ledger, computed purely."""

from __future__ import annotations

import datetime as dt

from report_helpers import NOW, config, fleet, reg

from testfleet.report.ages import LineAge
from testfleet.report.collect import build_report, category


def _report(regs=None, cfg=None, ages=None):
    return build_report(project="p", config=cfg or config(), registrations=regs if regs is not None else fleet(),
                        now=NOW, ages=ages)


def test_categories_are_exclusive_in_priority_order() -> None:
    assert category(reg("a", disabled="x", nightly=True, labels=("long",))) == "disabled"
    assert category(reg("a", nightly=True, labels=("long",))) == "nightly-only"
    assert category(reg("a", labels=("long",))) == "label-gated"
    assert category(reg("a")) == "enabled"


def test_matrix_counts_per_stage_backend_and_label() -> None:
    r = _report()
    stages = {s.name: s for s in r.stages}
    assert [s.name for s in r.stages] == ["cpu-a", "gpu-h200", "gpu-mi300x"]
    a = stages["cpu-a"].counts
    assert (a.enabled, a.label_gated, a.nightly_only, a.disabled, a.total) == (1, 0, 1, 0, 2)
    h = stages["gpu-h200"].counts
    assert (h.label_gated, h.disabled, h.active) == (1, 1, 1)
    assert h.est_seconds == 900  # disabled time is not counted
    m = stages["gpu-mi300x"]
    assert m.status == "dormant" and m.reason and [x.text for x in m.references] == ["#2230"]
    assert (m.counts.active, m.counts.disabled) == (1, 1)
    assert r.totals.total == 6 and r.totals.active == 4
    assert r.runnable == 3  # the enabled MI300X test sits in a dormant stage
    assert r.headline().startswith("3 of 6 registrations can run, 2 coverage holes, 1 dormant stage")
    backends = {g.name: g for g in r.backends}
    assert backends["rocm"].scheduled == 0 and backends["cuda"].scheduled == 1
    labels = {g.name: g for g in r.labels}
    assert labels["megatron"].counts.total == 3 and labels["megatron"].scheduled == 1
    assert labels["amd"].scheduled == 0


def test_holes_backend_first_then_stages() -> None:
    r = _report()
    assert [(h.kind, h.name, h.cause) for h in r.holes] == [
        ("backend", "rocm", "all-stages-dormant"),
        ("stage", "gpu-mi300x", "dormant"),
    ]
    assert r.holes[1].detail.startswith("MI300X runners") and r.holes[1].lost == 1


def test_all_disabled_stage_and_empty_stage_are_holes() -> None:
    cfg = config(stages={"cpu-a": {"backend": "cpu"}, "gpu": {"backend": "cuda"},
                         "empty": {"backend": "cuda"}})
    regs = [reg("a.py"), reg("g.py", "gpu", "cuda", labels=("megatron",), disabled="x #1")]
    r = _report(regs, cfg)
    assert [(h.kind, h.name, h.cause) for h in r.holes] == [
        ("backend", "cuda", "all-disabled"),
        ("stage", "gpu", "all-disabled"),
        ("stage", "empty", "no-registrations"),
    ]


def test_healthy_fleet_has_no_holes() -> None:
    cfg = config(stages={"cpu-a": {"backend": "cpu"}})
    r = _report([reg("a.py")], cfg)
    assert r.holes == () and r.dormant == ()
    assert "0 disabled" in r.headline()


def test_unconfigured_suite_is_shown_not_dropped() -> None:
    r = _report([*fleet(), reg("z.py", "nope", "cpu")])
    row = [s for s in r.stages if s.name == "nope"]
    assert row and row[0].status == "unconfigured" and row[0].counts.total == 1
    assert r.totals.total == 7


def test_ledger_ages_expiry_shared_reasons_and_order() -> None:
    regs = [*fleet(),
            reg("tests/unit/test_e.py", disabled="slow disks until 2026-05-01"),
            reg("tests/unit/test_f.py", disabled="fine until 2026-12-31, see #5")]
    by_file = {r.file + r.backend: r for r in regs}
    when = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    ages = {by_file["tests/e2e/test_x.pycuda"]: LineAge("committed", when, "c" * 40, line=7),
            by_file["tests/e2e/test_m.pyrocm"]: LineAge("uncommitted")}
    r = _report(regs, ages=ages)
    files = [(e.file, e.backend) for e in r.ledger]
    # expired first, then oldest, unknown ages last
    assert files[0] == ("tests/unit/test_e.py", "cpu")
    assert files[1] == ("tests/e2e/test_x.py", "cuda")
    e = {(x.file, x.backend): x for x in r.ledger}
    x = e[("tests/e2e/test_x.py", "cuda")]
    assert x.age_days == (NOW.date() - dt.date(2026, 1, 1)).days and x.changed == "2026-01-01"
    assert x.reason_line == 7 and x.references == () and x.shared_reason == 2
    assert e[("tests/e2e/test_m.py", "rocm")].age_days == 0
    assert e[("tests/e2e/test_m.py", "rocm")].stage_dormant
    exp = e[("tests/unit/test_e.py", "cpu")]
    assert exp.expired and exp.expiry == "2026-05-01" and exp.days_left == -31
    ok = e[("tests/unit/test_f.py", "cpu")]
    assert not ok.expired and ok.days_left == (dt.date(2026, 12, 31) - NOW.date()).days
    assert e[("tests/unit/test_f.py", "cpu")].age_days is None
    assert "1 past their expiry" in r.headline()


def test_reference_patterns_from_config() -> None:
    cfg = config(check={"reference_patterns": [r"\bJIRA-\d+\b"]})
    r = _report([reg("a.py"), reg("b.py", disabled="blocked on JIRA-7")], cfg)
    assert [x.text for x in r.ledger[0].references] == ["JIRA-7"]
