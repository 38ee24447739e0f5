"""Run a plan's statements on a DuckDB connection: setup once, then refresh.

The statement lists are plain SQL a user can run by hand, except one: ``maintain``'s window
statement (``-- duckstream: pin window``) is a read whose rows the runner checks and turns
into the window variable (:mod:`duckstream.ducklake_window` says how). These helpers also add
what a program wants around them: a rollback when a statement fails, so the connection is
usable again and the table and cursors are exactly as before.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from duckstream import ducklake_window
from duckstream.plan import IVMPlan

if TYPE_CHECKING:
    from duckstream.strategy import Policy, RefreshReport


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


def run_statements(con: Connection, statements: list[str]) -> None:
    """Run ``statements`` in order; on failure roll back an open transaction and re-raise."""
    try:
        for statement in statements:
            if statement.startswith(ducklake_window.DIRECTIVE):
                ducklake_window.read(con, statement, pin=True)
            else:
                con.execute(statement)
    except Exception:
        with contextlib.suppress(Exception):  # no transaction was open
            con.execute("ROLLBACK")
        raise


def setup(con: Connection, plan: IVMPlan) -> None:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    run_statements(con, [plan.create_cursors_table, plan.create_mv])
    run_statements(con, plan.initialize_cursors)


def refresh(
    con: Connection,
    plan: IVMPlan,
    strategy: str = "auto",
    policy: Policy | None = None,
) -> RefreshReport:
    """Apply every change committed to the sources since the last refresh (one transaction).

    ``strategy``: ``"auto"`` (the default) estimates the change from the DuckLake catalog and
    runs whichever is cheaper, falling back to a rebuild when maintenance is impossible;
    ``"incremental"`` runs ``plan.maintain`` (errors such as ``rebuild required`` propagate);
    ``"full"`` rebuilds the table and its cursors atomically (``plan.initialize_cursors``)
    (:mod:`duckstream.strategy`). The returned report says which ran, why, and how long it took.
    """
    from duckstream.strategy import refresh as refresh_with

    return refresh_with(con, plan, strategy, policy)
