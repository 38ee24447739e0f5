"""The Spark + Iceberg plan without Spark: statement shapes, directives, refusals.

The end-to-end Spark tests (``tests/spark``, marker ``spark``) run the plans; these check what
can be checked from the SQL alone, in milliseconds.
"""

from __future__ import annotations

import re

import pytest
import sqlglot

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.engines import engine_for
from duckstream.engines.iceberg.engine import IcebergEngine, value_query
from duckstream.plan import (
    Cleanup,
    CommitWith,
    CreateTemp,
    PinSnapshot,
    PinWindow,
    SetValues,
    Sql,
    StopUnless,
)
from test_smoke import VIEWS

PLACEHOLDER = re.compile(r"\$\{duckstream\.[a-z0-9_]+\.([a-z_]+)[0-9_]*\}")


def _spark(view: str, **kwargs):
    sql = sqlglot.transpile(view, read="duckdb", write="spark")[0]
    return compile_ivm(sql, dialect="spark", mv_catalog="lake", mv_schema="db", **kwargs)


def _sql(step) -> str:
    """The Spark SQL a step runs (empty for a step that runs none)."""
    if isinstance(step, PinSnapshot | PinWindow | SetValues):
        return value_query(step)
    if isinstance(step, Sql | Cleanup | CommitWith):
        return step.statement
    return ""


def _substituted(sql: str) -> str:
    return PLACEHOLDER.sub(lambda m: "true" if m[1].startswith("changed") else "42", sql)


def test_spark_dialect_has_an_engine() -> None:
    assert isinstance(engine_for("spark"), IcebergEngine)


@pytest.mark.parametrize("name", sorted(set(VIEWS) - {"aggregate_expression"}))
def test_every_statement_is_spark_sql(name: str) -> None:
    plan = _spark(VIEWS[name])
    for step in [s for steps in plan.steps.values() for s in steps]:
        sql = _sql(step)
        if sql and not sql.startswith("CALL"):
            sqlglot.parse_one(_substituted(sql), read="spark")
        if isinstance(step, CreateTemp):
            sqlglot.parse_one(_substituted(step.query.sql("icebergspark")), read="spark")


def test_the_mv_changes_in_one_commit_that_carries_every_cursor() -> None:
    plan = _spark("SELECT a.k, count(*) AS n FROM r AS a JOIN s AS b ON a.k = b.k GROUP BY a.k")
    writes = [s for s in plan.steps["maintain"] if isinstance(s, CommitWith)]
    assert len(writes) == 1 and writes[0].statement.startswith(f"MERGE INTO {plan.mv_table} ")
    assert [k for k, _ in writes[0].properties] == [
        "duckstream.cursor.lake.db.r",
        "duckstream.cursor.lake.db.s",
    ]
    (populate,) = [s for s in plan.steps["initialize_cursors"] if isinstance(s, CommitWith)]
    assert f"INSERT OVERWRITE TABLE {plan.mv_table} " in populate.statement
    assert populate.properties == writes[0].properties


def test_nothing_changed_stops_before_any_work() -> None:
    plan = _spark(VIEWS["group_by"])
    steps = plan.steps["maintain"]
    assert isinstance(steps[1], PinWindow) and isinstance(steps[2], StopUnless)
    assert steps[2].value == "${duckstream.lake_db_mv.changed}"
    assert all(isinstance(s, Cleanup) for s in steps[-3:])
    assert not any("-- duckstream:" in s for s in plan.maintain)


def test_names_that_are_keywords_parse_back() -> None:
    """Spark's parser takes ``orders.select`` bare, sqlglot's does not; the runner parses the
    plan's statements back (CI found this on a star over a column named ``select``)."""
    plan = compile_ivm(
        "SELECT `select`, `from`, count(*) AS `order` FROM t GROUP BY `select`, `from`",
        dialect="spark",
        mv_catalog="lake",
        mv_schema="db",
    )
    for step in [s for steps in plan.steps.values() for s in steps]:
        sql = _sql(step)
        if sql and not sql.startswith("CALL"):
            sqlglot.parse_one(_substituted(sql), read="icebergspark")
    assert "`select`" in plan.create_mv and "`order`" in plan.create_mv


def test_row_numbers_are_ordered_for_spark() -> None:
    plan = _spark(VIEWS["duplicates"])
    assert "OVER ()" not in "\n".join(plan.maintain + plan.initialize_cursors)


@pytest.mark.parametrize(
    "view",
    [
        "SELECT k, sum(a) / sum(b) AS r FROM t GROUP BY k",
        "SELECT k, avg(a) / 2 AS r FROM t GROUP BY k",
        "SELECT sum(a) / count(*) AS r FROM t HAVING sum(a) / count(*) > 1",
    ],
)
def test_decimal_division_over_sums_is_refused_on_spark(view: str) -> None:
    with pytest.raises(UnsupportedSQLError) as caught:
        _spark(view)
    assert caught.value.feature == "spark_unsupported"
    compile_ivm(view)  # DuckDB divides in DOUBLE


@pytest.mark.parametrize(
    ("view", "schema"),
    [
        ("SELECT k, CAST(sum(a) AS DOUBLE) / count(*) AS r FROM t GROUP BY k", None),
        ("SELECT k, sum(a) / count(*) AS r FROM t GROUP BY k", {"t": {"k": "INT", "a": "INT"}}),
        ("SELECT k, r / 2 AS h FROM (SELECT k, sum(a) AS r FROM t GROUP BY k) AS s", None),
    ],
)
def test_exact_divisions_are_accepted_on_spark(view: str, schema: dict | None) -> None:
    _spark(view, schema=schema)
