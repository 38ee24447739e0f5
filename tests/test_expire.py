"""``python -m duckstream expire``: a DuckLake catalog's snapshots that no maintained view needs
are expired; the views go on refreshing incrementally, equal to recomputation."""

from __future__ import annotations

import datetime
from collections import Counter

import pytest

from duckstream import compile_ivm
from duckstream.cli import main
from duckstream.engines.ducklake import cursors, window
from duckstream.engines.ducklake.expire import expire
from duckstream.runtime import refresh, setup
from duckstream.testing import postgres
from duckstream.testing.ducklake import attach_ducklake, connect_ducklake, current_snapshot

TOTALS = "SELECT k, sum(v) AS s, count(*) AS n FROM facts GROUP BY k"
LISTED = "SELECT k FROM other WHERE k > 0"


def _snapshots(con, catalog: str) -> list[int]:
    rows = con.execute(f"SELECT snapshot_id FROM ducklake_snapshots('{catalog}') ORDER BY 1")
    return [int(r[0]) for r in rows.fetchall()]


def _equal(con, plan, query: str) -> bool:
    """The view holds what ``query`` computes (as multisets)."""
    return Counter(con.execute(plan.query_mv).fetchall()) == Counter(con.execute(query).fetchall())


def test_expiry_keeps_what_views_read_and_they_stay_incremental(tmp_path):
    con = connect_ducklake(str(tmp_path / "lake"), alias="dl")
    con.execute("CREATE TABLE dl.main.facts (k INT, v INT)")
    con.execute("CREATE TABLE dl.main.other (k INT)")
    con.execute("INSERT INTO dl.main.facts VALUES (1, 10), (2, 20), (2, NULL)")
    con.execute("INSERT INTO dl.main.other VALUES (1), (0)")
    totals = compile_ivm(TOTALS, mv_name="totals")
    listed = compile_ivm(LISTED, mv_name="listed")
    setup(con, totals)
    setup(con, listed)
    listed_cursor = cursors.read(con, "dl", "dl.main.listed")["dl.main.other"][1]
    for k in range(6):
        con.execute(f"INSERT INTO dl.main.facts VALUES ({k % 3}, {k})")
        con.execute(f"DELETE FROM dl.main.facts WHERE v = {k - 2}")
        refresh(con, totals, "auto")
    before = _snapshots(con, "dl")

    dry = expire(con, "dl", dry_run=True)
    assert _snapshots(con, "dl") == before  # a dry run expires nothing
    # "listed" has not been refreshed: its cursor of "other" holds everything after it
    assert (dry.kept_from, dry.needed_by) == (
        listed_cursor,
        "dl.main.listed's cursor of dl.main.other",
    )
    assert dry.expired == [s for s in before if s < listed_cursor]

    con.execute("INSERT INTO dl.main.other VALUES (5)")
    refresh(con, listed, "incremental")
    done = expire(con, "dl")
    # now the older of the two views' cursors (totals' last refresh read them before "listed")
    totals_cursor = cursors.read(con, "dl", "dl.main.totals")["dl.main.facts"][1]
    assert (done.kept_from, done.needed_by) == (
        totals_cursor,
        "dl.main.totals's cursor of dl.main.facts",
    )
    assert done.expired == [s for s in before if s < totals_cursor]
    assert min(_snapshots(con, "dl")) == totals_cursor

    # the views go on: changes to both sources, equal to recomputation
    for k in range(3):
        con.execute(f"INSERT INTO dl.main.facts VALUES ({k}, NULL), (7, {k})")
        con.execute("DELETE FROM dl.main.other WHERE k = 1")
        con.execute(f"INSERT INTO dl.main.other VALUES ({k + 1})")
        for plan in (totals, listed):  # forced: a cursor expired would rebuild (and say so)
            report = refresh(con, plan, "incremental")
            assert report.strategy == "incremental", report.reason
        assert _equal(con, totals, TOTALS.replace("facts", "dl.main.facts"))
        assert _equal(con, listed, LISTED.replace("other", "dl.main.other"))
    con.close()


def _refresh(con, plan, strategy: str):
    if strategy != "plain SQL":
        return refresh(con, plan, strategy)
    for statement in plan.statements()["maintain"]:  # the script a person runs
        con.execute(statement)
    return None


