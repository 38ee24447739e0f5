"""Scan: a source table under an alias.

Delta rule: ``Δ(scan R) = ΔR`` -- the rows of the source's change feed in the refresh
window, +1 for each inserted row and -1 for each deleted one (an update is both). The feed is
not netted here: every later rule is linear in it or nets by content itself, and leaving it
raw lets the engine push the view's filters and columns into the change read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.expressions import aliased
from duckstream.tree.base import Context, Leaf, mult_column
from duckstream.tree.key_filters import KeyRange


@dataclass
class Scan(Leaf):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "ΔR: the rows of the change feed in the window, +1 inserted, -1 deleted"
    source: Source
    alias_node: exp.TableAlias

    @property
    def name(self) -> str:
        return self.alias_node.name

    def sources(self) -> list[Source]:
        return [self.source]

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        if version is Version.CURRENT:
            table = self.source.table()
            table.set("alias", self.alias_node.copy())
            return table
        return aliased(ctx.engine.state(self.source, version), self.alias_node)

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        return aliased(ctx.engine.changes(self.source), self.alias_node), mult_column(self.name)

    def only_grows(self) -> bool:
        return True  # its delta is the source's changes themselves

    def delta_rows(self, ctx: Context) -> exp.Expr | None:
        if not ctx.engine.changes_are_materialized:
            return None
        return ctx.engine.changes(self.source)

    def reads_changes_only(self, ctx: Context) -> bool:
        return self.delta_rows(ctx) is not None

    def delta_range(self, ctx: Context) -> Callable[[str], KeyRange | None] | None:
        """Each column's range in the source's changes, where the engine computes one per
        refresh (``Engine.key_ranges``); not under renamed columns (``t AS x(a, b)``: the
        source's own names differ)."""
        if not ctx.engine.key_ranges or self.alias_node.columns:
            return None
        return lambda column: KeyRange(partial(ctx.engine.key_range, self.source, column))
