"""The cost-based choice between incremental and full refresh (duckstream.engines.ducklake.runner).

A small DuckLake: ``facts`` (100k rows, one data file) joined to ``dims`` (100 rows). Small
changes are maintained incrementally, huge ones rebuilt; whatever is chosen, the table equals
recomputation. The estimate comes from the catalog alone and must count exactly what the
change feed holds: inserts, deletes, updates (both), inlined rows. ``LEAN`` leaves out the
fixed cost of an incremental refresh, which on a view this small outweighs any change.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake.runner import Policy, RefreshReport, choose, refresh
from duckstream.plan import Read
from duckstream.runtime import refresh as runtime_refresh
from duckstream.runtime import setup
from duckstream.strategy import History, Measured, SourceEstimate, calibrate, decide, join_reads
from duckstream.testing.differential import DuckLakeHarness
from duckstream.testing.ducklake import Recording

VIEW = (
    "SELECT d.name, count(*) AS n, sum(f.v) AS total"
    " FROM facts f JOIN dims d ON f.k = d.k GROUP BY d.name"
)
FACTS = "dl.main.facts"
LEAN = Policy(use_measurements=False, overhead_rows=0)


@pytest.fixture
def view(lake):
    lake.execute("CREATE TABLE dl.main.dims (k INTEGER, name VARCHAR)")
    lake.execute("INSERT INTO dl.main.dims SELECT i, 'd' || (i % 7) FROM range(100) r(i)")
    lake.execute("CREATE TABLE dl.main.facts (id BIGINT, k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO dl.main.facts SELECT i, i % 100, i % 13 FROM range(100000) r(i)")
    harness = DuckLakeHarness(lake)
    plan = harness.compile(VIEW)
    setup(lake, plan)
    return harness, plan


def _refresh(harness: DuckLakeHarness, plan, **kwargs) -> RefreshReport:
    report = refresh(harness.con, plan, **kwargs)
    harness.check(plan, VIEW, f"after a {report.strategy} refresh ({report.reason})")
    return report


def test_no_change_is_incremental(view):
    harness, plan = view
    report = _refresh(harness, plan)
    assert (report.strategy, report.reason) == ("incremental", "no source changed")
    assert report.change_rows == {}  # the window's pin decides: no estimate is read
    assert "estimate" not in [p.name for p in report.phases]


def test_small_change_is_incremental(view):
    harness, plan = view
    harness.con.execute("INSERT INTO dl.main.facts SELECT 100000 + i, i, 5 FROM range(50) r(i)")
    assert (
        choose(harness.con, plan, Policy(use_measurements=False)).strategy == "full"
    )  # the fixed cost
    report = _refresh(harness, plan, policy=LEAN)
    assert report.strategy == "incremental"
    assert report.sources[FACTS].inserted == 50 and report.sources[FACTS].deleted == 0
    assert report.sources[FACTS].rows == 100050
    assert report.incremental_cost is not None and report.full_cost is not None
    assert report.incremental_cost < report.full_cost
    assert "facts +50/-0" in report.reason
    assert report.elapsed >= report.estimate_seconds > 0


def test_huge_change_is_full(view):
    harness, plan = view
    harness.con.execute(
        "INSERT INTO dl.main.facts SELECT 200000 + i, i % 100, 1 FROM range(60000) r(i)"
    )
    harness.con.execute("DELETE FROM dl.main.facts WHERE id % 2 = 0")
    report = _refresh(harness, plan, policy=LEAN)
    assert report.strategy == "full"
    assert report.sources[FACTS].inserted == 60000
    assert report.sources[FACTS].deleted == 50000 + 30000
    assert "more than 10%" in report.reason
    # the cursors moved: the next small change is incremental again, and exact
    harness.con.execute("INSERT INTO dl.main.facts VALUES (999999, 5, 7)")
    assert _refresh(harness, plan, policy=LEAN).strategy == "incremental"


def test_deletes_read_their_data_files(view):
    """Deleted rows are read positionally: the whole 100k-row file is scanned, so a delete of
    a few rows from a big file costs about a rebuild of a view over that file."""
    harness, plan = view
    harness.con.execute("DELETE FROM dl.main.facts WHERE id < 30")
    # dims, scanned for the deleted keys, costs a rebuild's row each: the file decides
    estimate = choose(
        harness.con, plan, Policy(use_measurements=False, overhead_rows=0, delete_reach=1.0)
    )
    assert estimate.sources[FACTS].deleted == 30
    assert estimate.sources[FACTS].scanned == 100000
    assert estimate.incremental_cost is not None and estimate.full_cost is not None
    assert estimate.incremental_cost > estimate.full_cost
    assert estimate.strategy == "full"
    _refresh(harness, plan, policy=LEAN)


def test_updates_count_twice_and_several_snapshots_add_up(view):
    harness, plan = view
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id < 40")
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id < 10")
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-1, 3, 3), (-2, 4, 4)")  # inlined
    harness.con.execute("DELETE FROM dl.main.facts WHERE id = -1")
    harness.con.execute("UPDATE dl.main.dims SET name = 'renamed' WHERE k = 3")
    report = choose(harness.con, plan, Policy(use_measurements=False))
    feed = harness.con.execute(
        "SELECT (SELECT count(*) FROM ducklake_table_insertions('dl', 'main', 'facts', ?, ?)),"
        " (SELECT count(*) FROM ducklake_table_deletions('dl', 'main', 'facts', ?, ?))",
        [_cursor(harness) + 1, _end(harness)] * 2,
    ).fetchone()
    facts = report.sources[FACTS]
    assert (facts.inserted, facts.deleted) == feed
    assert report.change_rows["dl.main.dims"] == 2
    for strategy in ("incremental", "full"):  # both paths are exact from here
        assert _refresh(harness, plan, strategy=strategy).strategy == strategy


def test_forced_strategies_and_policy(view):
    harness, plan = view
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-5, 1, 1)")
    eager = Policy(use_measurements=False, max_fraction=0.0)
    report = _refresh(harness, plan, policy=eager)
    assert report.strategy == "full" and report.requested == "auto"
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-6, 1, 1)")
    report = _refresh(harness, plan, strategy="full")
    assert (report.strategy, report.reason) == ("full", "requested")
    with pytest.raises(ValueError, match="strategy"):
        refresh(harness.con, plan, strategy="sometimes")


def test_runtime_refresh_is_auto_by_default(view):
    harness, plan = view
    harness.con.execute("INSERT INTO dl.main.facts SELECT 300000 + i, 1, 1 FROM range(90000) r(i)")
    report = runtime_refresh(harness.con, plan)
    assert report.requested == "auto" and report.reason
    harness.check(plan, VIEW)
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-7, 2, 2)")
    report = runtime_refresh(harness.con, plan, strategy="incremental")
    assert (report.strategy, report.requested) == ("incremental", "incremental")
    harness.check(plan, VIEW)


@pytest.mark.parametrize(
    "change",
    [
        "CALL ducklake_expire_snapshots('dl', versions => [{cursor}])",
        "CREATE OR REPLACE TABLE dl.main.dims AS SELECT 1 AS k, 'x' AS name",
        "ALTER TABLE dl.main.dims ADD COLUMN extra INTEGER",
    ],
)
def test_auto_rebuilds_when_incremental_is_impossible(view, change):
    harness, plan = view
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-8, 1, 1)")
    harness.con.execute(change.format(cursor=_cursor(harness)))
    estimate = choose(
        harness.con, plan, Policy(use_measurements=False)
    )  # the estimate sees it, not only the pin
    assert estimate.strategy == "full" and estimate.sources == {}
    assert any(word in estimate.reason for word in ("expired", "recreated", "altered"))
    report = _refresh(harness, plan)
    assert report.strategy == "full"
    assert any(word in report.reason for word in ("expired", "recreated", "altered"))


def _cursor(harness: DuckLakeHarness) -> int:
    cursors = ducklake_cursors.read(harness.con, "dl", "dl.main.mv")
    assert cursors is not None
    return min(snapshot for _, snapshot in cursors.values())


def _end(harness: DuckLakeHarness) -> int:
    row = harness.con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('dl')").fetchone()
    assert row is not None
    return int(row[0])


def test_a_table_kept_inline_counts_its_live_rows(lake):
    """A small table may live in the catalog whole (inlined): its rows still count, so deleting
    one of its five rows changes a quarter of the four left, not 100% of nothing."""
    lake.execute("CREATE TABLE dl.main.tiny (k INTEGER, name VARCHAR)")
    lake.execute("INSERT INTO dl.main.tiny VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")
    harness = DuckLakeHarness(lake)
    view = "SELECT name, count(*) AS n FROM tiny GROUP BY name"
    plan = harness.compile(view)
    setup(lake, plan)
    lake.execute("DELETE FROM dl.main.tiny WHERE k = 2")
    report = refresh(lake, plan)
    tiny = report.sources["dl.main.tiny"]
    assert (tiny.rows, tiny.deleted) == (4, 1)
    assert "(25.00%)" in report.reason
    harness.check(plan, view)


# -- what each path scans (plan.maintain_reads / rebuild_reads) --------------------------

DIMS = "dl.main.dims"
# Q4's shape: EXISTS decorrelated into a join with DISTINCT keys of facts. The term of dims'
# changes joins that DISTINCT, restricted to the changed keys before the DISTINCT (the key
# filter pushed into the derived table); the term of facts' changes recomputes the affected
# keys only, at both snapshots.
EXISTS_VIEW = (
    "SELECT d.name, count(*) AS n FROM dims d"
    " WHERE EXISTS (SELECT 1 FROM facts f WHERE f.k = d.k AND f.v > 5) GROUP BY d.name"
)
# An uncorrelated scalar subquery: one row aggregated from all of facts, which no key of a
# change restricts: the term of dims' changes reads facts whole.
SCALAR_VIEW = (
    "SELECT d.name, count(*) AS n FROM dims d"
    " WHERE d.k < (SELECT avg(f.v) FROM facts f) GROUP BY d.name"
)


def _shape(reads) -> list[tuple[str, tuple[tuple[str, ...], ...], bool]]:
    return sorted((r.table, tuple(tuple(sorted(c)) for c in r.when), r.whole) for r in reads)


def test_a_plain_join_scans_each_other_source_once(view):
    _, plan = view
    assert plan.maintain_reads is not None and plan.rebuild_reads is not None
    assert _shape(plan.maintain_reads) == _shape(join_reads([FACTS, DIMS]))
    assert sorted(r.table for r in plan.rebuild_reads) == [DIMS, FACTS]


def test_a_decorrelated_subquery_scans_only_the_changed_keys(view):
    """On DuckLake the two terms' reads of facts through the changed keys (dims' keys, and
    the affected keys of facts' changes at both snapshots) are one scan
    (``engines/ducklake/old_states``), run when either source changed: never whole."""
    harness, _ = view
    plan = harness.compile(EXISTS_VIEW, mv_name="mv_exists")
    reads = plan.maintain_reads or []
    facts = [r for r in reads if r.table == FACTS]
    assert [(r.runs({DIMS}), r.runs({FACTS}), r.whole) for r in facts] == [(True, True, False)]
    for_facts = [r for r in reads if r.runs({FACTS}) and not r.runs({DIMS})]
    assert [r.table for r in for_facts] == [DIMS]


def test_an_uncorrelated_aggregate_scans_its_table_whole_for_the_other_changes(view):
    harness, _ = view
    plan = harness.compile(SCALAR_VIEW, mv_name="mv_scalar")
    reads = plan.maintain_reads or []
    for_dims = [r for r in reads if r.runs({DIMS}) and not r.runs({FACTS})]
    assert [(r.table, r.whole) for r in for_dims] == [(FACTS, True)]


def test_auto_weighs_the_scans_the_changes_enable(view):
    """Ten new dims: a plain join would read a tenth of facts (appended keys prune), but the
    average over facts is read whole, as much as a rebuild reads: with a fixed cost, full.
    Under EXISTS, the new dims' keys restrict the DISTINCT over facts: incremental. Ten new
    facts: the affected keys prune both scans of facts: incremental. Either way, exact."""
    harness, _ = view
    fixed = Policy(use_measurements=False, overhead_rows=1_000)
    scalar = harness.compile(SCALAR_VIEW, mv_name="mv_scalar")
    exists = harness.compile(EXISTS_VIEW, mv_name="mv_exists")
    setup(harness.con, scalar)
    setup(harness.con, exists)
    harness.con.execute("INSERT INTO dl.main.dims SELECT 100 + i, 'new' FROM range(10) r(i)")
    found = choose(harness.con, scalar, fixed)
    assert decide(found.sources, fixed).strategy == "incremental"  # as a plain join
    assert found.strategy == "full" and "scans" in found.reason
    assert found.incremental_cost is not None and found.full_cost is not None
    assert found.incremental_cost >= 1_000 + 100_000 and found.full_cost == 100_110
    report = refresh(harness.con, scalar, policy=fixed)
    assert report.strategy == "full"
    harness.check(scalar, SCALAR_VIEW, report.reason)
    report = refresh(harness.con, exists, policy=fixed)
    assert report.strategy == "incremental", report.reason
    harness.check(exists, EXISTS_VIEW, report.reason)
    harness.con.execute("INSERT INTO dl.main.facts SELECT 200000 + i, i, 9 FROM range(10) r(i)")
    report = refresh(harness.con, exists, policy=fixed)
    assert report.strategy == "incremental", report.reason
    harness.check(exists, EXISTS_VIEW, report.reason)


def test_the_cost_model_counts_the_scans_the_window_runs():
    big, small = "c.s.big", "c.s.small"
    sources = {
        big: SourceEstimate(big, rows=1_000_000, inserted=100),
        small: SourceEstimate(small, rows=1_000),
    }
    lean = Policy(use_measurements=False, overhead_rows=0)
    plain = decide(sources, lean)  # a plain join: the term of big's changes scans small
    assert plain.incremental_cost == 100 + 0.1 * 1_000 and plain.full_cost == 1_001_000
    only_small = [Read(big, (frozenset({small}),), whole=True)]  # runs only when small changes
    assert decide(sources, lean, only_small).incremental_cost == 100
    twice = [Read(big, (frozenset({big}),)), Read(big, (frozenset({big, small}),))]
    assert decide(sources, lean, twice).incremental_cost == 100 + 2 * 0.1 * 1_000_000
    whole = [Read(big, (frozenset({big}),), whole=True), Read(big, (frozenset({big}),), True)]
    report = decide(sources, lean, whole)  # two scans of big read whole: twice a rebuild
    assert report.incremental_cost == 100 + 2_000_000 and report.strategy == "full"
    rebuild = [Read(big), Read(big), Read(small), Read(small)]  # the rebuild reads both twice
    assert decide(sources, lean, whole, rebuild).full_cost == 2_002_000
    assert decide(sources, lean, whole, rebuild).strategy == "incremental"
    deleted = {
        big: SourceEstimate(big, rows=1_000_000, deleted=100, scanned=10_000),
        small: sources[small],
    }
    assert decide(deleted, lean, twice).incremental_cost == 10_000 + 2 * 0.4 * 1_000_000


@pytest.mark.parametrize("strategy", ["incremental", "auto"])
def test_a_window_with_no_change_runs_nothing_but_its_pin(view, strategy):
    harness, plan = view
    recording = Recording(harness.con)
    report = refresh(recording, plan, strategy=strategy)
    assert report.strategy == "incremental"
    ran = " ".join(recording.statements)
    assert "CREATE OR REPLACE TEMP TABLE" not in ran and "DELETE FROM" not in ran
    assert "COMMIT" in recording.statements
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-9, 1, 1)")
    recording.statements.clear()
    report = refresh(recording, plan, strategy=strategy, policy=LEAN)
    assert report.strategy == "incremental"
    assert "CREATE OR REPLACE TEMP TABLE" in " ".join(recording.statements)
    harness.check(plan, VIEW)


# An update of ``facts.id``, a column the view does not read: the catalog sees 500 rows
# deleted and 500 inserted, the view's columns (k, v) net to nothing.
UNREAD_UPDATE = "UPDATE dl.main.facts SET id = id + 1000000 WHERE id < 500"
# Copy the changes before settling on a rebuild even though they sit in a 100k-row file.
NET_FIRST = Policy(use_measurements=False, net_first=5.0, copy_rows=0)
COPY = "TEMP TABLE temp.main._ivm_dl_main_mv_changes_0 AS"
DELTA = "TEMP TABLE temp.main._ivm_dl_main_mv_delta AS"


def _temp_tables(harness: DuckLakeHarness) -> int:
    found = harness.con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name LIKE '_ivm_%'"
    ).fetchone()
    assert found is not None
    return int(found[0])


def test_auto_nets_the_changes_before_settling_on_a_rebuild(view):
    harness, plan = view
    harness.con.execute(UNREAD_UPDATE)
    assert choose(harness.con, plan, NET_FIRST).strategy == "full"  # the catalog's counts
    recording = Recording(harness.con)
    report = refresh(recording, plan, policy=NET_FIRST)
    assert report.strategy == "incremental"
    assert report.reason.endswith("after netting: no change in the columns the view reads")
    assert report.sources[FACTS].changed == 1000  # the catalog's estimate is kept
    assert report.netted is not None and report.netted[FACTS].changed == 0
    ran = " ".join(recording.statements)
    assert COPY in ran and DELTA not in ran  # copied, nothing applied
    assert "INSERT INTO dl.main._ivm_cursors" in ran and _temp_tables(harness) == 0
    harness.check(plan, VIEW)
    assert refresh(harness.con, plan).reason == "no source changed"  # the cursors moved
    # without room to copy first, the catalog's estimate stands
    harness.con.execute("UPDATE dl.main.facts SET id = -id WHERE id BETWEEN 1000 AND 1499")
    report = _refresh(harness, plan, policy=Policy(use_measurements=False, net_first=0))
    assert report.strategy == "full" and report.netted is None


def test_auto_rebuilds_when_the_netted_changes_are_still_too_many(view):
    harness, plan = view
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id < 500")
    report = _refresh(harness, plan, policy=NET_FIRST)
    assert report.strategy == "full" and "after netting: facts +" in report.reason
    assert report.netted is not None
    # (k, v) -> (k, v + 1) cancels where another row held (k, v + 1) and moved on
    netted = report.netted[FACTS]
    assert 0 < netted.inserted == netted.deleted < 500
    assert _temp_tables(harness) == 0  # the copies are dropped after the rebuild too
    harness.con.execute(UNREAD_UPDATE)
    assert _refresh(harness, plan, policy=NET_FIRST).strategy == "incremental"


def test_an_incremental_refresh_of_changes_netting_to_nothing_applies_nothing(view):
    harness, plan = view
    harness.con.execute(UNREAD_UPDATE)
    harness.con.execute("INSERT INTO dl.main.facts VALUES (-1, 1, 1)")
    harness.con.execute("DELETE FROM dl.main.facts WHERE id = -1")  # in and out in the window
    recording = Recording(harness.con)
    assert refresh(recording, plan, strategy="incremental").strategy == "incremental"
    ran = " ".join(recording.statements)
    assert COPY in ran and DELTA not in ran
    assert "INSERT INTO dl.main._ivm_cursors" in ran and _temp_tables(harness) == 0
    harness.check(plan, VIEW)
    assert refresh(harness.con, plan).reason == "no source changed"
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id BETWEEN 600 AND 604")
    recording.statements.clear()
    refresh(recording, plan, strategy="incremental")
    assert DELTA in " ".join(recording.statements)  # a real change is applied
    harness.check(plan, VIEW)


def test_auto_stops_copying_at_a_copy_that_keeps_the_rebuild(view):
    """dims' copy is the cheaper, so it is made first: when it still holds a change the
    rebuild still wins, and facts' copy is never made; when it nets to nothing (a row
    rewritten as it was, as a sync tool does), facts' copy is made and decides."""
    harness, plan = view
    dims, facts = (f"TEMP TABLE temp.main._ivm_dl_main_mv_changes_{i} AS" for i in (1, 0))
    harness.con.execute("UPDATE dl.main.dims SET name = 'renamed' WHERE k = 3")
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id BETWEEN 10 AND 19")
    recording = Recording(harness.con)
    report = refresh(recording, plan, policy=NET_FIRST)
    harness.check(plan, VIEW)
    assert report.strategy == "full" and report.netted is not None
    assert report.netted["dl.main.dims"].changed == 2
    assert report.netted[FACTS] == report.sources[FACTS]  # not copied: the catalog's
    ran = " ".join(recording.statements)
    assert dims in ran and facts not in ran and _temp_tables(harness) == 0
    harness.con.execute("UPDATE dl.main.dims SET name = name WHERE k = 4")
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id BETWEEN 20 AND 29")
    recording.statements.clear()
    report = refresh(recording, plan, policy=NET_FIRST)
    harness.check(plan, VIEW)
    assert report.strategy == "full" and report.netted is not None
    assert report.netted["dl.main.dims"].changed == 0 and report.netted[FACTS].changed > 0
    ran = " ".join(recording.statements)
    assert dims in ran and facts in ran


