"""The connection manager of ``type: duckstream``: dbt-duckdb's, under its own type name, with
one DuckDB statement at a time.

dbt-duckdb keeps its one DuckDB environment on ``DuckDBConnectionManager`` and reads it from
there by name (seeds, external sources); opening and closing through that class keeps the
environment in the one place every dbt-duckdb code path looks.

**One statement at a time.** dbt-duckdb runs dbt's threads on cursors of one DuckDB database
(``environments/local.py``: one ``duckdb.connect``, a ``.cursor()`` per thread). DuckLake
1.5.5 does not survive statements of two cursors of one database running at once: with
``dbt run --threads 4`` a commit fails with ``Failed to get path for schema with id <garbage>``,
``Out of Memory Error: Allocation failure``, or the process dies of a segmentation fault
(reproduced without dbt: DDL and commits on DuckLake tables from four cursors of one database
crash within seconds; a read-only transaction beside a committing one is enough for the
garbage schema id). So every statement on this adapter's connections (dbt's and
duckstream's, which run on the same cursor), every rollback and close, and the opening of a
connection (which may create the database and attach the DuckLake, and initialises the
cursor) hold :data:`STATEMENTS`, one lock per process (dbt-duckdb keeps one database per
process). Transactions still interleave, as DuckLake allows: a commit that conflicts fails
as it would between processes. DuckDB parallelises each statement itself, so the threads lose
little; they keep overlapping in everything dbt does between statements.

**One database per dbt command.** dbt-duckdb closes the DuckDB database after each node when
the profile says ``keep_open: false`` (the last connection closed), and opens it again for the
next one: loading the extensions, attaching the DuckLake and reading its catalog afresh, some
0.6 s per model (``make demo``), more than refreshing one. This adapter keeps the database open
from the first connection of a command (``dbt run``, ``dbt build``...) to its end (dbt's
``cleanup_connections``), then closes it as ``keep_open: false`` asks: between commands the
database files are free, as before (another process, or the same process attaching the
DuckLake again); during one they are held, as they were while each model ran.
``keep_open: true`` keeps dbt-duckdb's meaning (open until the process ends).

Closing under the lock also orders the database's shutdown (the last connection closed,
``keep_open: false``) before the next open: the next ``duckdb.connect`` of the same file
never meets a database still being torn down (DuckDB's instance cache busy-waits for it).
``interrupt`` (dbt's cancel, from another thread) does not take the lock.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Generator
from typing import Any

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.duckdb.connections import DuckDBConnectionManager

# Held by each DuckDB statement on a duckstream connection (reentrant: a close may roll back).
STATEMENTS = threading.RLock()
_waits = threading.local()  # per thread: seconds spent waiting for STATEMENTS


@contextlib.contextmanager
def _holding() -> Generator[None]:
    """Hold :data:`STATEMENTS`, adding the time spent waiting for it to the thread's
    :func:`waited`."""
    if not STATEMENTS.acquire(blocking=False):
        start = time.perf_counter()
        STATEMENTS.acquire()
        _waits.seconds = waited() + time.perf_counter() - start
    try:
        yield
    finally:
        STATEMENTS.release()


def waited() -> float:
    """Seconds this thread has waited for other threads' statements (:data:`STATEMENTS`):
    with ``--threads`` above 1, part of each model's time is spent waiting, not working."""
    return getattr(_waits, "seconds", 0.0)


class SerializedCursor:
    """A dbt-duckdb cursor whose statements hold :data:`STATEMENTS`."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        with _holding():
            self._cursor.execute(*args, **kwargs)
        return self  # as DuckDB's cursor returns itself: fetch through the lock-free getattr

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        with _holding():
            self._cursor.executemany(*args, **kwargs)
        return self

    def rollback(self) -> Any:
        with _holding():
            return self._cursor.rollback()

    def commit(self) -> Any:
        with _holding():
            return self._cursor.commit()

    def close(self) -> Any:
        with _holding():
            return self._cursor.close()


class SerializedHandle:
    """dbt-duckdb's connection handle, handing out its cursor as a :class:`SerializedCursor`
    and closing (and so maybe shutting the database down) under :data:`STATEMENTS`."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._cursor = SerializedCursor(handle.cursor())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def cursor(self) -> SerializedCursor:
        return self._cursor

    def rollback(self) -> Any:
        with _holding():
            return self._handle.rollback()

    def close(self) -> Any:
        with _holding():
            return self._handle.close()


class DuckstreamConnectionManager(DuckDBConnectionManager):
    TYPE = "duckstream"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        with _holding():
            connection = DuckDBConnectionManager.open(connection)
            if connection.handle is not None and not isinstance(
                connection.handle, SerializedHandle
            ):
                connection.handle = SerializedHandle(connection.handle)
            _open_until_cleanup(DuckDBConnectionManager._ENV)
        return connection

    def cleanup_all(self) -> None:
        """dbt's end of a command: close every connection, then the database when the profile
        does not keep it open (:func:`_open_until_cleanup`)."""
        with _holding():
            super().cleanup_all()
            environment = DuckDBConnectionManager._ENV
            if environment is not None and not getattr(environment.creds, "keep_open", True):
                environment.close()

    @classmethod
    def close_all_connections(cls) -> None:
        with _holding():
            DuckDBConnectionManager.close_all_connections()


def _open_until_cleanup(environment: Any) -> None:
    """Keep dbt-duckdb's local environment from closing its database when a node's connection
    (the last one open) closes: :meth:`DuckstreamConnectionManager.cleanup_all` closes it at the
    command's end instead. Other environments (MotherDuck, remote) keep their own ways."""
    if environment is not None and hasattr(environment, "_keep_open"):
        environment._keep_open = True


atexit.register(DuckstreamConnectionManager.close_all_connections)
