"""SELECT DISTINCT inside a view (a derived table).

Delta rule: a row is in ``δ(R)`` while its count in R is positive, so

    Δ(δ(R)) = δ(R_new ⋉ affected) - δ(R_old ⋉ affected)

over the rows the input's delta touches (the same state diff as an inner aggregate). At the
top of a view, DISTINCT is a GROUP BY of every column with a hidden row count instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.aggregate import changed_group_keys, regroup_delta, wanted_groups
from duckstream.tree.base import Block, Context, Relation, Term, union_all


@dataclass
class Distinct(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "δ(R_new ⋉ affected) − δ(R_old ⋉ affected): "
        "the rows the delta touches recounted at both snapshots"
    )
    input: Block
    items: list[exp.Expr]
    names: list[str]

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def _close(self, term: Term) -> exp.Select:
        return term.select(*self.items).distinct()

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return union_all([self._close(t) for t in self.input.state_terms(ctx, version)])

    def _groups(self) -> list[exp.Expr]:
        return [i.unalias() if isinstance(i, exp.Alias) else i for i in self.items]

    def delta(self, ctx: Context) -> exp.Query:
        return regroup_delta(ctx, self.input, self._groups(), self._close)

    def delta_keys(self, ctx: Context) -> exp.Query | None:
        return changed_group_keys(ctx, self.input, self._groups(), self.items, self.names)

    def delta_within(self, ctx: Context, wanted: dict[str, exp.Query]) -> exp.Query | None:
        found = wanted_groups(self._groups(), self.items, self.names, wanted)
        if not found:
            return None
        return regroup_delta(ctx, self.input, self._groups(), self._close, found)
