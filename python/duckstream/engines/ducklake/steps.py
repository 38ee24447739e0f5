"""The step interpreter: run a plan's statement lists on a DuckDB connection.

:func:`run_statements` runs each step as its plain SQL rendering, except the window pin
(:class:`~duckstream.plan.PinWindow`: two metadata reads checked in Python,
:mod:`duckstream.engines.ducklake.window`), and takes the faster paths the plan allows: a
window in which no source changed skips to the ``COMMIT`` (or, far behind, to the cursors),
empty change copies skip to :class:`~duckstream.plan.Applied`, a statement whose
:attr:`~duckstream.plan.Sql.needed` read says it changes nothing is left out. A failure
rolls back the transaction this run opened. On a catalog other processes commit to, the
view's commit is guarded (:func:`guard_statements`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Generator, Sequence
from contextvars import ContextVar
from typing import Any, TypeGuard

from sqlglot import exp

from duckstream.connection import Connection, literal
from duckstream.engines.base import MULT
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.engine import render
from duckstream.engines.ducklake.names import table_sql

# the window :func:`begin` pinned, while the chosen path's statements run (:func:`finish`)
from duckstream.engines.ducklake.profile import (
    _clock,
    _count,
    _Counting,
    _is,
    _profile,
    _record,
)
from duckstream.engines.ducklake.statistics import _shared_catalog, without_table_statistics
from duckstream.engines.ducklake.transaction import _SYSTEM
from duckstream.errors import RefreshConflict
from duckstream.plan import (
    Applied,
    Begin,
    Cleanup,
    Commit,
    CreateTemp,
    Measure,
    PinSnapshot,
    PinWindow,
    Sql,
    Step,
    StopUnless,
)

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


# -- one refresh of a view at a time, across processes -------------------------------------

GUARD_PREFIX = "_ivm_refresh_"


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


def _is_copy(step: Step) -> TypeGuard[CreateTemp]:
    """Whether ``step`` copies a source's netted changes (:attr:`CreateTemp.changes_of`)."""
    return isinstance(step, CreateTemp) and step.changes_of is not None
