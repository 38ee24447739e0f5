"""The Python behind incremental_ivm, without dbt: on a DuckLake catalog ``dl`` directly."""

from __future__ import annotations

import doctest
import json
import threading
from pathlib import Path

import pytest
import yaml

pytest.importorskip("dbt.adapters.duckdb", reason="needs dbt-core and dbt-duckdb")

from dbt.adapters.duckdb.credentials import Attachment  # noqa: E402

from dbt.adapters.duckstream import Plugin  # noqa: E402
from dbt.adapters.duckstream import expand as expand_module  # noqa: E402
from dbt.adapters.duckstream.credentials import DuckstreamCredentials  # noqa: E402
from dbt.adapters.duckstream.expand import catalog_views, expand_views  # noqa: E402
from dbt.adapters.duckstream.impl import DuckstreamAdapter  # noqa: E402
from dbt.adapters.duckstream.ivm import (  # noqa: E402
    ModelError,
    ModelRequest,
    Outcome,
    equivalence_sql,
    materialize,
    read_state,
)
from dbt_duckstream import locate as locate_module  # noqa: E402
from dbt_duckstream.decide import Compiled  # noqa: E402
from dbt_duckstream.locate import locate  # noqa: E402
from dbt_duckstream.model import State  # noqa: E402
from dbt_duckstream.plans import CachedPlan, PlanCache  # noqa: E402
from duckstream import UnsupportedSQLError  # noqa: E402
from duckstream.engines.ducklake import cursors as ducklake_cursors  # noqa: E402

TOTALS = (
    "SELECT customer, count(*) AS n, sum(amount) AS total FROM dl.main.orders GROUP BY customer"
)


@pytest.fixture
def shop(lake):
    lake.execute("CREATE TABLE dl.main.orders (id INTEGER, customer VARCHAR, amount DECIMAL(9, 2))")
    lake.execute("INSERT INTO dl.main.orders VALUES (1, 'ann', 10), (2, 'bob', 5), (3, 'ann', 1)")
    return lake


def request(sql: str = TOTALS, strategy: str = "incremental", **kwargs) -> ModelRequest:
    return ModelRequest(
        name="totals",
        database="dl",
        schema="main",
        identifier="totals",
        sql=sql,
        strategy=strategy,
        **kwargs,
    )


def differences(con, req: ModelRequest) -> list[tuple]:
    return con.execute(equivalence_sql(con, req)).fetchall()


def table_id(con, name: str) -> int:
    return con.execute(
        "SELECT table_id FROM __ducklake_metadata_dl.ducklake_table"
        " WHERE table_name = ? AND end_snapshot IS NULL",
        [name],
    ).fetchone()[0]


def test_build_then_maintain_then_nothing_to_do(shop) -> None:
    built = materialize(shop, request())
    assert built.message().startswith("built: 2 rows, ")
    assert differences(shop, request()) == []
    shop.execute("INSERT INTO dl.main.orders VALUES (4, 'cy', 2)")
    shop.execute("DELETE FROM dl.main.orders WHERE id = 2")
    refreshed = materialize(shop, request())
    assert refreshed.message().startswith("incremental: +1 -1 rows from 1 source, 2 snapshots, ")
    assert differences(shop, request()) == []
    quiet = materialize(shop, request())
    assert quiet.action == "up to date" and quiet.message().startswith("up to date: no source")


def test_an_idle_model_far_behind_moves_its_cursors(shop, monkeypatch) -> None:
    """A model whose sources did not change commits nothing, until its cursors are far behind
    (other tables' commits): then they move, so snapshot expiry is not held back."""
    from duckstream.engines.ducklake import window

    monkeypatch.setattr(window, "ADVANCE_IDLE_CURSORS", 4)
    shop.execute("CREATE TABLE dl.main.busy (k INTEGER)")
    materialize(shop, request())
    cursor = ducklake_cursors.read(shop, "dl", "dl.main.totals")["dl.main.orders"][1]
    (now,) = shop.execute("SELECT id FROM ducklake_current_snapshot('dl')").fetchone()
    while now < cursor + 3:
        shop.execute("INSERT INTO dl.main.busy VALUES (1)")
        (now,) = shop.execute("SELECT id FROM ducklake_current_snapshot('dl')").fetchone()
    assert materialize(shop, request()).action == "up to date"
    assert ducklake_cursors.read(shop, "dl", "dl.main.totals")["dl.main.orders"][1] == cursor
    shop.execute("INSERT INTO dl.main.busy VALUES (2)")
    quiet = materialize(shop, request())
    assert quiet.action == "up to date"
    assert ducklake_cursors.read(shop, "dl", "dl.main.totals")["dl.main.orders"][1] == cursor + 4
    assert differences(shop, request()) == []
    shop.execute("DELETE FROM dl.main.orders WHERE id = 1")
    assert materialize(shop, request()).message().startswith("incremental: +1 -1 rows")
    assert differences(shop, request()) == []


