"""Factor the conjuncts every branch of an OR shares out of it: ``(a AND b) OR (a AND c)``
is ``a AND (b OR c)``.

SQL's three-valued AND and OR distribute over each other as two-valued ones do (Kleene's logic
is a distributive lattice: check ``a`` FALSE, NULL, TRUE), so the two mean the same on every
row, NULLs included. The point is correlation: a subquery correlated as ``(i.m = o.m AND
i.color = 'red') OR (i.m = o.m AND i.size = 'L')`` (TPC-DS Q41) is correlated by the
equality ``i.m = o.m`` once factored out, which
:mod:`~duckstream.normalize.decorrelate_subqueries` turns into a join key.

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT * FROM t WHERE (a = 1 AND b = 2 AND c) OR (b = 2 AND a = 1 AND d)")
>>> factor_disjunctions(view).sql()
'SELECT * FROM t WHERE a = 1 AND b = 2 AND (c OR d)'
>>> factor_disjunctions(parse_one("SELECT * FROM t WHERE (a AND b) OR a")).sql()
'SELECT * FROM t WHERE a'
>>> factor_disjunctions(parse_one("SELECT * FROM t WHERE (a AND b) OR c")).sql()
'SELECT * FROM t WHERE (a AND b) OR c'
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.expressions import conjuncts


def factor_disjunctions(expression: exp.Expr) -> exp.Expr:
    return expression.transform(_factor)


def _factor(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Or) or isinstance(node.parent, exp.Or):
        return node  # the whole OR chain is taken at its top
    branches = [conjuncts(b) for b in node.flatten()]  # (flatten unnests parentheses)
    # (a common random() would be drawn once, not per branch: validate refused it already)
    common = [c for c in branches[0] if all(any(c == d for d in b) for b in branches[1:])]
    if not common:
        return node
    rests = [[c for c in b if not any(c == k for k in common)] for b in branches]
    if any(not rest for rest in rests):
        # one branch is the common part alone: (a AND b) OR a is a (absorption)
        return exp.and_(*(c.copy() for c in common))
    either = exp.or_(*(_and(rest) for rest in rests))
    return exp.and_(*(c.copy() for c in common), exp.paren(either))


def _and(conjuncts: list[exp.Expr]) -> exp.Expr:
    if len(conjuncts) == 1:
        return conjuncts[0].copy()
    return exp.paren(exp.and_(*(c.copy() for c in conjuncts)))
