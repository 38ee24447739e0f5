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
in one select list (Spark allows one).

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
from duckstream.normalize.constant_relations import is_constant_relation
from duckstream.normalize.lateral_functions import lateral_function, lateral_functions

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
        if len(generators) > 1:
            raise UnsupportedSQLError(
                FEATURE,
                "Spark allows one generator (unnest / explode) per select list: unnest in FROM"
                f" instead: `{query.sql()[:80]}`",
            )


def explode_laterals(select: exp.Select) -> exp.Select:
    """``select`` with the table functions over a row's columns among its joins as
    ``LATERAL EXPLODE(...)`` (a copy; ``select`` itself when it has none), however they are
    spelled (``normalize.lateral_functions``): a view written for DuckDB transpiles too.

    >>> from sqlglot import parse_one
    >>> explode_laterals(parse_one("SELECT * FROM t LEFT JOIN unnest(t.x) ON TRUE")).sql("spark")
    'SELECT * FROM t LEFT JOIN LATERAL EXPLODE(t.x) AS unnest(unnest) ON TRUE'
    """
    joins = select.args.get("joins") or []
    if not any(_function(j.this) for j in joins):
        return select
    # unnamed columns as DuckDB names them: what reaches here unnormalized is a DuckDB
    # view transpiled (the compiler names them first)
    spelled = lateral_functions(select, "duckdb")
    assert isinstance(spelled, exp.Select)
    for join in spelled.args["joins"]:
        if isinstance(join.this, exp.Lateral) and _function(join.this):
            join.this.set("this", spark_explode(join.this.this))
    return spelled


def _function(node: exp.Expr) -> bool:
    if isinstance(node, exp.Lateral) and isinstance(node.this, exp.Explode):
        return False  # Spark's own spelling already
    if isinstance(node, exp.Lateral | exp.Unnest) and node.find(exp.Unnest, bfs=False):
        unnest = node if isinstance(node, exp.Unnest) else node.this
        if isinstance(unnest, exp.Unnest) and unnest.args.get("offset"):
            return False  # WITH ORDINALITY: sqlglot's posexplode, refused (check_lateral)
    return lateral_function(node) is not None and not is_constant_relation(node)


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
