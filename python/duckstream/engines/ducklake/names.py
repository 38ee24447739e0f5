"""How a view's table and schema names find their rows in DuckLake's catalog tables.

DuckDB resolves table and schema names case-insensitively, quoted or not (``orders``,
``ORDERS`` and ``"Orders"`` are one table; two names differing only in case cannot coexist
in one schema), and DuckLake's table functions (``ducklake_table_insertions(catalog, schema,
table, ...)``) do the same. The catalog's metadata tables (``ducklake_table.table_name``,
``ducklake_schema.schema_name``) store the spelling of the ``CREATE`` statement, so a lookup
there must compare case-insensitively too, never with ``=``.

>>> same_name("t.table_name", "Orders")
"lower(t.table_name) = lower('Orders')"
"""

from __future__ import annotations

from duckstream.connection import literal as _lit


def quote(name: str) -> str:
    """An SQL identifier quoted, its quotes doubled.

    >>> print(quote('a"b'))
    "a""b"
    """
    return '"' + name.replace('"', '""') + '"'


def table_sql(source: str) -> str:
    """The SQL name of a source given by its full name ``catalog.schema.table``.

    >>> table_sql("lake.main.Orders")
    '"lake"."main"."Orders"'
    """
    return ".".join(quote(part) for part in source.split(".", 2))


def same_name(column: str, name: str) -> str:
    """A predicate: the catalog column ``column`` (SQL) holds ``name`` as DuckDB matches it."""
    return f"lower({column}) = lower({_lit(name)})"


def same_names(left: str, right: str) -> str:
    """A predicate: two SQL expressions of names match as DuckDB matches names."""
    return f"lower({left}) = lower({right})"