def test_auto_refreshes_from_its_copies_when_netting_turns_the_choice(view):
    """The catalog's estimate counts the 100k-row file the deletions sit in; once copied,
    the ten updated rows are all that is left to read: the refresh goes on from the copies
    (made once) and applies them."""
    harness, plan = view
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id BETWEEN 700 AND 709")
    lean = Policy(use_measurements=False, overhead_rows=0, margin=0.5, net_first=5.0, copy_rows=0)
    assert choose(harness.con, plan, lean).strategy == "full"
    recording = Recording(harness.con)
    report = refresh(recording, plan, policy=lean)
    harness.check(plan, VIEW)
    assert report.strategy == "incremental" and report.netted is not None
    assert report.netted[FACTS].changed > 0
    ran = " ".join(recording.statements)
    assert ran.count(COPY) == 1 and DELTA in ran and _temp_tables(harness) == 0


class _SlowCopies(Recording):
    """A connection on which copying a source's changes takes at least ``SLOW`` seconds."""

    def execute(self, sql, *args):
        if COPY in sql:
            time.sleep(SLOW)
        return super().execute(sql, *args)


SLOW = 0.3


def test_a_refresh_from_auto_s_copies_is_timed_with_them(view):
    """Copying the changes is a refresh's work, done early when auto nets first: the
    refresh's recorded time includes it, or auto would later see the refresh cheaper than
    one that copies for itself."""
    harness, plan = view
    harness.con.execute("UPDATE dl.main.facts SET v = v + 1 WHERE id BETWEEN 700 AND 709")
    lean = Policy(use_measurements=False, overhead_rows=0, margin=0.5, net_first=5.0, copy_rows=0)
    report = refresh(_SlowCopies(harness.con), plan, policy=lean)
    assert report.strategy == "incremental" and report.netted is not None
    measured = _history(harness).incremental
    assert measured is not None and measured.ms >= SLOW * 1000


