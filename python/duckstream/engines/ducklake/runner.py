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
DuckLake's COMMIT 1; no change: 11. In CPU time (``python -m bench.fixed_cost --refreshes
20``, medians, three runs on a loaded 2-core machine): ~29-33 ms in all, of which the COMMIT
7-13, the change copy 4.5-5.4 (``ducklake_table_insertions``: the first read of the source
at a new snapshot), the pin 4.9-5.8 (its two metadata reads and the SET; the first touch of
DuckLake in a transaction loads its snapshot, ~1.5 ms, whichever statement comes first),
the settings and the transaction check 1.8-2.2, the delta's temporary table 2-2.3, the apply
2.2-2.5, the cursors ~1, the clean-up ~0.7. What was cut from the pin (7.6-8 ms before, same
runs): the table ids, read only after DDL (:func:`.window.renames_possible`), the file lists
grouped without the cursors, the ends read once. Reading the snapshot log in the pin's first
statement (for the cursors the process last recorded) saved no CPU: planning the larger
statement cost what the second one did.

This module holds the flows (setup, refresh, auto's begin / choose / finish, rebuild); the
pieces they use each have a module: :mod:`.steps` runs statement lists (the step
interpreter and its faster paths), :mod:`.transaction` refuses to run inside the caller's
transaction, :mod:`.statistics` keeps DuckLake's table statistics out while a refresh runs,
:mod:`.profile` times and counts what ran. The names other modules import from here stay
here (``__all__``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from duckstream.connection import Connection
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.estimate import choose
from duckstream.engines.ducklake.profile import (
    Tally,
    _log,
    _phase,
    _profile,
    log_profile,
    measuring,
    profiling,
    tallying,
)
from duckstream.engines.ducklake.statistics import (
    _shared_catalog,
    shared_catalog,
    without_table_statistics,
)
from duckstream.engines.ducklake.steps import (
    _is_copy,
    _window_known,
    advances,
    count_changes,
    no_changes,
    run_statements,
)
from duckstream.engines.ducklake.transaction import TransactionOpen, _outside
from duckstream.errors import RebuildRequired, RefreshConflict
from duckstream.history import FIRST_BUILD
from duckstream.plan import (
    Applied,
    Begin,
    Cleanup,
    Commit,
    IVMPlan,
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
    check_strategy,
    decide_netted,
    sources_to_net,
)


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


__all__ = [
    "Pinned",
    "Policy",
    "RefreshConflict",
    "RefreshReport",
    "Runner",
    "TransactionOpen",
    "abandon",
    "advances",
    "begin",
    "choose",
    "finish",
    "log_profile",
    "profiling",
    "rebuild",
    "refresh",
    "run_statements",
    "setup",
    "shared_catalog",
    "without_table_statistics",
]
