"""Refresh history on DuckLake: every refresh that commits records, in that same commit, the
path it took, why, its rows in and out and its phases (:mod:`duckstream.history`).

The property: through random windows of inserts, deletes and updates, refreshed by a random
strategy each time (auto, incremental, full), with and without the sources' schema, the view
equals recomputation after each refresh (as every property test checks), and the newest
entry of its history is the refresh that just ran: its path and reason are the report's, its
rows out are exactly the change of the view's table (``inserted - deleted`` = rows after -
rows before), its phases the report's up to the cursors. A refresh that changes the view's
table always leaves an entry; one that fails leaves none.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duckstream.engines.ducklake import cursors
from duckstream.engines.ducklake.runner import refresh
from duckstream.errors import RebuildRequired
from duckstream.history import FIRST_BUILD, Entry
from duckstream.runtime import setup
from duckstream.testing.differential import DuckLakeHarness, run_scenario, tables_schema
from duckstream.testing.ducklake import connect_ducklake
from strategies import cycles, tables, views  # tests/ is on sys.path (its conftest)

EXAMPLES = int(
    os.environ.get("DUCKSTREAM_EXAMPLES") or (300 if os.environ.get("DUCKSTREAM_DEEP") else 12)
)


def entries(con, view: str, limit: int = 100) -> list[tuple[int, Entry | None]]:
    """``view``'s history, newest first: (snapshot, entry)."""
    rows = con.execute(cursors.newest_query("dl", view, limit=limit)).fetchall()
    found = []
    for snapshot, info in rows:
        measured = json.loads(info).get("measured")
        found.append((snapshot, None if measured is None else Entry.from_dict(measured)))
    return found


class HistoryHarness(DuckLakeHarness):
    """Refreshes by a drawn strategy each time and checks the entry each refresh leaves."""

    def __init__(self, con, strategies: list[str]) -> None:
        super().__init__(con)
        self.strategies = strategies
        self.refreshes = 0

    def table_rows(self, plan) -> int:
        return self.con.execute(f"SELECT count(*) FROM {plan.mv_table}").fetchone()[0]

    def setup(self, plan) -> None:
        setup(self.con, plan)
        ((_, entry),) = entries(self.con, plan.mv_table)
        assert entry is not None and entry.path == "full" and entry.reason == FIRST_BUILD
        assert entry.inserted == self.table_rows(plan) and entry.deleted == 0

    def refresh(self, plan) -> None:
        strategy = self.strategies[self.refreshes % len(self.strategies)]
        self.refreshes += 1
        before, rows_before = entries(self.con, plan.mv_table), self.table_rows(plan)
        report = refresh(self.con, plan, strategy)
        after, rows_after = entries(self.con, plan.mv_table), self.table_rows(plan)
        assert len(after) - len(before) in (0, 1)
        if len(after) == len(before):  # no commit: nothing changed the view's table
            assert rows_after == rows_before
            assert report.strategy == "incremental"
            return
        _, entry = after[0]
        assert entry is not None
        assert (entry.path, entry.requested, entry.reason) == (
            report.strategy,
            strategy,
            report.reason,
        )
        assert entry.inserted is not None and entry.deleted is not None
        assert entry.inserted - entry.deleted == rows_after - rows_before
        assert entry.inserted >= 0 and entry.deleted >= 0
        names = [p.name for p in report.phases]
        assert [name for name, _, _ in entry.phases] == names[: len(entry.phases)]
        assert "commit" not in names[: len(entry.phases)]
        assert set(entry.changes) <= {f"{s.catalog}.{s.schema}.{s.table}" for s in plan.sources}
        if report.strategy == "incremental" and entry.outcome == "nothing to apply":
            assert rows_after == rows_before


@st.composite
def scenarios(draw):
    tables_ = draw(tables(draw(st.integers(1, 2))))
    view_sql = draw(views(tables_))
    windows = draw(cycles(tables_, max_cycles=5))
    strategies = draw(
        st.lists(st.sampled_from(["auto", "incremental", "full"]), min_size=1, max_size=4)
    )
    inlining = draw(st.sampled_from([0, None]))  # DuckLake's data inlining: off, default
    return tables_, view_sql, windows, draw(st.booleans()), strategies, inlining


@settings(max_examples=EXAMPLES, deadline=None)
@given(scenarios())
def test_every_refresh_records_what_it_did_in_its_commit(scenario):
    tables_, view_sql, windows, known_schema, strategies, inlining = scenario
    with tempfile.TemporaryDirectory() as directory:
        con = connect_ducklake(f"{directory}/lake", "dl", inlining)
        try:
            kwargs = {"schema": tables_schema(tables_)} if known_schema else {}
            run_scenario(HistoryHarness(con, strategies), tables_, view_sql, windows, **kwargs)
        finally:
            con.close()


@pytest.mark.parametrize("schema", [None, {"t": {"k": "INTEGER", "v": "INTEGER"}}])
def test_reasons_and_rows_of_each_path(lake, schema):
    from duckstream import compile_ivm

    lake.execute("CREATE TABLE dl.main.t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO dl.main.t SELECT i % 10, i FROM range(1000) r(i)")
    plan = compile_ivm(
        "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k", mv_name="v", schema=schema
    )
    setup(lake, plan)
    view = plan.mv_table

    lake.execute("INSERT INTO dl.main.t VALUES (3, 1)")  # one group changes
    refresh(lake, plan, "incremental")
    entry = entries(lake, view)[0][1]
    assert entry is not None
    assert (entry.outcome, entry.requested, entry.reason) == (
        "incremental",
        "incremental",
        "requested",
    )
    assert entry.changes == {"dl.main.t": 1} and (entry.inserted, entry.deleted) == (1, 1)

    lake.execute("UPDATE dl.main.t SET v = v + 1 WHERE v < 500")  # half the rows: rebuild
    report = refresh(lake, plan, "auto")
    entry = entries(lake, view)[0][1]
    assert entry is not None and entry.outcome == "rebuild" and report.strategy == "full"
    assert "changed more than 10% of its rows" in entry.reason
    # the catalog's estimate (rows written and removed): at least 500 deleted, 500 inserted
    assert set(entry.changes) == {"dl.main.t"} and entry.changes["dl.main.t"] >= 1000

    count = len(entries(lake, view))
    lake.execute("ALTER TABLE dl.main.t ADD COLUMN w INTEGER")
    lake.execute("INSERT INTO dl.main.t VALUES (1, 1, 1)")
    with pytest.raises(RebuildRequired):
        refresh(lake, plan, "incremental")
    assert len(entries(lake, view)) == count  # a failed refresh leaves no entry
    refresh(lake, plan, "auto")
    entry = entries(lake, view)[0][1]
    assert entry is not None and entry.outcome == "rebuild" and "altered" in entry.reason
