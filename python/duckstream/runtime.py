"""Run a plan's statements on a DuckDB connection: setup once, then refresh.

The runner executes the plan's steps (:mod:`duckstream.plan`), each as its plain SQL
rendering (``IVMPlan.maintain`` and friends, SQL a user can run by hand), except one:
``maintain``'s :class:`~duckstream.plan.PinWindow` is pinned by two reads whose rows the
runner checks in Python (:mod:`duckstream.ducklake_window`: faster than the same checks as
SQL). These helpers also add what a program wants around them: a rollback when a statement
fails, so the connection is usable again and the table and cursors are exactly as before.

The runner only ever rolls back a transaction it opened itself. A refresh or a setup is its
own transaction, so it refuses to start inside the caller's (DuckDB has no nested
transactions: its ``BEGIN`` would fail and abort the caller's work), before touching anything.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, Protocol

from duckstream import ducklake_window
from duckstream.engines.duckdb import render
from duckstream.errors import DuckstreamError
from duckstream.plan import Begin, Cleanup, Commit, IVMPlan, PinWindow, Sql, Step

if TYPE_CHECKING:
    from duckstream.strategy import Policy, RefreshReport


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


class TransactionOpen(DuckstreamError):
    """The caller has a transaction open on the connection: duckstream will not run in it."""


def in_transaction(con: Connection) -> bool:
    """Whether a transaction is open on ``con`` (DuckDB): ``txid_current()`` is the same for two
    statements only inside one explicit transaction; in auto-commit each statement is its own.
    A read, harmless inside the caller's transaction."""
    first = con.execute("SELECT txid_current()").fetchone()
    second = con.execute("SELECT txid_current()").fetchone()
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


def run_statements(
    con: Connection, statements: list[str] | list[Step], *, opened: bool = False
) -> None:
    """Run ``statements`` (plain SQL, or a plan's steps) in order.

    On failure, roll back the transaction this call opened (its ``BEGIN``), or continues
    (``opened``: an earlier call's ``BEGIN`` of the runner's), and re-raise; a statement that
    fails outside such a transaction rolls nothing back (an open transaction is the caller's).
    Statements after the ``COMMIT`` are clean-up (dropping temporary tables): the work is
    ended, so their failure is a warning, not an error.
    """
    own = opened
    ended = False
    for item in statements:
        step = Sql(item) if isinstance(item, str) else item
        try:
            if isinstance(step, PinWindow):
                ducklake_window.read(con, step.spec, pin=True)
            else:
                for statement in render(step):
                    con.execute(statement)
        except Exception as error:
            if ended or (isinstance(step, Cleanup) and not own):
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
        text = step.statement if isinstance(step, Sql) else ""
        if isinstance(step, Begin) or _is(text, "BEGIN"):
            own = True
        elif own and (isinstance(step, Commit) or _is(text, "COMMIT", "END", "ROLLBACK", "ABORT")):
            own, ended = False, True


def setup(con: Connection, plan: IVMPlan) -> None:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    refuse_open_transaction(con, "setup()")
    run_statements(con, [*plan.steps["create_cursors_table"], *plan.steps["create_mv"]])
    run_statements(con, plan.steps["initialize_cursors"])


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
