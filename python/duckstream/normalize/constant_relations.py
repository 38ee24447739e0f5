"""Spell constant relations in FROM one way: ``VALUES`` lists and number or date series with
constant arguments, each under an alias that names its columns.

The series functions of both engines become sqlglot's ``GenerateSeries`` (an engine renders
it: DuckDB as ``range`` / ``generate_series``, Spark as ``range``): DuckDB's ``range(b)``,
``range(a, b[, step])`` (end excluded) and ``generate_series(a, b[, step])`` (end included),
Spark's ``range(...)`` and ``explode(sequence(a, b[, step]))``. A relation without a column
list gets the names its engine gives (DuckDB: ``range``, ``generate_series``, ``col0``,
``col1``...; Spark: ``id``, ``col``, ``col1``, ``col2``...), so every later step and both
engines read the same columns. A ``VALUES`` that ``inline_ctes`` left as the body of a derived
table (``WITH v(a) AS (VALUES (1))``) is lifted to stand in FROM itself.

Whether an argument is constant is checked by :func:`is_constant_relation` (validation).

>>> from sqlglot import parse_one
>>> constant_relations(parse_one("SELECT * FROM t, range(3)"), "duckdb").sql("duckdb")
'SELECT * FROM t, RANGE(0, 3) AS range(range)'
>>> constant_relations(parse_one("SELECT * FROM range(3) AS r", read="spark"), "spark").sql()
'SELECT * FROM GENERATE_SERIES(0, 3) AS r(id)'
>>> constant_relations(parse_one("SELECT * FROM (VALUES (1, 'a')) AS v"), "duckdb").sql()
"SELECT * FROM (VALUES (1, 'a')) AS v(col0, col1)"
>>> constant_relations(parse_one("SELECT * FROM (VALUES (1)) AS v(k)"), "spark").sql()
'SELECT * FROM (VALUES (1)) AS v(k)'
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.expressions import varies

SERIES_FUNCTIONS = ("range", "generate_series")


def constant_relations(expression: exp.Expr, dialect: str) -> exp.Expr:
    expression = expression.copy()
    for node in list(expression.find_all(exp.Table, exp.Values, exp.Subquery)):
        if isinstance(node, exp.Table):
            series = _series(node)
            if series is not None:
                name = "range" if series.args.get("is_end_exclusive") else "generate_series"
                default = _SPARK_SERIES_COLUMN[_series_call(node)] if dialect == "spark" else name
                node.set("this", series)
                _name_columns(node, name, [default])
        elif isinstance(node, exp.Values) and isinstance(node.parent, exp.From | exp.Join):
            _name_values(node, dialect)
        elif isinstance(node, exp.Subquery) and isinstance(node.this, exp.Values):
            values = node.this.copy()
            values.set("alias", node.args.get("alias"))
            _name_values(values, dialect)
            node.replace(values)
    return expression


_SPARK_SERIES_COLUMN = {"range": "id", "generate_series": "id", "explode": "col"}


def is_constant_relation(node: exp.Expr) -> bool:
    """Whether ``node`` (a FROM item) is a constant relation this module spells: a ``VALUES``
    list or a series function, with no column, subquery or window among its values.

    >>> from sqlglot import parse_one
    >>> [is_constant_relation(parse_one(f"SELECT * FROM {f}").args["from_"].this)
    ...     for f in ("range(1, 2 + 3)", "range(t.k)", "(VALUES (1), (2)) v", "unnest([1])")]
    [True, False, True, False]
    """
    if isinstance(node, exp.Values):
        return _constant(node)
    return isinstance(node, exp.Table) and _series(node) is not None and _constant(node.this)


def _constant(node: exp.Expr) -> bool:
    found = node.find(exp.Column, exp.Query, exp.Window, exp.AggFunc, exp.Placeholder)
    return found is None and not varies(node)


def _series_call(table: exp.Table) -> str:
    """``range``, ``generate_series`` or ``explode``: how the view spelled the series."""
    this = table.this
    if isinstance(this, exp.Explode):
        return "explode"
    if isinstance(this, exp.Anonymous):
        return this.name.lower()
    return "range" if this.args.get("is_end_exclusive") else "generate_series"


def _series(table: exp.Table) -> exp.GenerateSeries | None:
    """The series ``table`` reads, as a ``GenerateSeries`` (a copy), or ``None``."""
    this = table.this
    if isinstance(this, exp.GenerateSeries):
        series = this.copy()
    elif isinstance(this, exp.Explode) and isinstance(this.this, exp.GenerateSeries):
        series = this.this.copy()  # Spark's explode(sequence(...)): the end included
        series.set("is_end_exclusive", False)
    elif isinstance(this, exp.Anonymous) and this.name.lower() in SERIES_FUNCTIONS:
        arguments = [a.copy() for a in this.expressions]
        if not 1 <= len(arguments) <= 3:
            return None
        if len(arguments) == 1:
            arguments.insert(0, exp.Literal.number(0))
        series = exp.GenerateSeries(
            start=arguments[0],
            end=arguments[1],
            step=arguments[2] if len(arguments) == 3 else None,
            is_end_exclusive=this.name.lower() == "range",
        )
    else:
        return None
    if series.args.get("start") is None:  # range(b)
        series.set("start", exp.Literal.number(0))
    return series


def _name_columns(node: exp.Expr, alias: str, columns: list[str]) -> None:
    table_alias = node.args.get("alias")
    if table_alias is None:
        table_alias = exp.TableAlias(this=exp.to_identifier(alias))
        node.set("alias", table_alias)
    if not table_alias.columns:
        table_alias.set("columns", [exp.to_identifier(c) for c in columns])


def _name_values(values: exp.Values, dialect: str) -> None:
    width = len(values.expressions[0].expressions) if values.expressions else 0
    first = 1 if dialect == "spark" else 0
    _name_columns(values, "valueslist", [f"col{i + first}" for i in range(width)])
