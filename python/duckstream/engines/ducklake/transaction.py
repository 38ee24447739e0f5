"""A refresh or a setup is its own transaction: it refuses to start inside the caller's.

DuckDB has no nested transactions: a ``BEGIN`` inside the caller's would fail and abort the
caller's work. So the runner checks first (one read) and raises :class:`TransactionOpen`
before touching anything, and only ever rolls back a transaction it opened itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from duckstream.connection import Connection
from duckstream.engines.ducklake.profile import _phase
from duckstream.errors import DuckstreamError


class TransactionOpen(DuckstreamError):
    """The caller has a transaction open on the connection: duckstream will not run in it."""


# DuckDB's own functions named in full (``system.main``) in the statements a refresh runs
# outside its transaction: an unqualified name is looked up in the default database first, and
# when that is a DuckLake the lookup opens a DuckLake transaction, which reads the catalog's
# newest snapshot: ~1.2 ms CPU per statement (DuckDB 1.5.5), a read of 0.2 ms otherwise.
_SYSTEM = "system.main."
_TRANSACTION = f"SELECT {_SYSTEM}current_transaction_id()"


def in_transaction(con: Connection) -> bool:
    """Whether a transaction is open on ``con`` (DuckDB): ``current_transaction_id()`` is the
    same for two statements only inside one explicit transaction; in auto-commit each statement
    is its own. A read, harmless inside the caller's transaction. (Not ``txid_current()``: with
    a DuckLake catalog as the default database it fails an internal DuckDB assertion.)"""
    first = con.execute(_TRANSACTION).fetchone()
    second = con.execute(_TRANSACTION).fetchone()
    return first == second


def refuse_open_transaction(con: Connection, operation: str) -> None:
    """Raise :class:`TransactionOpen` when the caller has a transaction open on ``con``; the
    caller's transaction is left as it was, still committable."""
    if in_transaction(con):
        _refuse(operation)


def _refuse(operation: str) -> None:
    raise TransactionOpen(
        f"duckstream: {operation} must run outside a transaction: it runs its own, and"
        " DuckDB cannot nest them; commit or roll back yours first (it is untouched)"
    )


@dataclass(frozen=True)
class _Outside:
    """An operation that must run outside a transaction (:func:`refuse_open_transaction`),
    and the transaction id of the statement read just before its settings: the settings read
    (:func:`without_table_statistics`) reads the id again, and refuses before it sets
    anything when both are the same (one statement instead of two for the check)."""

    operation: str
    transaction: object


def _outside(con: Connection, operation: str) -> _Outside:
    with _phase(con, "check") as counted:
        return _Outside(operation, counted.execute(_TRANSACTION).fetchone())
