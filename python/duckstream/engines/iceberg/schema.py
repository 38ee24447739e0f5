"""The columns of the tables a view reads, from a Spark session: ``compile_ivm``'s ``schema=``
in one call (``SELECT *`` over a base table and ``NATURAL JOIN`` need them).

Spark resolves ``t`` in the current catalog and namespace, ``db.t`` in the current catalog and
``cat.db.t`` as written; a CTE's name is not a table. Types are Spark's (``int``,
``decimal(10,2)``, ``string``), which sqlglot reads in the Spark dialect. Columns named
``_ivm_*`` are left out: ``*`` over a maintained view's table means its visible columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from duckstream.engines.iceberg.dialect import IcebergSpark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Columns = dict[str, dict[str, dict[str, dict[str, str]]]]  # catalog -> schema -> table -> type


def schema_of(
    spark: SparkSession, sql: str, *, catalog: str | None = None, schema: str | None = None
) -> Columns:
    """Columns and types of the tables ``sql`` (Spark SQL) reads, nested by catalog and
    namespace; tables that do not exist are left out (the compiler then names what it misses).

    Unqualified tables resolve in ``catalog``.``schema``: pass the ``mv_catalog`` and
    ``mv_schema`` given to ``compile_ivm`` (both default to the session's current ones).
    """
    if catalog is None or schema is None:
        row = spark.sql("SELECT current_catalog(), current_database()").first()
        assert row is not None
        catalog, schema = catalog or str(row[0]), schema or str(row[1])
    tree = sqlglot.parse_one(sql, dialect="spark")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    columns: Columns = {}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or (not table.db and table.name in ctes):
            continue  # a table function, or a CTE's name
        parts = (table.catalog or catalog, table.db or schema, table.name)
        name = ".".join(exp.to_identifier(p).sql(dialect=IcebergSpark) for p in parts)
        if not spark.catalog.tableExists(name):
            continue
        fields = spark.table(name).schema.fields
        columns.setdefault(parts[0], {}).setdefault(parts[1], {})[parts[2]] = {
            f.name: f.dataType.simpleString() for f in fields if not f.name.startswith("_ivm_")
        }
    return columns
