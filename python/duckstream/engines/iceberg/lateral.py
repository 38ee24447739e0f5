"""Table functions over a row's columns on Spark (``normalize.lateral_functions``' ``LATERAL
f(...) AS u(cols)``), rendered with Spark 3.5's generators:

- ``unnest(list)`` is ``LATERAL EXPLODE(list) AS u(c)``: a row per element, NULL elements
  kept, none for an empty or NULL list (``LEFT JOIN LATERAL ... ON TRUE`` keeps the row
  once, NULL-extended, as on DuckDB);
- a series is ``LATERAL EXPLODE(IF(start > end, ARRAY(), SEQUENCE(start, end, step)))``, the
  end moved one step in when excluded (``range``): Spark's ``sequence`` fails where the step
  goes away from the end (``sequence(5, 1, 1)``) where DuckDB gives no rows, hence the
  ``IF``; a NULL bound gives a NULL array and no rows on both. The step's sign must be a
  literal's (:func:`.series.check_series`).

A LATERAL subquery with LIMIT is refused on Spark (3.5 cannot correlate one); ``WITH
ORDINALITY`` is refused too (its ``posexplode`` counts from 0 in another column
order, and the count cannot be shifted inside the FROM item), and so are several generators
in one select list (Spark allows one), and a generator under SELECT DISTINCT (Spark refuses it
in the GROUP BY that maintains the DISTINCT).

>>> from sqlglot import parse_one
>>> from duckstream.normalize.lateral_functions import lateral_functions
>>> def spark(sql):
...     view = lateral_functions(parse_one(sql, read="duckdb"), "duckdb")
...     return spark_explode(view.args["joins"][0].this.this).sql("spark")
>>> spark("SELECT * FROM t, unnest(t.tags) AS u(x)")
'EXPLODE(t.tags)'
>>> spark("SELECT * FROM t, range(t.a, t.b) AS r(i)")
'EXPLODE(IF(t.a > t.b - 1, ARRAY(), SEQUENCE(t.a, t.b - 1, 1)))'
>>> spark("SELECT * FROM t, generate_series(t.b, 0, -2) AS r(i)")
'EXPLODE(IF(t.b < 0, ARRAY(), SEQUENCE(t.b, 0, -2)))'
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.engines.iceberg.series import series_step
from duckstream.errors import UnsupportedSQLError

FEATURE = "spark_unsupported"


def check_lateral(select: exp.Expr) -> None:
    """Refuse what Spark cannot render of the view's lateral functions and generators."""
    for lateral in select.find_all(exp.Lateral):
        function = lateral.this
        query = function.this if isinstance(function, exp.Subquery) else None
        if query is not None and (query.args.get("limit") or query.args.get("offset")):
            raise UnsupportedSQLError(
                FEATURE,
                "a LATERAL subquery with LIMIT / OFFSET: Spark 3.5 cannot correlate one"
                f" (ACCESSING_OUTER_QUERY_COLUMN_IS_NOT_ALLOWED): `{lateral.sql()[:80]}`",
            )
        if isinstance(function, exp.Unnest) and function.args.get("offset"):
            raise UnsupportedSQLError(
                FEATURE,
                "unnest WITH ORDINALITY is not rendered on Spark (posexplode counts from 0):"
                f" number the elements with a list function instead: `{lateral.sql()}`",
            )
    for query in select.find_all(exp.Select):
        generators = [i for i in query.expressions if i.find(exp.Explode, exp.Unnest)]
        if generators and query.args.get("distinct"):
            raise UnsupportedSQLError(
                FEATURE,
                "SELECT DISTINCT beside a generator (unnest / explode): Spark refuses it in the"
                f" GROUP BY that maintains it: unnest in FROM instead: `{query.sql()[:80]}`",
            )
        if len(generators) > 1:
            raise UnsupportedSQLError(
                FEATURE,
                "Spark allows one generator (unnest / explode) per select list: unnest in FROM"
                f" instead: `{query.sql()[:80]}`",
            )


