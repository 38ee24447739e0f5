"""Spell the table functions over a row's columns one way: ``LATERAL f(...) AS alias(cols)``,
a CROSS JOIN (or a LEFT JOIN ... ON TRUE) after the relations it reads.

A table function that stands after other FROM items may read their columns: ``FROM t,
unnest(t.tags) AS u(tag)`` gives, for each row of ``t``, one row per element of its list
(none for an empty or NULL list; LEFT JOIN keeps the row once, NULL-extended). The spellings
of both engines become one node, ``exp.Lateral`` over an ``exp.Unnest`` (a list; DuckDB's
``unnest``, Spark's ``explode``, ``WITH ORDINALITY`` kept as the unnest's ``offset``) or an
``exp.GenerateSeries`` (DuckDB's ``range`` / ``generate_series``) whose arguments read a
column (Spark's ``explode(sequence(...))`` is the unnest of the array ``sequence`` makes):

- ``FROM t, unnest(t.tags) AS u(tag)``, ``CROSS JOIN [LATERAL] unnest(...)``, ``JOIN
  unnest(...) ON TRUE`` and ``LEFT JOIN [LATERAL] unnest(...) ON TRUE``;
- Spark's ``LATERAL VIEW [OUTER] explode(t.tags) u AS tag``, a CROSS (LEFT) join at the end
  of FROM, where Spark applies it.

A function without a column list gets the names its engine gives (DuckDB: ``unnest``,
``range``, ``generate_series``; Spark: ``col``), so that every later step reads the same
columns. A series with constant arguments stays a constant relation
(``normalize.constant_relations``). Validation refuses the rest by name (a function that is
first in FROM, RIGHT or FULL joins, an ON other than TRUE, ``unnest`` of several lists).

>>> from sqlglot import parse_one
>>> def spelled(sql, dialect="duckdb"):
...     return lateral_functions(parse_one(sql, read=dialect), dialect).sql("duckdb")
>>> spelled("SELECT u.tag FROM t, unnest(t.tags) AS u(tag)")
'SELECT u.tag FROM t CROSS JOIN LATERAL UNNEST(t.tags) AS u(tag)'
>>> spelled("SELECT * FROM t LEFT JOIN unnest(t.tags) ON TRUE")
'SELECT * FROM t LEFT JOIN LATERAL UNNEST(t.tags) AS unnest(unnest) ON TRUE'
>>> spelled("SELECT r.i FROM t, range(t.a, t.b) AS r(i)")
'SELECT r.i FROM t CROSS JOIN LATERAL RANGE(t.a, t.b) AS r(i)'
>>> spelled("SELECT u.tag FROM t LATERAL VIEW OUTER explode(t.tags) u AS tag", "spark")
'SELECT u.tag FROM t LEFT JOIN LATERAL UNNEST(t.tags) AS u(tag) ON TRUE'
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.normalize.constant_relations import is_constant_relation


def lateral_functions(expression: exp.Expr, dialect: str) -> exp.Expr:
    expression = expression.copy()
    for select in list(expression.find_all(exp.Select)):
        joins = list(select.args.get("joins") or [])
        for view in select.args.get("laterals") or []:
            joins.append(_from_lateral_view(view))
        if select.args.get("laterals"):
            select.set("laterals", None)
            select.set("joins", joins)
        for join in joins:
            function = lateral_function(join.this)
            if function is None or is_constant_relation(join.this):
                continue
            alias = _alias(join.this, function, dialect)
            join.set("this", exp.Lateral(this=function, alias=alias))
            if (join.side or "").upper() == "LEFT":
                join.set("kind", None)
            elif not join.side and (join.args.get("on") is None or _true(join.args["on"])):
                join.set("kind", "CROSS")
                join.set("on", None)
    return expression


def lateral_function(node: exp.Expr) -> exp.Unnest | exp.GenerateSeries | None:
    """The table function ``node`` (a FROM item) calls, as an ``Unnest`` or a
    ``GenerateSeries`` without alias (a copy), or ``None``.

    >>> from sqlglot import parse_one
    >>> def item(sql, dialect="duckdb"):
    ...     return parse_one(f"SELECT * FROM t, {sql}", read=dialect).args["joins"][0].this
    >>> lateral_function(item("LATERAL explode(t.tags) AS u(tag)", "spark")).sql("duckdb")
    'UNNEST(t.tags)'
    >>> lateral_function(item("LATERAL explode(sequence(t.a, 9)) AS s(n)", "spark")).sql("spark")
    'EXPLODE(SEQUENCE(t.a, 9))'
    >>> lateral_function(item("LATERAL (SELECT 1) AS s")) is None
    True
    """
    this = node.this if isinstance(node, exp.Lateral) else node
    if isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
        this = node.this
    if isinstance(this, exp.Unnest):
        found: exp.Unnest | exp.GenerateSeries = this.copy()
        found.set("alias", None)
        return found
    if isinstance(this, exp.Explode) and not isinstance(this, exp.Posexplode | exp.ExplodeOuter):
        # Spark's explode(sequence(a, b)) too: the elements of the array Spark's sequence
        # makes (it counts down where b < a, where DuckDB's series have no rows)
        return exp.Unnest(expressions=[this.this.copy()])
    if isinstance(this, exp.GenerateSeries):
        series = this.copy()
        if series.args.get("start") is None:
            series.set("start", exp.Literal.number(0))
        return series
    return None


def _from_lateral_view(view: exp.Lateral) -> exp.Join:
    """Spark's ``LATERAL VIEW [OUTER] explode(x) u AS c``: a join at the end of FROM."""
    lateral = exp.Lateral(this=view.this.copy(), alias=view.args.get("alias"))
    if view.args.get("outer"):
        return exp.Join(this=lateral, side="LEFT", on=exp.true())
    return exp.Join(this=lateral, kind="CROSS")


def _alias(node: exp.Expr, function: exp.Expr, dialect: str) -> exp.TableAlias:
    alias = node.args.get("alias")
    if alias is None and isinstance(node, exp.Lateral):
        alias = node.this.args.get("alias")
    alias = alias.copy() if alias is not None else exp.TableAlias()
    if isinstance(function, exp.Unnest):
        default = "col" if dialect == "spark" else "unnest"
        table = "unnest"
    else:
        default = "col" if dialect == "spark" else _series_name(function)
        table = _series_name(function)
    if not alias.name:
        alias.set("this", exp.to_identifier(table))
    if not alias.columns:
        alias.set("columns", [exp.to_identifier(default)])
    return alias


def _series_name(series: exp.Expr) -> str:
    return "range" if series.args.get("is_end_exclusive") else "generate_series"


def _true(condition: exp.Expr) -> bool:
    return isinstance(condition, exp.Boolean) and condition.this is True
