"""TemporalFilter: a WHERE conjunct that compares the rows with the clock.

``WHERE ts > now() - INTERVAL 7 DAY``, ``d >= current_date - 7``, ``d <= current_date``:
a comparison of the rows' columns with a monotone expression of the clock
(:func:`is_temporal_filter`). The refresh reads the clock once (``c1``) and the view was last
refreshed at ``c0`` (the clock recorded with the cursors); the predicate ``p`` is read at
either (``p0``, ``p1``: each use of the clock spelled as the engine's value of it,
:meth:`~duckstream.engines.base.Engine.clock`).

State: ``σ_p(B)`` at a version is ``B`` at that version filtered by ``p`` at that version's
clock. Delta rule, with ``σ_p`` keeping the rows where ``p`` is TRUE::

    Δ(σ_p(B)) = σ_p1(B1) - σ_p0(B0)
              = σ_p0(ΔB) + σ_{p1 ∧ ¬p0}(B1) - σ_{p0 ∧ ¬p1}(B1)

the input's own changes filtered at the old clock, and the rows of the input's new state that
crossed a boundary as the clock moved: those that entered the window (+1) and those that
left it (-1). Both crossing terms are guarded by "the clock moved" (a run-time constant:
unmoved, they are not read); for a monotone comparison each is a range of the compared
column between the two boundaries (``ts`` in ``(c0 - 7 days, c1 - 7 days]``), which the
engine prunes the scan to. Correct whichever way the clock moved (a clock set back makes
rows enter from the other side).

Example: ``d >= current_date - 7`` over ``t(d)`` = {Jan 1, Jan 5}; refreshed on Jan 8
(window from Jan 1: both rows), then on Jan 10 (from Jan 3) with Jan 9 inserted: the delta
is Jan 9 (+1, its insert, passing at Jan 8's clock too) and Jan 1 (-1, left the window).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.normalize.pin_clock import at_clock, clock_kind, clock_kinds
from duckstream.tree.base import Block, Context, Term

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


def _is_true(predicate: exp.Expr) -> exp.Expr:
    """``predicate IS TRUE``, spelled so every engine reads it: a NULL comparison keeps no
    row, as in WHERE."""
    return exp.func("coalesce", exp.paren(predicate), exp.false())


@dataclass
class TemporalFilter(Block):
    input: Block
    predicate: exp.Expr  # the temporal conjuncts, the clock as marks (normalize.pin_clock)

    def sources(self) -> list[Source]:
        return self.input.sources()

    def at(self, ctx: Context, version: Version) -> exp.Expr:
        """The predicate at the clock of ``version`` (the refresh's for NEW and CURRENT)."""
        return at_clock(self.predicate, lambda kind: ctx.engine.clock(version, kind))

    def state_terms(self, ctx: Context, version: Version) -> list[Term]:
        return [t.filtered(self.at(ctx, version)) for t in self.input.state_terms(ctx, version)]

    def delta_terms(self, ctx: Context) -> list[Term]:
        old, new = self.at(ctx, Version.OLD), self.at(ctx, Version.NEW)
        own = [t.filtered(old) for t in self.input.delta_terms(ctx)]
        moved = ctx.engine.clock_moved()
        crossed = []
        for sign, into, out_of in ((1, new, old), (-1, old, new)):
            for term in self.input.state_terms(ctx, Version.NEW):
                mult: exp.Expr = exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))
                if term.mult is not None:
                    mult = exp.Mul(this=exp.paren(term.multiplicity()), expression=mult)
                crossing = term.filtered(_is_true(into), exp.not_(_is_true(out_of)))
                crossed.append(replace(crossing, mult=mult, guards=(*term.guards, moved)))
        return own + crossed
