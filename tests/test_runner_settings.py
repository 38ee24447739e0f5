"""The settings a DuckLake refresh changes are GLOBAL: refreshes on one database share them.

DuckDB 1.5.5's ``disabled_optimizers`` and ``perfect_ht_threshold`` hold for every connection
of a database (``duckdb_settings()``'s scope), and dbt's threads refresh on cursors of one
database. The runner turns statistics propagation and the perfect hash aggregate off while
it runs (:func:`duckstream.engines.ducklake.runner.without_table_statistics`: DuckLake's
table statistics can be wrong), so it keeps them per database: the first refresh in turns
them off, the last one out puts the user's values back, and none runs with them on.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pytest

from duckstream.engines.ducklake import statistics
from duckstream.engines.ducklake.runner import refresh, setup, without_table_statistics
from duckstream.plan import Naming
from duckstream.testing.differential import DuckLakeHarness
from duckstream.testing.ducklake import Recording, connect_ducklake

OFF = "statistics_propagation"


def _settings(con: Any) -> tuple[int, str]:
    row = con.execute(
        "SELECT current_setting('perfect_ht_threshold'), current_setting('disabled_optimizers')"
    ).fetchone()
    return int(row[0]), str(row[1])


class _Refresh:
    """One refresh's use of the guard, entered and left when a test says, in a context of its
    own (as a thread of its own would)."""

    def __init__(self, con: Any) -> None:
        self.con = Recording(con)
        self.context = contextvars.copy_context()
        self.guard = without_table_statistics(self.con)

    def enter(self) -> list[str]:
        self.con.statements.clear()
        self.context.run(self.guard.__enter__)
        return list(self.con.statements)

    def leave(self) -> list[str]:
        self.con.statements.clear()
        self.context.run(self.guard.__exit__, None, None, None)
        return list(self.con.statements)


def _disabled(con: Any) -> str:
    return _settings(con)[1]


@pytest.fixture
def db(tmp_path):
    con = connect_ducklake(str(tmp_path / "lake"), "dl")
    con.execute("SET disabled_optimizers = 'join_order'")
    con.execute("SET GLOBAL perfect_ht_threshold = 7")
    yield con
    con.close()


ON = "SET disabled_optimizers = 'join_order'"
OFF_TOO = f"SET disabled_optimizers = 'join_order,{OFF}'"


def test_the_first_refresh_in_turns_it_off_the_last_out_puts_it_back(db):
    first, second, third = (_Refresh(db.cursor()) for _ in range(3))
    assert first.enter()[1:] == [OFF_TOO, "SET perfect_ht_threshold = 0"]
    assert _settings(first.con) == (0, f"join_order,{OFF}")
    assert _settings(db) == (7, f"join_order,{OFF}")  # the threshold: the session's
    assert second.enter()[1:] == ["SET perfect_ht_threshold = 0"]  # counted in
    assert first.leave() == ["SET perfect_ht_threshold = 7"]  # another refresh runs
    assert _settings(first.con) == (7, f"join_order,{OFF}")
    assert third.enter()[1:] == ["SET perfect_ht_threshold = 0"]
    assert third.leave() == ["SET perfect_ht_threshold = 7"]
    assert _disabled(db) == f"join_order,{OFF}"
    assert second.leave() == ["SET perfect_ht_threshold = 7", ON]
    assert _settings(db) == (7, "join_order") and _settings(second.con) == (7, "join_order")
    assert statistics._untrusting == {}


def test_a_nested_use_on_the_same_connection_runs_nothing(db):
    con = Recording(db)
    with without_table_statistics(con):
        count = len(con.statements)
        with without_table_statistics(con):
            assert _settings(db) == (0, f"join_order,{OFF}")
        assert len(con.statements) == count
    assert con.statements[-2:] == ["SET perfect_ht_threshold = 7", ON]
    assert _settings(db) == (7, "join_order")


def test_settings_already_off_are_not_set_twice_and_stay_off(db):
    db.execute(f"SET disabled_optimizers = '{OFF},join_order'")
    db.execute("SET perfect_ht_threshold = 0")
    one, two = _Refresh(db), _Refresh(db.cursor())
    assert one.enter()[1:] == []
    assert two.enter()[1:] == ["SET perfect_ht_threshold = 0"]
    assert one.leave() == [] and two.leave() == ["SET perfect_ht_threshold = 7"]
    assert _settings(db) == (0, f"join_order,{OFF}")  # as DuckDB orders them


def test_each_database_has_its_own_count(db, tmp_path):
    other = connect_ducklake(str(tmp_path / "other"), "dl")
    here, there = _Refresh(db.cursor()), _Refresh(other)
    here.enter()
    assert there.enter()[1] == f"SET disabled_optimizers = '{OFF}'"  # its own database
    assert here.leave()[-1] == ON and _disabled(db) == "join_order"
    assert _disabled(other) == OFF
    assert there.leave()[-1] == "SET disabled_optimizers = ''"
    assert _disabled(other) == "" and statistics._untrusting == {}
    other.close()


class _Failing(Recording):
    def __init__(self, con: Any, failing: str) -> None:
        super().__init__(con)
        self.failing = failing

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith(self.failing):
            raise RuntimeError("injected")
        return super().execute(sql, *args)


@pytest.mark.parametrize(
    "failing", ["SELECT system.main.current_setting", OFF_TOO, "SET perfect_ht"]
)
def test_a_failure_to_turn_them_off_leaves_them_as_they_were(db, failing):
    con = _Failing(db, failing)
    with pytest.raises(RuntimeError, match="injected"), without_table_statistics(con):
        pass
    assert _settings(db) == (7, "join_order") and statistics._untrusting == {}


@pytest.mark.parametrize("failing", [ON, "SET perfect_ht_threshold = 7"])
def test_a_failure_to_put_them_back_is_a_warning(db, failing):
    con = _Failing(db, failing)
    with pytest.warns(RuntimeWarning, match="could not put"), without_table_statistics(con):
        pass
    left = (7, f"join_order,{OFF}") if failing == ON else (0, "join_order")
    assert _settings(db) == left  # the other one is put back
    assert statistics._untrusting == {}
    with without_table_statistics(db):  # counted out: the next refresh turns it off again
        assert _disabled(db).endswith(OFF)


VIEWS = [
    "SELECT g, count(*) AS n, sum(v) AS s FROM t{i} WHERE v <> 3 GROUP BY g",
    "SELECT t.g, d.name, sum(t.v) AS s FROM t{i} t JOIN dims d ON t.g = d.g GROUP BY t.g, d.name",
    "SELECT DISTINCT g FROM t{i} WHERE v > 2",
    "SELECT g, max(v) AS m FROM t{i} GROUP BY g HAVING count(*) > 1",
]


class _Watching:
    """A thread's cursor that, before each statement its refresh runs with the statistics
    untrusted, reads whether they still are (the settings are the database's: another
    thread's refresh could have turned them back on)."""

    def __init__(self, con: Any, seen_on: list[str]) -> None:
        self.con, self.seen_on = con, seen_on

    def execute(self, sql: str, *args: Any) -> Any:
        if statistics._untrusted_on.get() is self and not sql.startswith("SET "):
            threshold, disabled = _settings(self.con)
            if threshold != 0 or OFF not in disabled.split(","):
                self.seen_on.append(f"{threshold} {disabled!r} before {sql[:60]}")
        return self.con.execute(sql, *args)


def test_concurrent_refreshes_never_see_the_settings_on(db):
    """dbt --threads 4: one database, a cursor per thread, a view each, refreshed at once
    with every strategy; each view equals recomputation, the settings are never seen on
    during a refresh, and end as the user set them (no duplicate entries)."""
    harness = DuckLakeHarness(db)
    db.execute("CREATE TABLE dl.main.dims AS SELECT i AS g, 'd' || i AS name FROM range(5) r(i)")
    plans = []
    for i, view in enumerate(VIEWS):
        db.execute(f"CREATE TABLE dl.main.t{i} (g INTEGER, v INTEGER)")
        db.execute(f"INSERT INTO dl.main.t{i} SELECT i % 5, i % 7 FROM range(50) r(i)")
        naming = Naming(mv_name=f"mv{i}", cursors_name=f"_ivm_cursors_{i}")
        plan = harness.compile(view.format(i=i), mv_name=f"mv{i}", naming=naming)
        setup(db, plan)
        plans.append(plan)
    seen_on: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(VIEWS))

    def work(i: int) -> None:
        con = _Watching(db.cursor(), seen_on)
        try:
            start.wait()
            for round_ in range(6):
                con.execute(
                    f"INSERT INTO dl.main.t{i} SELECT i % 5, (i + {round_}) % 7"
                    f" FROM range({round_ * 3}) r(i)"
                )
                con.execute(f"DELETE FROM dl.main.t{i} WHERE v = {round_ % 7} AND g = {i}")
                refresh(con, plans[i], ("incremental", "auto", "full")[(i + round_) % 3])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(VIEWS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert seen_on == []
    for i, plan in enumerate(plans):
        harness.check(plan, VIEWS[i].format(i=i), f"view {i}")
    assert _settings(db) == (7, "join_order") and statistics._untrusting == {}
