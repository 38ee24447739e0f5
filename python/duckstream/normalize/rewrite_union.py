"""Rewrite ``A UNION B`` (distinct) as ``SELECT DISTINCT * FROM (A UNION ALL B)``: the DISTINCT
operator (or, at the top of the view, the grouped sink's row counts) then maintains it. A
chain ``A UNION B UNION C`` (or ``A UNION ALL B UNION C``: the outer DISTINCT removes the inner
duplicates too) becomes one DISTINCT over one stack of branches. Set operations in derived
tables and branches are rewritten the same way.

>>> from sqlglot import parse_one
>>> rewrite_union(parse_one("SELECT t.a AS a FROM t UNION SELECT u.b AS b FROM u")).sql()
'SELECT DISTINCT _ivm_u.a AS a FROM (SELECT t.a AS a FROM t UNION ALL SELECT u.b AS b FROM u) AS _ivm_u'
>>> rewrite_union(parse_one("SELECT a FROM t UNION ALL SELECT b FROM u UNION SELECT c FROM v")).sql()
'SELECT DISTINCT _ivm_u.a AS a FROM (SELECT a FROM t UNION ALL SELECT b FROM u UNION ALL SELECT c FROM v) AS _ivm_u'
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.expressions import map_children
from duckstream.normalize.wrap_set_operation import select_from


def rewrite_union(expression: exp.Expr) -> exp.Expr:
    return _rewrite(expression.copy())


def _rewrite(node: exp.Expr) -> exp.Expr:
    """``node`` with its distinct UNIONs rewritten, outermost first (in place)."""
    if isinstance(node, exp.Union) and node.args.get("distinct"):
        branches = _chain(node)
        stacked = _rewrite(branches[0])
        for branch in branches[1:]:
            branch = _rewrite(branch)
            if isinstance(branch, exp.SetOperation):  # keep its own operation together
                branch = exp.Subquery(this=branch)
            stacked = exp.union(stacked, branch, distinct=False)
        assert isinstance(stacked, exp.Query)
        return select_from(stacked, "_ivm_u", distinct=True)
    return map_children(node, _rewrite)


def _chain(union: exp.Union) -> list[exp.Expr]:
    """The branches of the UNION chain ending in ``union``, left to right: the left operand
    is followed down while it is a UNION of either kind (possibly in parentheses)."""
    rights = [union.expression]
    left = union.this
    while True:
        inner = left
        while isinstance(inner, exp.Subquery) and not inner.alias:
            inner = inner.this
        if not isinstance(inner, exp.Union):
            break
        rights.append(inner.expression)
        left = inner.this
    return [left, *reversed(rights)]