# -- auto on the view's own measurements (duckstream.strategy.calibrate) ---------------------

MEASURED = Policy(overhead_rows=200_000)  # the model: a small change ~2x a rebuild


def _history(harness: DuckLakeHarness) -> History:
    return ducklake_cursors.history(harness.con, "dl", "dl.main.mv")


def test_each_path_records_how_long_it_took(view):
    """The fill records the rebuild's time (no estimate: no cost); a requested refresh its
    time without a cost, which auto cannot scale, so does not use; auto's refresh both."""
    harness, plan = view
    fill = _history(harness).full
    assert fill is not None and fill.ms > 0 and fill.cost is None
    harness.con.execute("INSERT INTO dl.main.facts SELECT 100000 + i, i, 5 FROM range(50) r(i)")
    _refresh(harness, plan, strategy="incremental")
    assert _history(harness) == History(fill, None)
    harness.con.execute("INSERT INTO dl.main.facts SELECT 200000 + i, i, 5 FROM range(50) r(i)")
    report = _refresh(harness, plan, policy=LEAN)
    assert report.strategy == "incremental" and report.incremental_cost
    measured = _history(harness).incremental
    assert measured is not None and measured.ms > 0
    assert measured.cost == report.incremental_cost


def test_plain_sql_records_no_measurement(lake):
    """The plan as plain SQL has no clock: its commit records none, and auto then has only
    the model."""
    lake.execute("CREATE TABLE dl.main.t (a INTEGER)")
    lake.execute("INSERT INTO dl.main.t SELECT i FROM range(20) r(i)")
    harness = DuckLakeHarness(lake)
    plan = harness.compile("SELECT a, count(*) AS n FROM dl.main.t GROUP BY a")
    for statement in [plan.create_cursors_table, plan.create_mv, *plan.initialize_cursors]:
        lake.execute(statement)
    assert _history(harness) == History()
    assert ducklake_cursors.read(lake, "dl", "dl.main.mv") is not None  # the cursors are


