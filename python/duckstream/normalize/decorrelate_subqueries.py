"""Decorrelate the subqueries of a WHERE clause into joins the operator tree maintains.

Each subquery becomes a derived table ``_ivm_sqN`` joined to the SELECT whose WHERE holds it,
built so that it matches at most one row per outer row (``DISTINCT`` keys, ``GROUP BY`` the
correlation keys, or a global aggregate: exactly one row); the outer rows keep their
multiplicities. A subquery is correlated by conjuncts of its own WHERE. Equalities
``inner = outer`` become the join's keys; ``=`` is not NULL-safe, in SQL as in the join, so a
NULL key has no partner. Subqueries are rewritten innermost first.

Other correlating comparisons (``inner <> outer``, ``<``, ...), in EXISTS and IN only, over
one outer table ``t`` (an EXISTS with one of them, as TPC-H Q21's, arrives here as ``ANY``:
:mod:`~duckstream.normalize.aggregate_inequalities`): the subquery is joined to the values its outer columns
take, ``(SELECT DISTINCT t.c, ... FROM t) AS _ivm_sqD``, on its correlating conjuncts read from
there, and its DISTINCT rows carry those values as keys; the outer query joins them on
``t.c = key``. Each correlating conjunct must be a comparison of columns, literals and
arithmetic: UNKNOWN where an outer column is NULL, as the join by ``=`` finds no partner.

- ``EXISTS (q)`` where only TRUE keeps a row (under AND from the WHERE's top) becomes an inner
  join to ``SELECT DISTINCT keys FROM q``; elsewhere (under OR, NOT, in a CASE) a LEFT JOIN
  and ``_ivm_sqN._ivm_m IS NOT NULL`` (never UNKNOWN, as EXISTS). Uncorrelated: a cross join
  to ``SELECT count(*) > 0 AS _ivm_m FROM q`` (one row).
- ``x IN (q)``, ``(x, y) IN (q)`` where only TRUE keeps a row: ``EXISTS`` with ``v = x``.
- ``x NOT IN (q)`` where only TRUE keeps a row: TRUE iff q is empty, or x is not NULL, no
  value of q is NULL and none equals x (else UNKNOWN or FALSE): q's row and non-NULL counts
  (per correlation key, a missing key meaning empty) joined, and a LEFT JOIN for the match.
- ``x IN (q)`` elsewhere (under OR or NOT, in the select list), where UNKNOWN and FALSE
  differ: the same joins, and a CASE giving TRUE on a match, FALSE when q is empty, UNKNOWN
  when x is NULL or q holds a NULL, else FALSE.
- ``x op ANY / SOME / ALL (q)``: ``= ANY`` as IN, ``<> ALL`` as NOT IN; the others from q's
  counts, least and greatest values (``x > ALL (q)``: TRUE when q is empty, FALSE when
  ``x <= max``, UNKNOWN when x is NULL or q holds a NULL, else TRUE).
- A scalar subquery, in WHERE or the select list, that is one aggregate expression without
  GROUP BY: uncorrelated, a cross join to it (one row); correlated, a LEFT JOIN to it grouped
  by the correlation keys, and where no group matched, the expression's value over no rows
  (COUNT is 0, not NULL: ``CASE WHEN _ivm_sqN._ivm_m IS NULL THEN <over no rows> ...``).
- In a SELECT with GROUP BY, an uncorrelated scalar aggregate subquery in HAVING or an item,
  outside the aggregates: a cross join, read as ``MAX(_ivm_sqN._ivm_v)`` (every row of a
  group carries the same value); inside an aggregate's argument, as in WHERE (per row).

Anything else (IN over several columns where UNKNOWN differs from FALSE, correlations other
than comparisons, subqueries in ON, in an aggregate SELECT without GROUP BY outside the
aggregates, a scalar subquery that is not an aggregate) is left in place and refused by
``validate.check_subqueries``, or refused here with the reason.

>>> from sqlglot import parse_one
>>> def show(sql):
...     print(decorrelate_subqueries(parse_one(sql)).sql())
>>> show("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.b > 0)")
SELECT r.a FROM r JOIN (SELECT DISTINCT s.k AS _ivm_k1, TRUE AS _ivm_m FROM s WHERE s.b > 0) AS _ivm_sq1 ON r.k = _ivm_sq1._ivm_k1 WHERE TRUE
>>> show("SELECT r.a FROM r WHERE r.a > 0 OR NOT EXISTS (SELECT 1 FROM s WHERE s.k = r.k)")
SELECT r.a FROM r LEFT JOIN (SELECT DISTINCT s.k AS _ivm_k1, TRUE AS _ivm_m FROM s) AS _ivm_sq1 ON r.k = _ivm_sq1._ivm_k1 WHERE r.a > 0 OR NOT (NOT _ivm_sq1._ivm_m IS NULL)
>>> show("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.b <> r.b)")
SELECT r.a FROM r JOIN (SELECT DISTINCT _ivm_sq1.k AS _ivm_k1, _ivm_sq1.b AS _ivm_k2, TRUE AS _ivm_m FROM s JOIN (SELECT DISTINCT r.k AS k, r.b AS b FROM r) AS _ivm_sq1 ON s.k = _ivm_sq1.k AND s.b <> _ivm_sq1.b) AS _ivm_sq2 ON r.k = _ivm_sq2._ivm_k1 AND r.b = _ivm_sq2._ivm_k2 WHERE TRUE
>>> show("SELECT r.a FROM r WHERE r.a > (SELECT avg(s.v) FROM s)")
SELECT r.a FROM r CROSS JOIN (SELECT AVG(s.v) AS _ivm_v FROM s) AS _ivm_sq1 WHERE r.a > _ivm_sq1._ivm_v
>>> show("SELECT r.a FROM r WHERE r.a < (SELECT count(*) FROM s WHERE s.k = r.k)")
SELECT r.a FROM r LEFT JOIN (SELECT s.k AS _ivm_k1, COUNT(*) AS _ivm_v, TRUE AS _ivm_m FROM s GROUP BY s.k) AS _ivm_sq1 ON r.k = _ivm_sq1._ivm_k1 WHERE r.a < CASE WHEN _ivm_sq1._ivm_m IS NULL THEN 0 ELSE _ivm_sq1._ivm_v END
>>> show("SELECT r.a FROM r WHERE r.a > ALL (SELECT s.v FROM s)")
SELECT r.a FROM r CROSS JOIN (SELECT COUNT(*) AS _ivm_n, COUNT(s.v) AS _ivm_nn, MIN(s.v) AS _ivm_lo, MAX(s.v) AS _ivm_hi FROM s) AS _ivm_sq1 WHERE CASE WHEN _ivm_sq1._ivm_n = 0 THEN TRUE WHEN NOT r.a > _ivm_sq1._ivm_hi THEN FALSE WHEN r.a IS NULL OR _ivm_sq1._ivm_n > _ivm_sq1._ivm_nn THEN CAST(NULL AS BOOLEAN) ELSE TRUE END
>>> show("SELECT r.a FROM r WHERE r.a NOT IN (SELECT s.v FROM s)")
SELECT r.a FROM r CROSS JOIN (SELECT COUNT(*) AS _ivm_n, COUNT(s.v) AS _ivm_nn FROM s) AS _ivm_sq1 LEFT JOIN (SELECT DISTINCT s.v AS _ivm_k1, TRUE AS _ivm_m FROM s) AS _ivm_sq2 ON r.a = _ivm_sq2._ivm_k1 WHERE (_ivm_sq1._ivm_n = 0 OR (NOT r.a IS NULL AND _ivm_sq1._ivm_n = _ivm_sq1._ivm_nn AND _ivm_sq2._ivm_m IS NULL))
"""  # noqa: E501

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TypeGuard

