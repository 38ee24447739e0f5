"""The compiled result: SQL statements to create, maintain and read a materialized view."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Naming:
    """Names of the tables and hidden columns duckstream creates.

    Every hidden column starts with ``_ivm_``; views may not use that prefix themselves.
    """

    mv_name: str = "mv"
    cursors_name: str = "_ivm_cursors"

    def mv_table(self) -> str:
        return self.mv_name

    def cursors_table(self) -> str:
        return self.cursors_name

    @staticmethod
    def aux_column(purpose: str) -> str:
        return f"_ivm_{purpose}"


@dataclass
class IVMPlan:
    """Everything needed to keep one materialized view current.

    Protocol: run ``create_cursors_table``, ``create_mv`` and ``initialize_cursors`` once;
    then run ``maintain`` (in order, on one connection) after any number of committed
    source changes. ``query_mv`` returns the view's rows without hidden columns.
    ``maintain`` is one transaction: it pins one end snapshot per catalog, applies the
    changes up to it and advances the cursors, or changes nothing.
    """

    view_sql: str
    create_cursors_table: str
    create_mv: str
    initialize_cursors: list[str]
    maintain: list[str]
    query_mv: str
    base_tables: dict[str, str]
    features: set[str] = field(default_factory=set)
    mv_table: str = ""
    cursors_table: str = ""
    output_columns: list[str] = field(default_factory=list)
    dialect: str = "duckdb"

    def statements(self) -> dict[str, list[str]]:
        """The plan's SQL grouped by protocol step, for printing."""
        return {
            "create_cursors_table": [self.create_cursors_table],
            "create_mv": [self.create_mv],
            "initialize_cursors": list(self.initialize_cursors),
            "maintain": list(self.maintain),
            "query_mv": [self.query_mv],
        }
