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
from duckstream.runtime import setup
from duckstream.strategy import Policy
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
    assert report.statements == len(recording.statements) == 18
    assert all(p.seconds >= 0 for p in report.phases)
    assert sum(p.seconds for p in report.phases) <= report.elapsed
    # the copies' CREATE reports their rows: no read to find them empty or not
    reads = [s for s in recording.statements if s.startswith("SELECT EXISTS")]
    assert not any("_changes_" in s for s in reads)
    # the delta has no negative row: a read of it instead of the view's DELETE
    assert [s for s in recording.statements if s.startswith("DELETE")] == []
    assert [s for s in reads if "_delta" in s] == [
        "SELECT EXISTS(SELECT 1 FROM temp.main._ivm_dl_main_mv_delta AS d WHERE d._ivm_mult < 0)"
    ]


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
    assert report.statements == len(recording.statements) == 20
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


def test_an_append_to_a_view_without_aggregates_runs_no_delete(one_row):
    """The delta has no negative row: the view's DELETE (a scan of its table) is skipped
    after a read of the delta; a deletion runs it."""
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1), (1, 1)")
    recording = Recording(harness.con)
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, VIEW)
    assert not any(s.startswith("DELETE FROM dl.main.mv") for s in recording.statements)
    harness.con.execute("DELETE FROM dl.main.t WHERE k = 0")
    recording.statements.clear()
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, VIEW)
    assert any(s.startswith("DELETE FROM dl.main.mv") for s in recording.statements)


def test_an_append_only_window_copies_the_insertions_alone(one_row):
    """A source the window shows without deletions is copied by the plainer query
    (``CreateTemp.appends_only``); with a deletion, by the netting one."""
    harness, plan = one_row
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    harness.con.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    recording = Recording(harness.con)
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, VIEW)
    (copy,) = [s for s in recording.statements if "_changes_0 AS" in s]
    assert "DUCKLAKE_TABLE_INSERTIONS" in copy and "DUCKLAKE_TABLE_DELETIONS" not in copy
    harness.con.execute("UPDATE dl.main.t SET v = 2 WHERE k = 1")
    recording.statements.clear()
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, VIEW)
    (copy,) = [s for s in recording.statements if "_changes_0 AS" in s]
    assert "DUCKLAKE_TABLE_DELETIONS" in copy


def _logged(harness) -> int:
    return harness.con.execute("SELECT count(*) FROM dl.main._ivm_cursors").fetchone()[0]


def test_the_cursors_log_is_written_only_when_nothing_else_makes_the_snapshot(lake):
    """A refresh that writes the view's table commits a snapshot anyway: its cursors go in
    the commit alone; a refresh whose changes leave the view as it was appends them to the
    log, so that its commit makes a snapshot and the cursors advance."""
    lake.execute("CREATE TABLE dl.main.t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (0, 0)")
    harness = DuckLakeHarness(lake)
    view = "SELECT k, v FROM t WHERE k < 100"
    plan = harness.compile(view)
    setup(lake, plan)
    logged = _logged(harness)
    lake.execute("INSERT INTO dl.main.t VALUES (1, 1)")
    refresh(lake, plan, strategy="incremental")
    harness.check(plan, view)
    assert _logged(harness) == logged
    lake.execute("INSERT INTO dl.main.t VALUES (500, 1)")  # filtered out: the view is as it was
    refresh(lake, plan, strategy="incremental")
    harness.check(plan, view)
    assert _logged(harness) == logged + 1
    assert refresh(lake, plan).reason == "no source changed"  # the cursors moved both times
