"""Break the ties of a LATERAL subquery that chooses rows (ORDER BY ... LIMIT / OFFSET) by its
output columns, ascending, NULLs last (:func:`.number_rows.break_ties`, as the top-k views
do): the subquery is evaluated again for the rows it may change (``tree.lateral_subquery``)
and must then choose the rows it chose before, and the recomputation the same ones.

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT s.x FROM t, LATERAL (SELECT u.x, u.y FROM u WHERE u.k = t.k"
...     " ORDER BY u.y LIMIT 2) AS s")
>>> print(lateral_subqueries(view).sql())
SELECT s.x FROM t, LATERAL (SELECT u.x, u.y FROM u WHERE u.k = t.k ORDER BY u.y, 1 NULLS LAST, 2 NULLS LAST LIMIT 2) AS s
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.normalize.number_rows import break_ties


def lateral_subqueries(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for lateral in list(expression.find_all(exp.Lateral)):
        subquery = lateral.this
        if isinstance(subquery, exp.Subquery) and isinstance(subquery.this, exp.Select):
            query = subquery.this
            if query.args.get("limit") or query.args.get("offset"):
                subquery.set("this", break_ties(query))
    return expression
