"""Number series on Spark: ``GenerateSeries`` (``normalize.constant_relations``' spelling of
``range`` / ``generate_series``) rendered as Spark's ``range(start, end, step)``.

Spark's ``range`` excludes its end, as DuckDB's ``range`` does, and gives BIGINT, as both
DuckDB functions do; an end included (``generate_series``) is moved one step past: ``end +
1`` for a rising series, ``end - 1`` for a falling one, so the step's sign must be known at
compile time (a literal). Spark's other series, ``explode(sequence(...))``, is not used: it
fails where the step goes away from the end (``sequence(5, 1, 1)``) where DuckDB gives no
rows, and its dates are DATEs where DuckDB's are TIMESTAMPs. Series over dates or
timestamps are refused on Spark (:func:`check_series`); a date spine is written as numbers
and ``date_add`` (as ``dbt_utils.date_spine`` does).

>>> from sqlglot import parse_one
>>> def series(sql):
...     return parse_one(f"SELECT * FROM {sql}", read="duckdb").find(exp.GenerateSeries)
>>> spark_range(series("generate_series(5, 1, -2) AS s(n)")).sql("spark")
'RANGE(5, 1 - 1, -2)'
>>> spark_range(series("range(0, 3) AS s(n)")).sql("spark")
'RANGE(0, 3, 1)'
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError


def check_series(select: exp.Expr) -> None:
    """Refuse a series Spark cannot render exactly: not over integers, or with a step whose
    sign is not a literal's."""
    for series in select.find_all(exp.GenerateSeries):
        arguments = [series.args.get(k) for k in ("start", "end", "step")]
        if not isinstance(series.parent, exp.Table | exp.Lateral):
            continue  # an array (Spark's sequence()), not a relation
        # over a row's columns (``.lateral``) Spark's sequence checks their type itself
        lateral = isinstance(series.parent, exp.Lateral)
        integral = lateral or all(a is None or _integral(a) for a in arguments)
        if not integral or _step(series) is None:
            raise UnsupportedSQLError(
                "spark_unsupported",
                "a series (range / generate_series) on Spark must count integers with a literal"
                " step (for a date spine: count days and add them with date_add):"
                f" `{series.sql()}`",
            )


def spark_range(series: exp.GenerateSeries) -> exp.Expr:
    """``RANGE(start, end, step)`` with the end excluded, for :func:`check_series`' series."""
    step = _step(series)
    assert step is not None, series.sql()
    end = series.args["end"].copy()
    if not series.args.get("is_end_exclusive"):
        one = exp.Literal.number(1)
        end = exp.Add(this=end, expression=one) if step > 0 else exp.Sub(this=end, expression=one)
    arguments = [series.args["start"].copy(), end, exp.Literal.number(step)]
    return exp.Anonymous(this="RANGE", expressions=arguments)


def series_step(series: exp.GenerateSeries) -> int | None:
    """The series' step as an integer (1 when none is given), or ``None`` when it is not a
    literal (or is 0)."""
    return _step(series)


def _step(series: exp.GenerateSeries) -> int | None:
    step = series.args.get("step")
    if step is None:
        return 1
    value = _literal_integer(step)
    return value if value else None  # a step of 0 fails on both engines: not rendered


def _literal_integer(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Paren):
        return _literal_integer(node.this)
    if isinstance(node, exp.Neg):
        inner = _literal_integer(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Literal) and not node.is_string and node.is_int:
        return int(node.this)
    return None


_INTEGRAL = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
}


def _integral(node: exp.Expr) -> bool:
    """Whether ``node`` is an integer: integer literals, casts to integer types and
    arithmetic (``+ - *``) over those."""
    if _literal_integer(node) is not None:
        return True
    if isinstance(node, exp.Cast):
        return node.to.this in _INTEGRAL
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return _integral(node.this) and _integral(node.expression)
    return False
