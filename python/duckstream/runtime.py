"""Run a plan's statements on a DuckDB connection: setup once, then refresh.

The statement lists are plain SQL a user can run by hand; these helpers add what a program
wants around them: a rollback when a statement fails, so the connection is usable again and
the table and cursors are exactly as before.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from duckstream.plan import IVMPlan


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


def run_statements(con: Connection, statements: list[str]) -> None:
    """Run ``statements`` in order; on failure roll back an open transaction and re-raise."""
    try:
        for statement in statements:
            con.execute(statement)
    except Exception:
        with contextlib.suppress(Exception):  # no transaction was open
            con.execute("ROLLBACK")
        raise


def setup(con: Connection, plan: IVMPlan) -> None:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    run_statements(con, [plan.create_cursors_table, plan.create_mv])
    run_statements(con, plan.initialize_cursors)


def refresh(con: Connection, plan: IVMPlan) -> None:
    """Apply every change committed to the sources since the last refresh (one transaction)."""
    run_statements(con, plan.maintain)