@pytest.mark.parametrize("strategy", ["incremental", "auto"])
def test_a_model_with_a_temporal_filter_says_the_clock_moved(lake, strategy) -> None:
    """A "last 7 days" model maintained as the clock moves (the session variable
    ``duckstream_now`` stands for the clock): dbt's line says the clock moved, and why."""
    lake.execute("CREATE TABLE dl.main.events (id INTEGER, d DATE)")
    lake.execute(
        "INSERT INTO dl.main.events"
        " SELECT i, DATE '2026-01-01' + CAST(i AS INTEGER) FROM range(20) AS r(i)"
    )
    sql = "SELECT id, d FROM dl.main.events WHERE d > current_date - INTERVAL 7 DAY"
    lake.execute("SET VARIABLE duckstream_now = TIMESTAMPTZ '2026-01-10 12:00:00+00'")
    materialize(lake, request(sql, strategy))
    quiet = materialize(lake, request(sql, strategy))
    assert quiet.action == "up to date"
    lake.execute("SET VARIABLE duckstream_now = TIMESTAMPTZ '2026-01-13 08:00:00+00'")
    moved = materialize(lake, request(sql, strategy))
    assert moved.action == "incremental", moved.message()
    assert "the clock moved from 2026-01-10 12:00:00+00 to 2026-01-13 08:00:00+00" in (
        moved.message()
    )
    expected = lake.execute(
        "SELECT id, d FROM dl.main.events WHERE d > DATE '2026-01-13' - INTERVAL 7 DAY"
    ).fetchall()
    assert sorted(lake.execute("SELECT id, d FROM dl.main.totals").fetchall()) == sorted(expected)


def phase_names(outcome: Outcome) -> list[str]:
    return [name for name, *_ in outcome.phases]


def feed_counts(con, since: int) -> tuple[int, int]:
    """Rows inserted into and deleted from dl.main.totals after snapshot ``since``."""
    (now,) = con.execute("SELECT id FROM ducklake_current_snapshot('dl')").fetchone()
    args = f"'dl', 'main', 'totals', {since + 1}, {now}"
    return con.execute(
        f"SELECT (SELECT count(*) FROM ducklake_table_insertions({args})),"
        f" (SELECT count(*) FROM ducklake_table_deletions({args}))"
    ).fetchone()


