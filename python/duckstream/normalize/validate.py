"""Reject what the compiler cannot maintain, naming the construct and where it is.

Nothing here rewrites: a view either passes or raises :class:`UnsupportedSQLError` whose
``feature`` names the construct (the README's table lists them).
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import NONDETERMINISTIC, NONDETERMINISTIC_NODES
from duckstream.normalize.constant_relations import is_constant_relation
from duckstream.normalize.lateral_functions import lateral_function


def _where(node: exp.Expr) -> str:
    text = node.sql()
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(feature: str, node: exp.Expr, why: str) -> UnsupportedSQLError:
    return UnsupportedSQLError(feature, f"{why}: `{_where(node)}`")


def validate(expression: exp.Expr, *, has_schema: bool, after_qualify: bool = False) -> None:
    """Raise :class:`UnsupportedSQLError` for the first construct that cannot be maintained."""
    if not isinstance(expression, exp.Select | exp.SetOperation):
        raise UnsupportedSQLError("statement", "the view must be a single SELECT statement")
    for node in expression.walk():
        _check(node, has_schema=has_schema, after_qualify=after_qualify)


def _check(node: exp.Expr, *, has_schema: bool, after_qualify: bool) -> None:
    if isinstance(node, NONDETERMINISTIC_NODES):
        raise _fail("nondeterministic_function", node, "non-deterministic function")
    if isinstance(node, exp.Anonymous | exp.Func) and not isinstance(node, exp.AggFunc):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name in NONDETERMINISTIC:
            raise _fail("nondeterministic_function", node, "non-deterministic function")
    if isinstance(node, exp.AggFunc):
        name = node.sql_name().lower() if not isinstance(node, exp.Anonymous) else node.name.lower()
        if name in NONDETERMINISTIC:
            raise _fail("nondeterministic_function", node, "non-deterministic aggregate")
    if isinstance(node, exp.SetOperation):
        _check_set_operation(node)
    if isinstance(node, exp.Select):
        _check_select(node, has_schema=has_schema, after_qualify=after_qualify)
    if isinstance(node, exp.Identifier) and node.name.lower().startswith("_ivm_"):
        raise _fail("reserved_name", node, "names starting with _ivm_ are reserved for duckstream")
    if isinstance(node, exp.Table) and node.args.get("when"):
        raise _fail("time_travel", node, "time travel on a source cannot be maintained")
    if isinstance(node, exp.Join) and _lateral_item(node.this):
        _check_lateral(node)
    inside = isinstance(node.parent, exp.Lateral) and _lateral_item(node.parent)
    if isinstance(node, exp.Lateral | exp.Unnest) and not (_lateral_item(node) or inside):
        if isinstance(node, exp.Unnest) and isinstance(node.parent, exp.From):
            raise _fail("table_function", node, "unnest must follow the relation it reads")
        raise _fail("table_function", node, FROM_ITEMS)
    if isinstance(node, exp.Values) and not is_constant_relation(node):
        raise _fail("table_function", node, "a VALUES list must hold constants")
    function = isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier)
    if function and not is_constant_relation(node) and not _lateral_item(node):
        raise _fail("table_function", node, FROM_ITEMS)


FROM_ITEMS = (
    "only tables, subqueries, VALUES lists, range / generate_series with constant"
    " arguments and, after the relations they read, unnest / range / generate_series over"
    " their columns may stand in FROM"
)


def _lateral_item(node: exp.Expr) -> bool:
    """Whether ``node`` is a table function over a row's columns that
    ``normalize.lateral_functions`` spells as a LATERAL join: a join's item (not first in
    FROM) or Spark's ``LATERAL VIEW``."""
    placed = isinstance(node.parent, exp.Join) or (
        isinstance(node, exp.Lateral) and node.arg_key == "laterals"
    )
    function = lateral_function(node) is not None and not is_constant_relation(node)
    return placed and (function or lateral_subquery(node))


def lateral_subquery(node: exp.Expr) -> bool:
    """Whether ``node`` is ``LATERAL (SELECT ...) AS alias`` (a join's item)."""
    return (
        isinstance(node, exp.Lateral)
        and isinstance(node.parent, exp.Join)
        and isinstance(node.this, exp.Subquery)
        and isinstance(node.this.this, exp.Select)
    )


def _check_lateral(join: exp.Join) -> None:
    """A lateral function joins as CROSS / comma, or LEFT / inner with ON TRUE."""
    item = join.this
    side, on = (join.side or "").upper(), join.args.get("on")
    true_on = on is None or (isinstance(on, exp.Boolean) and on.this is True)
    if side in ("RIGHT", "FULL") or join.args.get("using") or not true_on:
        raise _fail(
            "lateral_join",
            join,
            "a table function or LATERAL subquery joins as CROSS JOIN, a comma, or LEFT JOIN"
            " ... ON TRUE (filter its rows in WHERE)",
        )
    if lateral_subquery(item):
        if not item.alias:
            raise _fail("derived_table", item, "a LATERAL subquery needs an alias")
        return
    function = lateral_function(item)
    if isinstance(function, exp.Unnest) and len(function.expressions) != 1:
        raise _fail("table_function", item, "unnest of one list only (no zip, no recursive :=)")
    offset = function.args.get("offset") if isinstance(function, exp.Unnest) else None
    if offset not in (None, False) and not isinstance(offset, exp.Identifier):
        raise _fail(
            "table_function", item, "WITH ORDINALITY needs the column names (AS u(value, n))"
        )


