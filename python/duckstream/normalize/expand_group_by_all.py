"""Spell out ``GROUP BY ALL``: group by each select-list item that reads a column outside any
aggregate, window function or subquery, as DuckDB does (Spark: the same, but see below).

Items with an aggregate (``count(*)``, ``sum(sum(x)) OVER ()``) or a window function are no
grouping keys; neither is an item that reads no column (``1 AS one``): DuckDB 1.5.5 leaves
constants out, so ``SELECT 1 AS one, count(*) FROM t GROUP BY ALL`` is a global aggregate (one
row over no rows). Spark would group by the constant (no row over no rows); only that case
differs, and the view keeps DuckDB's meaning.

The rest of the compiler reads the keys from ``GROUP BY``: left as ``ALL`` it saw none, and
built a global aggregate whose items read columns of no relation (DuckDB: ``Referenced table
"t" not found``). With no key left, the GROUP BY goes. ``ALL`` before grouping sets or keys
(``GROUP BY ALL a, CUBE (b)``: a set quantifier, not this) is left alone.

Runs after ``qualify_view``: the items are their resolved expressions, so a key means what the
item means (no alias to resolve again in GROUP BY, where an input column would win).

>>> from sqlglot import parse_one
>>> view = parse_one(
...     "SELECT t.g AS g, d.name AS name, 1 AS one, SUM(t.v) AS s, RANK() OVER (ORDER BY t.g) AS r"
...     " FROM t AS t JOIN dims AS d ON t.g = d.g GROUP BY ALL", read="duckdb")
>>> print(expand_group_by_all(view).sql("duckdb"))  # doctest: +NORMALIZE_WHITESPACE
SELECT t.g AS g, d.name AS name, 1 AS one, SUM(t.v) AS s, RANK() OVER (ORDER BY t.g) AS r
FROM t AS t JOIN dims AS d ON t.g = d.g GROUP BY t.g, d.name
>>> expand_group_by_all(parse_one("SELECT 1 AS one, COUNT(*) AS n FROM t GROUP BY ALL")).sql()
'SELECT 1 AS one, COUNT(*) AS n FROM t'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.helpers import is_implicit_group_by_all


def expand_group_by_all(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for select in list(expression.find_all(exp.Select)):
        if not is_implicit_group_by_all(select):
            continue
        keys = [item.unalias().copy() for item in select.expressions if _is_key(item)]
        select.set("group", exp.Group(expressions=keys) if keys else None)
    return expression


def _is_key(item: exp.Expr) -> bool:
    """Whether the item reads a column outside any aggregate or window (of its own SELECT)."""
    if _own(item, exp.AggFunc, exp.Window):
        return False
    return any(not isinstance(c.this, exp.Star) for c in _own(item, exp.Column))


def _own(item: exp.Expr, *kinds: type[exp.Expr]) -> list[exp.Expr]:
    """The nodes of ``kinds`` in the item, not in a subquery nested in it."""
    return [node for node in item.find_all(*kinds) if not _in_query(node, item)]


def _in_query(node: exp.Expr, item: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not item:
        if isinstance(parent, exp.Query):
            return True
        parent = parent.parent
    return False