def test_plans_are_compiled_once_per_model_version(shop, tmp_path) -> None:
    """A plan is compiled when what it is compiled from changed (the model SQL, a source's
    columns), else read from the cache; every refresh still equals a recomputation, and the
    counts the log line gives are the table's change feed's."""
    plans = PlanCache(tmp_path / "plans")
    first = materialize(shop, request(), plans)
    assert "compile" in phase_names(first) and "plan stored" in phase_names(first)
    (cached,) = (tmp_path / "plans").iterdir()
    for change in (
        "INSERT INTO dl.main.orders VALUES (4, 'cy', 2), (5, 'ann', 3)",
        "UPDATE dl.main.orders SET amount = amount + 1 WHERE customer = 'bob'",
        "DELETE FROM dl.main.orders WHERE customer = 'cy'",
    ):
        (since,) = shop.execute("SELECT id FROM ducklake_current_snapshot('dl')").fetchone()
        shop.execute(change)
        again = materialize(shop, request(), plans)
        assert "plan checked" in phase_names(again) and "compile" not in phase_names(again)
        assert (again.inserted, again.deleted) == feed_counts(shop, since), change
        # counting leaves the runner its counts: a commit that wrote rows needs no log row
        assert not [q for q in again.sql if q.startswith("INSERT INTO dl.main._ivm_cursors")]
        assert differences(shop, request()) == []
    # a source's columns changed: compiled again (and rebuilt: the source was altered)
    shop.execute("ALTER TABLE dl.main.orders ADD COLUMN note VARCHAR")
    shop.execute("INSERT INTO dl.main.orders VALUES (6, 'dee', 4, 'x')")
    altered = materialize(shop, request(), plans)
    assert "compile" in phase_names(altered) and differences(shop, request()) == []
    assert "plan checked" in phase_names(materialize(shop, request(), plans))
    # edited SQL: compiled again, the model's other plans removed
    edited = request(TOTALS.replace("GROUP BY", "WHERE amount > 1 GROUP BY"))
    assert "compile" in phase_names(materialize(shop, edited, plans))
    assert [p.name for p in (tmp_path / "plans").iterdir()] != [cached.name]
    assert len(list((tmp_path / "plans").iterdir())) == 1
    # a file that cannot be read is compiled over
    (stored,) = (tmp_path / "plans").iterdir()
    stored.write_bytes(b"not a pickle")
    shop.execute("INSERT INTO dl.main.orders VALUES (7, 'eve', 9, NULL)")
    assert "compile" in phase_names(materialize(shop, edited, plans))
    assert differences(shop, edited) == []
    # storing a model's plan keeps the plans of a model whose name extends its own
    dotted = ModelRequest("x", "dl", "main", "totals.x", "SELECT 1 AS x")
    plans.store(dotted, CachedPlan("f" * 64, [], "plan of totals.x", Compiled("h", [], "")))
    plans.store(edited, CachedPlan("e" * 64, [], "another plan", Compiled("h", [], "")))
    assert plans.load(dotted, "f" * 64) is not None
    assert len(list((tmp_path / "plans").iterdir())) == 2


def test_a_state_is_kept_by_the_build_that_writes_it(shop, tmp_path) -> None:
    """The state a table was built with is kept under target/ by its state table's uuid
    (new with each build), by the build itself: runs that find the same uuid read no state
    table; a rebuild replaces it, keeps its own and drops the one kept for the old."""
    plans = PlanCache(tmp_path / "plans")
    states = tmp_path / "states"
    materialize(shop, request(), plans)
    (kept,) = states.iterdir()  # written by the build: no run has read the state table
    record = json.loads(kept.read_text())
    assert State.from_record(record) == read_state(shop, request())
    shop.execute("INSERT INTO dl.main.orders VALUES (4, 'cy', 2)")
    assert materialize(shop, request(), plans).action == "incremental"
    assert list(states.iterdir()) == [kept]
    # what is kept is what the next run decides on: a kept state of another plan rebuilds
    kept.write_text(json.dumps(record | {"plan_hash": "another plan"}))
    shop.execute("INSERT INTO dl.main.orders VALUES (5, 'dee', 3)")
    rebuilt = materialize(shop, request(), plans)
    assert rebuilt.action == "rebuilt" and differences(shop, request()) == []
    # the rebuild replaced the state table and kept its state under the new uuid
    (again,) = states.iterdir()
    assert again != kept and json.loads(again.read_text()) == record
    shop.execute("INSERT INTO dl.main.orders VALUES (6, 'eve', 4)")
    assert materialize(shop, request(), plans).action == "incremental"
    assert list(states.iterdir()) == [again]
    assert differences(shop, request()) == []


def test_a_cached_plan_is_compiled_again_when_a_view_it_reads_is_redefined(shop, tmp_path):
    plans = PlanCache(tmp_path / "plans")
    shop.execute("CREATE VIEW dl.main.big AS SELECT * FROM dl.main.orders WHERE amount > 1")
    over_view = request("SELECT customer, count(*) AS n FROM dl.main.big GROUP BY customer")
    assert "compile" in phase_names(materialize(shop, over_view, plans))
    assert "plan checked" in phase_names(materialize(shop, over_view, plans))
    # a view under a name the model does not read (a new dbt view model) compiles nothing
    shop.execute("CREATE VIEW dl.main.small AS SELECT * FROM dl.main.orders WHERE amount < 2")
    assert "plan checked" in phase_names(materialize(shop, over_view, plans))
    shop.execute("CREATE OR REPLACE VIEW dl.main.big AS SELECT * FROM dl.main.orders")
    redefined = materialize(shop, over_view, plans)
    assert "compile" in phase_names(redefined)
    assert redefined.reason == "a view the model reads was redefined"
    assert differences(shop, over_view) == []


