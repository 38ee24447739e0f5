"""Turn an EXISTS correlated by one inequality into a quantified comparison (``ANY``).

``EXISTS (SELECT ... FROM s WHERE s.k = r.k AND s.v > r.x AND p)`` asks whether some ``v`` of
its group (``s.k = r.k AND p``) is above ``r.x``: ``r.x < ANY (SELECT s.v FROM s WHERE s.k = r.k
AND p)``, a subquery correlated by equalities alone, which
:mod:`~duckstream.normalize.decorrelate_subqueries` joins as one table grouped by ``s.k``, with
the group's counts and least and greatest ``v`` (``r.x < max``; ``<>``: ``r.x`` differs from the
least or the greatest). Without this rewrite the inequality makes it join the subquery to every
distinct outer value, a join by ``s.k`` that pairs each outer row with its whole group (TPC-H
Q21: lineitem with itself per order, 10x the recomputation and seconds to maintain at SF 1).

- ``inner op outer`` is ``outer op' ANY (SELECT inner ...)``, ``op'`` the mirrored operator
  (``>`` becomes ``<``; ``<>`` stays); ``outer op inner`` the same with ``op`` itself.
- NULLs: ANY is UNKNOWN where EXISTS is FALSE (no value passes, and ``outer`` or a value is
  NULL); ``COALESCE(..., FALSE)`` keeps the result TRUE or FALSE as EXISTS is, so that ``NOT``
  of it means NOT EXISTS.
- Taken only where it is plainly right: EXISTS in a WHERE, over a SELECT without GROUP BY,
  HAVING, LIMIT, aggregates or nested queries, correlated by equalities and exactly one other
  comparison of inner columns with outer ones (columns, literals and arithmetic on each side).
  Anything else is left to :mod:`~duckstream.normalize.decorrelate_subqueries`.

>>> from sqlglot import parse_one
>>> def show(sql):
...     print(aggregate_inequalities(parse_one(sql)).sql())
>>> show("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.v > r.x)")
SELECT r.a FROM r WHERE COALESCE(r.x < ANY (SELECT s.v FROM s WHERE s.k = r.k), FALSE)
>>> show("SELECT r.a FROM r WHERE NOT EXISTS (SELECT * FROM s WHERE s.k = r.k AND r.x <> s.v)")
SELECT r.a FROM r WHERE NOT COALESCE(r.x <> ANY (SELECT s.v FROM s WHERE s.k = r.k), FALSE)
>>> show("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.v > r.x AND s.w < r.y)")
SELECT r.a FROM r WHERE EXISTS(SELECT 1 FROM s WHERE s.v > r.x AND s.w < r.y)
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.expressions import conjuncts
from duckstream.normalize.correlation import (
    comparison_of_columns,
    equality,
    outer_columns,
    side_of,
    source_names,
)

# the mirrored operator: ``a op b`` is ``b op' a``
_MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.NEQ: exp.NEQ,
}
_CLAUSES = ("group", "having", "limit", "offset", "qualify", "windows", "with_")


def aggregate_inequalities(expression: exp.Expr) -> exp.Expr:
    return expression.transform(_rewrite)


def _rewrite(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Exists) or not isinstance(
        node.find_ancestor(exp.Where, exp.Select), exp.Where
    ):
        return node
    query = node.this
    while isinstance(query, (exp.Subquery, exp.Paren)) and not query.alias:
        query = query.this
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in _CLAUSES):
        return node
    if query.find(exp.AggFunc, exp.Window) or any(
        q is not query for q in query.find_all(exp.Query)
    ):
        return node
    where = query.args.get("where")
    outer = outer_columns(query)
    enclosing = node.find_ancestor(exp.Select)
    if where is None or not outer or enclosing is None:
        return node
    if any(c.table not in source_names(enclosing) for c in outer):
        return node  # correlated to a query further out: left to be refused as such
    references = {id(c) for c in outer}
    kept, inequalities, seen = [], [], set()
    for conjunct in conjuncts(where.this):
        refs = {id(c) for c in conjunct.find_all(exp.Column)} & references
        seen |= refs
        if refs and equality(conjunct, refs) is None:
            inequalities.append(conjunct)
        else:
            kept.append(conjunct)
    if seen != references or len(inequalities) != 1:
        return node  # an outer column outside the WHERE, or not one inequality
    found = _inner_and_outer(inequalities[0], references)
    if found is None:
        return node
    op, inner, value = found
    select = query.copy()
    select.set("expressions", [inner.copy()])
    select.set("where", exp.Where(this=exp.and_(*(c.copy() for c in kept))) if kept else None)
    select.set("distinct", None)
    # inner op outer is outer op' inner: some inner value passes iff outer op' ANY of them
    some = _MIRRORED[op](this=value.copy(), expression=exp.Any(this=exp.Subquery(this=select)))
    return exp.Coalesce(this=some, expressions=[exp.false()])


def _inner_and_outer(
    conjunct: exp.Expr, references: set[int]
) -> tuple[type[exp.Expr], exp.Expr, exp.Expr] | None:
    """``(op, inner side, outer side)`` of ``inner op outer`` (either way round): one side
    reading only the subquery's columns, the other only the outer query's."""
    while isinstance(conjunct, exp.Paren):
        conjunct = conjunct.this
    if type(conjunct) not in _MIRRORED or not comparison_of_columns(conjunct):
        return None
    sides = side_of(conjunct.this, references), side_of(conjunct.expression, references)
    if sides == ("inner", "outer"):
        return type(conjunct), conjunct.this, conjunct.expression
    if sides == ("outer", "inner"):
        return _MIRRORED[type(conjunct)], conjunct.expression, conjunct.this
    return None
