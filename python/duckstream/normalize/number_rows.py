"""Number a SELECT's rows in an ORDER BY, ties broken by its output columns: the shared step
of :mod:`.rewrite_top_k` (ORDER BY ... LIMIT) and :mod:`.rewrite_distinct_on`.

``number_rows(select, keys, partition)`` gives ``SELECT _ivm_sorted.<names>, ROW_NUMBER()
OVER ([PARTITION BY <partition>] ORDER BY <keys>, <names>) AS _ivm_rank FROM (<select>) AS
_ivm_sorted``. An ORDER BY (or DISTINCT ON) expression that is not one of the output columns
is computed by the derived table as a hidden ``_ivm_key<i>`` column.

SQL lets an engine return any of the rows tied in the ORDER BY. Numbering them in the output
columns too (each ascending, NULLs last) makes the choice one valid answer that a recomputation
can reproduce: :func:`break_ties` adds the same tie-breakers to the user's own query, which is
how the tests and dbt's ``ivm_equivalent`` recompute a view that chooses rows. Rows equal in
every output column are interchangeable, so the choice is a function of the source rows.

>>> from sqlglot import parse_one
>>> select = parse_one("SELECT t.a AS a FROM t")
>>> keys = [parse_one("SELECT 1 ORDER BY t.b DESC").args["order"].expressions[0]]
>>> print(number_rows(select, keys).sql("duckdb"))
SELECT _ivm_sorted.a AS a, ROW_NUMBER() OVER (ORDER BY _ivm_sorted._ivm_key0 DESC, _ivm_sorted.a) AS _ivm_rank FROM (SELECT t.a AS a, t.b AS _ivm_key0 FROM t) AS _ivm_sorted
>>> print(break_ties(parse_one("SELECT a, b + 1 AS c FROM t ORDER BY b DESC LIMIT 2")).sql("duckdb"))
SELECT a, b + 1 AS c FROM t ORDER BY b DESC, 1, 2 LIMIT 2
"""  # noqa: E501

from __future__ import annotations

import sqlglot
from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import aliased
from duckstream.normalize.wrap_set_operation import output_names

SORTED = "_ivm_sorted"
RANK = "_ivm_rank"


def number_rows(
    select: exp.Select, keys: list[exp.Ordered], partition: list[exp.Expr] | None = None
) -> exp.Select:
    """``select`` (qualified, without ORDER BY / LIMIT) with its rows numbered by ``keys``
    (its ORDER BY items) within ``partition`` (expressions over its sources or outputs)."""
    inner = select.copy()
    names = output_names(inner)
    hidden: list[exp.Expr] = []

    def resolve(expression: exp.Expr) -> exp.Column:
        name = _output_named(expression, inner, names)
        if name is None:
            if inner.args.get("distinct"):
                raise UnsupportedSQLError(
                    "limit",
                    "a SELECT DISTINCT may order and choose rows only by its output columns: "
                    f"`{expression.sql()}`",
                )
            name = exp.to_identifier(f"_ivm_key{len(hidden)}")
            hidden.append(exp.alias_(_spell_out(expression, inner), name))
        return exp.Column(this=name.copy(), table=exp.to_identifier(SORTED))

    order = [_ordered(resolve(k.this), k) for k in keys]
    by = [resolve(e) for e in partition or []]
    if hidden:
        inner.select(*hidden, copy=False)
    ties = [exp.Ordered(this=_column(n), nulls_first=False) for n in names]
    number = exp.Window(
        this=exp.RowNumber(),
        partition_by=by or None,
        order=exp.Order(expressions=order + ties),
    )
    items = [exp.alias_(_column(n), n.copy()) for n in names]
    return exp.select(*items, exp.alias_(number, RANK)).from_(aliased(inner, SORTED))


