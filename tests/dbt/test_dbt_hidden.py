"""duckstream's hidden ``_ivm_*`` columns stay out of what dbt sees of a maintained table."""

from __future__ import annotations

import doctest
from types import SimpleNamespace

import pytest

pytest.importorskip("dbt.adapters.duckdb", reason="needs dbt-core and dbt-duckdb")

from dbt.adapters.duckstream.impl import DuckstreamAdapter  # noqa: E402
from dbt.adapters.duckstream.ivm import ModelRequest, materialize  # noqa: E402
from dbt_duckstream import hidden  # noqa: E402


def test_docstring_examples() -> None:
    assert doctest.testmod(hidden).failed == 0


def _adapter(con) -> DuckstreamAdapter:
    """A duckstream adapter whose thread connection is ``con`` (no dbt project needed)."""
    adapter = DuckstreamAdapter.__new__(DuckstreamAdapter)
    handle = SimpleNamespace(cursor=lambda: con)
    connection = SimpleNamespace(handle=handle)
    adapter.connections = SimpleNamespace(get_thread_connection=lambda: connection)
    return adapter


def _relation(identifier: str) -> SimpleNamespace:
    return SimpleNamespace(database="dl", schema="main", identifier=identifier)


def test_duckdb_a_table_is_maintained_when_its_state_sits_beside_it(lake) -> None:
    lake.execute("CREATE TABLE dl.main.orders (id INTEGER, _ivm_note VARCHAR)")
    lake.execute("INSERT INTO dl.main.orders VALUES (1, 'mine')")
    sql = "SELECT id, count(*) AS n FROM dl.main.orders GROUP BY id"
    materialize(lake, ModelRequest("totals", "dl", "main", "totals", sql))
    adapter = _adapter(lake)
    assert adapter.ivm_maintained(_relation("totals"))
    assert not adapter.ivm_maintained(_relation("orders"))  # a user's table, _ivm_ or not
    columns = [
        SimpleNamespace(name=name)
        for (name,) in lake.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'totals'"
        ).fetchall()
    ]
    assert any(hidden.is_hidden(c.name) for c in columns)  # the table has hidden columns
    shown = hidden.visible(columns, lambda: adapter.ivm_maintained(_relation("totals")))
    assert [c.name for c in shown] == ["id", "n"]


def _describe_rows(columns: list[tuple[str, str]], properties: str):
    """``DESCRIBE TABLE EXTENDED`` of an Iceberg table as dbt-spark's macro returns it."""
    agate = pytest.importorskip("agate")
    rows = [(name, kind, None) for name, kind in columns]
    rows += [
        ("", "", ""),
        ("# Metadata Columns", "", ""),
        ("_spec_id", "int", ""),
        ("", "", ""),
        ("# Detailed Table Information", "", ""),
        ("Name", "lake.db.t", ""),
        ("Type", "MANAGED", ""),
        ("Provider", "iceberg", ""),
        ("Table Properties", properties, ""),
    ]
    return agate.Table(rows, ["col_name", "data_type", "comment"]).rows


def test_spark_columns_hide_ivm_columns_of_tables_with_duckstream_properties() -> None:
    pytest.importorskip("dbt.adapters.spark", reason="needs dbt-spark")
    from dbt.adapters.duckstream_spark.impl import DuckstreamSparkAdapter

    adapter = DuckstreamSparkAdapter.__new__(DuckstreamSparkAdapter)
    relation = SimpleNamespace(schema="db", name="t", type="table")
    columns = [("day", "date"), ("revenue", "decimal(12,2)"), ("_ivm_count", "bigint")]
    maintained = _describe_rows(
        columns, "[current-snapshot-id=7,duckstream.mode=ivm,format=iceberg/parquet]"
    )
    shown = adapter.parse_describe_extended(relation, maintained)
    assert [c.name for c in shown] == ["day", "revenue"]
    plain = _describe_rows(columns, "[current-snapshot-id=7,format=iceberg/parquet]")
    shown = adapter.parse_describe_extended(relation, plain)
    assert [c.name for c in shown] == ["day", "revenue", "_ivm_count"]
