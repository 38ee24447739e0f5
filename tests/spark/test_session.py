"""The offline Spark + Iceberg session: DML, time travel, change feed, commit metadata."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from duckstream.engines.iceberg.session import JARS_ENV, bundled_iceberg_jars, session_conf
from duckstream.spark import sql_with_commit_properties

pytestmark = pytest.mark.spark

CHANGE = "_change_type, _change_ordinal, _commit_snapshot_id"


@dataclass
class History:
    """Snapshots of ``db.t``: 0 insert, 1 update, 2 delete, 3 merge (update + insert)."""

    snapshots: list[int]


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def changelog(spark, view: str, start: int, end: int, extra: str = "") -> list[tuple]:
    options = f"map('start-snapshot-id', '{start}', 'end-snapshot-id', '{end}')"
    spark.sql(
        f"CALL lake.system.create_changelog_view(table => 'db.t', options => {options}, "
        f"changelog_view => '{view}'{extra})"
    )
    order = "_change_ordinal, id, _change_type"
    return rows(spark, f"SELECT id, v, _change_type FROM {view} ORDER BY {order}")


@pytest.fixture(scope="module")
def history(spark) -> History:
    spark.sql("CREATE TABLE db.t (id bigint NOT NULL, v string) USING iceberg")
    spark.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("UPDATE db.t SET v = 'B' WHERE id = 2")
    spark.sql("DELETE FROM db.t WHERE id = 3")
    spark.sql(
        "MERGE INTO db.t t USING (SELECT * FROM VALUES (1L, 'A'), (4L, 'd') AS s(id, v)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    snapshots = rows(spark, "SELECT snapshot_id FROM db.t.snapshots ORDER BY committed_at")
    return History([s for (s,) in snapshots])


def test_relocated_jackson_is_complete() -> None:
    runtime, jackson = (Path(p) for p in bundled_iceberg_jars())
    with zipfile.ZipFile(jackson) as jar:
        names = set(jar.namelist())
        unshaded = re.compile(rb"(?<!shaded[/.])com[/.]fasterxml[/.]jackson")
        assert not [n for n in names if n.endswith(".class") and unshaded.search(jar.read(n))]
    shaded = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
    assert f"{shaded}databind/ObjectMapper.class" in names
    with zipfile.ZipFile(runtime) as jar:  # the runtime lacks exactly these classes
        assert not any(n.startswith(shaded) for n in jar.namelist())


def test_user_provided_runtime_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    package = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
    conf = session_conf("wh", extra_conf={"spark.jars.packages": package})
    assert "spark.jars" not in conf and conf["spark.jars.packages"] == package
    monkeypatch.setenv(JARS_ENV, "/opt/a.jar,/opt/b.jar")
    assert session_conf("wh")["spark.jars"] == "/opt/a.jar,/opt/b.jar"
    assert session_conf("wh")["spark.sql.catalog.lake.warehouse"] == str(Path("wh").resolve())


def test_dml_snapshots_and_time_travel(spark, history: History) -> None:
    ops = rows(spark, "SELECT operation FROM db.t.snapshots ORDER BY committed_at")
    assert ops == [("append",), ("overwrite",), ("overwrite",), ("overwrite",)]
    assert rows(spark, "SELECT * FROM db.t ORDER BY id") == [(1, "A"), (2, "B"), (4, "d")]
    first = history.snapshots[0]
    assert rows(spark, f"SELECT * FROM db.t VERSION AS OF {first} ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    (current,) = rows(spark, "SELECT snapshot_id FROM db.t.refs WHERE name = 'main'")
    assert current == (history.snapshots[-1],)


def test_changelog_view(spark, history: History) -> None:
    first, update, delete, merge = history.snapshots
    # start is exclusive, end inclusive; copy-on-write carry-over rows are removed
    assert changelog(spark, "c1", first, delete) == [
        (2, "b", "DELETE"),
        (2, "B", "INSERT"),
        (3, "c", "DELETE"),
    ]
    updates = ", compute_updates => true, identifier_columns => array('id')"
    assert changelog(spark, "c2", delete, merge, updates) == [
        (1, "A", "UPDATE_AFTER"),
        (1, "a", "UPDATE_BEFORE"),
        (4, "d", "INSERT"),
    ]
    columns = [f.name for f in spark.table("c2").schema.fields]
    assert columns == ["id", "v", *CHANGE.split(", ")]
    net = changelog(spark, "c3", first, merge, ", net_changes => true")
    assert sorted(net) == sorted(
        [(1, "a", "DELETE"), (1, "A", "INSERT"), (2, "b", "DELETE"), (2, "B", "INSERT")]
        + [(3, "c", "DELETE"), (4, "d", "INSERT")]
    )


def test_empty_changelog_window_is_an_error(spark, history: History) -> None:
    last = history.snapshots[-1]
    with pytest.raises(Exception, match="not a parent ancestor"):
        changelog(spark, "c4", last, last)


def test_commit_properties_in_same_snapshot(spark, history: History) -> None:
    spark.sql("CREATE TABLE db.mv (id bigint, n bigint) USING iceberg")
    cursor = str(history.snapshots[-1])
    merge = (
        "MERGE INTO db.mv m USING (SELECT id, count(*) AS n FROM db.t GROUP BY id) s "
        "ON m.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    sql_with_commit_properties(spark, merge, {"duckstream.cursor.db.t": cursor})
    spark.sql("INSERT INTO db.mv VALUES (9, 9)")  # later commits do not inherit them
    summary = "SELECT summary['duckstream.cursor.db.t'] FROM db.mv.snapshots ORDER BY committed_at"
    assert rows(spark, summary) == [(cursor,), (None,)]


def test_regex_column_names_and_struct_star(spark) -> None:
    spark.sql("CREATE TABLE db.r (k bigint, s int, _ivm_count bigint) USING iceberg")
    spark.sql("INSERT INTO db.r VALUES (1, 2, 3)")
    assert rows(spark, "SELECT struct(*) AS s FROM db.r")[0][0].asDict() == {
        "k": 1,
        "s": 2,
        "_ivm_count": 3,
    }
    spark.sql("SET spark.sql.parser.quotedRegexColumnNames = true")
    try:
        assert rows(spark, "SELECT `(?!_ivm_).*` FROM db.r") == [(1, 2)]
    finally:
        spark.sql("SET spark.sql.parser.quotedRegexColumnNames = false")


def test_union_of_two_snapshots_needs_remove_noop_union_excluded(spark, history: History) -> None:
    """Spark 3.5 takes ``db.t`` at two snapshots for the same plan: RemoveNoopUnion keeps one
    side of the UNION (a refresh reads sources at two snapshots in one query). The Iceberg
    runner excludes the rule (its ``Begin``); with it excluded the union is right."""
    from duckstream.engines.iceberg.engine import EXCLUDED_RULES, NOOP_UNION
    from duckstream.engines.iceberg.steps import run_steps
    from duckstream.plan import Begin

    first, last = history.snapshots[0], history.snapshots[-1]
    union = (
        f"SELECT id FROM db.t VERSION AS OF {first} UNION SELECT id FROM db.t VERSION AS OF {last}"
    )
    session = spark.newSession()  # its own configuration
    session.sql("USE lake")
    session.conf.set(EXCLUDED_RULES, "org.apache.spark.sql.catalyst.optimizer.CombineFilters")
    if sorted(rows(session, union)) == [(1,), (2,), (3,), (4,)]:
        pytest.fail("Spark keeps both snapshots now: NOOP_UNION's exclusion may go")
    run_steps(session, [Begin()])
    assert session.conf.get(EXCLUDED_RULES) == (
        f"org.apache.spark.sql.catalyst.optimizer.CombineFilters,{NOOP_UNION}"
    )
    assert sorted(rows(session, union)) == [(1,), (2,), (3,), (4,)]
