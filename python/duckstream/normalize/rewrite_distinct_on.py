"""DISTINCT ON as a window: the first row of each DISTINCT ON group in the ORDER BY, ties broken
by the output columns (:func:`.number_rows.number_rows`).

``SELECT DISTINCT ON (<on>) <items> FROM ... ORDER BY <keys>`` becomes ``SELECT
_ivm_first.<names> FROM (<rows numbered by keys, PARTITION BY <on>>) AS _ivm_first WHERE
_ivm_first._ivm_rank = 1``. The numbering is partitioned by the DISTINCT ON expressions, so a
change recomputes only the groups it touches (:mod:`duckstream.tree.window`). Spark has no
DISTINCT ON; the rewritten view runs there as it is.

Runs after ``qualify_view``; before :mod:`.rewrite_top_k`, which a LIMIT on the same SELECT
would need to apply after the DISTINCT ON: that combination is refused.

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT DISTINCT ON (t.k) t.k AS k, t.v AS v FROM t ORDER BY k, v DESC",
...     read="duckdb")
>>> print(rewrite_distinct_on(view).sql("duckdb"))
SELECT _ivm_first.k AS k, _ivm_first.v AS v FROM (SELECT _ivm_sorted.k AS k, _ivm_sorted.v AS v, ROW_NUMBER() OVER (PARTITION BY _ivm_sorted.k ORDER BY _ivm_sorted.k, _ivm_sorted.v DESC, _ivm_sorted.k, _ivm_sorted.v) AS _ivm_rank FROM (SELECT t.k AS k, t.v AS v FROM t) AS _ivm_sorted) AS _ivm_first WHERE _ivm_first._ivm_rank = 1
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import aliased, rewrite_innermost_first
from duckstream.normalize.number_rows import RANK, number_rows
from duckstream.normalize.wrap_set_operation import output_names

FIRST = "_ivm_first"


def rewrite_distinct_on(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    selects = [s for s in expression.find_all(exp.Select) if _distinct_on(s) is not None]
    return rewrite_innermost_first(expression, selects, _rewrite)


def _distinct_on(select: exp.Select) -> exp.Expr | None:
    distinct = select.args.get("distinct")
    return distinct.args.get("on") if distinct is not None else None


def _rewrite(select: exp.Select) -> exp.Select:
    on = _distinct_on(select)
    assert on is not None
    if select.args.get("limit") or select.args.get("offset"):
        raise UnsupportedSQLError(
            "distinct_on",
            "DISTINCT ON with LIMIT / OFFSET is not maintained: put the DISTINCT ON in a "
            f"derived table: `{select.sql()[:80]}`",
        )
    order = select.args.get("order")
    keys = [k.copy() for k in order.expressions] if order else []
    partition = list(on.expressions) if isinstance(on, exp.Tuple) else [on.unnest()]
    body = select.copy()
    body.set("distinct", None)
    body.set("order", None)
    numbered = number_rows(body, keys, [p.copy() for p in partition])
    items = [
        exp.alias_(exp.Column(this=n.copy(), table=exp.to_identifier(FIRST)), n.copy())
        for n in output_names(body)
    ]
    first = exp.EQ(this=exp.column(RANK, FIRST), expression=exp.Literal.number(1))
    return exp.select(*items).from_(aliased(numbered, FIRST)).where(first)
