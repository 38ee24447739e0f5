"""DuckLake's table statistics, untrusted while a refresh runs (DuckDB's settings, put back).

DuckLake 1.5.5 can record wrong table statistics (:func:`without_table_statistics` says
which and how they are kept out); the settings that keep them out are per session or, for
one of them, per database, shared by dbt's threads: counted in and out here. Also whether
a database's DuckLakes keep their catalog where other processes commit
(:func:`shared_catalog`).
"""

from __future__ import annotations

import contextlib
import re
import threading
import warnings
from collections.abc import Generator
from contextvars import ContextVar
from dataclasses import dataclass

from duckstream.connection import Connection, literal
from duckstream.engines.ducklake.profile import _phase
from duckstream.engines.ducklake.transaction import (
    _SYSTEM,
    _Outside,
    _refuse,
    refuse_open_transaction,
)

_UNTRUSTED = "statistics_propagation"
# the settings, and the database's identity: its attached DuckLakes' catalog paths (one
# catalog file cannot be attached twice in a process, even by two databases). One row per
# DuckLake, and one for the system database (always there: the settings come back with no
# DuckLake attached too); the paths joined in Python: the same read as one row, its paths
# joined by ``string_agg(path ORDER BY path)`` in SQL, cost DuckDB 1.5.5 ~0.7 ms CPU more
# (a refresh's fixed cost, ``python -m bench.fixed_cost``).
_SETTINGS = (
    f"SELECT {_SYSTEM}current_setting('perfect_ht_threshold'),"
    f" {_SYSTEM}current_setting('disabled_optimizers'),"
    f" {_SYSTEM}current_transaction_id(), type = 'ducklake', path"
    f" FROM {_SYSTEM}duckdb_databases() WHERE type = 'ducklake' OR database_name = 'system'"
)


def _read_settings(con: Connection) -> tuple[int, str, str, object]:
    """``perfect_ht_threshold``, ``disabled_optimizers``, the database's key (its DuckLakes'
    paths, sorted, one a line) and the transaction id, in one read (:data:`_SETTINGS`)."""
    rows = con.execute(_SETTINGS).fetchall()
    threshold, disabled, transaction = rows[0][:3]
    key = "\n".join(
        sorted(str(path) for _, _, _, ducklake, path in rows if ducklake and path is not None)
    )
    return int(threshold), str(disabled or ""), key, transaction


@dataclass
class _Untrusting:
    """The refreshes running on one DuckDB database with statistics propagation off: the
    user's ``disabled_optimizers`` (put back when the last one leaves), how many run."""

    disabled: list[str]
    running: int = 0


_untrusting: dict[str, _Untrusting] = {}  # by database (its DuckLakes' paths)
# whether the database has a DuckLake whose catalog other processes can commit to (one in
# PostgreSQL, not a DuckDB file): its views' commits are guarded (:func:`guard_statements`)
_shared_catalog: ContextVar[bool] = ContextVar("duckstream_shared_catalog", default=False)
_untrusting_lock = threading.Lock()
# the connection whose refresh this thread (context) runs with the statistics untrusted
_untrusted_on: ContextVar[object | None] = ContextVar("duckstream_untrusted", default=None)


