"""Give every SELECT with window functions a FROM of its own: ``SELECT <items> FROM (SELECT
<the columns they read> FROM ... WHERE ...) AS _ivm_wi``, and wrap such a SELECT at the top of
the view in ``SELECT cols FROM (...) AS _ivm_w``.

A window function reads its whole partition. The operator that maintains it
(:mod:`duckstream.tree.window`) recomputes the partitions a change touches, over its input's
rows at the two snapshots: that input must be one relation whose rows it can restrict to those
partitions, not a join whose state an outer join may spread over several terms. A derived
table is that. At the top, the sinks take a plain SELECT block: the window SELECT becomes a
derived table under one.

Over a GROUP BY (or aggregates without one) the derived table is the aggregate itself, its
keys and aggregates named, and the windows read one row per group: ``sum(sum(x)) OVER ()``
is ``sum(_ivm_wi._ivm_a0) OVER ()`` over ``SELECT sum(x) AS _ivm_a0 ... GROUP BY ...``. A
DISTINCT SELECT with windows is a DISTINCT over the windows' rows, as SQL orders them.

Runs after ``qualify_view`` (columns are qualified, items aliased).

>>> from sqlglot import parse_one
>>> view = parse_one(
...     "SELECT t.id AS id, ROW_NUMBER() OVER (PARTITION BY t.g ORDER BY t.ts) AS n"
...     " FROM t WHERE t.v > 0")
>>> print(isolate_windows(view).sql())
SELECT _ivm_w.id AS id, _ivm_w.n AS n FROM (SELECT _ivm_wi._ivm_c0 AS id, ROW_NUMBER() OVER (PARTITION BY _ivm_wi._ivm_c1 ORDER BY _ivm_wi._ivm_c2) AS n FROM (SELECT t.id AS _ivm_c0, t.g AS _ivm_c1, t.ts AS _ivm_c2 FROM t WHERE t.v > 0) AS _ivm_wi) AS _ivm_w
>>> view = parse_one(
...     "SELECT t.g AS g, SUM(t.v) * 100 / SUM(SUM(t.v)) OVER () AS share FROM t GROUP BY t.g")
>>> print(isolate_windows(view).sql())
SELECT _ivm_w.g AS g, _ivm_w.share AS share FROM (SELECT _ivm_wi._ivm_c0 AS g, _ivm_wi._ivm_a0 * 100 / SUM(_ivm_wi._ivm_a0) OVER () AS share FROM (SELECT t.g AS _ivm_c0, SUM(t.v) AS _ivm_a0 FROM t GROUP BY t.g) AS _ivm_wi) AS _ivm_w
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import aliased, has_window, parents, rewrite_innermost_first
from duckstream.normalize.wrap_set_operation import select_from

INNER = "_ivm_wi"
OUTER = "_ivm_w"


def isolate_windows(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    selects = [s for s in expression.find_all(exp.Select) if has_window(s)]
    expression = rewrite_innermost_first(expression, selects, _isolate)
    if isinstance(expression, exp.Select) and has_window(expression):
        return select_from(expression, OUTER)
    return expression


def _isolate(select: exp.Select) -> exp.Select:
    if _is_isolated(select):
        return select
    return isolate(select)


def _is_isolated(select: exp.Select) -> bool:
    """Whether ``select`` already reads one derived table ``_ivm_wi`` and only selects (as
    :func:`isolate` leaves a SELECT over grouping sets, expanded under it)."""
    source = select.args.get("from_")
    plain = not any(select.args.get(k) for k in ("joins", "where", "group", "having", "distinct"))
    return (
        plain
        and source is not None
        and isinstance(source.this, exp.Subquery)
        and source.this.alias == INNER
    )


def isolate(select: exp.Select, grouping_keys: list[exp.Expr] | None = None) -> exp.Select:
    """``select`` (with windows) as ``SELECT <its items> FROM (<its input>) AS _ivm_wi``.

    ``grouping_keys``: ``select`` groups by grouping sets, of these expressions (every one any
    set names); the input then keeps ``select``'s own GROUP BY, for
    :mod:`~duckstream.normalize.expand_grouping_sets` to expand, and its ``GROUPING()`` calls.
    """
    if select.args.get("distinct"):
        # DISTINCT applies to the rows the windows numbered: a DISTINCT over them.
        plain = select.copy()
        plain.set("distinct", None)
        distinct = select_from(isolate(plain, grouping_keys), "_ivm_wd")
        distinct.set("distinct", exp.Distinct())
        return distinct
    grouped = bool(select.args.get("group") or select.args.get("having")) or any(
        _own_aggregates(item) for item in select.expressions
    )
    if grouped:
        inner, names = _grouped_input(select, grouping_keys)
    else:
        inner, names = _input(select)

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node.parent, exp.Window) and node.arg_key == "this":
            return node  # the window's own function, never a column of the input
        if isinstance(node, exp.Ordered):
            # its SQL may be its column's (`x NULLS FIRST` where that is the default):
            # renaming the column inside keeps the direction and NULL order
            return node
        name = names.get(node.sql())
        return exp.column(name, table=INNER) if name is not None else node

    items = [item.transform(rename) for item in select.expressions]
    if grouped:
        _check_grouped(select, items)
    return exp.select(*items).from_(aliased(inner, INNER))


def _input(select: exp.Select) -> tuple[exp.Select, dict[str, str]]:
    """The columns the items read, from the SELECT's FROM, joins and WHERE."""
    columns: dict[str, exp.Column] = {}
    for item in select.expressions:
        for column in item.find_all(exp.Column):
            if column.table:
                columns.setdefault(column.sql(), column)
    names = {key: f"_ivm_c{i}" for i, key in enumerate(columns)}
    inner = exp.select(*(exp.alias_(c.copy(), names[k]) for k, c in columns.items()))
    if not columns:  # windows that read no column (row_number() OVER (ORDER BY 1)): one row each
        inner = exp.select(exp.alias_(exp.Literal.number(1), "_ivm_one"))
    _copy_from(select, inner)
    return inner, names


