"""What the TPC-H and TPC-DS test data share: DuckDB's generators (the ``tpch`` extension's
``dbgen``, the ``tpcds`` extension's ``dsdgen``) copied into a DuckLake catalog in one commit,
their query texts and table schemas, and the small SQL helpers their change workloads use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager

import duckdb

from duckstream.testing.ducklake import load_extension, quote

Counts = dict[str, dict[str, int]]  # per table: rows inserted, deleted, updated
Workload = Callable[..., Counts]

# The extension and its generator procedure.
GENERATORS = {"tpch": "dbgen", "tpcds": "dsdgen"}

_GEN_CATALOG = "__duckstream_gen"


def load_generated(
    con: duckdb.DuckDBPyConnection,
    extension: str,
    tables: Sequence[str],
    catalog: str,
    scale_factor: float,
    schema: str = "main",
) -> None:
    """Generate ``extension``'s data at ``scale_factor`` into a scratch in-memory catalog and
    copy ``tables`` into ``catalog.schema`` in one DuckLake commit."""
    with generated(con, extension, scale_factor) as scratch, transaction(con):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(catalog)}.{quote(schema)}")
        for table in tables:
            con.execute(
                f"CREATE TABLE {quote(catalog)}.{quote(schema)}.{table} AS "
                f"SELECT * FROM {scratch}.main.{table}"
            )


@contextmanager
def generated(
    con: duckdb.DuckDBPyConnection, extension: str, scale_factor: float
) -> Generator[str]:
    """``extension``'s data at ``scale_factor`` in a scratch in-memory catalog attached to
    ``con`` while the block runs; yields the catalog's (quoted) name."""
    load_extension(con, extension)
    con.execute(f"ATTACH ':memory:' AS {quote(_GEN_CATALOG)}")
    try:
        con.execute(
            f"CALL {GENERATORS[extension]}(sf = ?, catalog = ?)", [scale_factor, _GEN_CATALOG]
        )
        yield quote(_GEN_CATALOG)
    finally:
        con.execute(f"DETACH {quote(_GEN_CATALOG)}")


@functools.cache
def query_texts(extension: str) -> dict[int, str]:
    """``extension``'s query texts by number (``tpch_queries()`` / ``tpcds_queries()``)."""
    with duckdb.connect() as con:
        load_extension(con, extension)
        return dict(con.execute(f"SELECT query_nr, query FROM {extension}_queries()").fetchall())


@functools.cache
def generated_schema(extension: str) -> dict[str, dict[str, str]]:
    """The tables' columns and types (``compile_ivm``'s ``schema=``), from an empty
    generation."""
    with duckdb.connect() as con:
        load_extension(con, extension)
        con.execute(f"CALL {GENERATORS[extension]}(sf = 0)")
        schema: dict[str, dict[str, str]] = {}
        for table, column, data_type in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns()"
            " WHERE database_name = current_database() ORDER BY table_name, column_index"
        ).fetchall():
            schema.setdefault(table, {})[column] = data_type
        return schema


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Generator[None]:
    """One commit (one DuckLake snapshot), rolled back on any error."""
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """``sql``'s one integer (a count, a maximum; NULL is 0)."""
    row = con.execute(sql).fetchone()
    assert row is not None
    return int(row[0] or 0)


def counts(table: str, inserted: int = 0, deleted: int = 0, updated: int = 0) -> Counts:
    return {table: {"inserted": inserted, "deleted": deleted, "updated": updated}}


def merge(*parts: Counts) -> Counts:
    """The sum of several workloads' counts."""
    out: Counts = {}
    for part in parts:
        for table, per_table in part.items():
            slot = out.setdefault(table, {"inserted": 0, "deleted": 0, "updated": 0})
            for key, value in per_table.items():
                slot[key] += value
    return out
