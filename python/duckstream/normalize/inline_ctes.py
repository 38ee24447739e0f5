"""Inline non-recursive CTEs as derived tables.

>>> from sqlglot import parse_one
>>> inline_ctes(parse_one("WITH c AS (SELECT a FROM t) SELECT a FROM c")).sql()
'SELECT a FROM (SELECT a FROM t) AS c'
"""

from __future__ import annotations

from sqlglot import exp


def inline_ctes(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for select in list(expression.find_all(exp.Select)):
        with_ = select.args.get("with_")
        if not with_:
            continue
        bodies = {cte.alias_or_name: cte.this for cte in with_.expressions}
        select.set("with_", None)

        def replace(node: exp.Expr, bodies: dict = bodies) -> exp.Expr:
            if isinstance(node, exp.Table) and not node.args.get("db") and node.name in bodies:
                alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
                return exp.Subquery(this=inline_ctes(bodies[node.name].copy()), alias=alias.copy())
            return node

        select.transform(replace, copy=False)
    return expression
