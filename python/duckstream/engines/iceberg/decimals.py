"""Spark's types of decimal arithmetic, to keep a maintained aggregate at the type Spark gives it.

Spark types decimal arithmetic by precision (``DecimalPrecision``, with
``spark.sql.decimalOperations.allowPrecisionLoss`` on, the default): DECIMAL(15,2) plus
DECIMAL(15,2) is DECIMAL(16,2), ``sum`` of DECIMAL(p, s) is DECIMAL(min(38, p + 10), s). A
maintained SUM is a running total, the old total plus the window's delta, and Spark widens
its type at every such step: same value, another type. A division's scale follows its
operands' precision, so ``sum(x) / 7.0`` of the running total rounds at another digit than the
recomputation's. :func:`pin_aggregate_types` casts each SUM / AVG of a DECIMAL in the view's
select list and HAVING to the type Spark gives it: the view's result is unchanged (the cast
is to the type the value already has), and the maintained value is computed at that type.

Types are worked out from the view's own SQL and the ``schema`` passed to the compiler; an
expression whose type this module cannot tell (a function it does not know, a column of a
table the schema does not describe) is left alone, and the engine's check refuses the
division it would make inexact (:mod:`.unsupported`).

>>> import sqlglot
>>> schema = {"t": {"k": "INT", "x": "DECIMAL(15,2)", "d": "DECIMAL(15,2)"}}
>>> view = sqlglot.parse_one(
...     "SELECT t.k, SUM(t.x) / 7.0 AS a, SUM(t.x * (1 - t.d)) / SUM(t.x) AS b,"
...     " AVG(t.x) AS c FROM t GROUP BY t.k", read="spark")
>>> for item in pin_aggregate_types(view, schema).expressions[1:]:
...     print(item.sql("spark"))
CAST(SUM(t.x) AS DECIMAL(25, 2)) / 7.0 AS a
CAST(SUM(t.x * (1 - t.d)) AS DECIMAL(38, 4)) / CAST(SUM(t.x) AS DECIMAL(25, 2)) AS b
CAST(AVG(t.x) AS DECIMAL(19, 6)) AS c
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope
from sqlglot.schema import MappingSchema

from duckstream.expressions import in_subquery

MAX_PRECISION = 38
MIN_ADJUSTED_SCALE = 6
# Integers meet decimals as these (DecimalType.forType); an integer literal as its digits.
INTEGER_PRECISION = {
    exp.DataType.Type.TINYINT: 3,
    exp.DataType.Type.SMALLINT: 5,
    exp.DataType.Type.INT: 10,
    exp.DataType.Type.BIGINT: 20,
}


@dataclass(frozen=True)
class Decimal:
    """DECIMAL(precision, scale)."""

    precision: int
    scale: int

    def data_type(self) -> exp.DataType:
        return exp.DataType.build(f"DECIMAL({self.precision}, {self.scale})")


@dataclass(frozen=True)
class Integer:
    """An integer type, as the DECIMAL(precision, 0) it becomes beside a decimal;
    ``literal``: a literal, which becomes the DECIMAL of its own digits there."""

    precision: int
    literal: bool = False


class Other:
    """A type that is neither: floating point, string, date, boolean, ..."""


OTHER = Other()
SparkType = Decimal | Integer | Other | None  # None: not known


def adjust(precision: int, scale: int) -> Decimal:
    """Spark's ``DecimalType.adjustPrecisionScale``: past 38 digits, keep the integer digits
    and give up scale, down to 6.

    >>> adjust(39, 2)
    Decimal(precision=38, scale=2)
    >>> adjust(53, 28), adjust(79, 41)
    (Decimal(precision=38, scale=13), Decimal(precision=38, scale=6))
    """
    if precision <= MAX_PRECISION:
        return Decimal(precision, scale)
    integer_digits = precision - scale
    minimum = min(scale, MIN_ADJUSTED_SCALE)
    return Decimal(MAX_PRECISION, max(MAX_PRECISION - integer_digits, minimum))


def bounded(precision: int, scale: int) -> Decimal:
    return Decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def _as_decimal(type_: Decimal | Integer) -> Decimal:
    return type_ if isinstance(type_, Decimal) else Decimal(type_.precision, 0)


def arithmetic(node: exp.Expr, left: SparkType, right: SparkType) -> SparkType:
    """The type of ``left op right`` (``node`` is the operation).

    >>> arithmetic(exp.Mul(), Decimal(15, 2), Decimal(16, 2))
    Decimal(precision=32, scale=4)
    >>> arithmetic(exp.Sub(), Integer(1, literal=True), Decimal(15, 2))
    Decimal(precision=16, scale=2)
    >>> arithmetic(exp.Div(), Decimal(25, 2), Decimal(2, 1))
    Decimal(precision=30, scale=6)
    """
    if left is None or right is None:
        return None
    if isinstance(left, Other) or isinstance(right, Other):
        return OTHER
    if isinstance(left, Integer) and isinstance(right, Integer):
        # Integer arithmetic stays integral; ``/`` of integers is DOUBLE: neither is DECIMAL.
        if isinstance(node, exp.Div):
            return OTHER
        return Integer(max(_typed(left).precision, _typed(right).precision))
    a, b = _as_decimal(left), _as_decimal(right)
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if isinstance(node, exp.Add | exp.Sub):
        scale = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if isinstance(node, exp.Mul):
        return adjust(p1 + p2 + 1, s1 + s2)
    if isinstance(node, exp.Div):
        scale = max(MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + scale, scale)
    if isinstance(node, exp.Mod):
        scale = max(s1, s2)
        return adjust(min(p1 - s1, p2 - s2) + scale, scale)
    return None


def _typed(integer: Integer) -> Integer:
    """An integer literal as the INT it is outside arithmetic with a decimal."""
    return Integer(INTEGER_PRECISION[exp.DataType.Type.INT]) if integer.literal else integer


def wider(types: list[SparkType]) -> SparkType:
    """The common type of CASE / COALESCE branches (``DecimalPrecision.widerDecimalType``;
    integers as DECIMAL(10,0) and so on, literals too)."""
    if any(t is None for t in types):
        return None
    if any(isinstance(t, Other) for t in types):
        return OTHER
    known = [t for t in types if isinstance(t, Decimal | Integer)]
    if not any(isinstance(t, Decimal) for t in known):
        return Integer(max(_typed(t).precision for t in known if isinstance(t, Integer)))
    decimals = [t if isinstance(t, Decimal) else Decimal(_typed(t).precision, 0) for t in known]
    scale = max(d.scale for d in decimals)
    return bounded(max(d.precision - d.scale for d in decimals) + scale, scale)


def of_data_type(data_type: exp.DataType | None) -> SparkType:
    if data_type is None or data_type.is_type(exp.DataType.Type.UNKNOWN):
        return None
    if data_type.is_type(exp.DataType.Type.DECIMAL):
        params = [int(p.name) for p in data_type.expressions]
        precision, scale = (params + [10, 0][len(params) :])[:2]
        return Decimal(precision, scale)
    for kind, precision in INTEGER_PRECISION.items():
        if data_type.is_type(kind):
            return Integer(precision)
    return OTHER


def of_literal(literal: exp.Literal) -> SparkType:
    """An integer literal as the DECIMAL of its digits; ``7.0`` as DECIMAL(2,1) (Java's
    BigDecimal precision and scale); an exponent makes a DOUBLE."""
    if literal.is_string:
        return OTHER
    text = literal.name.lstrip("-")
    if "e" in text.lower():
        return OTHER
    whole, _, fraction = text.partition(".")
    if not fraction and "." not in text:
        digits = len(whole.lstrip("0")) or 1
        # Ten digits may be an INT or a BIGINT: not told apart here.
        return Integer(digits, literal=True) if digits < 10 else None
    significant = (whole + fraction).lstrip("0")
    return Decimal(max(len(significant) or 1, len(fraction)), len(fraction))


class Typer:
    """Spark types of expressions in the scopes of one SELECT, with ``schema`` for tables."""

    def __init__(self, select: exp.Select, schema: dict) -> None:
        self.schema = MappingSchema(schema, dialect="spark")
        self.root = build_scope(select)

    def type_of(self, node: exp.Expr, scope: Scope | None = None) -> SparkType:
        scope = scope or self.root
        if scope is None:
            return None
        if isinstance(node, exp.Paren | exp.Alias):
            return self.type_of(node.this, scope)
        if isinstance(node, exp.Neg):
            return self.type_of(node.this, scope)
        if isinstance(node, exp.Literal):
            return of_literal(node)
        if isinstance(node, exp.Cast):
            return of_data_type(node.to)
        if isinstance(node, exp.Column):
            return self._column(node, scope)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
            left = self.type_of(node.this, scope)
            return arithmetic(node, left, self.type_of(node.expression, scope))
        if isinstance(node, exp.Case):
            branches = [i.args["true"] for i in node.args.get("ifs") or []]
            branches += [node.args["default"]] if node.args.get("default") else []
            return wider([self.type_of(b, scope) for b in branches if not _is_null(b)])
        if isinstance(node, exp.Coalesce):
            values = [node.this, *node.expressions]
            return wider([self.type_of(v, scope) for v in values if not _is_null(v)])
        if isinstance(node, exp.Sum | exp.Avg):
            return aggregate_type(node, self.type_of(node.this, scope))
        if isinstance(node, exp.Min | exp.Max):
            argument = self.type_of(node.this, scope)
            return _typed(argument) if isinstance(argument, Integer) else argument
        if isinstance(node, exp.Count):
            return Integer(20)
        if isinstance(node, exp.Predicate | exp.Connector | exp.Not):
            return OTHER
        return None

    def _column(self, column: exp.Column, scope: Scope) -> SparkType:
        source = scope.sources.get(column.table) if column.table else None
        if isinstance(source, exp.Table):
            try:
                data_type = self.schema.get_column_type(source, column.name)
            except Exception:  # noqa: BLE001 - a table the schema does not describe
                return None
            return of_data_type(data_type)
        if isinstance(source, Scope) and isinstance(source.expression, exp.Select):
            for item in source.expression.expressions:
                if item.alias_or_name == column.name:
                    return self.type_of(item, source)
        return None


def aggregate_type(node: exp.Sum | exp.Avg, argument: SparkType) -> SparkType:
    """SUM of DECIMAL(p, s) is DECIMAL(min(38, p + 10), s); AVG is DECIMAL(min(38, p + 4),
    min(38, s + 4)); of integers, BIGINT and DOUBLE."""
    if isinstance(node.this, exp.Distinct):
        return None
    if isinstance(argument, Decimal):
        p, s = argument.precision, argument.scale
        return bounded(p + 10, s) if isinstance(node, exp.Sum) else bounded(p + 4, s + 4)
    if isinstance(argument, Integer):
        return Integer(20) if isinstance(node, exp.Sum) else OTHER
    return argument


def running_total_scale(argument: Decimal) -> int:
    """The scale a maintained SUM of ``argument`` keeps on Spark: each delta row's value times
    its multiplicity (a BIGINT), summed, added to the old total. Past 38 digits Spark gives
    up scale down to 6, so a scale above 6 can shrink: wrong sums, refused.

    >>> running_total_scale(Decimal(15, 2)), running_total_scale(Decimal(20, 6))
    (2, 6)
    >>> running_total_scale(Decimal(18, 8)), running_total_scale(Decimal(38, 10))
    (6, 6)

    A total of 38 digits (an argument of 28 or more) loses scale exactly when it is above 6:

    >>> all((running_total_scale(Decimal(p, s)) < s) == (s > 6)
    ...     for p in range(28, 39) for s in range(p + 1))
    True
    """
    times_multiplicity = arithmetic(exp.Mul(), argument, Integer(20))
    delta = aggregate_type(exp.Sum(), times_multiplicity)
    total = aggregate_type(exp.Sum(), argument)
    merged = arithmetic(exp.Add(), total, delta)
    assert isinstance(times_multiplicity, Decimal) and isinstance(merged, Decimal)
    return min(times_multiplicity.scale, merged.scale)


def _is_null(node: exp.Expr) -> bool:
    return isinstance(node, exp.Null)


def pin_aggregate_types(select: exp.Select, schema: dict | None) -> exp.Select:
    """``select`` with each SUM / AVG of a DECIMAL in its select list and HAVING cast to the
    type Spark gives it (outside a cast already); unchanged without ``schema``."""
    if not schema:
        return select
    typer = Typer(select, schema)
    pinned = select.copy()
    having = pinned.args.get("having")
    for node in [*pinned.expressions, *([having] if having else [])]:
        for aggregate in list(node.find_all(exp.Sum, exp.Avg)):
            if isinstance(aggregate.parent, exp.Cast) or in_subquery(aggregate, node):
                continue
            type_ = typer.type_of(aggregate)
            if isinstance(type_, Decimal):
                aggregate.replace(exp.Cast(this=aggregate.copy(), to=type_.data_type()))
    return pinned
