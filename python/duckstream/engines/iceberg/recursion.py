"""Recursive CTEs on Spark, which has no ``WITH RECURSIVE`` (3.5): iterated by the runner.

The operator tree writes a recursive CTE's states and deltas as ``WITH RECURSIVE`` queries
(:mod:`duckstream.tree.recursive`), as any engine with recursion runs them. Here each such
``WITH`` leaves the statement that reads it (:func:`hoist`): its CTEs become steps of the
plan that come before that statement, and the statement reads their temporary views:

- a CTE that reads itself (``B UNION [ALL] S``) becomes an :class:`~duckstream.plan.Iterate`
  step: its base term, then its recursive term over the rows the iteration before added,
  until an iteration adds none (UNION: an iteration keeps the rows not found before);
  one that still adds rows after the bound (``max_recursion_depth``) fails naming it;
- any other CTE of that ``WITH`` becomes a temporary view (:class:`~duckstream.plan.
  CreateTemp`), made when something first reads it, as the plan's other temp views.

:func:`render_iterate` writes an iteration as the statements of one step and the loop's
rule (``${k}``: the iteration's number), for a person; the runner
(:func:`duckstream.engines.iceberg.steps.iterate`) runs that loop, keeping each
iteration's rows (a local checkpoint) so that the next one reads them instead of
recomputing the chain before it.

A ``CREATE TABLE ... AS <no rows>`` has no step before it: there (:func:`unrolled`) a
recursive CTE is typed by its base term and one step over it, which is how Spark types the
union of the iterations.

>>> from sqlglot import parse_one
>>> query = parse_one("SELECT n FROM (WITH RECURSIVE r(n) AS (SELECT k FROM t UNION ALL"
...     " SELECT r.n + 1 FROM r WHERE r.n < 3) SELECT n FROM r) AS x")
>>> hoisted, steps = hoist(query, lambda name: exp.to_table(f"v_{name}"))
>>> hoisted.sql()
'SELECT n FROM (SELECT n FROM v_r AS r) AS x'
>>> [(type(s).__name__, s.table.name, s.previous) for s in steps]
[('Iterate', 'v_r', 'v_r_step_${k-1}')]
>>> steps[0].step.sql()
'SELECT * FROM (SELECT r.n + 1 FROM "v_r_step_${k-1}" AS r WHERE r.n < 3) AS _ivm_h(n)'
>>> unrolled(query).sql()
'SELECT n FROM (WITH r(n) AS (SELECT k FROM t UNION ALL SELECT r.n + 1 FROM (SELECT k FROM t) AS r(n) WHERE r.n < 3) SELECT n FROM r) AS x'
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from duckstream.plan import CreateTemp, Iterate, Step
from duckstream.recursion import BOUND

# the bound of a recursion the operator tree did not write (it marks its own, BOUND)
DEFAULT_BOUND = 1000
ITERATION = "${k}"  # the number of the iteration a statement of the loop makes
PREVIOUS = "${k-1}"
LAST = "${n}"  # the number of the last iteration (the first to add no row, less one)


def _self_reads(query: exp.Expr, name: str) -> list[exp.Table]:
    """The unqualified tables ``name`` in ``query`` (a CTE's references to itself)."""
    return [
        t
        for t in query.find_all(exp.Table)
        if not t.args.get("db") and isinstance(t.this, exp.Identifier) and t.name == name
    ]


def _renamed(query: exp.Expr, names: dict[str, exp.Table]) -> exp.Expr:
    """``query`` reading the tables ``names`` maps the CTE names to, under the CTE's name
    (or the alias it was read by), so that qualified columns still resolve."""

    def rename(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Table)
            and not node.args.get("db")
            and isinstance(node.this, exp.Identifier)
            and node.name in names
        ):
            table = names[node.name].copy()
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
            table.set("alias", alias.copy())
            return table
        return node

    return query.transform(rename)


def _named(query: exp.Expr, columns: list[exp.Identifier]) -> exp.Expr:
    """``query`` with the CTE's column names (``SELECT * FROM (query) AS _ivm_h(c1, ...)``)."""
    if not columns:
        return query
    alias = exp.TableAlias(this=exp.to_identifier("_ivm_h"), columns=[c.copy() for c in columns])
    return exp.select("*").from_(exp.Subquery(this=query, alias=alias))


def _recursive_parts(cte: exp.CTE) -> tuple[exp.Query, exp.Query, bool] | None:
    """``(base term, recursive term, UNION)`` of a CTE that reads itself, else None."""
    body = cte.this
    name = cte.alias_or_name
    if not isinstance(body, exp.Union) or not _self_reads(body.expression, name):
        return None
    return body.this, body.expression, bool(body.args.get("distinct"))


