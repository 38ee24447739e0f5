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
from duckstream.engines.spark import IcebergEngine
from duckstream.spark.runtime import Statement
from test_smoke import VIEWS

PLACEHOLDER = re.compile(r"\$\{duckstream\.[a-z0-9_]+\.([a-z_]+)[0-9_]*\}")


def _spark(view: str, **kwargs):
    sql = sqlglot.transpile(view, read="duckdb", write="spark")[0]
    return compile_ivm(sql, dialect="spark", mv_catalog="lake", mv_schema="db", **kwargs)


def _substituted(sql: str) -> str:
    return PLACEHOLDER.sub(lambda m: "true" if m[1].startswith("changed") else "42", sql)


def test_spark_dialect_has_an_engine() -> None:
    assert isinstance(engine_for("spark"), IcebergEngine)


@pytest.mark.parametrize("name", sorted(set(VIEWS) - {"aggregate_expression"}))
def test_every_statement_is_spark_sql(name: str) -> None:
    plan = _spark(VIEWS[name])
    for text in [plan.create_cursors_table, plan.create_mv, *plan.initialize_cursors]:
        statement = Statement.parse(text)
        if statement.sql:
            sqlglot.parse_one(_substituted(statement.sql), read="spark")
    for text in plan.maintain:
        statement = Statement.parse(text)
        if statement.sql and not statement.sql.startswith(("CALL", "CACHE LAZY")):
            sqlglot.parse_one(_substituted(statement.sql), read="spark")


def test_the_mv_changes_in_one_commit_that_carries_every_cursor() -> None:
    plan = _spark("SELECT a.k, count(*) AS n FROM r AS a JOIN s AS b ON a.k = b.k GROUP BY a.k")
    writes = [
        Statement.parse(s)
        for s in plan.maintain
        if Statement.parse(s).sql.startswith(f"MERGE INTO {plan.mv_table} ")
    ]
    assert len(writes) == 1
    properties = [d for d in writes[0].directives if d.startswith("snapshot property")]
    assert [p.split()[2] for p in properties] == [
        "duckstream.cursor.lake.db.r",
        "duckstream.cursor.lake.db.s",
    ]
    (populate,) = [s for s in plan.initialize_cursors if f"INSERT OVERWRITE {plan.mv_table} " in s]
    assert Statement.parse(populate).directives == writes[0].directives


def test_nothing_changed_stops_before_any_work() -> None:
    plan = _spark(VIEWS["group_by"])
    directives = [Statement.parse(s).directives for s in plan.maintain]
    assert directives[0] == ["set"]
    assert directives[1][0].startswith("stop unless ${duckstream.lake_db_mv.changed}")
    assert all(d == ["finally"] for d in directives[-3:])


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