@pytest.mark.parametrize("strategy", ["incremental", "auto", "plain SQL"])
def test_an_idle_view_far_behind_moves_its_cursors(tmp_path, monkeypatch, strategy):
    """A view whose sources did not change commits nothing, until its cursors are
    ADVANCE_IDLE_CURSORS snapshots behind: then they move, and expiry is not held back."""
    monkeypatch.setattr(window, "ADVANCE_IDLE_CURSORS", 10)
    con = connect_ducklake(str(tmp_path / "lake"), alias="dl")
    con.execute("CREATE TABLE dl.main.other (k INT)")
    con.execute("CREATE TABLE dl.main.busy (k INT)")
    con.execute("INSERT INTO dl.main.other VALUES (1), (2)")
    listed = compile_ivm(LISTED, mv_name="listed")
    setup(con, listed)
    cursor = cursors.read(con, "dl", "dl.main.listed")["dl.main.other"][1]
    while current_snapshot(con, "dl") < cursor + 9:  # 9 snapshots behind: nothing committed
        con.execute("INSERT INTO dl.main.busy VALUES (0)")
    at = current_snapshot(con, "dl")
    _refresh(con, listed, strategy)
    assert current_snapshot(con, "dl") == at
    assert cursors.read(con, "dl", "dl.main.listed")["dl.main.other"][1] == cursor
    con.execute("INSERT INTO dl.main.busy VALUES (1)")  # 10 behind: the cursors move, one commit
    at = current_snapshot(con, "dl")
    report = _refresh(con, listed, strategy)
    assert report is None or report.strategy == "incremental"
    assert current_snapshot(con, "dl") == at + 1
    assert cursors.read(con, "dl", "dl.main.listed")["dl.main.other"][1] == at
    assert _equal(con, listed, LISTED.replace("other", "dl.main.other"))
    assert expire(con, "dl").kept_from == at
    con.execute("INSERT INTO dl.main.other VALUES (3)")
    con.execute("DELETE FROM dl.main.other WHERE k = 1")
    assert refresh(con, listed, "incremental").strategy == "incremental"  # no cursor expired
    assert _equal(con, listed, LISTED.replace("other", "dl.main.other"))
    con.close()


def test_a_view_in_another_catalog_keeps_its_sources_cursor(tmp_path):
    con = connect_ducklake(str(tmp_path / "src"), alias="src")
    attach_ducklake(con, str(tmp_path / "views"), "dl")
    con.execute("CREATE TABLE src.main.facts (k INT, v INT)")
    con.execute("INSERT INTO src.main.facts VALUES (1, 1), (2, 2)")
    query = "SELECT k, sum(v) AS s, count(*) AS n FROM src.main.facts GROUP BY k"
    plan = compile_ivm(query, mv_name="totals", mv_catalog="dl")
    setup(con, plan)
    cursor = current_snapshot(con, "src")
    for k in range(4):
        con.execute(f"INSERT INTO src.main.facts VALUES ({k}, {k})")
    done = expire(con, "src")
    assert (done.kept_from, done.needed_by) == (cursor, "dl.main.totals's cursor of src.main.facts")
    assert min(_snapshots(con, "src")) == cursor
    report = refresh(con, plan, "incremental")
    assert report.strategy == "incremental"
    assert _equal(con, plan, query)
    con.close()


def test_older_than_keeps_recent_snapshots_and_the_command_line(tmp_path, capsys):
    directory = str(tmp_path / "lake")
    con = connect_ducklake(directory, alias="dl")
    con.execute("CREATE TABLE dl.main.t (k INT)")
    for k in range(3):
        con.execute(f"INSERT INTO dl.main.t VALUES ({k})")
    before = _snapshots(con, "dl")
    long_ago = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
    assert expire(con, "dl", older_than=long_ago).expired == []
    assert _snapshots(con, "dl") == before
    con.close()

    catalogs = postgres.active()
    lake = directory if catalogs is None else "ducklake:" + catalogs.target(directory)
    data = [] if catalogs is None else ["--data-path", str(tmp_path / "lake" / "data") + "/"]
    assert main(["expire", lake, "--catalog", "dl", "--dry-run", *data]) == 0
    assert "would expire 4 snapshots" in capsys.readouterr().out
    assert main(["expire", lake, "--catalog", "dl", "--cleanup", *data]) == 0
    assert "expired 4 snapshots (0 to 3)" in capsys.readouterr().out
    con = connect_ducklake(directory, alias="dl")
    assert _snapshots(con, "dl") == [before[-1]]
    assert sorted(r[0] for r in con.execute("SELECT k FROM dl.main.t").fetchall()) == [0, 1, 2]
    con.close()
