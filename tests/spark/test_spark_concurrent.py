"""Refreshes of one view racing on Spark + Iceberg: a refresh commits its delta to the view
as it pinned it, or not at all (:mod:`duckstream.engines.iceberg.pinned_commit`).

The default run stages the race in one process, deterministically: a refresh pins the view's
cursors, another refresh of the same view commits, then the first one commits. Under
``DUCKSTREAM_SPARK_ALL`` the same happens for real: a writer in another Spark process commits
to the sources while this one and a second refresher process refresh the views."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest

from duckstream.compiler import compile_ivm
from duckstream.engines.iceberg.pinned_commit import pinned_commit
from duckstream.engines.iceberg.steps import run_steps
from duckstream.engines.iceberg.window import java_table, read_logs
from duckstream.errors import RefreshConflict
from duckstream.spark import refresh, schema_of
from duckstream.testing import spark_concurrent
from duckstream.testing.differential import FROM_CATALOG, Column, Delete, Insert, TableSpec, Update
from duckstream.testing.spark_harness import SparkHarness, spark_all, to_spark

pytestmark = pytest.mark.spark

GROUPS = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"  # a MERGE
ROWS = "SELECT k, v FROM t WHERE v >= 0"  # only grows on inserts: the appends-only INSERT
FACTS = TableSpec(
    "t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(i % 4, i) for i in range(12)]
)


def test_a_refresh_that_lost_the_race_applies_nothing(spark) -> None:
    harness = SparkHarness(spark)
    harness.create(FACTS)
    plans = {
        GROUPS: harness.compile(GROUPS, "groups", schema=FROM_CATALOG),
        ROWS: harness.compile(ROWS, "rows_"),
    }
    for plan in plans.values():
        harness.setup(plan)
    harness.apply([Insert("t", ((1, 100), (5, 5)))])  # appends only: ROWS takes the INSERT
    for view, plan in plans.items():
        pinned = read_logs(spark, plan.mv_table, plan.tables)  # the loser pins first
        refresh(spark, plan, strategy="incremental")  # the winner commits
        with pytest.raises(RefreshConflict, match=plan.mv_table):
            run_steps(spark, plan.steps["maintain"], logs=pinned)
        harness.check(plan, view, "after the lost race")
        refs = harness.rows(f"SELECT name FROM {plan.mv_table}.refs")
        assert refs == [("main",)], f"branches left behind: {refs}"
    harness.apply([Update("t", "v = v + 1", "k = 1"), Delete("t", "k = 2")])
    for view, plan in plans.items():  # the next refresh catches up
        refresh(spark, plan, strategy="incremental")
        harness.check(plan, view, "caught up")


def test_the_commit_is_read_whatever_instance_spark_reads_the_view_through(spark) -> None:
    """Spark reads a table through the instance its Iceberg catalog caches, dropped 30 s
    after its last use: a refresh's statement planned later than that after the refresh
    loaded the view (a recursion iterated first, under load) loads and caches a new one. The
    move of ``main``, committed through the instance loaded first, must still be what the
    next read in the session sees (it showed the old rows). The expiry staged: the catalog's
    instance dropped between the branch's creation and the statement."""
    harness = SparkHarness(spark)
    harness.create(FACTS)
    view = harness.fqn("t")
    pinned = int(java_table(spark, view).currentSnapshot().snapshotId())
    with pinned_commit(spark, view, pinned) as branch:
        spark.catalog.refreshTable(view)  # as if expired: the INSERT loads a new instance
        spark.sql(f"INSERT INTO {view}.branch_{branch} VALUES (9, 99)")
    assert sorted(harness.rows(f"SELECT k, v FROM {view}")) == sorted([*FACTS.rows, (9, 99)])
    assert harness.rows(f"SELECT name FROM {view}.refs") == [("main",)]


# A peer process's Spark: small and cheap (the tests' session runs beside it on 2 cores).
PEER_CONF = {
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.locality.wait": "0",
}
JOINED = "SELECT t1.k, t1.v, t2.v AS w FROM {t1} AS t1 JOIN {t2} AS t2 ON t1.k = t2.k"


@pytest.mark.skipif(not spark_all(), reason="other Spark processes: DUCKSTREAM_SPARK_ALL")
def test_writer_and_refresher_in_other_spark_processes(spark, warehouse, tmp_path) -> None:
    """A writer process commits to the sources while this process and a second refresher
    process refresh the same views: each view, after each of this process's refreshes,
    equals its SELECT at the cursors of its current snapshot; at the end, recomputation."""
    harness = SparkHarness(spark)
    for name in ("t1", "t2"):
        rows = [(i % 8, i) for i in range(10)]
        harness.create(TableSpec(name, [Column("k", "INTEGER"), Column("v", "INTEGER")], rows))
    names = {"t1": harness.fqn("t1"), "t2": harness.fqn("t2")}
    views = {
        "groups": to_spark(GROUPS.replace("FROM t", f"FROM {names['t1']}")),
        "joined": to_spark(JOINED.format(**names)),
    }
    compiled = {  # with schema= (as dbt compiles) and without; the peer compiles the same
        "groups": {"schema": schema_of(spark, views["groups"])},
        "joined": {},
    }
    specs = [
        {
            "view_sql": sql,
            "dialect": "spark",
            "mv_name": name,
            "mv_catalog": harness.catalog,
            "mv_schema": harness.schema,
            **compiled[name],
        }
        for name, sql in views.items()
    ]
    plans = {spec["view_sql"]: compile_ivm(**spec) for spec in specs}
    for plan in plans.values():
        harness.setup(plan)
    stop = str(tmp_path / "stop")
    counts: Counter[str] = Counter()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        writer = pool.apply_async(
            spark_concurrent.write,
            (warehouse, harness.schema, ["t1", "t2"], 1, 16, 1.0, PEER_CONF),
        )
        refresher = pool.apply_async(
            spark_concurrent.refresh_views, (warehouse, specs, stop, "incremental", PEER_CONF)
        )
        rounds = 0
        while not writer.ready() or rounds < 2:
            for sql, plan in plans.items():
                try:
                    refresh(spark, plan, strategy="incremental")
                    counts["refreshes"] += 1
                except RefreshConflict:
                    counts["conflicts"] += 1
                rows, expected = spark_concurrent.at_cursors(spark, plan, sql)
                assert rows == expected, f"{plan.mv_table} at its cursors: {rows} != {expected}"
            rounds += 1
        written = writer.get(timeout=600)
        open(stop, "w").close()
        peer = refresher.get(timeout=600)
    for sql, plan in plans.items():
        refresh(spark, plan, strategy="incremental")
        context = f"writer {written}, here {dict(counts)}, peer {peer}"
        rows, expected = spark_concurrent.at_cursors(spark, plan, sql)
        assert rows == expected, context
        assert expected == Counter(tuple(r) for r in spark.sql(sql).collect()), context
    assert counts["refreshes"] and peer["refreshes"]
    print(f"writer {written}; this process {dict(counts)}; peer {peer}")