def _recursive_withs(query: exp.Expr) -> list[exp.With]:
    """The ``WITH RECURSIVE`` clauses in ``query``, each after those inside it."""
    return [w for w in reversed(list(query.find_all(exp.With))) if w.args.get("recursive")]


def hoist(query: exp.Expr, temp: Callable[[str], exp.Table]) -> tuple[exp.Expr, list[Step]]:
    """``query`` without ``WITH RECURSIVE``, reading the temporary views of the steps
    returned (in the order they must come), ``temp(name)`` the view of the CTE ``name``."""
    query = query.copy()
    steps: list[Step] = []
    for with_ in _recursive_withs(query):
        bound, message = with_.meta.get(BOUND) or (DEFAULT_BOUND, "")
        names: dict[str, exp.Table] = {}
        for cte in with_.expressions:
            name = cte.alias_or_name
            table = temp(name)
            columns = list(cte.args["alias"].columns) if cte.args.get("alias") else []
            found = _recursive_parts(cte)
            if found is None:
                body = _named(_renamed(cte.this, names), columns)
                steps.append(CreateTemp(table, body))
            else:
                base, step, distinct = found
                previous = f"{table.name}_step_{PREVIOUS}"
                reading = {**names, name: exp.table_(exp.to_identifier(previous))}
                steps.append(
                    Iterate(
                        table=table,
                        columns=tuple(c.name for c in columns),
                        base=_named(_renamed(base, names), columns),
                        step=_named(_renamed(step, reading), columns),
                        previous=previous,
                        distinct=distinct,
                        bound=bound,
                        message=message
                        or (
                            f"duckstream: recursive CTE {name} ran more than {bound} steps"
                            " (max_recursion_depth)"
                        ),
                    )
                )
            names[name] = table
        scope = with_.parent
        assert scope is not None
        scope.set("with_", None)
        replaced = _renamed(scope, names)
        if scope is query:
            query = replaced
        else:
            scope.replace(replaced)
    return query, steps


def unrolled(query: exp.Expr) -> exp.Expr:
    """``query`` with each recursive CTE as its base term and one step over it: the same
    columns and types (Spark types a union by both sides), for a query of no rows."""
    query = query.copy()
    for with_ in _recursive_withs(query):
        for cte in with_.expressions:
            found = _recursive_parts(cte)
            if found is None:
                continue
            base, step, _ = found
            name = cte.alias_or_name
            columns = list(cte.args["alias"].columns) if cte.args.get("alias") else []
            for reference in _self_reads(step, name):
                alias = reference.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
                alias = alias.copy()
                if columns:
                    alias.set("columns", [c.copy() for c in columns])
                reference.replace(exp.Subquery(this=base.copy(), alias=alias))
            cte.set("this", exp.union(base, step, distinct=False))
        with_.set("recursive", None)
    return query


def render_iterate(step: Iterate, sql: Callable[[exp.Expr], str]) -> list[str]:
    """The statements of an iteration and the loop's rule, as comments (``sql``: the
    engine's rendering)."""
    view, steps = step.table.name, f"{step.table.name}_step_"
    upto = f"{view}_upto_"

    def create(name: str, query: str) -> str:
        return f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}"

    first = sql(step.base)
    if step.distinct:
        first = f"SELECT DISTINCT * FROM ({first}) AS _ivm_b"
    nxt = sql(step.step)
    if step.distinct:  # only the rows not found before (EXCEPT is distinct)
        nxt = f"{nxt}\nEXCEPT SELECT * FROM {upto}{PREVIOUS}"
    rule = (
        f"-- recursive CTE {view}, by iteration (Spark has no WITH RECURSIVE): the first two"
        " statements once (k = 0), then the next two for k = 1, 2, ... while the first of"
        f" them finds rows, at most {step.bound} times (then fail: {step.message}), then the"
        f" last, {LAST} the last k that found rows\n"
    )
    return [
        rule + create(f"{steps}0", first),
        create(f"{upto}0", f"SELECT * FROM {steps}0"),
        create(f"{steps}{ITERATION}", nxt),
        create(
            f"{upto}{ITERATION}",
            f"SELECT * FROM {upto}{PREVIOUS} UNION ALL SELECT * FROM {steps}{ITERATION}",
        ),
        create(view, f"SELECT * FROM {upto}{LAST}"),
    ]
