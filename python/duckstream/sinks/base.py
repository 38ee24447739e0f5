"""What a sink provides to the plan: the table, how to fill it, how to maintain it."""

from __future__ import annotations

from abc import ABC, abstractmethod

from sqlglot import exp

from duckstream.expressions import ident
from duckstream.plan import Step
from duckstream.tree.base import Context, col


class Sink(ABC):
    """Builds the view table's statements as expressions; the engine renders them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.engine = ctx.engine

    def mv_table(self) -> exp.Table:
        """The view's table: a new node each call (a node belongs to one tree)."""
        return self.engine.tgt.table()

    def temp(self, purpose: str) -> exp.Table:
        """A temporary table of the refresh; copy it to place it in more than one tree."""
        return self.engine.temp_table(f"_ivm_{self.engine.slug()}_{purpose}")

    @abstractmethod
    def visible_columns(self) -> list[str]: ...

    @abstractmethod
    def all_columns(self) -> list[str]:
        """Every column of the table, visible then hidden, in table order."""

    def _insert(self, query: exp.Query) -> exp.Insert:
        """``INSERT INTO <view table> (<all columns>) query``."""
        return exp.insert(query, self.mv_table(), columns=[ident(c) for c in self.all_columns()])

    def create_mv(self) -> exp.Create:
        """``CREATE OR REPLACE TABLE <view table> AS <no rows>``: the table with its visible
        and hidden columns, typed as the view types them."""
        return exp.Create(
            this=self.mv_table(), kind="TABLE", replace=True, expression=self.no_rows()
        )

    @abstractmethod
    def no_rows(self) -> exp.Query:
        """A query of no rows with the table's columns (:meth:`all_columns`) and types."""

    @abstractmethod
    def populate(self, view: exp.Query | None = None) -> list[exp.Insert]:
        """Fill the table from the sources at the pinned snapshot. ``view``: the view's query
        as a recomputation runs it, reading the sources at that snapshot (subqueries kept,
        not decorrelated): the fill reads it instead of the operator tree's form wherever
        it gives the table's columns, hidden ones included."""

    @abstractmethod
    def maintain(self) -> list[Step]:
        """Apply the window's changes (inside the refresh transaction)."""

    def query_mv(self) -> exp.Select:
        """The view's rows: its table without the hidden columns."""
        return exp.select(*(col(c) for c in self.visible_columns())).from_(self.mv_table())
