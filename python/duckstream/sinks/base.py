"""What a sink provides to the plan: the table, how to fill it, how to maintain it."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from sqlglot import exp

from duckstream.plan import Step
from duckstream.tree.base import Context

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


def ident(name: str) -> exp.Identifier:
    """An identifier for a column name, quoted only when it has to be."""
    return exp.to_identifier(name, quoted=not _PLAIN.match(name))


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=exp.to_identifier(table) if table else None)


class Sink(ABC):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.engine = ctx.engine

    @property
    def mv(self) -> str:
        return self.engine.tgt.fqn

    def temp(self, purpose: str) -> str:
        return self.engine.temp_table(f"_ivm_{self.engine.slug()}_{purpose}").sql(
            self.engine.dialect
        )

    @abstractmethod
    def visible_columns(self) -> list[str]: ...

    @abstractmethod
    def all_columns(self) -> list[str]:
        """Every column of the table, visible then hidden, in table order."""

    def _insert(self, query: exp.Query) -> exp.Insert:
        """``INSERT INTO <view table> (<all columns>) query``."""
        return exp.insert(
            query, self.engine.tgt.table(), columns=[ident(c) for c in self.all_columns()]
        )

    @abstractmethod
    def create_mv(self) -> str:
        """Create the (empty) table with visible and hidden columns."""

    @abstractmethod
    def populate(self) -> list[exp.Insert]:
        """Fill the table from the sources at the pinned snapshot."""

    @abstractmethod
    def maintain(self) -> list[Step]:
        """Apply the window's changes (inside the refresh transaction)."""

    def query_mv(self) -> str:
        query = exp.select(*(col(c) for c in self.visible_columns())).from_(self.mv)
        return query.sql(self.engine.dialect)