from sqlglot import exp

from duckstream.expressions import RaiseError, in_subquery, map_children
from duckstream.normalize.correlation import (
    Body,
    body_of,
    only_equalities,
    subquery_error,
    unparen,
)
from duckstream.normalize.wrap_set_operation import output_names

# The value of an aggregate over no rows: 0 for the counts, NULL for the rest listed here
# (not array or string aggregates: Spark's collect_list gives an empty array).
ZERO_ON_EMPTY = (exp.Count, exp.CountIf, exp.ApproxDistinct)
NULL_ON_EMPTY = (
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
    exp.Median,
    exp.LogicalAnd,
    exp.LogicalOr,
)


def decorrelate_subqueries(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    names = (f"_ivm_sq{n}" for n in itertools.count(1))
    # pre-order reversed: a subquery's SELECT is rewritten before the SELECT holding it
    for select in reversed(list(expression.find_all(exp.Select, bfs=False))):
        _Rewriter(select, names).run()
    return expression


class _Rewriter:
    """Rewrites the subqueries of one SELECT's WHERE (and HAVING) into joins."""

    def __init__(self, select: exp.Select, names: Iterator[str]) -> None:
        self.select = select
        self.names = names
        self.joins: list[exp.Join] = []

    def run(self) -> None:
        where = self.select.args.get("where")
        if where is not None:
            where.set("this", self._visit(where.this, positive=True))
        having = self.select.args.get("having")
        if self.select.args.get("group"):
            if having is not None:
                having.set("this", self._visit_grouped(having.this))
            items = [self._visit_grouped(i) for i in self.select.expressions]
        elif not any(_aggregates_here(i) for i in self.select.expressions):
            items = [self._visit(i, positive=False) for i in self.select.expressions]
        else:  # one group, even over no rows, where a joined value would be missing: refused
            items = self.select.expressions
        self.select.set("expressions", items)
        if self.joins:
            _cross_commas(self.select.args.get("joins") or [])
            self.select.set("joins", [*(self.select.args.get("joins") or []), *self.joins])

    # -- traversal ---------------------------------------------------------------------------

    def _visit(self, node: exp.Expr, positive: bool) -> exp.Expr:
        """``node`` with its subqueries rewritten; ``positive``: only TRUE keeps the row
        (reached from the WHERE's top through AND and parentheses only)."""
        if isinstance(node, exp.Exists):
            return self._exists(node, positive)
        if positive and isinstance(node, exp.Not):
            negated = unparen(node.this)
            if _is_in_query(negated):
                return self._not_in(negated)
        if _is_in_query(node):
            return self._in(node) if positive else self._in_value(node)
        if _is_quantified(node):
            return self._quantified(node, positive)
        if isinstance(node, exp.Subquery) and node.arg_key not in ("from_", "joins"):
            return self._scalar(node, body_of(node.this, node))
        if isinstance(node, exp.Select | exp.SetOperation | exp.Any | exp.All):
            return node  # another scope, or ANY / ALL over a list: refused later
        below = positive and isinstance(node, exp.And | exp.Paren)
        return map_children(node, lambda child: self._visit(child, below))

    def _visit_grouped(self, node: exp.Expr) -> exp.Expr:
        """``node``, an item or the HAVING of a grouped SELECT, with its subqueries outside
        aggregates rewritten: uncorrelated scalar ones read as ``MAX`` of the joined value
        (every row of a group carries the same); inside an aggregate's argument, per row."""
        if isinstance(node, exp.AggFunc):
            return map_children(node, lambda child: self._visit(child, positive=False))
        if _is_in_query(node) or isinstance(node, exp.Exists):
            return node  # refused later
        if isinstance(node, exp.Subquery) and node.arg_key not in ("from_", "joins"):
            body = body_of(node.this, node)
            if body.correlated:
                return node  # refused later
            return exp.Max(this=self._scalar(node, body))
        if isinstance(node, exp.Select | exp.SetOperation):
            return node
        return map_children(node, self._visit_grouped)

    # -- the rewrites ------------------------------------------------------------------------

    def _exists(self, node: exp.Exists, positive: bool) -> exp.Expr:
        body = body_of(node.this, node)
        if not body.correlated:
            derived = body.select(
                [_alias(exp.GT(this=_count_star(), expression=exp.Literal.number(0)), "_ivm_m")],
                node,
            )
            alias = self._join(derived, None)
            return exp.column("_ivm_m", alias)
        return self._semi(body, [], [], positive, node)

    def _in(self, node: exp.In) -> exp.Expr:
        body = body_of(node.args["query"].this, node)
        outer = _in_operands(node)
        values = body.values(node)
        if len(values) != len(outer):
            raise subquery_error(
                node, f"IN compares {len(outer)} values with {len(values)} columns"
            )
        return self._semi(body, values, outer, True, node)

    def _semi(
        self,
        body: Body,
        values: list[exp.Expr],
        outer: list[exp.Expr],
        positive: bool,
        node: exp.Expr,
    ) -> exp.Expr:
        """A join to the subquery's distinct ``values`` + correlation keys: an inner join
        (the predicate becomes TRUE) where only TRUE keeps the row, else a LEFT JOIN and the
        predicate ``_ivm_m IS NOT NULL``."""
        alias = self._semi_alias(body, values, outer, node, side=None if positive else "LEFT")
        if positive:
            return exp.true()
        return exp.paren(
            exp.Not(this=exp.Is(this=exp.column("_ivm_m", alias), expression=exp.Null()))
        )

    def _in_value(self, node: exp.In) -> exp.Expr:
        """``x IN (q)`` as SQL's three values, where UNKNOWN and FALSE differ (under OR or
        NOT, in the select list): TRUE on a match; else FALSE if q is empty; else UNKNOWN if
        x is NULL or q holds a NULL; else FALSE."""
        body, x, v = _one_column(
            node, "IN over several columns is maintained only as a WHERE conjunct"
        )
        counted, empty = self._counts(body, v, node)
        match = exp.column("_ivm_m", self._semi_alias(body, [v], [x], node, side="LEFT"))
        found = exp.Not(this=exp.Is(this=match, expression=exp.Null()))
        return _three_valued([(found, exp.true()), (empty, exp.false())], x, counted, False)

    def _quantified(self, node: exp.Binary, positive: bool) -> exp.Expr:
        """``x op ANY / SOME / ALL (q)``: ``= ANY`` is IN and ``<> ALL`` NOT IN; the others
        read q's least and greatest values with its counts, in SQL's three values (ALL over
        an empty q is TRUE, ANY FALSE; UNKNOWN when x is NULL or a NULL in q could decide)."""
        quantifier = node.expression
        every = isinstance(quantifier, exp.All)
        query = exp.Subquery(this=unparen(quantifier.this).copy())
        as_in = exp.In(this=node.this.copy(), query=query)
        if isinstance(node, exp.EQ) and not every:
            return self._in(as_in) if positive else self._in_value(as_in)
        if isinstance(node, exp.NEQ) and every:
            return self._not_in(as_in) if positive else exp.Not(this=self._in_value(as_in))
        body, x, v = _one_column(as_in, "ANY / ALL compares one value with one column", node)
        extremes = [
            _alias(exp.Min(this=v.copy()), "_ivm_lo"),
            _alias(exp.Max(this=v.copy()), "_ivm_hi"),
        ]
        counted, empty = self._counts(body, v, node, extremes)
        lo, hi = exp.column("_ivm_lo", counted), exp.column("_ivm_hi", counted)
        if isinstance(node, exp.EQ | exp.NEQ):  # = ALL, <> ANY: some value differs from x
            decisive: exp.Expr = exp.paren(exp.or_(x.copy().neq(lo), x.copy().neq(hi)))
        else:  # ALL: the extreme that could fail; ANY: the one that could pass
            low = isinstance(node, exp.GT | exp.GTE) != every
            decisive = type(node)(this=x.copy(), expression=lo if low else hi)
            if every:
                decisive = exp.Not(this=decisive)
        # ALL: TRUE when empty, FALSE when a value fails x op v; ANY: the other way round
        if every:
            return _three_valued([(empty, exp.true()), (decisive, exp.false())], x, counted, True)
        return _three_valued([(decisive, exp.true()), (empty, exp.false())], x, counted, False)

    def _counts(
        self, body: Body, v: exp.Expr, node: exp.Expr, extra: Sequence[exp.Expr] = ()
    ) -> tuple[str, exp.Expr]:
        """Join q's row and non-NULL value counts (``_ivm_n``, ``_ivm_nn``; per correlation
        key) and the ``extra`` aggregates: the alias, and the predicate that q is empty."""
        keys = [i for i, _ in body.pairs]
        counts = [
            *(_alias(k, f"_ivm_k{n}") for n, k in enumerate(keys, 1)),
            _alias(_count_star(), "_ivm_n"),
            _alias(exp.Count(this=v.copy()), "_ivm_nn"),
            *extra,
        ]
        derived = body.select(counts, node)
        if not keys:
            counted = self._join(derived, None)
            return counted, exp.column("_ivm_n", counted).eq(0)
        derived.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        on = _keys_on([o for _, o in body.pairs], len(keys))
        counted = self._join(derived, on, side="LEFT")
        return counted, exp.Is(this=exp.column("_ivm_n", counted), expression=exp.Null())

    def _not_in(self, node: exp.In) -> exp.Expr:
        body, x, v = _one_column(node, "NOT IN over several columns is not supported")
        counted, empty = self._counts(body, v, node)
        match = exp.column("_ivm_m", self._semi_alias(body, [v], [x], node, side="LEFT"))
        keep = exp.and_(
            exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
            exp.column("_ivm_n", counted).eq(exp.column("_ivm_nn", counted)),
            exp.Is(this=match, expression=exp.Null()),
        )
        return exp.paren(exp.or_(empty, keep))

    def _semi_alias(
        self,
        body: Body,
        values: list[exp.Expr],
        outer: list[exp.Expr],
        node: exp.Expr,
        side: str | None,
    ) -> str:
        inner = values + [i for i, _ in body.pairs]
        outer = outer + [o for _, o in body.pairs]
        domain = next(self.names) if body.domain else None
        if domain is not None:
            inner += [exp.column(c.this.copy(), domain) for c in body.domain]
            outer += [c.copy() for c in body.domain]
        items = [_alias(v, f"_ivm_k{n}") for n, v in enumerate(inner, 1)]
        derived = body.select([*items, _alias(exp.true(), "_ivm_m")], node).distinct()
        if domain is not None:
            assert body.domain_on is not None
            on = body.domain_on.copy()
            for column in on.find_all(exp.Column):
                if column.table == "_ivm_dom":
                    column.set("table", _id(domain))
            joins = derived.args.get("joins") or []
            _cross_commas(joins)
            values_of = self._domain_values(body, node)
            alias = exp.TableAlias(this=_id(domain))
            derived.set(
                "joins", [*joins, exp.Join(this=exp.Subquery(this=values_of, alias=alias), on=on)]
            )
        return self._join(derived, _keys_on(outer, len(inner)), side=side)

    def _domain_values(self, body: Body, node: exp.Expr) -> exp.Select:
        """``SELECT DISTINCT t.c1 AS c1, ... FROM <t's source> AS t``: every value the outer
        columns (of the one outer table ``t``) take, whatever the outer query's filters."""
        table = body.domain[0].table
        sources = [self.select.args.get("from_"), *(self.select.args.get("joins") or [])]
        for source in sources:
            if source is not None and source.this.alias_or_name == table:
                relation = source.this
                break
        else:
            raise subquery_error(
                node,
                f"a subquery correlated other than by equalities to `{table}`,"
                " a table of a query further out",
            )
        if not isinstance(relation, exp.Table | exp.Subquery):
            raise subquery_error(
                node, f"a subquery correlated other than by equalities to `{table}`"
            )
        items = [exp.alias_(c.copy(), c.this.copy()) for c in body.domain]
        return exp.select(*items).from_(relation.copy()).distinct()

    def _scalar(self, node: exp.Subquery, body: Body) -> exp.Expr:
        only_equalities(body, node)
        query = body.query
        first = query
        while isinstance(first, exp.SetOperation | exp.Subquery):
            first = first.this
        if not isinstance(first, exp.Select) or len(first.expressions) != 1:
            raise subquery_error(node, "a scalar subquery must have one column")
        if not _one_aggregate(query):
            return self._scalar_rows(node, body)
        assert isinstance(query, exp.Select)
        value = query.expressions[0].unalias()
        if not body.pairs:
            derived = query.copy()
            derived.set("distinct", None)  # one row either way
            derived.set("expressions", [_alias(value, "_ivm_v")])
            return exp.column("_ivm_v", self._join(derived, None))
        keys = [i for i, _ in body.pairs]
        empty = _over_no_rows(value, node)
        derived = query.copy()
        derived.set("distinct", None)
        derived.set(
            "expressions",
            [
                *(_alias(k, f"_ivm_k{n}") for n, k in enumerate(keys, 1)),
                _alias(value, "_ivm_v"),
                _alias(exp.true(), "_ivm_m"),
            ],
        )
        derived.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        on = _keys_on([o for _, o in body.pairs], len(keys))
        alias = self._join(derived, on, side="LEFT")
        got = exp.column("_ivm_v", alias)
        if isinstance(value, NULL_ON_EMPTY):
            return got
        missing = exp.Is(this=exp.column("_ivm_m", alias), expression=exp.Null())
        return exp.Case(ifs=[exp.If(this=missing, true=empty)], default=got)

    def _scalar_rows(self, node: exp.Subquery, body: Body) -> exp.Expr:
        """A scalar subquery that may hold any number of rows: its value is the one row's,
        NULL for none, and more than one fails the statement, as the engine's subquery
        would: ``CASE WHEN count(*) > 1 THEN error(...) ELSE max(v) END``, grouped by the
        correlation keys (a SELECT without GROUP BY or aggregates) and LEFT JOINed."""
        distinct = body.query.args.get("distinct") is not None
        if distinct and body.correlated:
            raise subquery_error(node, "a correlated scalar subquery with DISTINCT")
        (value,) = body.values(node) if not distinct else output_names(body.query)
        if distinct:  # its rows counted as DISTINCT leaves them: from it as a derived table
            value = exp.column(value.copy(), "_ivm_b")
        several = exp.GT(this=_count_star(), expression=exp.Literal.number(1))
        message = "duckstream: more than one row returned by a scalar subquery"
        one = exp.Case(
            ifs=[exp.If(this=several, true=RaiseError(this=exp.Literal.string(message)))],
            default=exp.Max(this=value),
        )
        keys = [i for i, _ in body.pairs]
        items = [*(_alias(k, f"_ivm_k{n}") for n, k in enumerate(keys, 1)), _alias(one, "_ivm_v")]
        if distinct:
            rows = exp.Subquery(this=body.query.copy(), alias=exp.TableAlias(this=_id("_ivm_b")))
            derived = exp.select(*items).from_(rows)
        else:
            derived = body.select(items, node)
        if not keys:
            return exp.column("_ivm_v", self._join(derived, None))
        derived.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        on = _keys_on([o for _, o in body.pairs], len(keys))
        return exp.column("_ivm_v", self._join(derived, on, side="LEFT"))

    def _join(self, derived: exp.Select, on: exp.Expr | None, side: str | None = None) -> str:
        """Join ``(derived) AS _ivm_sqN`` to the SELECT (``on`` over ``_ivm_sqN``'s columns,
        written with the placeholder table ``_ivm_sq``); a cross join without ``on``."""
        alias = next(self.names)
        subquery = exp.Subquery(this=derived, alias=exp.TableAlias(this=_id(alias)))
        if on is None:
            join = exp.Join(this=subquery, kind="CROSS")
        else:
            for column in on.find_all(exp.Column):
                if column.table == "_ivm_sq":
                    column.set("table", _id(alias))
            join = exp.Join(this=subquery, on=on, side=side)
        self.joins.append(join)
        return alias


# -- helpers ---------------------------------------------------------------------------------


def _one_aggregate(query: exp.Query) -> bool:
    """Whether ``query`` is one aggregate expression without GROUP BY or HAVING: exactly one
    row, whatever its FROM holds."""
    return (
        isinstance(query, exp.Select)
        and not query.args.get("group")
        and not query.args.get("having")
        and bool(query.expressions[0].find(exp.AggFunc))
    )


def _one_column(
    in_: exp.In, why: str, node: exp.Expr | None = None
) -> tuple[Body, exp.Expr, exp.Expr]:
    """``x IN (q)``'s subquery, ``x`` and q's one column ``v``; refused (``why``, quoting
    ``node``, by default ``in_``) over several columns, or when q is correlated other than
    by equalities."""
    node = in_ if node is None else node
    body = body_of(in_.args["query"].this, node)
    outer, values = _in_operands(in_), body.values(node)
    if len(outer) != 1 or len(values) != 1:
        raise subquery_error(node, why)
    only_equalities(body, node)
    return body, outer[0], values[0]


def _three_valued(
    decided: list[tuple[exp.Expr, exp.Expr]], x: exp.Expr, counted: str, otherwise: bool
) -> exp.Expr:
    """``CASE`` over the ``decided`` (condition, value) pairs, then UNKNOWN when ``x`` is NULL
    or the counted subquery (alias ``counted``) holds a NULL, else ``otherwise``."""
    unknown = exp.or_(
        exp.Is(this=x.copy(), expression=exp.Null()),
        exp.GT(this=exp.column("_ivm_n", counted), expression=exp.column("_ivm_nn", counted)),
    )
    return exp.Case(
        ifs=[
            *(exp.If(this=c, true=v) for c, v in decided),
            exp.If(this=unknown, true=exp.cast(exp.Null(), exp.DataType.build("boolean"))),
        ],
        default=exp.true() if otherwise else exp.false(),
    )


def _cross_commas(joins: list[exp.Join]) -> None:
    """Comma joins become CROSS JOINs: a comma binds looser than JOINs appended after it."""
    for join in joins:
        if _is_comma(join):
            join.set("kind", "CROSS")


def _id(name: str) -> exp.Identifier:
    return exp.to_identifier(name)


def _alias(node: exp.Expr, name: str) -> exp.Expr:
    return exp.alias_(node.copy(), _id(name))


def _count_star() -> exp.Count:
    return exp.Count(this=exp.Star())


def _aggregates_here(node: exp.Expr) -> bool:
    """Whether ``node`` calls an aggregate of its own SELECT (not in a subquery, not a
    window function)."""
    return any(
        not isinstance(agg.parent, exp.Window) and not in_subquery(agg, node)
        for agg in node.find_all(exp.AggFunc)
    )


def _is_in_query(node: exp.Expr) -> TypeGuard[exp.In]:
    return isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Expr)