def test_ivm_strategy_auto_and_full_say_what_they_chose(shop) -> None:
    materialize(shop, request(strategy="auto"))
    before = table_id(shop, "totals")
    shop.execute("INSERT INTO dl.main.orders VALUES (4, 'cy', 2)")
    # a handful of source rows: a rebuild is cheaper than a refresh's fixed cost
    auto = materialize(shop, request(strategy="auto"))
    assert auto.message().startswith("rebuilt (auto: orders +1/-0"), auto.message()
    assert differences(shop, request()) == []
    shop.execute("DELETE FROM dl.main.orders WHERE id = 1")
    full = materialize(shop, request(strategy="full"))
    assert full.message().startswith("rebuilt (ivm_strategy full): 3 rows"), full.message()
    assert table_id(shop, "totals") == before  # rebuilt in place
    assert differences(shop, request()) == []
    assert materialize(shop, request(strategy="auto")).action == "up to date"
    with pytest.raises(ModelError, match="ivm_strategy must be one of"):
        materialize(shop, request(strategy="sometimes"))


def test_edited_sql_rebuilds_in_place_when_the_layout_is_unchanged(shop) -> None:
    materialize(shop, request())
    before = table_id(shop, "totals")
    edited = request(TOTALS.replace("GROUP BY", "WHERE amount > 1 GROUP BY"))
    outcome = materialize(shop, edited)
    assert (outcome.action, outcome.reason, outcome.replaced) == (
        "rebuilt",
        "model SQL changed",
        False,
    )
    assert table_id(shop, "totals") == before  # readers of the table keep their cursors
    widened = request(TOTALS.replace("AS total", "AS total, max(id) AS last"))
    outcome = materialize(shop, widened)
    assert (outcome.reason, outcome.replaced) == ("model SQL changed", True)
    assert differences(shop, widened) == []
    assert read_state(shop, widened).columns == ["customer", "n", "total", "last"]


def test_on_schema_change_fail_stops_when_columns_change(shop) -> None:
    materialize(shop, request())
    widened = request(TOTALS.replace("AS total", "AS total, 1 AS one"), on_schema_change="fail")
    with pytest.raises(ModelError, match="on_schema_change is 'fail'"):
        materialize(shop, widened)


def test_recreated_source_and_expired_cursor_rebuild(shop) -> None:
    materialize(shop, request())
    shop.execute("CREATE OR REPLACE TABLE dl.main.orders AS SELECT * FROM dl.main.orders")
    outcome = materialize(shop, request())
    assert outcome.reason == "source dl.main.orders was altered or recreated"
    ((_, cursor),) = ducklake_cursors.read(shop, "dl", "dl.main.totals").values()
    shop.execute("INSERT INTO dl.main.orders VALUES (9, 'dee', 4)")
    shop.execute(f"CALL ducklake_expire_snapshots('dl', versions => [{cursor}])")
    outcome = materialize(shop, request())
    assert outcome.reason == f"the cursor snapshot {cursor} of dl.main.orders was expired"
    assert differences(shop, request()) == []


def test_full_refresh_replaces_the_table(shop) -> None:
    materialize(shop, request())
    before = table_id(shop, "totals")
    outcome = materialize(shop, request(full_refresh=True))
    assert (outcome.action, outcome.reason, outcome.replaced) == ("rebuilt", "full refresh", True)
    assert table_id(shop, "totals") != before


def test_unsupported_sql_names_model_construct_and_line(shop) -> None:
    sql = "select\n  id,\n  n\nfrom dl.main.orders right join unnest([1, 2, 3]) as r(n) on true"
    raw = (
        "select\n  id,\n  n\nfrom {{ ref('orders') }} right join unnest([1, 2, 3]) as r(n) on true"
    )
    with pytest.raises(ModelError) as error:
        materialize(shop, request(sql, raw_sql=raw, path="models/totals.sql"))
    assert "model totals" in str(error.value)
    assert "lateral_join at line 4 of models/totals.sql" in str(error.value)
    assert "ivm_on_unsupported='full_refresh'" in str(error.value)