def check_subqueries(expression: exp.Expr) -> None:
    """Refuse the subqueries outside FROM that ``decorrelate_subqueries`` left in place."""
    in_from = exp.From | exp.Join | exp.Subquery | exp.SetOperation | exp.Lateral
    for node in expression.walk():
        if isinstance(node, exp.Exists):
            raise _fail(
                "subquery",
                node,
                "EXISTS is maintained in WHERE and the select list (in a GROUP BY view: inside"
                " an aggregate)",
            )
        if isinstance(node, exp.In) and node.args.get("query"):
            raise _fail(
                "subquery",
                node,
                "IN / NOT IN (SELECT ...) is maintained in WHERE, in the select list and"
                " in GROUP BY views' aggregates, correlated by comparisons (over several"
                " columns: only as a WHERE conjunct)",
            )
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, in_from):
            raise _fail(
                "subquery",
                node,
                "a scalar subquery is maintained only in WHERE and the select list (in a"
                " GROUP BY view: uncorrelated, or inside an aggregate), as one aggregate"
                " without GROUP BY",
            )
        if isinstance(node, exp.Select | exp.SetOperation) and not _in_from(node):
            raise _fail("subquery", node.parent or node, "a query outside FROM is not maintained")


def _in_from(query: exp.Expr) -> bool:
    """Whether ``query`` is the view, or (a branch of) a derived table in FROM."""
    node = query
    while isinstance(node.parent, exp.Subquery | exp.SetOperation):
        node = node.parent
    return node.parent is None or isinstance(node.parent, exp.From | exp.Join | exp.Lateral)


def _check_set_operation(node: exp.SetOperation) -> None:
    kind = node.key.upper()
    if node.args.get("by_name"):
        raise _fail("set_operation", node, f"{kind} BY NAME is not supported (list the columns)")
    if node.args.get("side") or node.args.get("kind") or node.args.get("on"):
        raise _fail("set_operation", node, f"this form of {kind} is not supported")


def _check_select(select: exp.Select, *, has_schema: bool, after_qualify: bool) -> None:
    if not select.args.get("from_") and select.find(exp.Table) is not None:
        raise _fail(
            "no_source",
            select,
            "a SELECT without FROM may not read a table in a subquery (add the FROM)",
        )
    generators = [i for i in select.expressions if i.find(exp.Explode, exp.Unnest)]
    grouped = (
        select.args.get("group")
        or select.args.get("distinct")  # DISTINCT groups by its items: GROUP BY unnest(...)
        or any(i.find(exp.AggFunc, exp.Window) for i in select.expressions)
    )
    if generators and grouped:
        raise _fail(
            "table_function",
            generators[0],
            "unnest in the select list of a grouped or DISTINCT SELECT or beside a window"
            " function (it runs after them): unnest in FROM, or group in an outer query",
        )
    joins = select.args.get("joins") or []
    _check_outer_joins(joins)
    for join in joins:
        kind = (join.kind or "").upper()
        if kind in ("SEMI", "ANTI", "ASOF", "POSITIONAL"):
            raise _fail(f"{kind.lower()}_join", join, f"{kind} JOIN is not supported")
        if join.args.get("method") and join.method.upper() == "NATURAL" and not has_schema:
            raise _fail(
                "natural_join", join, "NATURAL JOIN needs the source columns (pass schema=)"
            )
    for item in select.expressions:
        star = item if isinstance(item, exp.Star) else None
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            star = item
        # EXISTS ignores its select list (normalize.decorrelate_subqueries drops it)
        if star is not None and after_qualify and not isinstance(select.parent, exp.Exists):
            raise _fail(
                "star", star, "SELECT * needs the source columns: list them or pass schema="
            )


def _check_outer_joins(joins: list[exp.Join]) -> None:
    """Outer joins are maintained over a left-deep chain of joins; refuse what is not one,
    or what sqlglot's USING rewrite gets wrong."""
    comma, outer = None, False
    for i, join in enumerate(joins):
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if isinstance(join.this, exp.Subquery) and not isinstance(join.this.this, exp.Query):
            raise _fail("nested_join", join, "a parenthesized join in FROM is not supported")
        if side in ("LEFT", "RIGHT", "FULL"):
            outer = True
            if comma is not None:
                raise _fail(
                    "outer_join",
                    join,
                    f"a comma join (`, {comma.this.sql()}`) before an outer join binds looser "
                    "than JOIN: write CROSS JOIN or JOIN ... ON instead",
                )
        elif kind == "OUTER":
            raise _fail("outer_join", join, "OUTER JOIN needs LEFT, RIGHT or FULL")
        elif not side and not kind and not join.args.get("on") and not join.args.get("using"):
            comma = comma or join
        natural = (join.method or "").upper() == "NATURAL"
        if outer and i > 0 and (join.args.get("using") or natural):
            raise _fail(
                "outer_join",
                join,
                "USING or NATURAL after an outer join, with more than two tables, names a "
                "merged column: write the join condition with ON",
            )