def _is_quantified(node: exp.Expr) -> TypeGuard[exp.Binary]:
    """``x op ANY / SOME / ALL (SELECT ...)``."""
    return (
        isinstance(node, exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT | exp.LTE)
        and isinstance(node.expression, exp.Any | exp.All)
        and isinstance(unparen(node.expression.this), exp.Query | exp.Subquery)
    )


def _is_comma(join: exp.Join) -> bool:
    return not (
        join.side or join.kind or join.args.get("on") or join.args.get("using") or join.method
    )


def _in_operands(node: exp.In) -> list[exp.Expr]:
    this = unparen(node.this)
    return list(this.expressions) if isinstance(this, exp.Tuple) else [this]


def _keys_on(outer: list[exp.Expr], n: int) -> exp.Expr:
    """``outer_1 = _ivm_sq._ivm_k1 AND ...`` (the placeholder table is renamed in _join)."""
    assert len(outer) == n
    return exp.and_(
        *(o.copy().eq(exp.column(f"_ivm_k{i}", "_ivm_sq")) for i, o in enumerate(outer, 1))
    )


def _over_no_rows(value: exp.Expr, node: exp.Expr) -> exp.Expr:
    """``value`` (an expression over aggregates) as it is over no rows."""

    def empty(agg: exp.Expr) -> exp.Expr:
        if not isinstance(agg, exp.AggFunc):
            return agg
        if isinstance(agg, ZERO_ON_EMPTY):
            return exp.Literal.number(0)
        if isinstance(agg, NULL_ON_EMPTY):
            return exp.Null()
        raise subquery_error(node, f"the value of {agg.sql()} over no rows is not known here")

    return value.transform(empty)
