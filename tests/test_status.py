"""``python -m duckstream status``: a DuckLake catalog's maintained views, how far behind their
sources each is, and its recent refreshes, read from the catalog's snapshot log."""

from __future__ import annotations

import datetime

from duckstream import compile_ivm
from duckstream.cli import main
from duckstream.engines.ducklake.status import status_text, views_status
from duckstream.runtime import refresh, setup
from duckstream.testing import postgres
from duckstream.testing.ducklake import connect_ducklake


def test_status_lists_views_with_their_lag_and_refreshes(tmp_path, capsys):
    directory = str(tmp_path / "lake")
    con = connect_ducklake(directory, alias="dl")
    con.execute("CREATE TABLE dl.main.facts (k INT, v INT)")
    con.execute("CREATE TABLE dl.main.other (k INT)")
    con.execute("INSERT INTO dl.main.facts VALUES (1, 10), (2, 20)")
    totals = compile_ivm("SELECT k, sum(v) AS s FROM facts GROUP BY k", mv_name="totals")
    rows = compile_ivm("SELECT k FROM other", mv_name="listed")
    gone = compile_ivm("SELECT k FROM other", mv_name="gone")
    for plan in (totals, rows, gone):
        setup(con, plan)
    con.execute("INSERT INTO dl.main.facts VALUES (3, 30)")
    refresh(con, totals, "incremental")
    con.execute("INSERT INTO dl.main.facts VALUES (4, 40)")
    refresh(con, totals, "full")
    con.execute("DROP TABLE dl.main.gone")
    # two commits the view "rows" has not seen, one it does not read
    con.execute("INSERT INTO dl.main.other VALUES (1)")
    con.execute("DELETE FROM dl.main.other WHERE k = 1")
    con.execute("INSERT INTO dl.main.facts VALUES (5, 50)")

    statuses = {s.view: s for s in views_status(con, "dl")}
    assert set(statuses) == {"dl.main.totals", "dl.main.listed"}  # "gone" was dropped
    total, row = statuses["dl.main.totals"], statuses["dl.main.listed"]
    assert [r.measured.path for r in total.refreshes if r.measured] == [
        "full",
        "incremental",
        "full",  # the first build
    ]
    assert total.pending == 1 and total.behind_since is not None
    assert row.pending == 2 and len(row.refreshes) == 1
    assert set(row.cursors) == {"dl.main.other"} and set(total.cursors) == {"dl.main.facts"}
    refresh(con, rows, "auto")
    assert views_status(con, "dl", recent=1)[0].pending == 0  # listed, now up to date
    assert len(views_status(con, "dl", recent=1)[0].refreshes) == 1

    later = total.last.at + datetime.timedelta(minutes=3)
    text = status_text(views_status(con, "dl"), now=later)
    assert "dl.main.listed | up to date |" in text
    assert "dl.main.totals | 1 snapshots, oldest" in text and "| rebuild |" in text
    # the last refreshes from the history: path, why, rows in and out
    assert "nothing to apply (auto: other +1/-1" in text  # "listed": its changes netted away
    assert ": rebuild (full: requested), in ?, out +4 -3," in text
    assert ": incremental (incremental: requested), in 1, out +1 -0," in text
    assert ": rebuild (first build), in ?, out +2 -0," in text
    assert f"dl.main.totals: cursors dl.main.facts at {total.cursors['dl.main.facts']}" in text
    con.close()

    # a lake directory, or its ATTACH target when the suite keeps catalogs in PostgreSQL
    catalogs = postgres.active()
    lake = directory if catalogs is None else "ducklake:" + catalogs.target(directory)
    data = [] if catalogs is None else ["--data-path", str(tmp_path / "lake" / "data") + "/"]
    assert main(["status", lake, "--catalog", "dl", *data]) == 0
    out = capsys.readouterr().out
    assert out.startswith("view | behind") and "dl.main.totals" in out and "gone" not in out


def test_status_of_a_missing_lake_says_so(tmp_path, capsys):
    assert main(["status", str(tmp_path / "nowhere")]) == 2
    assert "no DuckLake" in capsys.readouterr().err
