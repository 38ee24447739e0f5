"""Small helpers over sqlglot expressions shared by the normalizer and the sinks."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlglot import exp

# The ``meta`` key of a derived table inlined from a CTE (``normalize.inline_ctes``): which CTE
# (name and number), for the tree to find the references one CTE shares (``tree.shared_cte``).
CTE_MARK = "ivm_cte"


def map_children(node: exp.Expr, visit: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``node`` (changed in place) with each child expression replaced by ``visit(child)``:
    the step of a rewrite that decides per node whether to descend.

    >>> from sqlglot import parse_one
    >>> upper = lambda n: exp.column(n.name.upper()) if isinstance(n, exp.Column) else n
    >>> map_children(parse_one("a + b"), upper).sql()
    'A + B'
    """
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, visit(value))
        elif isinstance(value, list):
            node.set(key, [visit(v) if isinstance(v, exp.Expr) else v for v in value])
    return node


def in_subquery(node: exp.Expr, top: exp.Expr) -> bool:
    """Whether ``node`` sits inside a query nested in ``top`` (another scope than ``top``'s).

    >>> from sqlglot import parse_one
    >>> item = parse_one("SELECT sum(a) + (SELECT max(b) FROM u) AS x FROM t").expressions[0]
    >>> [in_subquery(f, item) for f in item.find_all(exp.Sum, exp.Max)]
    [False, True]
    """
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, exp.Query):
            return True
        parent = parent.parent
    return False


Node = TypeVar("Node", bound=exp.Expr)


def rewrite_innermost_first(
    expression: exp.Expr, nodes: Sequence[Node], rewrite: Callable[[Node], exp.Expr]
) -> exp.Expr:
    """``expression`` with each of ``nodes`` (found in it, outer before inner, as
    ``find_all`` lists them) replaced by ``rewrite(node)``, innermost first: a rewrite sees
    the nodes nested in its own already rewritten. ``expression`` itself may be one of them.

    >>> from sqlglot import parse_one
    >>> tree = parse_one("SELECT a FROM (SELECT b FROM t) AS s")
    >>> wrap = lambda q: exp.select("*").from_(exp.Subquery(this=q.copy(), alias="w"))
    >>> rewrite_innermost_first(tree, list(tree.find_all(exp.Select)), wrap).sql()
    'SELECT * FROM (SELECT a FROM (SELECT * FROM (SELECT b FROM t) AS w) AS s) AS w'
    """
    for node in reversed(nodes):
        rewritten = rewrite(node)
        if node is expression:
            expression = rewritten
        else:
            node.replace(rewritten)
    return expression


class RaiseError(exp.Expression, exp.Func):
    """Fail the statement with a message when evaluated: DuckDB's ``error(msg)``, rendered
    ``raise_error(msg)`` by the Spark engine's dialect. What a maintained scalar subquery
    evaluates to when it holds more than one row, as the engine's own subquery would fail.

    >>> RaiseError(this=exp.Literal.string("two rows")).sql("duckdb")
    "ERROR('two rows')"
    """

    arg_types = {"this": True}
    _sql_names = ["ERROR"]


# Functions whose value changes over time or from call to call (validation refuses them
# outside what time-as-a-source maintains; a constant relation holding one is not constant).
NONDETERMINISTIC = {
    "random",
    "rand",
    "uuid",
    "gen_random_uuid",
    "uuidv4",
    "uuidv7",
    "now",
    "current_timestamp",
    "current_date",
    "current_time",
    "localtimestamp",
    "localtime",
    "get_current_timestamp",
    "get_current_time",
    "today",
    "transaction_timestamp",
    "nextval",
    "currval",
    "setseed",
    "any_value",
    "arbitrary",
    "first",
    "last",
    "reservoir_quantile",
    "unix_timestamp",
    "current_timezone",
    "sysdate",
}