def explode_laterals(select: exp.Select) -> exp.Select:
    """``select`` with the table functions over a row's columns among its joins as
    ``LATERAL EXPLODE(...)`` (a copy; ``select`` itself when it has none): the compiler's
    spelling (``normalize.lateral_functions``), and DuckDB's (``, unnest(t.x)``, a series over
    columns) for a view transpiled, its unnamed columns named as DuckDB names them.

    >>> from sqlglot import parse_one
    >>> explode_laterals(parse_one("SELECT * FROM t LEFT JOIN unnest(t.x) ON TRUE")).sql("spark")
    'SELECT * FROM t LEFT JOIN LATERAL EXPLODE(t.x) AS unnest(unnest) ON TRUE'
    >>> view = parse_one("SELECT * FROM t, range(t.a, 3) AS r(i)", read="duckdb")
    >>> explode_laterals(view).sql("spark")
    'SELECT * FROM t CROSS JOIN LATERAL EXPLODE(IF(t.a > 3 - 1, ARRAY(), SEQUENCE(t.a, 3 - 1, 1))) AS r(i)'
    """  # noqa: E501
    joins = select.args.get("joins") or []
    if not any(_function(j.this) is not None for j in joins):
        return select
    select = select.copy()
    for join in select.args["joins"]:
        function = _function(join.this)
        if function is None:
            continue
        alias = join.this.args.get("alias")
        alias = alias.copy() if alias is not None else exp.TableAlias()
        default = "unnest" if isinstance(function, exp.Unnest) else _series_name(function)
        if not alias.name:
            alias.set("this", exp.to_identifier(default))
        if not alias.columns:
            alias.set("columns", [exp.to_identifier(default)])
        join.set("this", exp.Lateral(this=spark_explode(function), alias=alias))
        if (join.side or "").upper() != "LEFT":
            join.set("kind", "CROSS")
            join.set("on", None)
    return select


def _function(node: exp.Expr) -> exp.Unnest | exp.GenerateSeries | None:
    """The unnest or series over a row's columns that the join item ``node`` calls, or
    ``None`` (``WITH ORDINALITY`` too: sqlglot's posexplode, refused by the compiler)."""
    function = node.this if isinstance(node, exp.Lateral | exp.Table) else node
    if isinstance(function, exp.Unnest) and not function.args.get("offset"):
        if isinstance(node, exp.Table):
            return None
    elif isinstance(function, exp.GenerateSeries):
        if isinstance(node, exp.Table) and function.find(exp.Column) is None:
            return None  # a constant series: Spark's range (series.py)
    else:
        return None
    found = function.copy()
    found.set("alias", None)
    if found.args.get("start") is None:  # range(b)
        found.set("start", exp.Literal.number(0))
    return found


def _series_name(series: exp.Expr) -> str:
    return "range" if series.args.get("is_end_exclusive") else "generate_series"


def spark_explode(function: exp.Expr) -> exp.Expr:
    """The ``EXPLODE(...)`` of a lateral function (an ``Unnest`` or a ``GenerateSeries``)."""
    if isinstance(function, exp.Unnest):
        return exp.Explode(this=function.expressions[0].copy())
    assert isinstance(function, exp.GenerateSeries), function
    step = series_step(function)
    assert step is not None, function.sql()
    start, end = function.args["start"].copy(), function.args["end"].copy()
    if function.args.get("is_end_exclusive"):
        one = exp.Literal.number(1)
        end = exp.Sub(this=end, expression=one) if step > 0 else exp.Add(this=end, expression=one)
    away = exp.GT if step > 0 else exp.LT
    sequence = exp.Anonymous(
        this="SEQUENCE", expressions=[start.copy(), end.copy(), exp.Literal.number(step)]
    )
    empty = exp.Anonymous(this="ARRAY", expressions=[])
    guarded = exp.If(this=away(this=start, expression=end), true=empty, false=sequence)
    return exp.Explode(this=guarded)
