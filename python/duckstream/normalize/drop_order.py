"""Drop ORDER BY without LIMIT: a table has no order, so it cannot change the view's rows.

>>> from sqlglot import parse_one
>>> drop_order(parse_one("SELECT a FROM t ORDER BY a")).sql()
'SELECT a FROM t'
"""

from __future__ import annotations

from sqlglot import exp


def drop_order(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for select in expression.find_all(exp.Select):
        if select.args.get("order") and not select.args.get("limit"):
            select.set("order", None)
    return expression
