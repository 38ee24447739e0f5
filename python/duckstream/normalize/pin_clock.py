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

from sqlglot import exp

from duckstream.clock import clock_kind, clock_kinds, mark

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


def pin_clock(expression: exp.Expr) -> exp.Expr:
    """``expression`` with every time function replaced by the mark of its clock value."""

    def replace(node: exp.Expr) -> exp.Expr:
        kind = _kind_of_function(node)
        return node if kind is None else mark(kind)

    return expression.transform(replace)


# -- temporal filters: what tree.temporal_filter maintains as the clock moves ----------------

_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ)
_SHIFTS = (exp.DateAdd, exp.DateSub, exp.TsOrDsAdd, exp.TimestampAdd, exp.TimestampSub)
_TRUNCATIONS = (exp.DateTrunc, exp.TimestampTrunc, exp.TimeStrToDate)


def _constant(node: exp.Expr | None) -> bool:
    """A value the same for every row and every clock: no column, clock, query or function
    beyond arithmetic on literals and intervals."""
    if node is None:
        return True
    allowed = (exp.Literal, exp.Interval, exp.Var, exp.Paren, exp.Neg, exp.Cast, exp.DataType)
    allowed += (exp.Add, exp.Sub, exp.Mul, exp.Identifier)
    return all(isinstance(n, allowed) for n in node.walk()) and not node.find(exp.Column)


def monotone_in_clock(node: exp.Expr) -> bool:
    """Whether ``node`` is a non-decreasing function of the clock alone: a mark, shifted by
    constants (``+``, ``-`` a constant, ``date_add``...), cast, truncated to a unit.

    >>> from sqlglot import parse_one
    >>> from duckstream.normalize.pin_clock import pin_clock
    >>> monotone_in_clock(pin_clock(parse_one("now() - INTERVAL 7 DAY")))
    True
    >>> monotone_in_clock(pin_clock(parse_one("7 - current_date")))  # decreasing
    False
    """
    if clock_kind(node) is not None:
        return True
    if isinstance(node, exp.Paren | exp.Cast | exp.TryCast):
        return monotone_in_clock(node.this)
    if isinstance(node, exp.Add):
        left, right = node.this, node.expression
        return (monotone_in_clock(left) and _constant(right)) or (
            monotone_in_clock(right) and _constant(left)
        )
    if isinstance(node, exp.Sub):
        return monotone_in_clock(node.this) and _constant(node.expression)
    if isinstance(node, _SHIFTS):
        others = [v for k, v in node.args.items() if k != "this"]
        return monotone_in_clock(node.this) and all(
            _constant(v) for v in others if isinstance(v, exp.Expr)
        )
    if isinstance(node, _TRUNCATIONS):
        others = [v for k, v in node.args.items() if k != "this"]
        return monotone_in_clock(node.this) and all(
            _constant(v) for v in others if isinstance(v, exp.Expr)
        )
    return False


def _row_side(node: exp.Expr) -> bool:
    """An expression of the row alone: columns, no clock, query, aggregate or window."""
    return (
        not clock_kinds(node)
        and node.find(exp.Query, exp.AggFunc, exp.Window) is None
        and node.find(exp.Column) is not None
    )


def is_temporal_filter(condition: exp.Expr) -> bool:
    """Whether the conjunct ``condition`` compares the row with a monotone expression of
    the clock (``<``, ``<=``, ``>``, ``>=``, ``=``, ``BETWEEN``): a :class:`TemporalFilter`.

    >>> from sqlglot import parse_one
    >>> from duckstream.normalize.pin_clock import pin_clock
    >>> def temporal(sql):
    ...     return is_temporal_filter(pin_clock(parse_one(sql)))
    >>> temporal("t.ts > now() - INTERVAL '7 days'"), temporal("current_date >= t.d")
    (True, True)
    >>> temporal("t.d BETWEEN current_date - 7 AND current_date")
    True
    >>> temporal("t.d + 7 > current_date OR t.x")  # not a comparison: a rebuild when it moves
    False
    """
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.Between):
        bounds = [condition.args.get("low"), condition.args.get("high")]
        return (
            _row_side(condition.this)
            and all(b is not None and (monotone_in_clock(b) or _constant(b)) for b in bounds)
            and any(b is not None and clock_kinds(b) for b in bounds)
        )
    if not isinstance(condition, _COMPARISONS):
        return False
    left, right = condition.this, condition.expression
    return (_row_side(left) and monotone_in_clock(right)) or (
        _row_side(right) and monotone_in_clock(left)
    )
