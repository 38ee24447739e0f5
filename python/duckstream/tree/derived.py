"""Derived table: a subquery in FROM under an alias.

Delta rule: ``Δ(ρ_alias(Q)) = ρ_alias(ΔQ)`` -- the subquery's own delta (its columns plus
``_ivm_mult``), renamed. The subquery is differentiated as a tree of its own.

The delta's key values, where the subquery knows them cheaply (a grouped subquery over one
table: its affected groups, read from that table's changes), let the terms that join ΔQ
filter the other relations by those keys, as they do for a source's changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.expressions import aliased
from duckstream.tree.base import Context, Leaf, Relation, mult_column


@dataclass
class Derived(Leaf):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "ρ(ΔQ): the subquery's own delta, renamed"
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

    def delta_within(
        self, ctx: Context, wanted: dict[str, exp.Query]
    ) -> tuple[exp.Expr, exp.Expr] | None:
        if self.alias_node.columns:  # renamed columns: the query's own names differ
            return None
        query = self.query.delta_within(ctx, wanted)
        if query is None:
            return None
        return aliased(query, self.alias_node), mult_column(self.name)

    def only_grows(self) -> bool:
        return self.query.only_grows()

    def delta_rows(self, ctx: Context) -> exp.Expr | None:
        if not ctx.engine.changes_are_materialized:
            return None
        if self.alias_node.columns:  # renamed columns: the query's own names differ
            return None
        return self.query.delta_keys(ctx)

    def reads_changes_only(self, ctx: Context) -> bool:
        return self.query.reads_changes_only(ctx)
