"""Rewrite ``GROUP BY ROLLUP / CUBE / GROUPING SETS`` as a ``UNION ALL`` of plain GROUP BYs,
one per grouping set, which the aggregate and union operators then maintain.

In the branch of a grouping set, a grouping expression outside that set reads NULL wherever
the SELECT uses it outside an aggregate's argument, and ``GROUPING(a, b)`` /
``GROUPING_ID(a, b)`` is the constant bit mask of the arguments left out (``a`` the high
bit), as SQL defines them. The empty set is a global aggregate: one row even over no rows,
as SQL's ``ROLLUP`` gives (DuckDB; Spark gives none, and its branch keeps only a row over
some rows). ``ROLLUP(a, b)`` is the sets ``(a, b), (a), ()``; ``CUBE(a, b)`` every subset;
``GROUP BY a, ROLLUP(b)`` the product ``(a, b), (a)``; ``WITH ROLLUP`` / ``WITH CUBE``
apply to the whole GROUP BY; a set listed twice gives its rows twice. ``SELECT DISTINCT``
over grouping sets makes the branches' union distinct.

Runs after ``qualify_view``: grouping expressions and the SELECT's references to them are
spelled alike (``t.a``), so a reference is recognised by equality.

>>> from sqlglot import parse_one
>>> view = parse_one(
...     "SELECT t.a AS a, t.b AS b, GROUPING(t.a, t.b) AS g, SUM(t.x) AS s FROM t"
...     " GROUP BY ROLLUP (t.a, t.b)")
>>> for branch in expand_grouping_sets(view).sql().split(" UNION ALL "):
...     print(branch)
SELECT t.a AS a, t.b AS b, 0 AS g, SUM(t.x) AS s FROM t GROUP BY t.a, t.b
SELECT t.a AS a, NULL AS b, 1 AS g, SUM(t.x) AS s FROM t GROUP BY t.a
SELECT NULL AS a, NULL AS b, 3 AS g, SUM(t.x) AS s FROM t
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import has_window, rewrite_innermost_first
from duckstream.normalize.isolate_windows import isolate

# CUBE of n expressions is 2**n branches, each a scan of the input at both snapshots; the
# operator tree nests one union per branch (64 exceed Python's recursion limit).
MAX_SETS = 32


def expand_grouping_sets(expression: exp.Expr, grand_total_over_no_rows: bool = True) -> exp.Expr:
    """``grand_total_over_no_rows=False``: the empty set's branch gives no row over no rows
    (``HAVING COUNT(*) > 0``), as Spark's grouping sets do."""
    expression = expression.copy()
    selects = [s for s in expression.find_all(exp.Select) if _has_sets(s)]
    expression = rewrite_innermost_first(
        expression, selects, lambda s: _expand(s, grand_total_over_no_rows)
    )
    return expression


def _has_sets(select: exp.Select) -> bool:
    group = select.args.get("group")
    if group is None:
        return False
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        return True
    return any(isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in group.expressions)


def _expand(select: exp.Select, grand_total_over_no_rows: bool) -> exp.Query:
    text = select.sql()[:120]
    group = select.args["group"]
    if group.args.get("totals"):
        raise UnsupportedSQLError("grouping_sets", f"WITH TOTALS is not maintained: `{text}`")
    sets = grouping_sets(group)
    if has_window(select):
        # the windows read the union of the sets' rows: the aggregate under them is expanded
        # (as isolate_windows puts a GROUP BY under its windows), the windows stay on top
        isolated = isolate(select, _universe(sets))
        for under in isolated.find_all(exp.Subquery):  # (under a DISTINCT's, if any)
            if isinstance(under.this, exp.Select) and _has_sets(under.this):
                under.set("this", _expand(under.this, grand_total_over_no_rows))
                break
        return isolated
    if len(sets) > MAX_SETS:
        raise UnsupportedSQLError(
            "grouping_sets",
            f"{len(sets)} grouping sets (more than {MAX_SETS}) are not maintained: `{text}`",
        )
    universe = _universe(sets)
    branches = [_branch(select, grouping_set, universe) for grouping_set in sets]
    if not grand_total_over_no_rows:
        for grouping_set, branch in zip(sets, branches, strict=True):
            if not grouping_set:
                branch.having(
                    exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)),
                    copy=False,
                )
    if len(branches) == 1:
        return branches[0]
    # one n-ary call over branches built here: no copies (a pairwise fold copies the growing
    # left side at each step)
    return exp.union(*branches, distinct=bool(select.args.get("distinct")), copy=False)


def _universe(sets: list[list[exp.Expr]]) -> list[exp.Expr]:
    """Every expression some grouping set names, once, in order."""
    universe: list[exp.Expr] = []
    for grouping_set in sets:
        for e in grouping_set:
            if not any(e == u for u in universe):
                universe.append(e)
    return universe


