"""Point at the line of a model that holds a construct the compiler cannot maintain.

The compiler names the construct and quotes it as SQL in backticks (after its own rewrites,
so the quote need not match the model's text). The construct is found again in the compiled
model SQL, by its quoted SQL or else by its kind, and its line there is mapped back to the
model file by the line's text (dbt's Jinja usually keeps lines where they were).

>>> from duckstream import UnsupportedSQLError
>>> error = UnsupportedSQLError("limit", "LIMIT/OFFSET depends on row order: `SELECT a LIMIT 3`")
>>> locate(error, "select a\\nfrom t\\nlimit 3", "select a\\nfrom {{ ref('t') }}\\nlimit 3")
3
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from duckstream.errors import UnsupportedSQLError
from duckstream.normalize.constant_relations import is_constant_relation

# What to look for when the quoted SQL is not found verbatim.
KINDS: dict[str, tuple[type[exp.Expr], ...]] = {
    "window_function": (exp.Window,),
    "outer_join": (exp.Join,),
    "subquery": (exp.Subquery, exp.Exists, exp.In),
    "limit": (exp.Limit, exp.Offset),
    "order_by": (exp.Order,),
    "set_operation": (exp.Union, exp.Except, exp.Intersect),
    "table_function": (exp.Lateral, exp.Unnest, exp.Values, exp.Table),
    "lateral_join": (exp.Join,),
    "grouping_sets": (exp.Cube, exp.Rollup, exp.GroupingSets),
}


def locate(
    error: UnsupportedSQLError, compiled_sql: str, raw_sql: str = "", dialect: str = "duckdb"
) -> int | None:
    """Line (1-based) of ``raw_sql`` (or of ``compiled_sql`` if not found there) holding the
    construct ``error`` is about; ``None`` when it is not in the model's own SQL (for example
    in a view the model reads)."""
    line = _line_in_compiled(error, compiled_sql, dialect)
    if line is None:
        return None
    if not raw_sql:
        return line
    return _map_to_raw(compiled_sql.splitlines()[line - 1], raw_sql, line) or line


def _line_in_compiled(error: UnsupportedSQLError, sql: str, dialect: str) -> int | None:
    try:
        tree = sqlglot.parse_one(sql, dialect=dialect)
    except SqlglotError:
        return None
    nodes = list(tree.walk())
    kinds = KINDS.get(error.feature, ())
    for node in nodes:
        if isinstance(node, kinds) and _is_construct(node):
            return _first_line(node)
    quoted = re.search(r"`([^`]+)`", error.message)
    if quoted:
        wanted = _normal(quoted.group(1))
        for node in nodes:
            if _normal(node.sql(dialect=dialect)) == wanted:
                return _first_line(node)
    return None


def _is_construct(node: exp.Expr) -> bool:
    """Skip the look-alikes of a kind: inner joins, ``IN`` over a list, plain tables."""
    if isinstance(node, exp.Join):
        return bool(node.side)
    if isinstance(node, exp.In):
        return node.args.get("query") is not None
    if isinstance(node, exp.Table | exp.Values):
        # a function in FROM, not a table; not a constant relation (VALUES, a series)
        return not isinstance(node.this, exp.Identifier) and not is_constant_relation(node)
    return True


def _normal(sql: str) -> str:
    return " ".join(sql.lower().split())


def _first_line(node: exp.Expr) -> int | None:
    lines = [n.meta["line"] for n in node.walk() if isinstance(n.meta, dict) and "line" in n.meta]
    return min(lines) if lines else None


def _map_to_raw(text: str, raw_sql: str, near: int) -> int | None:
    wanted = text.strip()
    if not wanted:
        return None
    matches = [i for i, line in enumerate(raw_sql.splitlines(), 1) if line.strip() == wanted]
    if not matches:
        return None
    return min(matches, key=lambda i: abs(i - near))