def _spell_out(expression: exp.Expr, select: exp.Select) -> exp.Expr:
    """``expression`` with each unqualified name of an output that is a source column of
    that name (``t.a AS a``) written as that column. Either reading of such a name (the
    output, the source column) is the same value; qualified, a later rewrite recognises it
    (expand_grouping_sets writes NULL for a column its grouping set leaves out).

    >>> from sqlglot import parse_one
    >>> select = parse_one("SELECT t.a AS a, -t.b AS b FROM t")
    >>> _spell_out(parse_one("a + b"), select).sql()
    't.a + b'
    """
    columns = {
        item.alias: item.this
        for item in select.expressions
        if isinstance(item, exp.Alias)
        and isinstance(item.this, exp.Column)
        and item.this.name == item.alias
    }

    def spell(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in columns:
            return columns[node.name].copy()
        return node

    return expression.transform(spell)


def _column(name: exp.Identifier) -> exp.Column:
    return exp.Column(this=name.copy(), table=exp.to_identifier(SORTED))


def _ordered(column: exp.Column, like: exp.Ordered) -> exp.Ordered:
    return exp.Ordered(
        this=column, desc=like.args.get("desc"), nulls_first=like.args.get("nulls_first")
    )


def _output_named(
    expression: exp.Expr, select: exp.Select, names: list[exp.Identifier]
) -> exp.Identifier | None:
    """The output column ``expression`` names (a bare alias) or computes, if any."""
    if isinstance(expression, exp.Column) and not expression.table:
        for name in names:
            if name.name.lower() == expression.name.lower():
                return name
    for item, name in zip(select.expressions, names, strict=True):
        if item.unalias().unnest() == expression.unnest():  # `(x)` is `x`
            return name
    return None


def break_ties(expression: exp.Expr, width: int | None = None) -> exp.Expr:
    """Append to every ORDER BY that chooses rows (with LIMIT / OFFSET, or under DISTINCT ON)
    the output columns, ascending, NULLs last: the tie-break :func:`number_rows` maintains.

    The columns are appended by position, but under DISTINCT ON as the items' expressions
    (they stay meaningful where a DISTINCT ON becomes a window, as on Spark), except a window
    item's. (Spark refuses an aggregate's expression in the ORDER BY of a ROLLUP with HAVING
    and windows: positions it takes.) ``width``: the number of the view's output columns,
    where a ``*`` hides it.
    """
    expression = expression.copy()
    for query in expression.find_all(exp.Select, exp.SetOperation):
        distinct = query.args.get("distinct")
        on = isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None
        if not (on or query.args.get("limit") or query.args.get("offset")):
            continue
        if isinstance(query.parent, exp.Exists) and not (on or query.args.get("offset")):
            continue  # EXISTS (... LIMIT k): chooses nothing (and Spark refuses its ORDER BY)
        ties = _tie_breakers(query, width if query is expression else None, on)
        if ties is None:
            continue
        order = query.args.get("order")
        keys = list(order.expressions) if order else []
        query.set(
            "order",
            exp.Order(expressions=keys + [exp.Ordered(this=t, nulls_first=False) for t in ties]),
        )
    return expression


def _tie_breakers(query: exp.Expr, width: int | None, on: bool) -> list[exp.Expr] | None:
    first = query
    while isinstance(first, exp.SetOperation | exp.Subquery):
        first = first.this
    assert isinstance(first, exp.Select)
    items = first.expressions
    if any(isinstance(e, exp.Star) or e.is_star for e in items):
        return None if width is None else [exp.Literal.number(i + 1) for i in range(width)]
    return [
        exp.Literal.number(i + 1)
        if not on or query is not first or item.find(exp.Window)
        else item.unalias().copy()
        for i, item in enumerate(items)
    ]


def break_ties_sql(sql: str, dialect: str, width: int | None = None) -> str:
    """:func:`break_ties` on SQL text; text that chooses no rows comes back unchanged."""
    lowered = sql.lower()
    if "limit" not in lowered and "offset" not in lowered and "distinct on" not in lowered:
        return sql
    return break_ties(sqlglot.parse_one(sql, read=dialect), width).sql(dialect=dialect)
