"""The marks of the clock in a view: ``_ivm_clock('<kind>')`` stands for the value of the
refresh's clock of that kind (``current_date``, ``current_timestamp``, ``localtimestamp``).

:mod:`duckstream.normalize.pin_clock` puts the marks in a view in place of its time
functions; the operator tree and the compiler read them (:func:`clock_kinds`) and spell each
as the engine's run-time value of the clock (:func:`at_clock`). A mark never reaches an
engine.

>>> from sqlglot import parse_one
>>> marked = parse_one("SELECT a FROM t WHERE d > _ivm_clock('current_date') - 7")
>>> sorted(clock_kinds(marked))
['current_date']
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

CLOCK = "_ivm_clock"


def mark(kind: str) -> exp.Anonymous:
    """The mark of the clock value ``kind``."""
    return exp.Anonymous(this=CLOCK, expressions=[exp.Literal.string(kind)])


def clock_kind(node: exp.Expr) -> str | None:
    """The kind of the mark ``node`` (None: not a mark)."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == CLOCK and node.expressions:
        return node.expressions[0].name
    return None


def clock_kinds(expression: exp.Expr) -> set[str]:
    """The kinds of clock value ``expression`` reads."""
    return {k for n in expression.find_all(exp.Anonymous) if (k := clock_kind(n)) is not None}


def at_clock(
    expression: exp.Expr, value: Callable[[str], exp.Expr], *, copy: bool = True
) -> exp.Expr:
    """``expression`` with each mark replaced by ``value(kind)``.

    >>> from sqlglot import parse_one
    >>> marked = parse_one("d >= _ivm_clock('current_date') - 7")
    >>> at_clock(marked, lambda kind: exp.cast(exp.Literal.string("2026-01-08"), "date")).sql()
    "d >= CAST('2026-01-08' AS DATE) - 7"
    """

    def replace(node: exp.Expr) -> exp.Expr:
        kind = clock_kind(node)
        return node if kind is None else value(kind)

    return expression.transform(replace, copy=copy)