def test_unsupported_sql_can_fall_back_to_recomputation(shop) -> None:
    sql = "select id, n from dl.main.orders right join unnest([0]) as r(n) on true"
    fallback = request(sql, on_unsupported="full_refresh")
    outcome = materialize(shop, fallback)
    assert outcome.action == "recomputed" and outcome.rows == 3 and outcome.warnings
    shop.execute("DELETE FROM dl.main.orders WHERE id = 1")
    assert materialize(shop, fallback).rows == 2
    assert differences(shop, fallback) == []
    assert materialize(shop, request()).reason == "was recomputed, now maintainable"
    with pytest.raises(ModelError, match="ivm_on_unsupported must be one of"):
        materialize(shop, request(on_unsupported="sometimes"))


def test_equivalence_query_reports_both_sides(shop) -> None:
    materialize(shop, request())
    shop.execute("UPDATE dl.main.totals SET n = n + 1 WHERE customer = 'bob'")
    sides = sorted(row[0] for row in differences(shop, request()))
    assert sides == ["missing", "unexpected"]
    other = ModelRequest("x", "dl", "main", "nothing_here", "")
    assert "has no duckstream state" in shop.execute(equivalence_sql(shop, other)).fetchone()[0]


def test_views_are_read_through_and_redefinitions_rebuild(shop) -> None:
    shop.execute("CREATE VIEW dl.main.big AS SELECT * FROM dl.main.orders WHERE amount > 2")
    sql = "SELECT customer, count(*) AS n FROM dl.main.big GROUP BY customer"
    assert materialize(shop, request(sql)).action == "built"
    shop.execute("CREATE OR REPLACE VIEW dl.main.big AS SELECT * FROM dl.main.orders")
    outcome = materialize(shop, request(sql))
    assert outcome.reason == "a view the model reads was redefined"
    assert differences(shop, request(sql)) == []


def test_model_outside_ducklake_is_refused(shop) -> None:
    with pytest.raises(ModelError, match="DuckLake catalog"):
        materialize(shop, ModelRequest("m", "memory", "main", "m", "SELECT 1 AS x"))


def test_expand_views_resolves_names_as_duckdb_does(shop) -> None:
    views = {
        ("lake", "main", "stg"): "CREATE VIEW stg(a, b) AS (SELECT id, amount FROM raw_orders)",
        ("lake", "main", "wide"): 'CREATE VIEW wide AS SELECT a FROM "lake"."main"."stg"',
    }
    expanded = expand_views(
        "WITH stg AS (SELECT 1 AS a) SELECT * FROM stg, main.wide AS w",
        views,
        catalog="lake",
        schema="main",
    )
    assert expanded == (
        "WITH stg AS (SELECT 1 AS a) SELECT * FROM stg, (SELECT a FROM (SELECT id, amount"
        " FROM lake.main.raw_orders) AS stg(a, b)) AS w"
    )
    assert expand_views("SELECT 1 FROM t", views, catalog="lake", schema="main") == (
        "SELECT 1 FROM t"
    )
    shop.execute("CREATE VIEW dl.main.v AS SELECT id FROM dl.main.orders")
    assert ("dl", "main", "v") in catalog_views(shop)


def test_locate_finds_lines_in_the_model_file() -> None:
    error = UnsupportedSQLError("outer_join", "LEFT OUTER JOIN is not supported: `LEFT JOIN u`")
    compiled = "select *\nfrom lake.main.t\nleft join lake.main.u on t.a = u.a"
    raw = "{{ config(x=1) }}\n\nselect *\nfrom {{ ref('t') }}\nleft join lake.main.u on t.a = u.a"
    assert locate(error, compiled, raw) == 5
    assert locate(error, compiled) == 3
    assert locate(error, "select * from lake.main.v") is None  # in a view it reads


def test_outcome_messages() -> None:
    assert Outcome(
        "incremental", inserted=120, deleted=3, sources_changed=2, snapshots=14, elapsed_ms=38
    ).message() == ("incremental: +120 -3 rows from 2 sources, 14 snapshots, 38 ms")
    assert Outcome("rebuilt", reason="model SQL changed", rows=9, elapsed_ms=5).message() == (
        "rebuilt (model SQL changed): 9 rows, 5 ms"
    )


