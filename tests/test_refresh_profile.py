"""The profile of a refresh (``RefreshReport.phases``) and its fixed cost in statements.

Every DuckLake refresh records where its time went, by the plan's step kinds (the window's pin,
each source's change copy, each delta and apply statement, the cursors, the commit, the
clean-up), with the statements each ran, and logs it at DEBUG on the ``duckstream`` logger.
The statement counts of a one-row view are pinned here: each DuckLake statement costs about a
millisecond, and a refresh's fixed cost is what every refresh of every view pays.
"""

from __future__ import annotations

import logging

import pytest

from duckstream.engines.ducklake.runner import TransactionOpen, begin, finish, rebuild, refresh
from duckstream.refresh import Policy
from duckstream.runtime import setup
from duckstream.testing.differential import DuckLakeHarness
from duckstream.testing.ducklake import Recording

VIEW = "SELECT k, v FROM t"
LEAN = Policy(use_measurements=False, overhead_rows=0, max_fraction=1.0)


@pytest.fixture
def one_row(lake):
    lake.execute("CREATE TABLE dl.main.t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (0, 0)")
    harness = DuckLakeHarness(lake)
    plan = harness.compile(VIEW)
    setup(lake, plan)
    return harness, plan


def _names(report) -> list[str]:
    return [p.name for p in report.phases]


def test_an_incremental_refresh_records_its_phases(one_row):
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    report = refresh(recording, plan, strategy="incremental")
    harness.check(plan, VIEW)
    assert _names(report) == [
        "check",
        "settings",
        "begin",
        "pin",
        "changes dl.main.t",
        "delta",
        "apply",
        "apply",
        "cursors",
        "commit",
        "cleanup",
        "settings",
    ]
    assert report.statements == len(recording.statements) == 20
    assert all(p.seconds >= 0 for p in report.phases)
    assert sum(p.seconds for p in report.phases) <= report.elapsed
    # the copies' CREATE reports their rows: no read to find them empty or not
    assert not any(s.startswith("SELECT EXISTS") for s in recording.statements)


@pytest.mark.parametrize("strategy", ["incremental", "auto"])
def test_a_window_without_change_runs_eleven_statements(one_row, strategy):
    harness, plan = one_row
    recording = Recording(harness.con)
    report = refresh(recording, plan, strategy=strategy)
    assert report.reason in ("requested", "no source changed")
    assert _names(report) == ["check", "settings", "begin", "pin", "commit", "settings"]
    assert report.statements == len(recording.statements) == 11


def test_auto_estimates_with_the_window_s_reads(one_row):
    """The view's measurements come with the window's cursors, the inlined tables' names with
    the file lists' counts: the estimate of one inlined row is two statements."""
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    report = refresh(recording, plan, policy=LEAN)
    harness.check(plan, VIEW)
    assert report.strategy == "incremental" and report.history is not None
    assert report.history.full is not None  # the fill's, read with the cursors
    estimate = [p for p in report.phases if p.name == "estimate"]
    assert len(estimate) == 1 and estimate[0].statements == 2
    assert report.statements == len(recording.statements) == 22
    assert report.sources["dl.main.t"].inserted == 1


def test_a_rebuild_records_its_phases(one_row):
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    report = refresh(recording, plan, strategy="full")
    harness.check(plan, VIEW)
    names = _names(report)
    assert names[:2] == ["check", "settings"] and names[-1] == "settings"
    assert {"pin", "fill", "cursors", "commit"} <= set(names)
    assert report.statements == len(recording.statements)
    recording.statements.clear()
    phases = rebuild(recording, plan, replace=False)
    assert sum(p.statements for p in phases) == len(recording.statements)


def test_begin_and_finish_share_one_profile(one_row):
    """dbt's path: the pin and the estimate in ``begin``, the rest in ``finish``."""
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    pinned = begin(recording, plan, "incremental")
    finish(recording, pinned, before_commit=["SELECT 1"])
    harness.check(plan, VIEW)
    assert pinned.report.statements == len(recording.statements)
    assert _names(pinned.report).count("pin") == 1 and "commit" in _names(pinned.report)


def test_the_profile_is_logged_at_debug(one_row, caplog):
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    with caplog.at_level(logging.DEBUG, logger="duckstream"):
        refresh(harness.con, plan, strategy="incremental")
    (record,) = [r for r in caplog.records if r.name == "duckstream"]
    assert "refresh of dl.main.mv: incremental (incremental: requested)" in record.getMessage()
    assert "pin " in record.getMessage() and "commit " in record.getMessage()


def test_an_open_transaction_is_refused_with_one_read_of_its_own(one_row):
    harness, plan = one_row
    harness.con.execute("BEGIN")
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    with pytest.raises(TransactionOpen):
        refresh(recording, plan)
    assert len(recording.statements) == 2  # the check, the settings read: nothing set
    harness.con.execute("COMMIT")  # the caller's transaction is untouched
    refresh(harness.con, plan, strategy="incremental")
    harness.check(plan, VIEW)
