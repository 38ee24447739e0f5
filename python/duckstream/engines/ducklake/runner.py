"""Run a DuckDB plan on a DuckDB connection: ``setup`` once, then ``refresh``.

The runner executes the plan's steps (:mod:`duckstream.plan`), each as its plain SQL
rendering (``IVMPlan.maintain`` and friends, SQL a user can run by hand), except one:
``maintain``'s :class:`~duckstream.plan.PinWindow` is pinned by two reads whose rows the
runner checks in Python (:mod:`duckstream.engines.ducklake.window`: faster than the same checks as
SQL). These helpers also add what a program wants around them: a rollback when a statement
fails, so the connection is usable again and the table and cursors are exactly as before.

The runner only ever rolls back a transaction it opened itself. A refresh or a setup is its
own transaction, so it refuses to start inside the caller's (DuckDB has no nested
transactions: its ``BEGIN`` would fail and abort the caller's work), before touching anything.

``refresh(con, plan, strategy="auto")`` chooses, per refresh, between incremental maintenance
and a full rebuild, and says why: it first pins the refresh's window as ``maintain`` does,
*estimates* its changes from DuckLake's catalog alone (:mod:`.estimate`: one query over the
catalog's file lists, no changed row read), weighs the two paths with the cost model of
:mod:`duckstream.strategy`, then runs either ``plan.maintain`` (apply the change feed) or
``plan.initialize_cursors`` (pin a snapshot, rebuild the table, record the cursors: atomic,
like ``maintain``). It returns a :class:`RefreshReport`: what was done and why. Auto also
rebuilds, and says so, when incremental maintenance is impossible: no cursors yet, a cursor
snapshot that was expired, a source recreated or altered.

Two more faster paths, both from ``maintain``'s change copies (:attr:`CreateTemp.changes_of`):
when every copy is empty (the window's changes net to nothing in the columns the view reads),
the runner skips from the copies to :class:`~duckstream.plan.Applied` and only advances the
cursors; and when the estimate picks the rebuild, auto may first make the copies of updated
sources and decide on their exact counts (:func:`duckstream.strategy.sources_to_net`), then
goes on from them.

Every refresh records its profile in its report (``RefreshReport.phases``: phase, seconds,
statements, by the plan's step kinds, :class:`~duckstream.strategy.Phase`) and logs it at DEBUG
on the ``duckstream`` logger: a ``perf_counter`` per step. What a refresh pays whatever its
view (one-row view, one-row insert, DuckDB 1.5.5): 18 statements, of which the plan's delta
and apply are 3 (the DELETE replaced by a read of the delta: :attr:`Sql.needed`) and
DuckLake's COMMIT 1; no change: 11. In CPU time (``python -m bench.fixed_cost``, medians of 40
refreshes, four runs on a loaded 2-core machine): ~35-45 ms in all, of which the COMMIT 9-15,
the pin 7-10 (its two metadata reads; the first touch of DuckLake in a transaction loads its
snapshot, ~1.5 ms, whichever statement comes first), the change copy 4.5-6.5
(``ducklake_table_insertions``), the settings and the transaction check 2.6-3.5, the delta's
temporary table 1.5-2.4, the apply 2-3, the cursors 0.8-1.3, the clean-up 0.7-1. Reading the
snapshot log in the pin's first statement (for the cursors the process last recorded) saved
no CPU: planning the larger statement cost what the second one did.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import warnings
from collections.abc import Callable, Generator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from sqlglot import exp

from duckstream.connection import Connection, literal
from duckstream.engines.base import MULT
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.engine import render
from duckstream.engines.ducklake.estimate import estimate
from duckstream.engines.ducklake.names import table_sql
from duckstream.errors import DuckstreamError, RebuildRequired, RefreshConflict
from duckstream.history import FIRST_BUILD, Entry, phase_list
from duckstream.plan import (
    Applied,
    Begin,
    Cleanup,
    Commit,
    CreateTemp,
    IVMPlan,
    Measure,
    PinSnapshot,
    PinWindow,
    Sql,
    Step,
    StopUnless,
    index_of,
)
from duckstream.strategy import (
    Phase,
    Policy,
    RefreshReport,
    calibrate,
    check_strategy,
    decide,
    decide_netted,
    phases_text,
    sources_to_net,
)

logger = logging.getLogger("duckstream")


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


# -- the profile of a refresh (RefreshReport.phases) -----------------------------------------

_profile: ContextVar[list[Phase] | None] = ContextVar("duckstream_profile", default=None)


@contextlib.contextmanager
def profiling(phases: list[Phase] | None = None) -> Generator[list[Phase]]:
    """Record the phases of what runs inside into ``phases`` (a new list when None; inside
    another ``profiling``: its list, unless given), the list yielded."""
    found = phases if phases is not None else _profile.get()
    found = [] if found is None else found
    token = _profile.set(found)
    try:
        yield found
    finally:
        _profile.reset(token)


def _record(name: str, seconds: float, statements: int, *, merge: bool = True) -> None:
    """Add a phase to the profile being recorded (if any), into the last one when it has the
    same name and ``merge``."""
    phases = _profile.get()
    if phases is None:
        return
    if merge and phases and phases[-1].name == name:
        last = phases[-1]
        phases[-1] = Phase(name, last.seconds + seconds, last.statements + statements)
    else:
        phases.append(Phase(name, seconds, statements))


class _Counting:
    """``con``, counting the statements it executes (for the profile)."""

    def __init__(self, con: Any) -> None:
        self.con, self.count = con, 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.con.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


@contextlib.contextmanager
def _phase(con: Any, name: str) -> Generator[Any]:
    """Time what runs inside as the phase ``name``, counting the statements run on the
    connection yielded (``con``, counted when a profile is being recorded)."""
    if _profile.get() is None:
        yield con
        return
    counted, start = _Counting(con), time.perf_counter()
    try:
        yield counted
    finally:
        _record(name, time.perf_counter() - start, counted.count)


def log_profile(
    what: str, plan: IVMPlan, report: RefreshReport | None, phases: list[Phase]
) -> None:
    """Log ``phases`` of ``what`` (a refresh, a rebuild) of ``plan`` at DEBUG on the
    ``duckstream`` logger, as :func:`refresh` does (for :func:`begin` and :func:`finish`
    run inside the caller's :func:`profiling`)."""
    _log(what, plan, report, phases)


def _log(what: str, plan: IVMPlan, report: RefreshReport | None, phases: list[Phase]) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    seconds = sum(p.seconds for p in phases)
    statements = sum(p.statements for p in phases)
    how = "" if report is None else f": {report.strategy} ({report.requested}: {report.reason})"
    logger.debug(
        "duckstream: %s of %s%s; %.1f ms, %d statements: %s",
        what,
        plan.mv_table or "the view",
        how,
        seconds * 1000,
        statements,
        phases_text(phases),
    )


@dataclass
class Tally:
    """Rows in and out of one refresh, counted from what its statements report (no read):
    each change copy's netted rows (by source), the view's rows written and removed."""

    changes: dict[str, int] = field(default_factory=dict)
    inserted: int = 0
    deleted: int = 0


_tally: ContextVar[Tally | None] = ContextVar("duckstream_tally", default=None)


@contextlib.contextmanager
def tallying(tally: Tally) -> Generator[Tally]:
    """Count the rows in and out of the statements run inside into ``tally``."""
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


def _count(step: Step, rows: int | None) -> None:
    """Add a statement's reported rows to the refresh's tally: a change copy's, or a write
    to the view's table (``step`` a DML statement of the plan before the cursors)."""
    tally = _tally.get()
    if tally is None or rows is None:
        return
    if isinstance(step, CreateTemp) and step.changes_of is not None:
        tally.changes[step.changes_of] = tally.changes.get(step.changes_of, 0) + rows
    elif isinstance(step, Sql) and _is(step.statement, "DELETE"):
        tally.deleted += rows
    elif isinstance(step, Sql) and _is(step.statement, "INSERT"):
        tally.inserted += rows
    elif isinstance(step, Sql) and _is(step.statement, "UPDATE"):
        tally.inserted, tally.deleted = tally.inserted + rows, tally.deleted + rows


@dataclass(frozen=True)
class _Clock:
    """The path being run, the model's cost of it (None: not estimated), when it began, and
    what the history entry says of it (:mod:`duckstream.history`): asked for what, why."""

    path: str
    cost: float | None
    start: float
    requested: str = ""
    reason: str = ""
    estimated: dict[str, int] | None = None  # rows in per source, the catalog's estimate

    def measurement(self, source_rows: dict[str, tuple[int, int]] | None = None) -> str:
        """The history entry the cursors' commit carries (:class:`~duckstream.history.Entry`;
        its ``path``, ``ms`` and ``cost`` are auto's measurement), with ``source_rows`` when
        counted (:func:`source_rows`)."""
        ms = (time.perf_counter() - self.start) * 1000
        tally = _tally.get() or Tally()
        changes = tally.changes if tally.changes or self.estimated is None else self.estimated
        entry = Entry(
            self.path,
            self.requested,
            self.reason,
            dict(changes),
            tally.inserted,
            tally.deleted,
            phase_list(_profile.get() or []),
            round(ms, 3),
            self.cost,
            source_rows or {},
        )
        return entry.to_json()


_clock: ContextVar[_Clock | None] = ContextVar("duckstream_clock", default=None)


@contextlib.contextmanager
def measuring(
    path: str,
    cost: float | None = None,
    spent: float = 0.0,
    report: RefreshReport | None = None,
    reason: str = "",
) -> Generator[None]:
    """Time the statements run inside as ``path``: the cursors' commit records how long they
    took up to it (:class:`~duckstream.plan.Measure`), plus ``spent`` seconds of the path's
    work done before (auto's change copies), for auto's next decisions; with the refresh's
    history entry: ``report``'s request and reason (``reason`` without one), the rows
    counted (:func:`tallying`: a tally of its own unless one is being kept)."""
    clock = _Clock(
        path,
        cost,
        time.perf_counter() - spent,
        report.requested if report is not None else "",
        report.reason if report is not None else reason,
        None if report is None or not report.sources else report.change_rows,
    )
    token = _clock.set(clock)
    try:
        if _tally.get() is None:
            with tallying(Tally()):
                yield
        else:
            yield
    finally:
        _clock.reset(token)


# the window :func:`begin` pinned, while the chosen path's statements run (:func:`finish`)
_pinned_window: ContextVar[ducklake_window.Window | None] = ContextVar(
    "duckstream_window", default=None
)


@contextlib.contextmanager
def _window_known(window: ducklake_window.Window | None) -> Generator[None]:
    token = _pinned_window.set(window)
    try:
        yield
    finally:
        _pinned_window.reset(token)


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
    ended, so their failure is a warning, not an error. A pinned window (:class:`PinWindow`)
    in which no source changed has nothing to apply: the statements up to the ``COMMIT`` are
    skipped (they would only be planned, at a cost that grows with the view's SQL, to find
    their guards false).
    """
    with without_table_statistics(con):
        _run_statements(con, statements, opened)


# -- DuckLake's table statistics, untrusted while a refresh runs ---------------------------

_UNTRUSTED = "statistics_propagation"
# the settings, and the database's identity: its attached DuckLakes' catalog paths (one
# catalog file cannot be attached twice in a process, even by two databases)
_SETTINGS = (
    f"SELECT {_SYSTEM}current_setting('perfect_ht_threshold'),"
    f" {_SYSTEM}current_setting('disabled_optimizers'),"
    f" (SELECT {_SYSTEM}string_agg(path, {_SYSTEM}chr(10) ORDER BY path)"
    f" FROM {_SYSTEM}duckdb_databases() WHERE type = 'ducklake'),"
    f" {_SYSTEM}current_transaction_id()"
)


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
        threshold, disabled, key, transaction = con.execute(_SETTINGS).fetchone()
        if outside is not None and (transaction,) == outside.transaction:
            _refuse(outside.operation)
        key = str(key or "")
        off = [o for o in (o.strip() for o in str(disabled or "").split(",")) if o]
        # no SET when it is off: another refresh runs on the database (found), or the user
        # turned it off. On while one runs: another database whose DuckLakes have the same
        # paths (PostgreSQL catalogs), or the user's SET meanwhile: off again, and the last
        # refresh out puts back the first one's value.
        if _UNTRUSTED not in off:
            con.execute(f"SET disabled_optimizers = {literal(','.join([*off, _UNTRUSTED]))}")
        found = _untrusting.setdefault(key, _Untrusting(off))
        found.running += 1
        return int(threshold), key


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


# -- one refresh of a view at a time, across processes -------------------------------------

GUARD_PREFIX = "_ivm_refresh_"


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


def guard_statements(view: tuple[str, str, str]) -> list[str]:
    """Statements that make a refresh's commit of ``view`` conflict in DuckLake with any
    other commit of that view made since the refresh began (another process's refresh):
    delete and insert the one row of the view's own guard table, ``_ivm_refresh_<view>``
    (made by the first). DuckLake refuses an insert into a table another transaction
    deleted from since, and a create of a table another created: of two refreshes of one
    window, the second to commit fails (:class:`RefreshConflict`) instead of applying the
    window again on top of the first's, or recording older cursors after the first's newer
    ones (a refresh whose changes net to nothing writes only its cursors). A table of its
    own per view: refreshes of other views never conflict with it (inserts alone into a
    shared table, the cursors log, never conflict in DuckLake).

    >>> guard_statements(("lake", "main", "Totals"))[1]
    'DELETE FROM "lake"."main"."_ivm_refresh_Totals"'
    """
    catalog, schema, name = view
    table = exp.table_(
        exp.to_identifier(GUARD_PREFIX + name, quoted=True),
        db=exp.to_identifier(schema, quoted=True),
        catalog=exp.to_identifier(catalog, quoted=True),
    ).sql(dialect="duckdb")
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (refreshed_at TIMESTAMP WITH TIME ZONE)",
        f"DELETE FROM {table}",
        f"INSERT INTO {table} VALUES (CAST(now() AS TIMESTAMP WITH TIME ZONE))",
    ]


def _writes_lake(step: Step) -> bool:
    """Whether ``step`` writes a DuckLake table (DML, or a table made or replaced; the
    refresh's temporary tables are :class:`CreateTemp` steps)."""
    return _writes(step) or (
        isinstance(step, Sql) and _is(step.statement, "CREATE TABLE", "CREATE OR REPLACE TABLE")
    )


def _run_statements(con: Connection, statements: list[str] | list[Step], opened: bool) -> None:
    own = opened
    ended = skipping = to_applied = stopped = advancing = unchanged = applied = False
    wrote = False  # a statement of this run wrote rows to a DuckLake table: a snapshot
    begun, made = opened, opened  # ``made``: a temporary table may exist from this run
    copies: list[CreateTemp] = []  # change copies run, not yet counted
    copied: list[int | None] = []  # their rows, as their CREATE reported them (None: unknown)
    can_skip = any(isinstance(s, Applied) for s in statements)  # ``maintain``: else a fill
    # the pinned window: what the change copies render for (:func:`render`)
    window = _pinned_window.get() if opened else None
    guarded = _shared_catalog.get()
    # this run wrote a DuckLake table in its transaction (a continued one, :func:`finish`'s,
    # wrote none before: :func:`begin` only pins and copies changes into temporary tables)
    writing = False
    counter = _Counting(con) if _profile.get() is not None else None
    con = con if counter is None else counter
    for item in statements:
        step = Sql(item) if isinstance(item, str) else item
        text = step.statement if isinstance(step, Sql) else ""
        if skipping and not (isinstance(step, Commit) or _is(text, "COMMIT", "END")):
            continue
        if stopped and not isinstance(step, Cleanup):
            continue
        if unchanged and isinstance(step, Cleanup):
            continue  # the window changed nothing: no temporary table was made
        is_copy = _is_copy(step)
        is_begin = isinstance(step, Begin) or _is(text, "BEGIN")
        is_end = isinstance(step, Commit) or _is(text, "COMMIT", "END", "ROLLBACK", "ABORT")
        started, ran = time.perf_counter(), 0 if counter is None else counter.count
        try:  # every read too: a failure inside the transaction rolls it back
            if isinstance(step, StopUnless):
                # its statements are guarded: skipping them is the same (and running them, when
                # this read fails after the COMMIT, is what they do as plain SQL)
                (value,) = con.execute(_guard_read(step)).fetchone()
                stopped = not value
                _record("guard", time.perf_counter() - started, 1)
                continue
            if copies and not is_copy:
                # a moved clock is a change of its own (tree.temporal_filter)
                moved = window is not None and bool(window.values.get("clock_moved"))
                to_applied = can_skip and not moved and _all_empty(con, copies, copied)
                copies, copied = [], []
                if counter is not None and counter.count > ran:
                    _record("count", time.perf_counter() - started, counter.count - ran)
                    started, ran = time.perf_counter(), counter.count
            if to_applied:
                to_applied = not isinstance(step, Applied)
                continue
            if isinstance(step, Sql) and step.snapshot_only and wrote:
                continue  # the commit makes a snapshot anyway
            if isinstance(step, Sql) and step.needed is not None:
                (needed,) = con.execute(step.needed).fetchone()
                if not needed:  # the statement would change nothing
                    if counter is not None:
                        name = _phase_name(step, False, False, begun, ended, advancing, can_skip)
                        _record(name, time.perf_counter() - started, counter.count - ran)
                    continue
            if isinstance(step, Measure):
                clock = _clock.get()
                counted = source_rows(con, step.sources) if guarded and clock else None
                value = "NULL" if clock is None else literal(clock.measurement(counted))
                reference = f"getvariable({literal(step.variable)})"
                con.execute(step.statement.replace(reference, value))
            elif isinstance(step, PinWindow):
                window = ducklake_window.read(con, step.spec, pin=True, ends_first=guarded)
                idle = own and not window.values["changed"]
                # an idle view far behind: its cursors move (after the view's steps) all the same
                to_applied = idle and advances(window)
                skipping = idle and not to_applied
                # nothing made a temporary table before the pin: none to drop after the skip
                unchanged = idle and not made
            else:
                if isinstance(step, Commit) and step.view and guarded and own and writing:
                    for statement in guard_statements(step.view):
                        con.execute(statement)
                writing = writing or _writes_lake(step)
                for statement in render(step, window):
                    result = con.execute(statement)
                    if is_copy:  # CREATE TABLE AS reports its rows: no read to count them
                        copied.append(rows := _created_rows(result))
                        _count(step, rows)
                    elif own and _writes(step):  # so does a DML statement
                        rows = _created_rows(result)
                        wrote = wrote or bool(rows)
                        if not applied:  # the view's table (after it: the cursors log)
                            _count(step, rows)
        except Exception as error:
            if ended or (isinstance(step, Cleanup) and not own):
                if own:  # a transaction after the work's COMMIT (a refill): given up
                    with contextlib.suppress(Exception):
                        con.execute("ROLLBACK")
                    own, stopped = False, True
                warnings.warn(
                    f"duckstream: clean-up after commit failed ({error}); the refresh is applied",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            if own:
                with contextlib.suppress(Exception):  # the transaction is gone already
                    con.execute("ROLLBACK")
            if isinstance(step, Commit) and step.view and "conflict" in str(error).lower():
                raise RefreshConflict(".".join(step.view), error) from error
            raise
        applied = applied or isinstance(step, Applied | Measure)
        if counter is not None:
            advancing = advancing or isinstance(step, Applied | Measure)
            name = _phase_name(step, is_begin, is_end, begun, ended, advancing, can_skip)
            seconds = time.perf_counter() - started
            _record(name, seconds, counter.count - ran, merge=name not in _EACH)
        begun = begun or is_begin
        made = made or isinstance(step, CreateTemp) or bool(getattr(step, "creates", None))
        if is_copy:
            copies.append(step)
        if is_begin:
            own = True
        elif own and is_end:
            own, ended, skipping = False, True, False


def advances(window: ducklake_window.Window | None) -> bool:
    """Whether a refresh with nothing to apply in ``window`` commits its cursors anyway (they
    are far behind: :data:`~duckstream.engines.ducklake.window.ADVANCE_IDLE_CURSORS`)."""
    return window is not None and bool(window.values.get("advance"))


def source_rows(con: Connection, sources: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per source (a full name), ``(snapshot, rows)``: the rows it holds at the snapshot the
    running transaction reads its catalog at (DuckLake fixes it at the transaction's first
    read: the window's end, or the snapshot a rebuild reads). One statement; counting a
    DuckLake table reads its files' metadata (~3-5 ms CPU each). Recorded in the history
    entry on a catalog other processes commit to, where the next refresh checks DuckLake did
    not rewrite that snapshot since (:func:`duckstream.engines.ducklake.window.read`)."""
    if not sources:
        return {}
    items = []
    for source in sources:
        catalog = source.split(".", 1)[0]
        items.append(f"(SELECT id FROM ducklake_current_snapshot({literal(catalog)}))")
        items.append(f"(SELECT count(*) FROM {table_sql(source)})")
    found = con.execute("SELECT " + ", ".join(items)).fetchone()
    return {source: (int(found[2 * i]), int(found[2 * i + 1])) for i, source in enumerate(sources)}


def _guard_read(step: StopUnless) -> str:
    """The read of a guard's value (after the COMMIT: outside a transaction, hence DuckDB's
    function named in full, :data:`_SYSTEM`)."""
    value = f"{_SYSTEM}getvariable({literal(step.value)})"
    if step.field:  # not ``(value).field``: its binding looks in the default database too
        value = f"{_SYSTEM}struct_extract({value}, {literal(step.field)})"
    return f"SELECT {value}"


def _writes(step: Step) -> bool:
    """Whether ``step`` is a plan's DML statement on a table (its refresh's: the view's table
    or the cursors log; temporary tables are made by :class:`CreateTemp` steps)."""
    return isinstance(step, Sql) and _is(step.statement, "INSERT", "DELETE", "UPDATE")


_EACH = ("delta", "apply", "fill")  # phases listed statement by statement


def _phase_name(
    step: Step,
    is_begin: bool,
    is_end: bool,
    begun: bool,
    ended: bool,
    advancing: bool,
    maintain: bool,
) -> str:
    """The phase of ``step`` (:class:`~duckstream.strategy.Phase`), from its kind and where it
    stands: before the transaction, after the COMMIT, after :class:`Applied` or
    :class:`Measure` (the cursors' advance); ``maintain``: a refresh's steps (with
    :class:`Applied`), else a fill's."""
    if isinstance(step, Cleanup):
        return "cleanup"
    if ended:
        return "after commit"
    if is_end:
        return "commit"
    if is_begin:
        return "begin"
    if isinstance(step, PinWindow | PinSnapshot):
        return "pin"
    if _is_copy(step):
        return f"changes {step.changes_of}"
    if advancing:
        return "cursors"
    if not begun:
        return "prepare"
    if not maintain:
        return "fill"
    return "delta" if isinstance(step, CreateTemp) else "apply"


def _created_rows(result: Any) -> int | None:
    """The rows a ``CREATE TABLE ... AS`` reports it wrote (DuckDB: one row, ``Count``)."""
    fetch = getattr(result, "fetchone", None)
    row = fetch() if fetch is not None else None
    if row and isinstance(row[0], int) and not isinstance(row[0], bool):
        return row[0]
    return None


def _all_empty(con: Connection, copies: Sequence[CreateTemp], rows: Sequence[int | None]) -> bool:
    """Whether every change copy is empty, from the rows their CREATE reported (a read of
    those that reported none)."""
    if any(rows):
        return False
    unknown = [c for c, n in zip(copies, rows, strict=False) if n is None]
    if len(rows) < len(copies):
        unknown += copies[len(rows) :]
    return not unknown or no_changes(con, unknown)


def no_changes(con: Connection, copies: Sequence[CreateTemp]) -> bool:
    """Whether every change copy is empty: the window's changes net to nothing in the columns
    the view reads, so applying them would change nothing (:class:`~duckstream.plan.Applied`)."""
    tables = [c.table.sql(dialect="duckdb") for c in copies]
    found = con.execute(f"SELECT {' OR '.join(f'EXISTS (FROM {t})' for t in tables)}").fetchone()
    return found is not None and not found[0]


def count_changes(con: Connection, copies: Sequence[CreateTemp]) -> dict[str, tuple[int, int]]:
    """Each copied source's netted changes: ``(inserted, deleted)`` rows, multiplicities
    summed (a source copied twice, under two aliases, counts once: the larger)."""
    parts = [
        f"SELECT {k} AS k, coalesce(sum({MULT}) FILTER (WHERE {MULT} > 0), 0),"
        f" coalesce(-sum({MULT}) FILTER (WHERE {MULT} < 0), 0)"
        f" FROM {c.table.sql(dialect='duckdb')}"
        for k, c in enumerate(copies)
    ]
    counts: dict[str, tuple[int, int]] = {}
    for k, inserted, deleted in con.execute(" UNION ALL ".join(parts)).fetchall():
        name = copies[k].changes_of
        assert name is not None
        before = counts.get(name, (0, 0))
        counts[name] = (max(before[0], int(inserted)), max(before[1], int(deleted)))
    return counts


def setup(con: Connection, plan: IVMPlan) -> None:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot,
    in one transaction (:func:`rebuild`). The fill is auto's first measurement of a rebuild:
    created in a transaction of their own, the tables made the fill's first statement wait
    for DuckLake to reload its catalog (13-20 ms at TPC-H SF 0.1, a third of a rebuild)."""
    with profiling() as phases:
        outside = _outside(con, "setup()")
        with without_table_statistics(con, outside):
            rebuild(con, plan)
    _log("setup", plan, None, phases)


Runner = Callable[..., None]  # run_statements(con, statements, *, opened=False)


def refresh(
    con: Connection, plan: IVMPlan, strategy: str = "auto", policy: Policy | None = None
) -> RefreshReport:
    """Bring ``plan``'s table up to date with ``strategy`` and report what was done.

    ``incremental`` runs ``plan.maintain`` (errors propagate, e.g. "rebuild required");
    ``full`` runs ``plan.initialize_cursors``; ``auto`` estimates and picks one, and falls back
    to a rebuild when the engine reports that incremental maintenance is impossible. Each is
    one transaction of its own: inside the caller's open transaction it refuses before doing
    anything (:func:`refuse_open_transaction`).
    """
    check_strategy(strategy)
    if plan.dialect != "duckdb":
        raise ValueError(
            f"this refresh runs DuckDB plans; refresh a {plan.dialect} plan with"
            " duckstream.spark.refresh(spark, plan, strategy=...)"
        )
    start = time.perf_counter()
    with profiling([]) as phases:
        outside = _outside(con, "refresh()")
        with without_table_statistics(con, outside):  # once for the whole refresh
            if strategy in ("incremental", "full"):
                report = RefreshReport(strategy, strategy, "requested")
                with measuring(strategy, report=report):
                    protocol = "maintain" if strategy == "incremental" else "initialize_cursors"
                    run_statements(con, plan.steps[protocol])
            else:
                report = _auto(con, plan, policy or Policy())
    report.elapsed = time.perf_counter() - start
    report.phases = phases
    _log("refresh", plan, report, phases)
    return report


def _auto(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    """Pin the window as ``maintain`` does, estimate from it, then run the rest of the chosen
    path, all in the refresh's one transaction: one DuckLake transaction set-up and one read
    of the snapshot log, and the estimate sees the snapshot the refresh applies. A window
    that cannot be maintained (no cursors, an expired cursor, an altered source) is rebuilt,
    and the report says why. A window in which no source changed needs no estimate: the
    report has none."""
    pinned = begin(con, plan, "auto", policy, estimate_unchanged=False)
    finish(con, pinned)
    return pinned.report


@dataclass
class Pinned:
    """A refresh with its transaction open and its window pinned: the path chosen and why
    (``report``); ``window``: ``None`` when the window cannot be maintained."""

    plan: IVMPlan
    report: RefreshReport
    window: ducklake_window.Window | None
    # auto copied changes before deciding (:func:`_net_first`) and all came out empty: an
    # incremental refresh runs only what follows ``maintain``'s :class:`Applied`
    nothing_to_apply: bool = False
    copy_seconds: float = 0.0  # how long those copies took: part of a refresh's time
    tally: Tally = field(default_factory=Tally)  # rows in and out, for the history entry

    @property
    def copied(self) -> bool:
        """Whether auto copied changes before deciding (:func:`_net_first`): they are not
        copied again; a rebuild drops them."""
        return self.report.netted is not None

    @property
    def changed(self) -> bool:
        """Whether a source changed since the cursors (or the window cannot be maintained)."""
        return self.window is None or bool(self.window.values["changed"])


def begin(
    con: Connection,
    plan: IVMPlan,
    strategy: str = "auto",
    policy: Policy | None = None,
    run: Runner = run_statements,
    *,
    estimate_unchanged: bool = True,
) -> Pinned:
    """Open the refresh's transaction and pin its window (one read of the snapshot log), then
    choose: ``auto`` estimates from the pinned window (with ``estimate_unchanged=False`` not
    when no source changed: the report then has no estimates), ``incremental`` maintains,
    ``full`` rebuilds; a window that cannot be maintained is rebuilt, the report says why.
    The transaction stays open: :func:`finish` runs the chosen path to its COMMIT,
    :func:`abandon` rolls it back. ``run`` runs statement lists. The report's ``phases``
    get what ran (inside :func:`profiling`: into its list); :func:`finish` adds the rest."""
    with profiling() as phases, tallying(Tally()) as tally:
        with without_table_statistics(con):  # once for ``run`` and the reads
            pinned = _begin(con, plan, strategy, policy, run, estimate_unchanged)
        pinned.report.phases = phases
        pinned.tally = tally
        return pinned


def _begin(
    con: Connection,
    plan: IVMPlan,
    strategy: str,
    policy: Policy | None,
    run: Runner,
    estimate_unchanged: bool,
) -> Pinned:
    maintain = plan.steps["maintain"]
    at = index_of(maintain, PinWindow)
    start = time.perf_counter()
    run(con, maintain[:at])  # BEGIN TRANSACTION, as initialize_cursors begins
    window = None
    try:  # the transaction is the runner's from here on: a failure rolls it back
        with _phase(con, "pin") as counted:
            spec = ducklake_window.spec_of(maintain)
            window = ducklake_window.read(
                counted,
                spec,
                pin=True,
                history=strategy == "auto",
                ends_first=_shared_catalog.get(),
            )
        if strategy != "auto":
            report = RefreshReport(strategy, strategy, "requested")
        elif not estimate_unchanged and not window.values["changed"]:
            report = RefreshReport("incremental", "auto", _unchanged(window))
        else:
            policy = policy or Policy()
            report = choose(con, plan, policy, window)
            if names := _to_net(plan, report, policy):
                return _net_first(con, plan, report, names, policy, window, run, start)
    except RebuildRequired as error:
        report, window = RefreshReport("full", strategy, error.reason), None
    except Exception:
        abandon(con)
        raise
    report.estimate_seconds = time.perf_counter() - start
    return Pinned(plan, report, window)


def _unchanged(window: ducklake_window.Window) -> str:
    """Why a window has nothing to apply: no source changed, or (a view whose only source
    is the clock) the clock values it reads did not move."""
    if window.sources:
        return "no source changed"
    return "the view reads no table, and the clock values it reads did not move"


def _net_first(
    con: Connection,
    plan: IVMPlan,
    estimated: RefreshReport,
    names: list[str],
    policy: Policy,
    window: ducklake_window.Window,
    run: Runner,
    start: float,
) -> Pinned:
    """Copy the changes of the sources ``names`` (:func:`_to_net`: cheapest first), with
    ``maintain``'s own copy steps, and decide again on their exact counts
    (:func:`decide_netted`); stop at a copy that still holds changes when the rebuild still
    wins. An incremental refresh goes on from the copies: the rest of them run here."""
    copies = [s for s in plan.steps["maintain"] if _is_copy(s)]
    counts: dict[str, tuple[int, int]] = {}
    report = estimated
    copying = 0.0
    for name in names:
        mine = [c for c in copies if c.changes_of == name]
        began = time.perf_counter()
        with _window_known(window):
            run(con, mine, opened=True)
        copying += time.perf_counter() - began
        with _phase(con, "netting") as counted:
            counts |= count_changes(counted, mine)
        report = decide_netted(estimated, counts, policy, plan.maintain_reads, plan.rebuild_reads)
        if report.strategy == "full" and counts[name] != (0, 0):
            break
    report.estimate_seconds = time.perf_counter() - start
    if report.strategy == "full":
        return Pinned(plan, report, window)
    began = time.perf_counter()
    rest = [c for c in copies if c.changes_of not in counts]
    with _window_known(window):
        run(con, rest, opened=True)
    copying += time.perf_counter() - began
    # the copies counted: empty when they netted to nothing; the others are read
    empty = not any(any(n) for n in counts.values()) and not window.values.get("clock_moved")
    if empty and rest:
        with _phase(con, "count") as counted:
            empty = no_changes(counted, rest)
    return Pinned(plan, report, window, empty, copying)


def _to_net(plan: IVMPlan, report: RefreshReport, policy: Policy) -> list[str]:
    """:func:`sources_to_net` for ``plan``, among the sources its ``maintain`` copies."""
    copied = {s.changes_of for s in plan.steps["maintain"] if _is_copy(s)}
    found = sources_to_net(report, policy, plan.maintain_reads, plan.rebuild_reads)
    return [name for name in found if name in copied]


def _is_copy(step: Step) -> TypeGuard[CreateTemp]:
    """Whether ``step`` copies a source's netted changes (:attr:`CreateTemp.changes_of`)."""
    return isinstance(step, CreateTemp) and step.changes_of is not None


def finish(
    con: Connection,
    pinned: Pinned,
    *,
    rebuild_first: Sequence[str] = (),
    before_commit: Sequence[str] = (),
    run: Runner = run_statements,
) -> None:
    """Run the rest of the path :func:`begin` chose, to its COMMIT. ``rebuild_first``: run
    first when rebuilding (e.g. ``plan.create_mv`` to replace the table); ``before_commit``:
    run in the transaction just before its COMMIT (e.g. a state record)."""
    plan, window = pinned.plan, pinned.window
    maintain = plan.steps["maintain"]
    first = [Sql(s) for s in rebuild_first]
    rest: list[Step]
    idle = pinned.report.strategy == "incremental" and window is not None and not pinned.changed
    if idle and not advances(window):
        # nothing to apply, no temporary table made to drop (as run_statements)
        rest = [s for s in maintain[index_of(maintain, Commit) :] if not isinstance(s, Cleanup)]
    elif idle:  # nothing to apply, but the cursors move (as run_statements)
        after = maintain[index_of(maintain, Applied) :]
        rest = [s for s in after if not isinstance(s, Cleanup)]
    elif pinned.report.strategy == "incremental" and pinned.nothing_to_apply:
        rest = maintain[index_of(maintain, Applied) :]
    elif pinned.report.strategy == "incremental" and pinned.copied:
        rest = [s for s in maintain[index_of(maintain, PinWindow) + 1 :] if not _is_copy(s)]
    elif pinned.report.strategy == "incremental":
        rest = maintain[index_of(maintain, PinWindow) + 1 :]
    else:
        # the pinned window serves the rebuild: same ends, and its sources' live table ids
        rest = _filled(plan, Begin if window is None else PinSnapshot, first)
        if window is not None:  # the fill's after-steps read the option with the window
            rest = [Sql(ducklake_window.with_unset(ducklake_window.spec_of(maintain))), *rest]
        if pinned.copied:  # the change copies auto netted: dropped after the COMMIT
            rest += [s for s in maintain if isinstance(s, Cleanup)]
    commit = index_of(rest, Commit)
    report = pinned.report
    incremental = report.strategy == "incremental"
    cost = report.incremental_cost if incremental else report.full_cost
    # a refresh's time includes the change copies auto made before deciding: a refresh that
    # was not netted first makes them itself (a rebuild after them does not count them)
    spent = pinned.copy_seconds if incremental else 0.0
    running = False
    with profiling(report.phases) as phases, tallying(pinned.tally):
        try:
            with without_table_statistics(con):
                running = True
                clock = measuring(report.strategy, cost, spent, report)
                with clock, _window_known(window):
                    steps = [*rest[:commit], *(Sql(s) for s in before_commit), *rest[commit:]]
                    run(con, steps, opened=True)
        except Exception:
            if not running:  # ``run`` rolls back what it fails in
                abandon(con)
            raise
    if _profile.get() is None:  # a refresh() logs its own, settings included
        _log("refresh", plan, report, phases)


def rebuild(
    con: Connection,
    plan: IVMPlan,
    *,
    replace: bool = True,
    before_commit: Sequence[str] = (),
    run: Runner = run_statements,
    reason: str = FIRST_BUILD,
) -> list[Phase]:
    """Build the table in one transaction: create the cursors table, create the table anew
    (``replace``) or keep it, fill it at a pinned snapshot and record the cursors (and
    ``reason``, why it was built, in the history entry); run ``before_commit`` just before
    the COMMIT. Returns its phases (inside :func:`profiling`: that list)."""
    create = [*plan.steps["create_cursors_table"], *(plan.steps["create_mv"] if replace else [])]
    filled = _filled(plan, Begin, create)
    commit = index_of(filled, Commit)
    outer = _profile.get()
    with profiling() as phases, without_table_statistics(con), measuring("full", reason=reason):
        steps = [Begin(), *filled[:commit], *(Sql(s) for s in before_commit)]
        run(con, [*steps, *filled[commit:]])
    if outer is None:  # setup() logs its own
        _log("rebuild", plan, None, phases)
    return phases


def _filled(plan: IVMPlan, after: type, first: Sequence[Step]) -> list[Step]:
    """The fill's steps of ``plan`` that follow its first step of type ``after`` (``Begin``,
    or ``PinSnapshot`` when a pinned window serves it), for a transaction already open,
    ``first`` run first (e.g. ``plan.create_mv``), with the steps the plan runs before the
    fill's transaction (:meth:`~duckstream.engines.base.Engine.before_fill`: reads of the
    view's table as it stands) at the start, or after the COMMIT when ``first`` replaces the
    table (holds ``plan.create_mv``), so that they read the new table; a table replaced also
    goes on past the guards read about the old one (:attr:`StopUnless.about_old_table`)."""
    initialize = plan.steps["initialize_cursors"]
    before = initialize[: index_of(initialize, Begin)]
    rest = [*first, *initialize[index_of(initialize, after) + 1 :]]
    if not any(step in plan.steps["create_mv"] for step in first):
        return [*before, *rest]
    rest = [s for s in rest if not (isinstance(s, StopUnless) and s.about_old_table)]
    commit = index_of(rest, Commit) + 1
    return [*rest[:commit], *before, *rest[commit:]]


def abandon(con: Connection) -> None:
    """Roll back the transaction :func:`begin` opened (nothing to do, or a failure)."""
    with contextlib.suppress(Exception):
        con.execute("ROLLBACK")


# -- the estimate ------------------------------------------------------------------------


def choose(
    con: Connection,
    plan: IVMPlan,
    policy: Policy,
    window: ducklake_window.Window | None = None,
) -> RefreshReport:
    """Estimate the window's changes from the catalog and decide; runs nothing else.
    ``window``: the refresh's pinned window, read here when not given."""
    start = time.perf_counter()
    with _phase(con, "estimate") as counted:
        found = estimate(counted, plan, window)
        if isinstance(found, str):
            report = RefreshReport("full", "auto", found)
        else:
            report = decide(found, policy, plan.maintain_reads, plan.rebuild_reads)
            measured = None if window is None else window.history
            if measured is None:  # not read with the window's cursors
                view = ducklake_window.spec_of(plan.steps["maintain"]).view
                measured = ducklake_cursors.history(counted, view.split(".", 1)[0], view)
            report = calibrate(report, measured, policy)
    if window is not None and window.values.get("clock_moved"):
        moved = (
            f"the clock moved from {window.values['clock_old']} to {window.values['clock']}:"
            " the rows that crossed the view's temporal filters are changes"
        )
        # a view whose only source is the clock: its move is the whole reason
        report.reason = f"{report.reason}; {moved}" if window.sources else moved
    report.estimate_seconds = time.perf_counter() - start
    return report
