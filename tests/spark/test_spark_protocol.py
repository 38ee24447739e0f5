"""The Spark refresh protocol: no-op refreshes, cursors in the MV's snapshot, the plan run by
hand, and the clear refusals where Iceberg has no change feed (merge-on-read delete files, a
replaced table, a changed schema, an MV written outside duckstream), each rebuilt by
``strategy='auto'`` (or ``rebuild=True``)."""

from __future__ import annotations

import pytest

from duckstream.engines.iceberg.estimate import SparkPolicy
from duckstream.errors import DuckstreamError
from duckstream.plan import (
    CommitWith,
    IVMPlan,
)
from duckstream.spark import RebuildRequired, refresh
from duckstream.testing.differential import (
    FROM_CATALOG,
    Column,
    Delete,
    Insert,
    TableSpec,
    Update,
)
from duckstream.testing.spark_harness import SparkHarness, spark_all

pytestmark = pytest.mark.spark

VIEW = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"


TABLE = TableSpec("t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(1, 10), (2, 20)])


def _view(spark, properties: str = "") -> tuple[SparkHarness, IVMPlan]:
    harness = SparkHarness(spark)
    harness.create(TABLE)
    if properties:
        spark.sql(f"ALTER TABLE {harness.fqn('t')} SET TBLPROPERTIES ({properties})")
    plan = harness.compile(VIEW)
    harness.setup(plan)
    harness.check(plan, VIEW, "after setup")
    return harness, plan


def _mv_snapshots(harness: SparkHarness) -> list[tuple]:
    return harness.rows(f"SELECT snapshot_id, summary FROM {harness.fqn('mv')}.snapshots")


def test_refresh_without_changes_commits_nothing(spark) -> None:
    harness, plan = _view(spark)
    before = _mv_snapshots(harness)
    for strategy in ("incremental", "auto"):
        report = refresh(spark, plan, strategy=strategy)
        assert report.strategy == "incremental"
    assert report.reason == "no source changed"
    assert _mv_snapshots(harness) == before


def test_cursors_travel_in_the_mv_commit(spark) -> None:
    harness, plan = _view(spark)
    harness.apply([Insert("t", ((1, 5),)), Update("t", "v = v + 1", "k = 2")])
    harness.refresh(plan)
    harness.check(plan, VIEW, "after refresh")
    current = harness.rows(f"SELECT snapshot_id FROM {harness.fqn('t')}.refs WHERE name = 'main'")
    (summary,) = harness.rows(
        f"SELECT s.summary FROM {harness.fqn('mv')}.snapshots AS s"
        f" JOIN {harness.fqn('mv')}.refs AS r ON s.snapshot_id = r.snapshot_id"
    )[0]
    assert summary[f"duckstream.cursor.{harness.fqn('t')}"] == str(current[0][0])
    assert not spark.catalog.tableExists(plan.cursors_table)  # no second copy of them


def test_plan_runs_by_hand_with_spark_variable_substitution(spark, run_by_hand) -> None:
    """What the runner does, done the way its docstring tells a user: SET + ${...}."""
    harness, plan = _view(spark)
    harness.apply([Insert("t", ((3, 30),)), Delete("t", "k = 1")])
    run_by_hand(plan)
    harness.check(plan, VIEW, "after a refresh by hand")
    harness.apply([Insert("t", ((4, 40),))])
    harness.refresh(plan)  # the runner continues from the cursors committed by hand
    harness.check(plan, VIEW, "after the next refresh")


MERGE_ON_READ = ", ".join(
    f"'write.{op}.mode' = 'merge-on-read'" for op in ("delete", "update", "merge")
)


# The join reads both sources by position; the one-table view too under DUCKSTREAM_SPARK_ALL.
@pytest.mark.parametrize(
    "view", ["SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k", *([VIEW] if spark_all() else [])]
)
def test_merge_on_read_sources_are_read_by_position(spark, view) -> None:
    """Sources with delete files (merge-on-read), which Iceberg's changelog refuses, are read
    by position (no changelog call): windows of deletes, updates (twice in a window, and of
    a row inserted in it), appends and a whole data file deleted, both sources changed."""
    harness = SparkHarness(spark)
    harness.create(TABLE)
    harness.create(TableSpec("u", [Column("k", "INTEGER"), Column("w", "VARCHAR")], [(1, "a")]))
    for table in ("t", "u"):
        spark.sql(f"ALTER TABLE {harness.fqn(table)} SET TBLPROPERTIES ({MERGE_ON_READ})")
    plan = harness.compile(view)
    harness.setup(plan)
    windows = [
        [Insert("t", ((3, 30), (1, 11), (1, 11)))],
        [Update("t", "v = v + 1", "k = 2")],  # a position delete file
        [Insert("t", ((2, 5),)), Update("t", "v = v * 2", "k = 2"), Delete("t", "v = 11")],
        [
            Insert("u", ((2, "b"), (3, "c"))),
            Update("u", "w = 'z'", "k = 1"),
            Insert("t", ((4, 4),)),
        ],
        [Delete("t", "k = 3"), Update("t", "v = 0", "k = 1"), Delete("u", "k = 2")],
        [Delete("t", "true"), Insert("t", ((2, 7),))],
    ]
    recording = _Recording(spark)
    delete_files = []
    for number, batch in enumerate(windows):
        harness.apply(batch)
        found = harness.rows(f"SELECT count(*) FROM {harness.fqn('t')}.delete_files")
        delete_files.append(found[0][0])
        recording.ran.clear()
        report = refresh(recording, plan, strategy="incremental")
        assert report.strategy == "incremental", report.reason
        harness.check(plan, view, f"after window {number}")
        assert not [s for s in recording.ran if "create_changelog_view" in s], recording.ran
    assert all(delete_files[1:5]), delete_files  # the windows meant to hold delete files
    harness.apply([Insert("t", ((5, 50),)), Delete("t", "k = 2")])
    report = refresh(spark, plan)  # auto: maintains or rebuilds, either exact
    harness.check(plan, view, "after auto")


def test_replaced_table_requires_rebuild(spark) -> None:
    harness, plan = _view(spark)
    t = harness.fqn("t")
    spark.sql(f"CREATE OR REPLACE TABLE {t} USING iceberg AS SELECT * FROM {t} WHERE k = 2")
    with pytest.raises(RebuildRequired, match="no longer in its history"):
        harness.refresh(plan)
    report = refresh(spark, plan)  # auto: the estimate finds the broken history
    assert report.strategy == "full" and "no longer in its history" in report.reason
    harness.check(plan, VIEW, "after the rebuild")


def test_schema_change_requires_rebuild(spark) -> None:
    harness, plan = _view(spark)
    spark.sql(f"ALTER TABLE {harness.fqn('t')} ADD COLUMN w STRING")
    spark.sql(f"INSERT INTO {harness.fqn('t')} VALUES (3, 30, 'x')")
    with pytest.raises(RebuildRequired, match="schema of .* changed"):
        harness.refresh(plan)
    # The estimate reads the same metadata as the pin: it finds the schema change and
    # rebuilds without trying to maintain (no source estimated).
    report = refresh(spark, plan, policy=SparkPolicy(overhead_rows=0, max_fraction=1.0))
    assert report.strategy == "full" and "schema of" in report.reason, report
    assert not report.sources
    harness.check(plan, VIEW, "after the rebuild")


def test_mv_written_outside_duckstream_requires_rebuild(spark) -> None:
    harness, plan = _view(spark)
    spark.sql(f"DELETE FROM {harness.fqn('mv')} WHERE k = 1")
    harness.apply([Insert("t", ((3, 30),))])
    with pytest.raises(RebuildRequired, match="no cursor for source"):
        harness.refresh(plan)
    report = refresh(spark, plan)
    assert report.strategy == "full" and "no cursor for source" in report.reason
    harness.check(plan, VIEW, "after the rebuild")


JOIN_VIEW = "SELECT u.w, count(*) AS n, sum(t.v) AS total FROM t JOIN u ON t.k = u.k GROUP BY u.w"
EMPTY = [
    TableSpec("t", [Column("k", "INTEGER"), Column("v", "INTEGER")], []),
    TableSpec("u", [Column("k", "INTEGER"), Column("w", "VARCHAR")], []),
]


def test_sources_never_written_are_set_up_and_maintained(spark) -> None:
    """A source created and never written has no snapshot to pin: setup gives it one (an
    empty append, no data file), and a source re-created empty after setup is rebuilt."""
    harness = SparkHarness(spark)
    for table in EMPTY:
        harness.create(table)  # no rows: no commit
    assert not harness.rows(f"SELECT * FROM {harness.fqn('t')}.snapshots")
    plan = harness.compile(JOIN_VIEW)
    harness.setup(plan)
    harness.check(plan, JOIN_VIEW, "after setup over empty sources")
    first = harness.rows(f"SELECT operation, summary FROM {harness.fqn('t')}.snapshots")
    assert len(first) == 1 and first[0][0] == "append"
    assert "duckstream.first-snapshot" in first[0][1] and first[0][1].get("added-records") is None
    assert refresh(spark, plan).reason == "no source changed"
    harness.apply([Insert("t", ((1, 10), (2, 20)))])
    harness.refresh(plan)
    harness.check(plan, JOIN_VIEW, "rows in one source, the other still empty")
    harness.apply([Insert("u", ((1, "a"), (2, "b"), (3, "a")))])
    harness.refresh(plan)
    harness.check(plan, JOIN_VIEW, "rows in both")
    spark.sql(f"DROP TABLE {harness.fqn('u')}")
    harness.create(EMPTY[1])
    with pytest.raises(RebuildRequired, match="has no snapshot"):
        harness.refresh(plan)
    report = refresh(spark, plan)
    assert report.strategy == "full" and "has no snapshot" in report.reason
    harness.check(plan, JOIN_VIEW, "a source re-created empty")
    harness.apply([Insert("u", ((2, "c"),))])
    harness.refresh(plan)
    harness.check(plan, JOIN_VIEW, "rows in the re-created source")


def test_cached_source_is_refused(spark) -> None:
    """Spark would read the window's old snapshot of a cached source from the cache."""
    harness, plan = _view(spark)
    spark.sql(f"CACHE TABLE {harness.fqn('t')}")
    try:
        harness.apply([Insert("t", ((1, 5),))])
        with pytest.raises(DuckstreamError, match="is cached in this Spark session"):
            refresh(spark, plan, strategy="incremental")
    finally:
        spark.sql(f"UNCACHE TABLE {harness.fqn('t')}")
    harness.refresh(plan)
    harness.check(plan, VIEW, "after uncaching")


class _Recording:
    """``spark``, writing down the SQL statements it runs."""

    def __init__(self, spark) -> None:
        self.spark, self.ran = spark, []

    def sql(self, statement: str, *args, **kwargs):
        self.ran.append(statement)
        return self.spark.sql(statement, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.spark, name)


def test_appends_are_read_without_a_changelog_and_rewrites_with_one(spark) -> None:
    """A window of appends only is read by Iceberg's incremental append scan (no changelog
    call), an unchanged source gets no call either; a window with a delete is read from the
    changelog. The refresh's profile lists its phases."""
    harness = SparkHarness(spark)
    harness.create(TABLE)
    harness.create(TableSpec("u", [Column("k", "INTEGER"), Column("w", "VARCHAR")], [(1, "a")]))
    plan = harness.compile(JOIN_VIEW)
    harness.setup(plan)
    recording = _Recording(spark)
    harness.apply([Insert("t", ((1, 5),)), Insert("t", ((3, 7),))])
    report = refresh(recording, plan, strategy="incremental")
    harness.check(plan, JOIN_VIEW, "after appends")
    assert not [s for s in recording.ran if "create_changelog_view" in s], recording.ran
    names = [p.name for p in report.phases]
    assert names[0] == "pin" and "apply" in names and f"changes {harness.fqn('t')}" in names
    assert not any("SELECT" in s and ".snapshots" in s for s in recording.ran)  # no pin query
    recording.ran.clear()
    harness.apply([Insert("t", ((2, 1),)), Delete("t", "k = 3")])
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, JOIN_VIEW, "after a delete")
    calls = [s for s in recording.ran if "create_changelog_view" in s]
    # t's window: one changelog call; u's (unchanged): none
    assert len(calls) == 1 and f"{harness.schema}.t'" in calls[0], calls


