"""ORDER BY ... LIMIT / OFFSET (top-k), at the top or in a derived table, as a window: number
the rows in the ORDER BY (:func:`.number_rows.number_rows`, ties broken by the output columns)
and keep those whose number falls in the range.

``SELECT <items> FROM ... ORDER BY <keys> LIMIT k OFFSET m`` becomes ``SELECT _ivm_top.<names>
FROM (<numbered>) AS _ivm_top WHERE _ivm_top._ivm_rank > m AND _ivm_top._ivm_rank <= m + k``
(``m`` = 0 without OFFSET).
A set operation's ORDER BY ... LIMIT numbers the rows of ``SELECT ... FROM (<set operation>)``.
``FETCH FIRST k ROWS ONLY`` is ``LIMIT k``. Under EXISTS, ``LIMIT k >= 1`` changes nothing and is
dropped. A correlated subquery with LIMIT is refused.

What it costs: the numbering has no PARTITION BY, so :mod:`duckstream.tree.window` recomputes
the whole ordered input (the SELECT without its LIMIT) at the two snapshots whenever a change
reaches it, and applies the difference of the two top-k's. The view's table holds only the k
rows; the plan says ``window_recomputes_whole_input``.

Runs after ``qualify_view`` (items aliased, ORDER BY naming aliases or source columns).

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT t.a AS a FROM t ORDER BY a DESC LIMIT 3 OFFSET 1")
>>> print(rewrite_top_k(view).sql("duckdb"))
SELECT _ivm_top.a AS a FROM (SELECT _ivm_sorted.a AS a, ROW_NUMBER() OVER (ORDER BY _ivm_sorted.a DESC, _ivm_sorted.a) AS _ivm_rank FROM (SELECT t.a AS a FROM t) AS _ivm_sorted) AS _ivm_top WHERE _ivm_top._ivm_rank > 1 AND _ivm_top._ivm_rank <= 4
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import aliased, rewrite_innermost_first
from duckstream.normalize.number_rows import RANK, number_rows
from duckstream.normalize.wrap_set_operation import output_names, select_from

TOP = "_ivm_top"


def rewrite_top_k(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    limited = [
        q
        for q in expression.find_all(exp.Select, exp.SetOperation)
        if (q.args.get("limit") or q.args.get("offset")) and not _lateral(q)
    ]
    return rewrite_innermost_first(expression, limited, _rewrite)


def _rewrite(query: exp.Select | exp.SetOperation) -> exp.Query:
    count = _count(query, query.args.get("limit"))
    skip = _count(query, query.args.get("offset")) or 0
    if isinstance(query.parent, exp.Exists) and not skip and count:
        # EXISTS asks only whether a row exists: LIMIT k >= 1 cannot change that
        body = query.copy()
        for arg in ("order", "limit", "offset"):
            body.set(arg, None)
        return body
    if _correlated(query):
        raise UnsupportedSQLError(
            "subquery",
            f"a correlated subquery with LIMIT / OFFSET is not maintained: `{query.sql()[:80]}`",
        )
    order = query.args.get("order")
    keys = [k.copy() for k in order.expressions] if order else []
    body = query.copy()
    for arg in ("order", "limit", "offset"):
        body.set(arg, None)
    if isinstance(body, exp.SetOperation):
        body = select_from(body, "_ivm_set")
        for key in keys:  # the set operation's ORDER BY names its output columns
            for column in key.find_all(exp.Column):
                column.set("table", exp.to_identifier("_ivm_set"))
    numbered = number_rows(body, keys)
    rank = exp.column(RANK, TOP)
    # `_ivm_rank > 0` even without OFFSET: DuckDB 1.5.5 turns `ROW_NUMBER() OVER (ORDER BY
    # ...) <= 1` into an ungrouped arg_min, which returns a row of NULLs over no rows (its
    # top_n_window_elimination optimizer); the range form is not rewritten
    kept: list[exp.Expr] = [exp.GT(this=rank, expression=exp.Literal.number(skip))]
    if count is not None:
        kept.append(exp.LTE(this=rank.copy(), expression=exp.Literal.number(skip + count)))
    items = [
        exp.alias_(exp.Column(this=n.copy(), table=exp.to_identifier(TOP)), n.copy())
        for n in output_names(body)
    ]
    return exp.select(*items).from_(aliased(numbered, TOP)).where(exp.and_(*kept))


def _lateral(query: exp.Expr) -> bool:
    """Whether ``query`` is a LATERAL subquery's: re-evaluated per row as written
    (``tree.lateral_subquery``), its ties broken by ``normalize.lateral_subqueries``."""
    return isinstance(query.parent, exp.Subquery) and isinstance(query.parent.parent, exp.Lateral)


def _correlated(query: exp.Expr) -> bool:
    """Whether ``query`` names a table alias it does not define (an outer query's)."""
    defined = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    defined |= {s.alias.lower() for s in query.find_all(exp.Subquery) if s.alias}
    defined |= {c.alias.lower() for c in query.find_all(exp.CTE)}
    return any(c.table and c.table.lower() not in defined for c in query.find_all(exp.Column))


def _count(query: exp.Expr, node: exp.Expr | None) -> int | None:
    """The row count of a LIMIT, OFFSET or FETCH, which must be a whole number."""
    if node is None:
        return None
    if isinstance(node, exp.Fetch):
        options = node.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            raise UnsupportedSQLError(
                "limit", f"FETCH ... PERCENT / WITH TIES is not maintained: `{query.sql()[:80]}`"
            )
        value = node.args.get("count")
    else:
        value = node.expression
    if not (isinstance(value, exp.Literal) and value.is_int):
        raise UnsupportedSQLError(
            "limit", f"LIMIT and OFFSET must be whole numbers: `{node.sql()}`"
        )
    return int(value.name)
