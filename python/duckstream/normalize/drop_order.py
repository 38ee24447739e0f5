"""Drop ORDER BY without LIMIT: a table has no order, so it cannot change the view's rows.
The same for a set operation's ORDER BY (``... UNION ALL ... ORDER BY 1``). An ORDER BY that
chooses rows stays: with LIMIT / OFFSET (:mod:`.rewrite_top_k`) or DISTINCT ON
(:mod:`.rewrite_distinct_on`).

>>> from sqlglot import parse_one
>>> drop_order(parse_one("SELECT a FROM t ORDER BY a")).sql()
'SELECT a FROM t'
>>> drop_order(parse_one("SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1")).sql()
'SELECT a FROM t UNION ALL SELECT b FROM u'
"""

from __future__ import annotations

from sqlglot import exp


def drop_order(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for select in expression.find_all(exp.Select, exp.SetOperation):
        distinct = select.args.get("distinct")
        chooses = isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None
        chooses = chooses or select.args.get("limit") or select.args.get("offset")
        if select.args.get("order") and not chooses:
            select.set("order", None)
    return expression