def test_profile_with_a_ducklake_attachment_loads_the_extension() -> None:
    attach = [Attachment(path="ducklake:/somewhere/metadata.ducklake", alias="lake")]
    credentials = DuckstreamCredentials(database="lake", schema="main", attach=attach)
    assert credentials.type == "duckstream"
    assert credentials.extensions and credentials.extensions[0].endswith(
        "ducklake.duckdb_extension"
    )
    plain = DuckstreamCredentials(database="memory", schema="main")
    assert not plain.extensions


def test_plugin_ships_the_dbt_duckstream_project() -> None:
    assert DuckstreamAdapter.type() == "duckstream"
    assert Plugin.dependencies == ["duckdb"]
    include = Path(Plugin.include_path)
    project = yaml.safe_load((include / "dbt_project.yml").read_text())
    assert project["name"] == "dbt_duckstream" != Plugin.project_name
    macros = {p.name for p in (include / "macros").rglob("*.sql")}
    assert {"incremental_ivm.sql", "ivm_equivalent.sql"} <= macros


@pytest.mark.parametrize("module", [expand_module, locate_module])
def test_docstring_examples(module) -> None:
    """python/dbt is outside pytest's doctest paths (a namespace package): run them here."""
    assert doctest.testmod(module).failed == 0


def test_one_window_read_per_model_run(shop, monkeypatch) -> None:
    """The change window is read once per run, inside the refresh's transaction; the SQL the
    run executed comes back with the outcome (for target/run)."""
    from duckstream.engines.ducklake import window as ducklake_window

    materialize(shop, request(strategy="auto"))
    reads = []
    real = ducklake_window.read

    def counting(con, statement, **kwargs):
        reads.append(statement)
        return real(con, statement, **kwargs)

    monkeypatch.setattr(ducklake_window, "read", counting)
    quiet = materialize(shop, request(strategy="auto"))
    assert quiet.action == "up to date" and len(reads) == 1
    shop.execute("INSERT INTO dl.main.orders VALUES (4, 'cy', 2)")
    reads.clear()
    for strategy in ("incremental", "auto", "full"):
        shop.execute("INSERT INTO dl.main.orders VALUES (5, 'dee', 2)")
        outcome = materialize(shop, request(strategy=strategy))
        assert outcome.action in ("incremental", "rebuilt") and len(reads) == 1, strategy
        # Around the plan's statements, the runner's settings that keep DuckDB from trusting
        # DuckLake's table statistics (runner.without_table_statistics)
        settings = ("perfect_ht_threshold", "disabled_optimizers")
        plan_sql = [s for s in outcome.sql if not any(x in s for x in settings)]
        assert plan_sql[0] == "BEGIN TRANSACTION" and "COMMIT" in plan_sql
        assert "SET perfect_ht_threshold = 0" in outcome.sql[:4]
        assert "SET disabled_optimizers = 'statistics_propagation'" in outcome.sql[:4]
        assert not any(s.lstrip().startswith("--") for s in outcome.sql)
        reads.clear()
        assert differences(shop, request()) == []


def test_one_database_per_dbt_command(tmp_path) -> None:
    """With keep_open: false, closing a node's connection (the last one open) leaves the
    DuckDB database open for the next node; dbt's end of the command closes it."""
    from dbt.adapters.contracts.connection import Connection
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    from dbt.adapters.duckstream.connections import DuckstreamConnectionManager

    path = str(tmp_path / "dbt.duckdb")
    credentials = DuckstreamCredentials(database="dbt", schema="main", path=path)
    credentials.keep_open = False

    def node(name: str) -> object:
        connection = Connection(type="duckstream", name=name, credentials=credentials)
        DuckstreamConnectionManager.open(connection)
        connection.handle.cursor().execute("SELECT 1")
        database = DuckDBConnectionManager._ENV.conn
        connection.handle.close()
        return database

    first, second = node("a"), node("b")
    assert first is not None and second is first  # not closed and opened again
    # the manager of a command with no thread connection left (dbt's own need a config)
    manager = DuckstreamConnectionManager.__new__(DuckstreamConnectionManager)
    manager.lock, manager.thread_connections = threading.RLock(), {}
    manager.cleanup_all()
    assert DuckDBConnectionManager._ENV.conn is None  # closed: the file is free
    assert node("c") is not None  # and opened again by the next command
    manager.cleanup_all()