def test_auto_tries_an_unmeasured_refresh_then_decides_on_times(view):
    """After the fill only the rebuild is measured: a change the model puts within
    ``explore`` of the rebuild is refreshed, to be measured; the next change is decided on
    the two measured times, the refresh's scaled by its estimated cost."""
    harness, plan = view
    harness.con.execute("INSERT INTO dl.main.facts SELECT 100000 + i, i, 5 FROM range(50) r(i)")
    model = choose(harness.con, plan, replace(MEASURED, use_measurements=False))
    assert model.strategy == "full"  # the model alone rebuilds
    report = _refresh(harness, plan, policy=MEASURED)
    assert report.strategy == "incremental" and "a refresh never: trying it" in report.reason
    seen = _history(harness)
    assert seen.full is not None and seen.incremental is not None
    assert seen.incremental.cost is not None
    harness.con.execute("INSERT INTO dl.main.facts SELECT 200000 + i, i, 5 FROM range(80) r(i)")
    report = _refresh(harness, plan, policy=MEASURED)
    assert report.incremental_cost is not None and "measured: a refresh ~" in report.reason
    refresh_ms = seen.incremental.ms * report.incremental_cost / seen.incremental.cost
    expected = "full" if refresh_ms > seen.full.ms else "incremental"
    assert report.strategy == expected, report.reason


