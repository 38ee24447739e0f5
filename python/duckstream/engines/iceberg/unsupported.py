"""What Spark cannot maintain exactly although DuckDB can: refused at compile time.

**Division over a DECIMAL SUM or AVG of a type it cannot tell** (``sum(a) / sum(b)``,
``sum(a) / count(*)``, ``avg(a) / 2`` in a grouped view). Spark types decimal arithmetic by
precision: the quotient's scale depends on the precision of its operands. A maintained row
computes the visible value from hidden running sums whose precision grew while merging deltas
(``DECIMAL(25,2)`` becomes ``DECIMAL(37,2)``), so its quotient would be rounded at another digit
than the recomputed view's. With ``schema=``, the engine works out Spark's type of each such
aggregate and casts the running sum back to it (:mod:`.decimals`); where it cannot (no
schema, a function it does not type), it refuses. Ways out for the user: pass ``schema=``,
or cast (``CAST(sum(a) AS DOUBLE) / ...``; a cast to an explicit DECIMAL(p, s) is exact
too). DuckDB divides decimals in DOUBLE and is not affected; aggregates inside derived tables
are recomputed per affected group and are not affected either.

**``x IN (subquery)`` where its value is more than a filter** (in the select list, under
``IS NULL``, compared, in a CASE of the select list): Spark 3.5 gives FALSE where SQL gives
UNKNOWN (``NULL IN (SELECT ...)`` over rows, ``5 IN (SELECT ...)`` over a NULL and no 5), so
its recomputation and a maintained table (SQL's three values) would differ. In WHERE and
HAVING under AND, OR and NOT, Spark keeps SQL's meaning, and there it is maintained.

**``x op ANY / ALL (subquery)``**: Spark SQL does not parse it (sqlglot does).

**An untyped NULL column** (``SELECT DISTINCT k, NULL AS z``, or a set operation whose branches
all give NULL there): Spark types it ``void``, which an Iceberg table cannot hold. Way out:
give it a type, ``CAST(NULL AS STRING) AS z``.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from duckstream.engines.iceberg.decimals import Decimal, Typer, running_total_scale
from duckstream.errors import UnsupportedSQLError

FEATURE = "spark_unsupported"


def check_view(select: exp.Select, schema: dict | None) -> None:
    """Raise :class:`UnsupportedSQLError` (feature ``spark_unsupported``) for a construct
    this engine cannot maintain exactly."""
    for item in [*select.expressions, *_null_in_every_branch(select)]:
        if isinstance(item.unalias(), exp.Null):
            raise UnsupportedSQLError(
                FEATURE,
                "an untyped NULL column cannot be stored in an Iceberg table (Spark types it"
                f" void); give it a type, e.g. CAST(NULL AS STRING): `{item.sql()}`",
            )
    aggregated = select.args.get("group") or any(i.find(exp.AggFunc) for i in select.expressions)
    if not aggregated:
        return
    _check_running_totals(select, schema)
    typed = _annotated(select, schema)
    having = typed.args.get("having")
    for node in [*typed.expressions, *([having.this] if having else [])]:
        for division in node.find_all(exp.Div):
            for operand in (division.this, division.expression):
                for aggregate in _exposed(operand):
                    if _maybe_decimal(aggregate.this):
                        raise UnsupportedSQLError(
                            FEATURE,
                            "division over a SUM/AVG that may be DECIMAL, of a type duckstream"
                            " cannot tell: Spark's decimal precision would drift as deltas"
                            " merge; pass schema= (then the type is kept), or cast it, e.g."
                            f" CAST(sum(x) AS DOUBLE): `{division.sql()}`",
                        )


def _check_running_totals(select: exp.Select, schema: dict | None) -> None:
    """Refuse a SUM / AVG of a DECIMAL whose scale Spark would shrink in the running total
    (:func:`~.decimals.running_total_scale`: a scale above 6 with many digits, e.g.
    DECIMAL(18,8)). Only where the schema tells the type."""
    if not schema:
        return
    typer = Typer(select, schema)
    having = select.args.get("having")
    for node in [*select.expressions, *([having] if having else [])]:
        for aggregate in node.find_all(exp.Sum, exp.Avg):
            argument = typer.type_of(aggregate.this)
            if not isinstance(argument, Decimal):
                continue
            if isinstance(aggregate, exp.Avg) and argument.scale > AVG_MAX_SCALE:
                raise UnsupportedSQLError(FEATURE, avg_message(argument.scale, aggregate.sql()))
            if running_total_scale(argument) < argument.scale:
                raise UnsupportedSQLError(
                    FEATURE,
                    f"a SUM/AVG of DECIMAL({argument.precision},{argument.scale}): Spark gives"
                    " up digits of scale past 6 when a running total of that many digits"
                    " merges a change (the sums would be rounded); cast the argument, e.g. to"
                    f" DECIMAL({argument.precision},6) or DOUBLE: `{aggregate.sql('spark')}`",
                )


# An AVG of DECIMAL(p, s) is DECIMAL with scale s + 4. Its maintained value divides the running
# total (whose precision widens to 38 as changes merge) by the count, and Spark then keeps
# max(s, 6) digits of the quotient: enough for s + 4 only up to s = 2.
AVG_MAX_SCALE = 2


def avg_message(scale: int, text: str) -> str:
    """Why an AVG of a DECIMAL with ``scale`` is refused (``text``: where)."""
    return (
        f"an AVG of a DECIMAL with scale {scale}: Spark types it with scale {scale + 4}, and"
        f" the maintained quotient of the running total keeps only {max(scale, 6)} digits of"
        f" scale (an AVG of a DECIMAL with scale up to {AVG_MAX_SCALE} is maintained); cast"
        f" the argument, e.g. to DOUBLE: `{text}`"
    )


def check_written(view: exp.Expr) -> None:
    """Refuse ``IN (subquery)`` where Spark's FALSE for SQL's UNKNOWN would show: anywhere but
    in WHERE or HAVING through AND, OR, NOT and parentheses; and ``op ANY / ALL (subquery)``,
    which Spark SQL does not parse (the view could not be recomputed)."""
    for quantified in view.find_all(exp.Any, exp.All):
        if isinstance(quantified.this, exp.Query | exp.Subquery):
            text = (quantified.parent or quantified).sql()
            raise UnsupportedSQLError(
                FEATURE,
                "Spark SQL has no ANY / SOME / ALL over a subquery; write it with IN, EXISTS"
                f" or an aggregate (e.g. x > (SELECT max(v) ...)): `{text}`",
            )
    for node in view.find_all(exp.In):
        if not isinstance(node.args.get("query"), exp.Expr):
            continue
        parent = node.parent
        while isinstance(parent, exp.And | exp.Or | exp.Not | exp.Paren):
            parent = parent.parent
        if not isinstance(parent, exp.Where | exp.Having):
            raise UnsupportedSQLError(
                FEATURE,
                "IN (subquery) is maintained on Spark only as a filter (in WHERE or HAVING,"
                " under AND, OR, NOT): elsewhere Spark gives FALSE where SQL gives UNKNOWN"
                f" (NULL): `{node.sql(dialect='spark')}`",
            )


def _null_in_every_branch(select: exp.Select) -> list[exp.Expr]:
    """The items of set operations that are an untyped NULL in every branch (Spark types the
    column void; a NULL in some branches only takes the others' type)."""
    found = []
    for operation in select.find_all(exp.SetOperation):
        parent = operation.parent
        while isinstance(parent, exp.Subquery) and not parent.alias:
            parent = parent.parent
        if isinstance(parent, exp.SetOperation):
            continue  # a branch of a larger one: checked with it
        for items in zip(*(b.expressions for b in _branches(operation)), strict=False):
            if all(isinstance(i.unalias(), exp.Null) for i in items):
                found.append(items[0])
    return found


def _branches(node: exp.Expr) -> list[exp.Select]:
    """The SELECTs a set operation stacks, nested ones included."""
    if isinstance(node, exp.Subquery):
        return _branches(node.this)
    if isinstance(node, exp.SetOperation):
        return _branches(node.this) + _branches(node.expression)
    return [node] if isinstance(node, exp.Select) else []


def _annotated(select: exp.Select, schema: dict | None) -> exp.Select:
    if schema is None:
        return select
    try:
        typed = annotate_types(select.copy(), schema=schema, dialect="spark")
    except Exception:  # noqa: BLE001 - unknown types only make the check conservative
        return select
    assert isinstance(typed, exp.Select)
    return typed


def _exposed(operand: exp.Expr) -> list[exp.Expr]:
    """SUM/AVG calls (not DISTINCT) whose type reaches ``operand``: a cast fixes the type."""
    found = []
    for node in operand.walk(prune=lambda n: isinstance(n, exp.Cast)):
        if isinstance(node, exp.Sum | exp.Avg) and not isinstance(node.this, exp.Distinct):
            found.append(node)
    return found


def _maybe_decimal(argument: exp.Expr) -> bool:
    type_ = argument.type
    if type_ is None or type_.is_type(exp.DataType.Type.UNKNOWN):
        return True
    return type_.is_type(exp.DataType.Type.DECIMAL, exp.DataType.Type.BIGDECIMAL)
