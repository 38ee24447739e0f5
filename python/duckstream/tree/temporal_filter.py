"""TemporalFilter: a WHERE conjunct that compares the rows with the clock.

``WHERE ts > now() - INTERVAL 7 DAY``, ``d >= current_date - 7``, ``d <= current_date``:
a comparison of the rows' columns with a monotone expression of the clock
(:func:`~duckstream.normalize.pin_clock.is_temporal_filter`). The refresh reads the clock
once (``c1``) and the view was last refreshed at ``c0`` (the clock recorded with the
cursors); the predicate ``p`` is read at either (``p0``, ``p1``: each use of the clock
spelled as the engine's value of it, :meth:`~duckstream.engines.base.Engine.clock`).

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
from typing import ClassVar

from sqlglot import exp

from duckstream.clock import at_clock
from duckstream.engines.base import Source, Version
from duckstream.tree.base import Block, Context, Term, changes


@dataclass
class TemporalFilter(Block):
    input: Block
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "σp0(ΔB) + σ(p1 ∧ ¬p0)(B1) - σ(p0 ∧ ¬p1)(B1): the changes at the old clock, and the"
        " rows that crossed a boundary as the clock moved"
    )
    predicate: exp.Expr  # the temporal conjuncts, the clock as marks (normalize.pin_clock)
    # the clock is a source of this operator (tree.base.moves_with_clock)
    reads_moving_clock: ClassVar[bool] = True

    def sources(self) -> list[Source]:
        return self.input.sources()

    def at(self, ctx: Context, version: Version) -> exp.Expr:
        """The predicate at the clock of ``version`` (the refresh's for NEW and CURRENT)."""
        return at_clock(self.predicate, lambda kind: ctx.engine.clock(version, kind))

    def state_terms(self, ctx: Context, version: Version) -> list[Term]:
        return [t.filtered(self.at(ctx, version)) for t in self.input.state_terms(ctx, version)]

    def delta_terms(self, ctx: Context) -> list[Term]:
        old, new = self.at(ctx, Version.OLD), self.at(ctx, Version.NEW)
        # over constants (a date spine) the input has no changes of its own: no term for them
        own = [t.filtered(old) for t in self.input.delta_terms(ctx)] if changes(self.input) else []
        moved = ctx.engine.clock_moved()
        crossed = []
        for sign, into, out_of in ((1, new, old), (-1, old, new)):
            for term in self.input.state_terms(ctx, Version.NEW):
                mult: exp.Expr = exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))
                if term.mult is not None:
                    mult = exp.Mul(this=exp.paren(term.multiplicity()), expression=mult)
                # ``into AND NOT out_of`` as written, which the engine pushes into the scan
                # (a range of the compared column): a temporal filter is NULL at one clock
                # exactly when at the other (only its row side can be NULL), so where
                # ``into`` is TRUE, ``out_of`` is TRUE or FALSE
                crossing = term.filtered(into, exp.not_(exp.paren(out_of)))
                crossed.append(replace(crossing, mult=mult, guards=(*term.guards, moved)))
        return own + crossed
