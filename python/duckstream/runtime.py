"""Run a plan's statements on a DuckDB connection: setup once, then refresh.

The statement lists are plain SQL a user can run by hand, except one: ``maintain``'s window
statement (``-- duckstream: pin window``) is a read whose rows the runner checks and turns
into the window variable (:mod:`duckstream.ducklake_window` says how). These helpers also add
what a program wants around them: a rollback when a statement fails, so the connection is
usable again and the table and cursors are exactly as before.

The runner only ever rolls back a transaction it opened itself. A refresh or a setup is its
own transaction, so it refuses to start inside the caller's (DuckDB has no nested
transactions: its ``BEGIN`` would fail and abort the caller's work), before touching anything.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, Protocol

from duckstream import ducklake_window
from duckstream.errors import DuckstreamError
from duckstream.plan import IVMPlan

if TYPE_CHECKING:
    from duckstream.strategy import Policy, RefreshReport


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


class TransactionOpen(DuckstreamError):
    """The caller has a transaction open on the connection: duckstream will not run in it."""


def in_transaction(con: Connection) -> bool:
    """Whether a transaction is open on ``con`` (DuckDB): ``current_transaction_id()`` is the
    same for two statements only inside one explicit transaction; in auto-commit each statement
    is its own. A read, harmless inside the caller's transaction. (Not ``txid_current()``: with
    a DuckLake catalog as the default database it fails an internal DuckDB assertion.)"""
    first = con.execute("SELECT current_transaction_id()").fetchone()
    second = con.execute("SELECT current_transaction_id()").fetchone()
    return first == second


def refuse_open_transaction(con: Connection, operation: str) -> None:
    """Raise :class:`TransactionOpen` when the caller has a transaction open on ``con``; the
    caller's transaction is left as it was, still committable."""
    if in_transaction(con):
        raise TransactionOpen(
            f"duckstream: {operation} must run outside a transaction: it runs its own, and"
            " DuckDB cannot nest them; commit or roll back yours first (it is untouched)"
        )


def _is(statement: str, *words: str) -> bool:
    return statement.lstrip().upper().startswith(words)


def run_statements(con: Connection, statements: list[str], *, opened: bool = False) -> None:
    """Run ``statements`` in order.

    On failure, roll back the transaction this call opened (its ``BEGIN``), or continues
    (``opened``: an earlier call's ``BEGIN`` of the runner's), and re-raise; a statement that
    fails outside such a transaction rolls nothing back (an open transaction is the caller's).
    Statements after the ``COMMIT`` are clean-up (dropping temporary tables): the work is
    ended, so their failure is a warning, not an error.
    """
    own = opened
    ended = False
    for statement in statements:
        try:
            if statement.startswith(ducklake_window.DIRECTIVE):
                ducklake_window.read(con, statement, pin=True)
            else:
                con.execute(statement)
        except Exception as error:
            if ended:
                warnings.warn(
                    f"duckstream: clean-up after commit failed ({error}); the refresh is applied",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            if own:
                with contextlib.suppress(Exception):  # the transaction is gone already
                    con.execute("ROLLBACK")
            raise
        if _is(statement, "BEGIN"):
            own = True
        elif own and _is(statement, "COMMIT", "END", "ROLLBACK", "ABORT"):
            own, ended = False, True


def setup(con: Connection, plan: IVMPlan) -> None:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    refuse_open_transaction(con, "setup()")
    run_statements(con, [plan.create_cursors_table, plan.create_mv])
    run_statements(con, plan.initialize_cursors)


def refresh(
    con: Connection,
    plan: IVMPlan,
    strategy: str = "auto",
    policy: Policy | None = None,
) -> RefreshReport:
    """Apply every change ended to the sources since the last refresh (one transaction).

    ``strategy``: ``"auto"`` (the default) estimates the change from the DuckLake catalog and
    runs whichever is cheaper, falling back to a rebuild when maintenance is impossible;
    ``"incremental"`` runs ``plan.maintain`` (errors such as ``rebuild required`` propagate);
    ``"full"`` rebuilds the table and its cursors atomically (``plan.initialize_cursors``)
    (:mod:`duckstream.strategy`). The returned report says which ran, why, and how long it took.
    """
    from duckstream.strategy import refresh as refresh_with

    return refresh_with(con, plan, strategy, policy)
