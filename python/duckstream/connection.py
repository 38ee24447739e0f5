"""The one interface duckstream needs from a DuckDB connection, and SQL string literals."""

from __future__ import annotations

import functools
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
    if len(value) > _CACHED_LENGTH:  # one of a kind (a history entry): not worth keeping
        return _literal(value, dialect)
    return _cached_literal(value, dialect)


def _literal(value: str, dialect: str) -> str:
    return exp.Literal.string(value).sql(dialect=dialect)


# A refresh renders the same few names as literals every time (its window variable, view,
# sources, catalogs: ~9 per refresh, ~0.2 ms each through sqlglot's generator, DuckDB 1.5.5's
# one-row refresh spends ~2 ms CPU on them): kept, as the strings they render to.
_CACHED_LENGTH = 512
_cached_literal = functools.lru_cache(maxsize=4096)(_literal)