GROWING_VIEW = "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k WHERE t.v > 0"


def _latest_mv_commit(harness: SparkHarness) -> tuple[str, dict]:
    (row,) = harness.rows(
        f"SELECT s.operation, s.summary FROM {harness.fqn('mv')}.snapshots AS s"
        f" JOIN {harness.fqn('mv')}.refs AS r ON s.snapshot_id = r.snapshot_id"
    )
    return row[0], row[1]


@pytest.mark.parametrize("schema", [None, FROM_CATALOG], ids=["no_schema", "schema"])
def test_a_view_that_only_grows_takes_appends_in_one_insert(spark, schema) -> None:
    """A join without aggregates over windows of appends only (duplicates among them): one
    INSERT into the view (an Iceberg ``append``, no MERGE), carrying the cursors; a window
    with a delete: the MERGE."""
    harness = SparkHarness(spark)
    harness.create(TABLE)
    harness.create(TableSpec("u", [Column("k", "INTEGER"), Column("w", "VARCHAR")], [(1, "a")]))
    plan = harness.compile(GROWING_VIEW, schema=schema)
    harness.setup(plan)
    recording = _Recording(spark)
    windows = [
        [Insert("t", ((1, 5), (1, 5), (3, 7)))],
        [Insert("u", ((3, "c"), (1, "a"))), Insert("t", ((3, 7),))],
    ]
    for number, batch in enumerate(windows):
        harness.apply(batch)
        recording.ran.clear()
        refresh(recording, plan, strategy="incremental")
        harness.check(plan, GROWING_VIEW, f"after appends {number}")
        operation, summary = _latest_mv_commit(harness)
        assert operation == "append", (operation, recording.ran)
        assert not [s for s in recording.ran if s.lstrip().startswith("MERGE")]
        for table in ("t", "u"):
            current = harness.rows(f"SELECT snapshot_id FROM {harness.fqn(table)}.refs")
            assert summary[f"duckstream.cursor.{harness.fqn(table)}"] == str(current[0][0])
    harness.apply([Insert("t", ((1, 6),)), Delete("t", "v = 7")])
    recording.ran.clear()
    refresh(recording, plan, strategy="incremental")
    harness.check(plan, GROWING_VIEW, "after a delete")
    assert [s for s in recording.ran if s.lstrip().startswith("MERGE")]
    assert _latest_mv_commit(harness)[0] != "append"


def test_an_insert_that_would_remove_a_row_falls_back_to_the_merge(spark, monkeypatch) -> None:
    """The append-only INSERT fails, writing nothing, on a change that removes a row (here
    made possible by taking a LEFT JOIN for monotone: a partner's arrival removes the
    NULL-extended row); the MERGE then applies the window."""
    from duckstream.tree.join import Join

    view = "SELECT t.k, u.w FROM t LEFT JOIN u ON t.k = u.k"
    harness = SparkHarness(spark)
    harness.create(TABLE)
    harness.create(TableSpec("u", [Column("k", "INTEGER"), Column("w", "VARCHAR")], [(1, "a")]))
    monkeypatch.setattr(Join, "only_grows", lambda self: True)
    plan = harness.compile(view)
    monkeypatch.undo()
    assert any(isinstance(s, CommitWith) and s.appends_only for s in plan.steps["maintain"])
    harness.setup(plan)
    harness.apply([Insert("u", ((2, "b"),))])  # (2, NULL) must go
    harness.refresh(plan)
    harness.check(plan, view, "after the partner's arrival")
    assert _latest_mv_commit(harness)[0] != "append"
