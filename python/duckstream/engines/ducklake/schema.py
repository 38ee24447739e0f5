"""The columns of the tables a view reads, from a DuckDB connection: ``compile_ivm``'s
``schema=`` in one call.

``SELECT *`` over a base table and ``NATURAL JOIN`` need the tables' columns, which the view's
text does not give. The catalog does:

>>> import duckdb
>>> con = duckdb.connect()
>>> _ = con.execute("CREATE TABLE orders (id INTEGER, amount DECIMAL(10, 2))")
>>> schema_of(con, "WITH o AS (SELECT * FROM orders) SELECT * FROM o")
{'memory': {'main': {'orders': {'id': 'INTEGER', 'amount': 'DECIMAL(10,2)'}}}}

Names resolve as DuckDB resolves them: ``a.b`` is schema ``a`` of the default catalog first,
then catalog ``a`` (schema ``main``); a CTE's name is not a table. Columns named ``_ivm_*``
are left out: ``*`` over a maintained view's table means its visible columns.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from duckstream.connection import Connection

TableKey = tuple[str, str, str]  # lower-cased (catalog, schema, table)
Columns = dict[str, dict[str, dict[str, dict[str, str]]]]  # catalog -> schema -> table -> type


def schema_of(
    con: Connection,
    sql: str,
    *,
    catalog: str | None = None,
    schema: str | None = None,
    dialect: str = "duckdb",
) -> Columns:
    """Columns and types of the tables ``sql`` reads, nested by catalog and schema.

    Unqualified tables resolve in ``catalog``.``schema``: pass the ``mv_catalog`` and
    ``mv_schema`` given to ``compile_ivm`` (both default to the connection's current ones).
    """
    if catalog is None or schema is None:
        row = con.execute("SELECT current_database(), current_schema()").fetchone()
        assert row is not None
        catalog, schema = catalog or row[0], schema or row[1]
    wanted = tables_read(sqlglot.parse_one(sql, dialect=dialect), catalog, schema)
    if not wanted:
        return {}
    keys = ", ".join("(?, ?, ?)" for _ in wanted)
    rows = con.execute(
        "SELECT c.database_name, c.schema_name, c.table_name, c.column_name, c.data_type"
        f" FROM duckdb_columns() AS c JOIN (VALUES {keys}) AS w(d, s, t)"
        " ON lower(c.database_name) = w.d AND lower(c.schema_name) = w.s"
        " AND lower(c.table_name) = w.t"
        " WHERE NOT starts_with(c.column_name, '_ivm_')"
        " ORDER BY c.database_name, c.schema_name, c.table_name, c.column_index",
        [part for key in sorted(wanted) for part in key],
    ).fetchall()
    columns: Columns = {}
    for database, schema_name, table_name, column, data_type in rows:
        tables = columns.setdefault(database, {}).setdefault(schema_name, {})
        tables.setdefault(table_name, {})[column] = data_type
    return columns


def tables_read(tree: exp.Expr, catalog: str, schema: str) -> set[TableKey]:
    """Every table ``tree`` may read, as each name may resolve (see :func:`candidates`)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return {
        key
        for table in tree.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier)  # not a table function
        for key in candidates(table, catalog, schema, ctes)
    }


def candidates(table: exp.Table, catalog: str, schema: str, ctes: set[str]) -> list[TableKey]:
    """What a table name can mean, in DuckDB's order (none for a CTE's name).

    >>> candidates(exp.to_table("s.t"), "lake", "main", set())
    [('lake', 's', 't'), ('s', 'main', 't')]
    """
    name = table.name.lower()
    if table.catalog:
        return [(table.catalog.lower(), table.db.lower(), name)]
    if table.db:
        return [(catalog.lower(), table.db.lower(), name), (table.db.lower(), "main", name)]
    if name in ctes:
        return []
    return [(catalog.lower(), schema.lower(), name)]