@contextlib.contextmanager
def without_table_statistics(con: Connection, outside: _Outside | None = None) -> Generator[None]:
    """Keep DuckDB from trusting DuckLake's column statistics while the statements run, then
    restore the user's settings. DuckLake 1.5.5 can record wrong table statistics: rows
    inserted in one transaction into several files, the first all NULL in a column, leave
    that column's bounds out of the table's (``tests/test_regressions_ducklake.py``). Then:

    * statistics propagation proves a filter on a value the bounds leave out always false
      and reads nothing (``WHERE k = 0`` over a table holding k = 0: no row; a view built or
      refreshed from that read stays wrong after the bounds are repaired): turned off;
    * the perfect hash aggregate sizes its table from the bounds and stops with "Perfect hash
      aggregate: ... statistics ... are corrupt": turned off.

    The files' own statistics (DuckLake's pruning of data files) are right and stay in use.

    ``perfect_ht_threshold`` is set for the session and put back on the way out. But the
    optimizers are off only GLOBALLY in DuckDB 1.5.5 (``disabled_optimizers`` "cannot be set
    locally"): for every connection of the database, and dbt's threads refresh on cursors of
    one database. So that one is kept per database, process-wide: the first refresh to enter
    reads the user's value and turns statistics propagation off, the others count themselves
    in (no ``SET``), and the last to leave puts the user's value back: a refresh never runs
    with it on because another one left. One read and two ``SET`` per refresh (the first
    and last on a database: two more); nested use on the same connection in one thread (a
    refresh's statement lists) costs nothing. Leaving never raises: a failed restore is a
    warning (the refresh is done; the setting stays off).

    The cost of the GLOBAL setting: while a refresh runs, the database's other queries run
    without statistics propagation too, and DuckDB 1.5.5 then answers some of them wrongly
    now and then: ``SELECT ... FROM (SELECT DISTINCT ON (g) k ... ORDER BY g, k NULLS FIRST)
    AS s JOIN u ON u.k = s.k`` joins a row DISTINCT ON orders second
    (``tests/test_regressions_ducklake.py``). duckstream's own statements do not have that
    form (DISTINCT ON is numbered rows: :mod:`duckstream.normalize.rewrite_distinct_on`), but
    a dbt ``table`` model of that form run on another thread at the same moment can be hit.

    ``outside``: refuse (:class:`TransactionOpen`) before setting anything when the caller
    has a transaction open; the settings read tells (:class:`_Outside`)."""
    if _untrusted_on.get() is con:
        if outside is not None:
            refuse_open_transaction(con, outside.operation)
        yield
        return
    with _phase(con, "settings") as counted:
        threshold, key = _untrust(counted, outside)
        try:
            if threshold != 0:
                counted.execute("SET perfect_ht_threshold = 0")
        except Exception:
            _trust_again(counted, key)
            raise
    token = _untrusted_on.set(con)
    shared = _shared_catalog.set(shared_catalog(key))
    try:
        yield
    finally:
        _shared_catalog.reset(shared)
        _untrusted_on.reset(token)
        with _phase(con, "settings") as counted:
            try:
                if threshold != 0:
                    counted.execute(f"SET perfect_ht_threshold = {threshold}")
            except Exception as error:
                _warn_unrestored("perfect_ht_threshold", error)
            _trust_again(counted, key)


def _untrust(con: Connection, outside: _Outside | None = None) -> tuple[int, str]:
    """Count a refresh in on ``con``'s database, turning statistics propagation off if it is
    the first; the session's ``perfect_ht_threshold`` and the database's key. On failure
    nothing is counted and the setting is as it was (``outside``: a transaction open raises
    :class:`TransactionOpen`, nothing set)."""
    with _untrusting_lock:  # the read too: it must not see a refresh's value as the user's
        threshold, disabled, key, transaction = _read_settings(con)
        if outside is not None and (transaction,) == outside.transaction:
            _refuse(outside.operation)
        off = [o for o in (o.strip() for o in disabled.split(",")) if o]
        # no SET when it is off: another refresh runs on the database (found), or the user
        # turned it off. On while one runs: another database whose DuckLakes have the same
        # paths (PostgreSQL catalogs), or the user's SET meanwhile: off again, and the last
        # refresh out puts back the first one's value.
        if _UNTRUSTED not in off:
            con.execute(f"SET disabled_optimizers = {literal(','.join([*off, _UNTRUSTED]))}")
        found = _untrusting.setdefault(key, _Untrusting(off))
        found.running += 1
        return threshold, key


def _trust_again(con: Connection, key: str) -> None:
    """Count a refresh out; the last one puts the user's ``disabled_optimizers`` back."""
    with _untrusting_lock:
        found = _untrusting[key]
        found.running -= 1
        if found.running:
            return
        del _untrusting[key]
        if _UNTRUSTED not in found.disabled:
            try:
                con.execute(f"SET disabled_optimizers = {literal(','.join(found.disabled))}")
            except Exception as error:
                _warn_unrestored("disabled_optimizers", error)


def _warn_unrestored(setting: str, error: Exception) -> None:
    warnings.warn(
        f"duckstream: could not put {setting} back ({error}); the refresh is done",
        RuntimeWarning,
        stacklevel=4,
    )


def shared_catalog(paths: str) -> bool:
    """Whether one of the DuckLakes attached (their paths, one a line, as
    ``duckdb_databases()`` lists them) keeps its catalog where other processes commit too: a
    ``postgres:`` (or other ``scheme:``) target rather than a DuckDB file.

    >>> shared_catalog("/data/lake/metadata.ducklake"), shared_catalog("C:/lake/m.ducklake")
    (False, False)
    >>> shared_catalog("/a/metadata.ducklake" + chr(10) + "postgres:dbname=lake host=/tmp")
    True
    """
    return any(re.match(r"[A-Za-z][A-Za-z0-9_]+:", line) for line in paths.splitlines())