def _grouped_input(
    select: exp.Select, grouping_keys: list[exp.Expr] | None = None
) -> tuple[exp.Select, dict[str, str]]:
    """The aggregate below the windows: the SELECT's grouping keys and its aggregates
    (outside windows, or a window's argument: ``sum(sum(x)) OVER ()``; ``GROUPING(a)`` is
    one), grouped and filtered as the SELECT is; the windows then read one row per group."""
    group = select.args.get("group")
    if grouping_keys is not None:
        keys = grouping_keys
    else:  # (a GROUP BY of an alias is qualified to its expression in parentheses;
        # GROUP BY ALL is expanded to its keys before: normalize.expand_group_by_all)
        keys = [key.unnest() for key in group.expressions] if group else []
    aggregates: dict[str, exp.Expr] = {}
    for item in select.expressions:
        for call in item.find_all(exp.AggFunc):
            if not _is_window_function(call) and not _in_query(call, item):
                aggregates.setdefault(call.sql(), call)
    names = {key.sql(): f"_ivm_c{i}" for i, key in enumerate(keys)}
    names.update({key: f"_ivm_a{i}" for i, key in enumerate(aggregates)})
    inner = exp.select(
        *(exp.alias_(k.copy(), names[k.sql()]) for k in keys),
        *(exp.alias_(a.copy(), names[key]) for key, a in aggregates.items()),
    )
    _copy_from(select, inner)
    if group is not None and grouping_keys is not None:  # the sets, for expand_grouping_sets
        inner.set("group", group.copy())
    elif group is not None:
        inner.set("group", exp.Group(expressions=[k.copy() for k in keys]) if keys else None)
    if select.args.get("having"):
        inner.set("having", select.args["having"].copy())
    return inner, names


def _copy_from(select: exp.Select, inner: exp.Select) -> None:
    inner.set("from_", select.args["from_"].copy())
    if select.args.get("joins"):
        inner.set("joins", [j.copy() for j in select.args["joins"]])
    if select.args.get("where"):
        inner.set("where", select.args["where"].copy())


def _check_grouped(select: exp.Select, items: list[exp.Expr]) -> None:
    """Every column the windows read over a GROUP BY must be a grouping key or inside an
    aggregate (else the SELECT itself is invalid SQL, or reads a key's part we did not keep)."""
    for item in items:
        for column in item.find_all(exp.Column):
            if column.table != INNER and not _in_query(column, item):
                raise UnsupportedSQLError(
                    "window_function",
                    "a window over GROUP BY may read the grouping keys (as written in GROUP BY)"
                    f" and aggregates only: `{column.sql()}` in `{select.sql()[:120]}`",
                )


def _in_query(node: exp.Expr, top: exp.Expr) -> bool:
    return any(isinstance(p, exp.Query) for p in parents(node, top))


def _is_window_function(call: exp.Expr) -> bool:
    """``sum(x)`` of ``sum(x) OVER (...)``; not an aggregate in its PARTITION BY."""
    return isinstance(call.parent, exp.Window) and call.arg_key == "this"


def _own_aggregates(item: exp.Expr) -> bool:
    """An aggregate outside any window (``sum(x)``, not ``sum(x) OVER (...)``)."""
    return any(
        not _is_window_function(a) and not any(isinstance(p, exp.Query) for p in parents(a, item))
        for a in item.find_all(exp.AggFunc)
    )
