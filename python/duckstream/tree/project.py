"""Project: the select list of a SELECT block without aggregates or DISTINCT.

Delta rule: ``Δ(π_L(R)) = π_L(ΔR)`` -- each delta row is projected and keeps its signed
multiplicity; expressions (CASE, arithmetic, casts, string functions) are evaluated on the
delta rows exactly as on the state. Duplicates the projection creates are kept as
multiplicities and netted by whoever applies the delta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Source, Version
from duckstream.tree.base import Block, Context, Relation, union_all


@dataclass
class Project(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "π(ΔR): each delta row projected, its multiplicity kept"
    input: Block
    items: list[exp.Expr]  # aliased select items
    names: list[str]

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return union_all([t.select(*self.items) for t in self.input.state_terms(ctx, version)])

    def delta(self, ctx: Context) -> exp.Query:
        return union_all(
            [
                t.select(*self.items, exp.alias_(t.multiplicity(), MULT))
                for t in self.input.delta_terms(ctx)
            ]
        )
