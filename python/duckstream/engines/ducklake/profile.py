"""The profile of a refresh (``RefreshReport.phases``), its rows in and out, and the history
entry its commit carries.

Inside :func:`profiling`, each statement the runner runs is counted and timed into a phase
(pin, changes, delta, apply, commit...: :class:`~duckstream.strategy.Phase`), logged at DEBUG
on the ``duckstream`` logger (:func:`log_profile`); :func:`tallying` counts the rows in and
out; :func:`measuring` times the chosen path for the history entry (:mod:`duckstream.history`)
the cursors' commit records, which ``auto`` reads back (:func:`duckstream.strategy.calibrate`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Generator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from duckstream.history import Entry, phase_list
from duckstream.plan import (
    CreateTemp,
    IVMPlan,
    Sql,
    Step,
)
from duckstream.strategy import (
    Phase,
    RefreshReport,
    phases_text,
)

logger = logging.getLogger("duckstream")


def _is(statement: str, *words: str) -> bool:
    """Whether ``statement`` starts with one of ``words`` (upper case)."""
    return statement.lstrip().upper().startswith(words)


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
