"""Filter: the WHERE clause of a SELECT block.

Delta rule: ``Δ(σ_p(R)) = σ_p(ΔR)`` -- the predicate is applied to every delta term as it is
to the state. An update that moves a row across the predicate arrives as -old and +new and
each side is filtered on its own values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.base import Block, Context, Term, column_tables


@dataclass
class Filter(Block):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "σp(ΔR): the predicate applied to every delta row"
    input: Block
    predicate: exp.Expr

    def sources(self) -> list[Source]:
        return self.input.sources()

    def state_terms(self, ctx: Context, version: Version) -> list[Term]:
        return [t.filtered(self.predicate) for t in self.input.state_terms(ctx, version)]

    def delta_terms(self, ctx: Context) -> list[Term]:
        return [t.filtered(self.predicate) for t in self.input.delta_terms(ctx)]

    def only_grows(self) -> bool:
        # a predicate reading a subquery could turn false on an append (decorrelation makes
        # joins of those; one left here is not trusted)
        return self.input.only_grows() and self.predicate.find(exp.Query) is None

    def key_terms(self, ctx: Context, aliases: frozenset[str] | None) -> list[Term]:
        # a row the input's key terms stand for must pass the predicate as they do: the
        # predicate's relations count as keys too
        read = column_tables([self.predicate])
        wanted = None if aliases is None or read is None else aliases | read
        return [t.filtered(self.predicate) for t in self.input.key_terms(ctx, wanted)]

    def reads_changes_only(self, ctx: Context) -> bool:
        return self.input.reads_changes_only(ctx)

    def changed_rows(self, ctx: Context) -> tuple[str, exp.Expr] | None:
        return self.input.changed_rows(ctx)  # the predicate keeps a subset of them
