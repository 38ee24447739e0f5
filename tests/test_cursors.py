"""DuckLake cursors travel in the commit of the refresh that advances them.

They are read from the snapshot list (never from the cursors table, an append-only log whose
row guarantees the commit); a refresh that changes nothing in the view still advances them;
views sharing a catalog and a log keep their own cursors.
"""

from __future__ import annotations

from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.runtime import refresh, setup
from duckstream.testing.differential import DuckLakeHarness, as_multiset


def _snapshot(con) -> int:
    return int(con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('dl')").fetchone()[0])


def _cursors(con, view: str = "dl.main.mv") -> dict[str, tuple[int, int]]:
    cursors = ducklake_cursors.read(con, "dl", view)
    assert cursors is not None
    return cursors


def _equal(harness: DuckLakeHarness, plan, sql: str) -> bool:
    return as_multiset(harness.rows(plan.query_mv)) == as_multiset(harness.rows(sql))


def test_an_unchanged_view_still_advances_its_cursors(lake):
    harness = DuckLakeHarness(lake)
    lake.execute("CREATE TABLE dl.main.t (a INTEGER, b INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (1, 10), (2, 20)")
    sql = "SELECT a, b FROM dl.main.t WHERE b > 100"
    plan = harness.compile(sql)
    setup(lake, plan)
    assert harness.rows(plan.query_mv) == []
    lake.execute("INSERT INTO dl.main.t VALUES (3, 30)")  # filtered out: the view is unchanged
    changed = _snapshot(lake)
    refresh(lake, plan)
    assert _cursors(lake) == {"dl.main.t": (_cursors(lake)["dl.main.t"][0], changed)}
    lake.execute("INSERT INTO dl.main.t VALUES (4, 400)")
    refresh(lake, plan)
    assert _cursors(lake)["dl.main.t"][1] == _snapshot(lake) - 1  # the window's end
    assert _equal(harness, plan, sql)


def test_no_change_makes_no_snapshot(lake):
    harness = DuckLakeHarness(lake)
    lake.execute("CREATE TABLE dl.main.t (a INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (1)")
    plan = harness.compile("SELECT a, count(*) AS n FROM dl.main.t GROUP BY a")
    setup(lake, plan)
    before, cursors = _snapshot(lake), _cursors(lake)
    refresh(lake, plan)
    assert (_snapshot(lake), _cursors(lake)) == (before, cursors)


def test_the_cursors_log_is_never_read(lake):
    """Emptying the log loses nothing: the cursors are in the snapshot list. The log holds
    the cursors of the commits that wrote nothing else (here: an update of a column the
    view does not read); a commit that writes the view's table makes its snapshot anyway."""
    harness = DuckLakeHarness(lake)
    lake.execute("CREATE TABLE dl.main.t (a INTEGER, b INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (1, 0), (2, 0)")
    sql = "SELECT a, count(*) AS n FROM dl.main.t GROUP BY a"
    plan = harness.compile(sql)
    setup(lake, plan)
    lake.execute("INSERT INTO dl.main.t VALUES (2, 0), (3, 0)")
    refresh(lake, plan, strategy="incremental")
    assert lake.execute("SELECT count(*) FROM dl.main._ivm_cursors").fetchone() == (0,)
    lake.execute("UPDATE dl.main.t SET b = 1")
    refresh(lake, plan, strategy="incremental")
    logged = lake.execute(
        "SELECT source_table, table_id, last_snapshot FROM dl.main._ivm_cursors"
        " WHERE mv_name = 'mv' ORDER BY last_snapshot DESC LIMIT 1"
    ).fetchone()
    assert logged == ("dl.main.t", *_cursors(lake)["dl.main.t"])
    assert lake.execute("SELECT count(*) FROM dl.main._ivm_cursors").fetchone() == (1,)
    lake.execute("DELETE FROM dl.main._ivm_cursors")
    lake.execute("DELETE FROM dl.main.t WHERE a = 1")
    refresh(lake, plan)
    assert _equal(harness, plan, sql)


def test_views_sharing_a_catalog_keep_their_own_cursors(lake):
    harness = DuckLakeHarness(lake)
    lake.execute("CREATE TABLE dl.main.t (a INTEGER)")
    lake.execute("CREATE TABLE dl.main.u (b INTEGER)")
    lake.execute("INSERT INTO dl.main.t VALUES (1)")
    lake.execute("INSERT INTO dl.main.u VALUES (5)")
    on_t = harness.compile("SELECT a, count(*) AS n FROM dl.main.t GROUP BY a", mv_name="on_t")
    on_u = harness.compile("SELECT b, count(*) AS n FROM dl.main.u GROUP BY b", mv_name="on_u")
    setup(lake, on_t)
    setup(lake, on_u)
    lake.execute("INSERT INTO dl.main.t VALUES (1), (7)")
    refresh(lake, on_t)
    lake.execute("INSERT INTO dl.main.u VALUES (5)")
    refresh(lake, on_u)
    assert set(_cursors(lake, "dl.main.on_t")) == {"dl.main.t"}
    assert set(_cursors(lake, "dl.main.on_u")) == {"dl.main.u"}
    lake.execute("INSERT INTO dl.main.t VALUES (7)")
    refresh(lake, on_t)
    assert _equal(harness, on_t, "SELECT a, count(*) FROM dl.main.t GROUP BY a")
    assert _equal(harness, on_u, "SELECT b, count(*) FROM dl.main.u GROUP BY b")
