"""Rewrite ``agg(x) FILTER (WHERE p)`` as ``agg(CASE WHEN p THEN x END)``.

COUNT(*) FILTER (WHERE p) counts the rows where p holds: ``COUNT(CASE WHEN p THEN 1 END)``.

>>> from sqlglot import parse_one
>>> rewrite_filtered_aggregates(parse_one("SELECT sum(x) FILTER (WHERE y > 1) FROM t")).sql()
'SELECT SUM(CASE WHEN y > 1 THEN x END) FROM t'
"""

from __future__ import annotations

from sqlglot import exp


def rewrite_filtered_aggregates(expression: exp.Expr) -> exp.Expr:
    def rewrite(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Filter) or not isinstance(node.this, exp.AggFunc):
            return node
        aggregate = node.this.copy()
        condition = (
            node.expression.this if isinstance(node.expression, exp.Where) else node.expression
        )
        arg = aggregate.this
        if isinstance(arg, exp.Distinct):
            inner = arg.expressions[0]
            arg.set(
                "expressions", [exp.Case(ifs=[exp.If(this=condition.copy(), true=inner.copy())])]
            )
            return aggregate
        value = exp.Literal.number(1) if arg is None or isinstance(arg, exp.Star) else arg
        aggregate.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())]))
        return aggregate

    return expression.transform(rewrite)