NONDETERMINISTIC_NODES = (
    exp.Rand,
    exp.Uuid,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.AnyValue,
    exp.First,
    exp.Last,
)


# Functions whose value changes between refreshes: the clock (``current_date`` and the like),
# random numbers, sequences. Listed here, not only in validation, so that a relation reading
# one is never taken for a constant, whatever validation lets through (time as a source).
_CLOCK_NODES = (exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp, exp.Rand, exp.Uuid)
_CLOCK_NAMES = {
    "now",
    "today",
    "current_date",
    "current_time",
    "current_timestamp",
    "get_current_time",
    "get_current_timestamp",
    "transaction_timestamp",
    "localtime",
    "localtimestamp",
    "sysdate",
    "unix_timestamp",
}


def varies(node: exp.Expr) -> bool:
    """Whether ``node`` holds a function whose value changes over time or from call to call
    (the clock, ``random()``, ``nextval``: validation's non-deterministic functions too).

    >>> from sqlglot import parse_one
    >>> [varies(parse_one(s, read="duckdb")) for s in ("SELECT 1 + 2", "SELECT current_date",
    ...     "SELECT now()", "SELECT * FROM range(DATE '2020-01-01', today(), INTERVAL 1 DAY)")]
    [False, True, True, True]
    """
    for found in node.walk():
        if isinstance(found, _CLOCK_NODES + NONDETERMINISTIC_NODES):
            return True
        if isinstance(found, exp.Func):
            name = found.name if isinstance(found, exp.Anonymous) else found.sql_name()
            if name.lower() in _CLOCK_NAMES | NONDETERMINISTIC:
                return True
    return False


_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


def ident(name: str) -> exp.Identifier:
    """An identifier for a column name, quoted only when it has to be."""
    return exp.to_identifier(name, quoted=not _PLAIN.match(name))


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return list(condition.flatten())
    return [condition]


def parenthesized(query: exp.Expr, alias: str) -> exp.Expr:
    """``(query) AS alias``, as ``exp.paren(query).as_(alias)`` builds it, but adopting
    ``query`` where that copies it twice: pass a query nobody else holds. A delta's
    query is most of what the compiler builds, and copying it at every wrapper made
    deep copies most of a compile's time.

    >>> from sqlglot import parse_one
    >>> exp.select("*").from_(parenthesized(parse_one("SELECT 1 AS a"), "_ivm_d")).sql()
    'SELECT * FROM (SELECT 1 AS a) AS _ivm_d'
    """
    return exp.Paren(this=query).as_(alias, copy=False)


def aliased(query: exp.Expr, alias: exp.TableAlias | str) -> exp.Subquery:
    """``(query) AS alias``, keeping a column list if the user's alias had one."""
    table_alias = (
        alias.copy()
        if isinstance(alias, exp.TableAlias)
        else exp.TableAlias(this=exp.to_identifier(alias))
    )
    return exp.Subquery(this=query, alias=table_alias)


def has_window(select: exp.Select) -> bool:
    """Whether ``select``'s own items hold a window function (not a nested query's)."""
    return any(own_windows(item) for item in select.expressions)


def own_windows(node: exp.Expr) -> list[exp.Window]:
    return [
        w
        for w in node.find_all(exp.Window)
        if not any(isinstance(p, exp.Query) for p in parents(w, node))
    ]


def parents(node: exp.Expr, top: exp.Expr) -> list[exp.Expr]:
    found, parent = [], node.parent
    while parent is not None and parent is not top:
        found.append(parent)
        parent = parent.parent
    return found


def uncorrelated(query: exp.Expr) -> bool:
    """Whether every qualified column of ``query`` names a relation defined inside it."""
    defined = {
        n.alias_or_name for n in query.find_all(exp.Table, exp.Subquery, exp.CTE, exp.Unnest)
    }
    defined |= {n.alias for n in query.find_all(exp.TableAlias) if n.alias}
    return all(not c.table or c.table in defined for c in query.find_all(exp.Column))
