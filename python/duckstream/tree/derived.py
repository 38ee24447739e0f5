"""Derived table: a subquery in FROM under an alias.

Delta rule: ``Δ(ρ_alias(Q)) = ρ_alias(ΔQ)`` -- the subquery's own delta (its columns plus
``_ivm_mult``), renamed. The subquery is differentiated as a tree of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.base import Context, Leaf, Relation, aliased, mult_column


@dataclass
class Derived(Leaf):
    query: Relation
    alias_node: exp.TableAlias

    @property
    def name(self) -> str:
        return self.alias_node.name

    def sources(self) -> list[Source]:
        return self.query.sources()

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        return aliased(self.query.state(ctx, version), self.alias_node)

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        return aliased(self.query.delta(ctx), self.alias_node), mult_column(self.name)
