"""Give every SELECT with window functions a FROM of its own: ``SELECT <items> FROM (SELECT
<the columns they read> FROM ... WHERE ...) AS _ivm_wi``, and wrap such a SELECT at the top of
the view in ``SELECT cols FROM (...) AS _ivm_w``.

A window function reads its whole partition. The operator that maintains it
(:mod:`duckstream.tree.window`) recomputes the partitions a change touches, over its input's
rows at the two snapshots: that input must be one relation whose rows it can restrict to those
partitions, not a join whose state an outer join may spread over several terms. A derived
table is that. At the top, the sinks take a plain SELECT block: the window SELECT becomes a
derived table under one.

Runs after ``qualify_view`` (columns are qualified, items aliased). Windows over GROUP BY
(``sum(sum(x)) OVER (...)``) and DISTINCT with windows are refused for now.

>>> from sqlglot import parse_one
>>> view = parse_one(
...     "SELECT t.id AS id, ROW_NUMBER() OVER (PARTITION BY t.g ORDER BY t.ts) AS n"
...     " FROM t WHERE t.v > 0")
>>> print(isolate_windows(view).sql())
SELECT _ivm_w.id AS id, _ivm_w.n AS n FROM (SELECT _ivm_wi._ivm_c0 AS id, ROW_NUMBER() OVER (PARTITION BY _ivm_wi._ivm_c1 ORDER BY _ivm_wi._ivm_c2) AS n FROM (SELECT t.id AS _ivm_c0, t.g AS _ivm_c1, t.ts AS _ivm_c2 FROM t WHERE t.v > 0) AS _ivm_wi) AS _ivm_w
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.normalize.wrap_set_operation import select_from
from duckstream.tree.base import aliased

INNER = "_ivm_wi"
OUTER = "_ivm_w"


def has_window(select: exp.Select) -> bool:
    """Whether ``select``'s own items hold a window function (not a nested query's)."""
    return any(_own_windows(item) for item in select.expressions)


def _own_windows(node: exp.Expr) -> list[exp.Window]:
    return [
        w
        for w in node.find_all(exp.Window)
        if not any(isinstance(p, exp.Query) for p in _parents(w, node))
    ]


def _parents(node: exp.Expr, top: exp.Expr) -> list[exp.Expr]:
    found, parent = [], node.parent
    while parent is not None and parent is not top:
        found.append(parent)
        parent = parent.parent
    return found


def isolate_windows(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    selects = [s for s in expression.find_all(exp.Select) if has_window(s)]
    for select in reversed(selects):  # innermost first
        isolated = _isolate(select)
        if select is expression:
            expression = isolated
        else:
            select.replace(isolated)
    if isinstance(expression, exp.Select) and has_window(expression):
        return select_from(expression, OUTER)
    return expression


def _isolate(select: exp.Select) -> exp.Select:
    text = select.sql()[:120]
    if select.args.get("group") or select.args.get("having"):
        raise UnsupportedSQLError(
            "window_function", f"window functions over GROUP BY are not maintained: `{text}`"
        )
    if any(_own_aggregates(item) for item in select.expressions):
        raise UnsupportedSQLError(
            "window_function", f"window functions beside aggregates are not maintained: `{text}`"
        )
    if select.args.get("distinct"):
        raise UnsupportedSQLError(
            "window_function", f"SELECT DISTINCT with window functions is not maintained: `{text}`"
        )
    columns: dict[str, exp.Column] = {}
    for item in select.expressions:
        for column in item.find_all(exp.Column):
            if column.table:
                columns.setdefault(column.sql(), column)
    names = {key: f"_ivm_c{i}" for i, key in enumerate(columns)}
    inner = exp.select(*(exp.alias_(c.copy(), names[k]) for k, c in columns.items()))
    inner.set("from_", select.args["from_"].copy())
    for key in ("joins", "where"):
        if select.args.get(key):
            inner.set(
                key,
                select.args[key].copy() if key == "where" else [j.copy() for j in select.args[key]],
            )

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.sql() in names:
            return exp.column(names[node.sql()], table=INNER)
        return node

    items = [item.copy().transform(rename) for item in select.expressions]
    return exp.select(*items).from_(aliased(inner, INNER))


def _own_aggregates(item: exp.Expr) -> bool:
    """An aggregate outside any window (``sum(x)``, not ``sum(x) OVER (...)``)."""
    return any(
        not isinstance(a.parent, exp.Window)
        and not any(isinstance(p, exp.Query) for p in _parents(a, item))
        for a in item.find_all(exp.AggFunc)
    )