@pytest.mark.parametrize(
    ("refresh_ms", "rebuild_ms", "expected"),
    [(10.0, 100.0, "incremental"), (100.0, 10.0, "full"), (55.0, 50.0, "full")],
)
def test_measured_times_overrule_the_model(refresh_ms, rebuild_ms, expected):
    """Whichever way the model leans, two measured paths decide (a refresh at the same
    estimated cost: its time as measured)."""
    for leaning in ("incremental", "full"):
        model = RefreshReport(leaning, "auto", "model", {}, 1_000_000.0, 1_000_000.0)
        history = History(
            Measured("full", rebuild_ms), Measured("incremental", refresh_ms, 1_000_000.0)
        )
        assert calibrate(model, history, Policy()).strategy == expected
        assert calibrate(model, history, Policy(use_measurements=False)).strategy == leaning


def test_measurements_leave_requested_paths_and_big_changes_alone():
    fast = History(Measured("full", 100.0), Measured("incremental", 1.0, 1_000.0))
    requested = RefreshReport("full", "full", "requested")
    assert calibrate(requested, fast, Policy()).strategy == "full"
    big = RefreshReport("full", "auto", "t changed more than 10%", {}, 1.0, 2.0, by_fraction=True)
    assert calibrate(big, fast, Policy()).strategy == "full"
    # 4.5M rows beyond the fixed 1.5M: beyond explore (4x the rebuild's 1M)
    far = RefreshReport("full", "auto", "model", {}, 6_000_000.0, 1_000_000.0)
    assert calibrate(far, History(fast.full), Policy()).strategy == "full"
    near = RefreshReport("full", "auto", "model", {}, 5_000_000.0, 1_000_000.0)
    assert calibrate(near, History(fast.full), Policy()).strategy == "incremental"