def grouping_sets(group: exp.Group) -> list[list[exp.Expr]]:
    """The grouping sets of a GROUP BY, in SQL's order.

    >>> from sqlglot import parse_one
    >>> def sets(sql):
    ...     group = parse_one(sql).args["group"]
    ...     return [[e.sql() for e in s] for s in grouping_sets(group)]
    >>> sets("SELECT 1 FROM t GROUP BY a, ROLLUP (b, c)")
    [['a', 'b', 'c'], ['a', 'b'], ['a']]
    >>> sets("SELECT 1 FROM t GROUP BY CUBE (a, b)")
    [['a', 'b'], ['a'], ['b'], []]
    >>> sets("SELECT 1 FROM t GROUP BY GROUPING SETS ((a, b), a, ())")
    [['a', 'b'], ['a'], []]
    """
    factors: list[list[list[exp.Expr]]] = []
    plain = [e for e in group.expressions if not isinstance(e, exp.Rollup | exp.Cube)]
    plain = [e for e in plain if not isinstance(e, exp.GroupingSets)]
    if group.args.get("rollup") or group.args.get("cube"):  # WITH ROLLUP / WITH CUBE
        expand = _rollup if group.args.get("rollup") else _cube
        factors.append(expand([[e] for e in plain]))
    else:
        factors.extend([[e]] for e in plain)
    for e in group.expressions:
        if isinstance(e, exp.Rollup):
            factors.append(_rollup([_members(x) for x in e.expressions]))
        elif isinstance(e, exp.Cube):
            factors.append(_cube([_members(x) for x in e.expressions]))
        elif isinstance(e, exp.GroupingSets):
            factors.append([s for x in e.expressions for s in _listed_set(x)])
    for key in ("grouping_sets", "rollup", "cube"):
        for e in group.args.get(key) or []:
            if e.expressions:  # a bare WITH ROLLUP marker has none
                raise UnsupportedSQLError("grouping_sets", f"`{e.sql()}` is not maintained")
    result = []
    for combination in itertools.product(*factors):
        merged: list[exp.Expr] = []
        for part in combination:
            for e in part:
                if not any(e == m for m in merged):
                    merged.append(e)
        result.append(merged)
    return result


def _members(element: exp.Expr) -> list[exp.Expr]:
    """``(a, b)`` inside ROLLUP / CUBE is one unit of two expressions."""
    if isinstance(element, exp.Tuple | exp.Paren):
        inner = element.expressions if isinstance(element, exp.Tuple) else [element.this]
        return list(inner)
    return [element]


def _listed_set(element: exp.Expr) -> list[list[exp.Expr]]:
    """The sets one item of ``GROUPING SETS (...)`` stands for."""
    if isinstance(element, exp.Rollup):
        return _rollup([_members(x) for x in element.expressions])
    if isinstance(element, exp.Cube):
        return _cube([_members(x) for x in element.expressions])
    return [_members(element)]


def _rollup(units: list[list[exp.Expr]]) -> list[list[exp.Expr]]:
    return [[e for unit in units[:n] for e in unit] for n in range(len(units), -1, -1)]


def _cube(units: list[list[exp.Expr]]) -> list[list[exp.Expr]]:
    sets = []
    for kept in itertools.product([True, False], repeat=len(units)):
        sets.append([e for unit, keep in zip(units, kept, strict=True) if keep for e in unit])
    return sets


def _branch(select: exp.Select, grouping_set: list[exp.Expr], universe: list[exp.Expr]):
    branch = select.copy()
    branch.set("distinct", None)
    absent = [u for u in universe if not any(u == e for e in grouping_set)]

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Grouping | exp.GroupingId):
            args = node.expressions or universe  # Spark: grouping_id() is over all of them
            mask = 0
            for arg in args:
                if not any(arg == u for u in universe):
                    raise UnsupportedSQLError(
                        "grouping_sets", f"`{node.sql()}` names `{arg.sql()}`, not grouped by"
                    )
                mask = mask * 2 + any(arg == a for a in absent)
            return exp.Literal.number(mask)
        if isinstance(node, exp.AggFunc):
            return node  # an aggregate's argument reads the rows, not the grouping
        if any(node == a for a in absent):
            return exp.null()
        return node

    for key in ("expressions", "having"):
        value = branch.args.get(key)
        if isinstance(value, list):
            branch.set(key, [_transform(e, rewrite) for e in value])
        elif value is not None:
            branch.set(key, _transform(value, rewrite))
    if grouping_set:
        branch.set("group", exp.Group(expressions=[e.copy() for e in grouping_set]))
    else:
        branch.set("group", None)
    return branch


def _transform(node: exp.Expr, rewrite) -> exp.Expr:
    """``rewrite`` top-down, not descending into what it returned changed or into
    aggregates (``node.transform`` would visit the NULL's and the aggregate's children)."""
    replaced = rewrite(node)
    if replaced is not node or isinstance(node, exp.AggFunc):
        return replaced
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _transform(value, rewrite))
        elif isinstance(value, list):
            node.set(key, [_transform(v, rewrite) if isinstance(v, exp.Expr) else v for v in value])
    return node
