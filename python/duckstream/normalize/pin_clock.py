"""Read the time functions of a view as one clock: the refresh's.

``current_date``, ``now()``, ``current_timestamp`` and the like read the time: a view that
uses them changes as time passes, with no source changing. duckstream reads the clock once
per refresh (one instant for every use in the view) and records it with the cursors; this
rewrite marks each use with the value of the clock it stands for (its *kind*), as the
function ``_ivm_clock('<kind>')``. The compiler then spells each mark as the engine's
run-time value of the clock (the refresh's, or, in a temporal filter's delta rule, the
one the view was last refreshed at: :mod:`duckstream.tree.temporal_filter`); a mark never
reaches an engine (it is no function there: a mistake fails loudly).

The kinds, and what each is of the clock (an instant, ``TIMESTAMP WITH TIME ZONE``):

* ``current_timestamp`` (``now()``, ``current_timestamp``, ``get_current_timestamp()``,
  ``transaction_timestamp()``): the instant itself;
* ``current_date`` (``current_date``, ``today()``): its date, in the session's time zone;
* ``localtimestamp``: its local timestamp (no time zone).

The time of day (``current_time``, ``localtime``) is not a clock of the view: it goes back
every midnight (``normalize.validate`` refuses it, as the other volatile functions).

>>> from sqlglot import parse_one
>>> pin_clock(parse_one("SELECT a FROM t WHERE d > current_date - 7 AND ts < now()")).sql()
"SELECT a FROM t WHERE d > _IVM_CLOCK('current_date') - 7 AND ts < _IVM_CLOCK('current_timestamp')"
>>> sorted(clock_kinds(pin_clock(parse_one("SELECT today(), localtimestamp FROM t"))))
['current_date', 'localtimestamp']
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

CLOCK = "_ivm_clock"

# function name (lower case) -> the kind of clock value it reads
KINDS = {
    "now": "current_timestamp",
    "current_timestamp": "current_timestamp",
    "get_current_timestamp": "current_timestamp",
    "transaction_timestamp": "current_timestamp",
    "current_date": "current_date",
    "today": "current_date",
    "localtimestamp": "localtimestamp",
}

_NODES: dict[type[exp.Expr], str] = {
    exp.CurrentTimestamp: "current_timestamp",
    exp.CurrentDate: "current_date",
    exp.Localtimestamp: "localtimestamp",
}


def _kind_of_function(node: exp.Expr) -> str | None:
    """The kind of clock value the time function ``node`` reads (None: not one)."""
    for node_type, kind in _NODES.items():
        if type(node) is node_type and not node.args.get("this"):  # no time zone argument
            return kind
    if isinstance(node, exp.Anonymous) and not node.expressions:
        return KINDS.get(node.name.lower())
    return None


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


def pin_clock(expression: exp.Expr) -> exp.Expr:
    """``expression`` with every time function replaced by the mark of its clock value."""

    def replace(node: exp.Expr) -> exp.Expr:
        kind = _kind_of_function(node)
        return node if kind is None else mark(kind)

    return expression.transform(replace)


def at_clock(
    expression: exp.Expr, value: Callable[[str], exp.Expr], *, copy: bool = True
) -> exp.Expr:
    """``expression`` with each mark replaced by ``value(kind)``.

    >>> from sqlglot import parse_one
    >>> marked = pin_clock(parse_one("d >= current_date - 7"))
    >>> at_clock(marked, lambda kind: exp.cast(exp.Literal.string("2026-01-08"), "date")).sql()
    "d >= CAST('2026-01-08' AS DATE) - 7"
    """

    def replace(node: exp.Expr) -> exp.Expr:
        kind = clock_kind(node)
        return node if kind is None else value(kind)

    return expression.transform(replace, copy=copy)
