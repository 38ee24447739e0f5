"""The one interface duckstream needs from a DuckDB connection, and SQL string literals."""

from __future__ import annotations

from typing import Any, Protocol

from sqlglot import exp


class Connection(Protocol):
    """A DuckDB connection (``duckdb.DuckDBPyConnection`` or a wrapper recording its SQL)."""

    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


def literal(value: str, dialect: str = "duckdb") -> str:
    r"""``value`` as an SQL string literal of ``dialect``.

    >>> print(literal("it's"), literal("it's", "spark"))
    'it''s' 'it\'s'
    """
    return exp.Literal.string(value).sql(dialect=dialect)
