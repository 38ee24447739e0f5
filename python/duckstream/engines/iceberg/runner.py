"""Run a Spark plan: ``setup(spark, plan)`` once, then ``refresh(spark, plan)``.

``refresh(spark, plan)`` (``strategy="auto"``) is :func:`begin` then :func:`finish`, as on
DuckLake (:mod:`duckstream.engines.ducklake.runner`): ``begin`` reads the window's metadata
once and estimates it from Iceberg's metadata (:mod:`.estimate`), choosing ``maintain`` or
``initialize_cursors`` (the atomic full rebuild: the view's data and cursors in one commit),
whichever is cheaper; ``finish`` runs the chosen path's steps (:mod:`.steps`, the step
interpreter), rebuilds when the window cannot be read from Iceberg
(:class:`~duckstream.errors.RebuildRequired`) and records the view's history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from duckstream.engines.iceberg.decimals import Decimal, running_total_scale
from duckstream.engines.iceberg.dialect import DIALECT, quoted
from duckstream.engines.iceberg.estimate import SparkPolicy, choose, estimate_window
from duckstream.engines.iceberg.steps import run_steps
from duckstream.engines.iceberg.unsupported import AVG_MAX_SCALE, avg_message
from duckstream.engines.iceberg.window import (
    TableLog,
    read_logs,
)
from duckstream.errors import DuckstreamError, RebuildRequired, UnsupportedSQLError
from duckstream.history import FIRST_BUILD, Entry, phase_list
from duckstream.plan import (
    IVMPlan,
)
from duckstream.strategy import Phase, Policy, RefreshReport, check_strategy, decide

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def setup(spark: SparkSession, plan: IVMPlan, reason: str = FIRST_BUILD) -> dict[str, str]:
    """Create the cursors table and the view's table, and fill it at pinned snapshots
    (``reason``: why, for the view's history)."""
    check_running_totals(spark, plan)
    spark.sql(plan.create_cursors_table)
    spark.sql(plan.create_mv)
    return fill(spark, plan, reason)


def fill(spark: SparkSession, plan: IVMPlan, reason: str = FIRST_BUILD) -> dict[str, str]:
    """Fill the view's table at pinned snapshots, its commit recording ``reason`` in the
    view's history."""
    phases: list[Phase] = []
    report = RefreshReport("full", "", reason)
    entry = history_entry(report, phases, None, time.perf_counter())
    return run_steps(spark, plan.steps["initialize_cursors"], phases=phases, entry=entry)


def history_entry(
    report: RefreshReport,
    phases: list[Phase],
    changes: dict[str, int] | None,
    start: float,
) -> Callable[[], Entry]:
    """The history entry of a refresh, made when its commit runs: ``report``'s path and
    reason, ``changes`` (rows in per source: the estimate), the phases so far. Rows out
    are Iceberg's own (the summary's ``added-records``, ``deleted-records``)."""

    def entry() -> Entry:
        cost = report.incremental_cost if report.strategy == "incremental" else report.full_cost
        return Entry(
            report.strategy,
            report.requested,
            report.reason,
            dict(changes or {}),
            phases=phase_list(phases),
            ms=round((time.perf_counter() - start) * 1000, 3),
            cost=cost,
        )

    return entry


def changes_in(
    plan: IVMPlan, report: RefreshReport, logs: dict[str, TableLog] | None
) -> dict[str, int] | None:
    """Rows in per source: the estimate auto decided with, else the window's from ``logs``."""
    if report.sources:
        return report.change_rows
    if logs is None:
        return None
    found = estimate_window(plan.mv_table, plan.tables, logs)
    return None if isinstance(found, str) else {n: s.changed for n, s in found.items()}


@dataclass
class Pinned:
    """A refresh decided, its window pinned by the metadata read once, nothing run yet
    (:func:`begin`); :func:`finish` runs it. The same protocol as DuckLake's
    (:class:`duckstream.engines.ducklake.runner.Pinned`), less the open transaction Spark
    does not have.

    ``report`` is the path and why (a caller may still change it: dbt's ``full`` keeps an
    unchanged window incremental), ``logs`` the metadata read once for the estimate and the
    pin (``None``: a rebuild of whatever is current), ``phases`` the profile so far."""

    plan: IVMPlan
    report: RefreshReport
    logs: dict[str, TableLog] | None
    phases: list[Phase]
    started: float  # perf_counter at the start: the history entry's time
    started_ms: int  # wall clock at the start: recorded in the view's commit, for auto

    def unchanged(self) -> bool:
        """Whether the estimate found no source changed (a refresh would commit nothing)."""
        return self.report.strategy == "incremental" and not any(
            s.changed for s in self.report.sources.values()
        )


def begin(
    spark: SparkSession,
    plan: IVMPlan,
    strategy: str = "auto",
    policy: Policy | None = None,
    *,
    estimate_full: bool = False,
) -> Pinned:
    """Decide a refresh: read the view's and the sources' metadata once (no Spark job) and
    choose the path: ``auto`` estimates the window (:func:`.estimate.choose`, with ``policy``),
    ``incremental`` and ``full`` take theirs (with the model's costs of the window, for auto
    to scale its time by). ``full`` reads no metadata (a rebuild of what is current) unless
    ``estimate_full``: then the window is estimated too and pins the rebuild, and
    :meth:`Pinned.unchanged` says whether anything changed."""
    check_strategy(strategy)
    started, started_ms = time.perf_counter(), int(time.time() * 1000)
    phases: list[Phase] = []
    logs = None
    if strategy != "full" or estimate_full:
        # One read of the view's and the sources' metadata: auto's estimate and the pin
        logs = read_logs(spark, plan.mv_table, plan.tables, measured=strategy == "auto")
        phases.append(Phase("pin", time.perf_counter() - started, 0))
    if strategy == "auto" or (strategy == "full" and estimate_full):
        report = choose(spark, plan, policy, logs=logs)
        if strategy == "full":
            report.requested = "full"
            if report.strategy == "incremental" and not any(
                s.changed for s in report.sources.values()
            ):
                report.reason = "nothing changed"
            else:
                report.strategy, report.reason = "full", "requested"
    else:
        report = requested(plan, strategy, logs, policy)
    return Pinned(plan, report, logs, phases, started, started_ms)


def finish(spark: SparkSession, pinned: Pinned, *, rebuild: bool = True) -> dict[str, str]:
    """Run the path ``pinned`` chose, in one commit of the view's table (none if nothing
    changed), and return the run's values (the window's flags, :func:`changed_sources`).
    ``maintain`` raising :class:`RebuildRequired` rebuilds instead (the report says why)
    when ``rebuild``, else the error propagates. The report gets the phases and the time."""
    plan, report, logs, phases = pinned.plan, pinned.report, pinned.logs, pinned.phases
    entry = history_entry(report, phases, changes_in(plan, report, logs), pinned.started)
    values: dict[str, str] = {}
    if report.strategy == "incremental":
        check_not_cached(spark, plan)
        try:
            values = run_steps(
                spark,
                plan.steps["maintain"],
                logs=logs,
                phases=phases,
                entry=entry,
                started_ms=pinned.started_ms,
            )
        except RebuildRequired as error:
            if not rebuild:
                raise
            report.strategy = "full"
            report.reason = error.reason
    if report.strategy == "full":  # pinned at the snapshots ``logs`` read, when read
        values = run_steps(
            spark,
            plan.steps["initialize_cursors"],
            logs=logs,
            phases=phases,
            entry=entry,
            started_ms=pinned.started_ms,
        )
    report.phases = phases
    report.elapsed = time.perf_counter() - pinned.started
    return values


def refresh(
    spark: SparkSession,
    plan: IVMPlan,
    *,
    rebuild: bool = False,
    strategy: str = "auto",
    policy: Policy | None = None,
) -> RefreshReport:
    """Bring the view up to date with ``strategy`` and report what ran and why.

    ``incremental`` applies every change committed to the sources since the last refresh, in
    one commit of the view's table (or none if nothing changed), and raises
    :class:`RebuildRequired` for a window Iceberg cannot read, unless ``rebuild=True``: then
    it re-initializes the view. ``full`` re-initializes it. ``auto`` (the default) estimates
    the window from Iceberg metadata (:func:`duckstream.engines.iceberg.estimate.choose`, with
    ``policy``) and runs the cheaper of the two, rebuilding whenever maintaining is
    impossible. :func:`begin` then :func:`finish`, as the dbt adapter runs them.
    """
    pinned = begin(spark, plan, strategy, policy)
    finish(spark, pinned, rebuild=rebuild or strategy != "incremental")
    return pinned.report


def requested(
    plan: IVMPlan, strategy: str, logs: dict[str, TableLog] | None, policy: Policy | None
) -> RefreshReport:
    """The report of a requested path, with the model's costs of the window when ``logs``
    were read: its time then calibrates ``auto`` (:func:`~duckstream.strategy.calibrate`
    scales a refresh's time by its cost), as a refresh ``auto`` chose would."""
    report = RefreshReport(strategy, strategy, "requested")
    found = None if logs is None else estimate_window(plan.mv_table, plan.tables, logs)
    if isinstance(found, dict):
        costs = decide(found, policy or SparkPolicy())
        report.incremental_cost, report.full_cost = costs.incremental_cost, costs.full_cost
    return report


def check_not_cached(spark: SparkSession, plan: IVMPlan) -> None:
    """Refuse to maintain from a source cached in the session: Spark answers a read of any
    snapshot of a cached table from the cache (it takes the snapshots for the same plan), so
    the window's old state would be read as the current one."""
    for source in {(s.catalog, s.schema, s.table) for s in plan.sources}:
        name = ".".join(quoted(part) for part in source)
        if spark.catalog.isCached(name):
            raise DuckstreamError(
                f"duckstream: source {'.'.join(source)} of {plan.mv_table} is cached"
                " in this Spark session (CACHE TABLE), and Spark would read its earlier"
                f" snapshots from the cache: UNCACHE TABLE {name} before refreshing"
            )


def check_running_totals(spark: SparkSession, plan: IVMPlan) -> None:
    """Refuse a view whose SUM / AVG running total Spark would round: a DECIMAL argument with
    a scale above 6 and many digits (``decimals.running_total_scale``). The compiler refuses
    it when it has the schema; without one, the types are first known here, from Spark's
    analysis of the table's query (no job runs)."""
    create = sqlglot.parse_one(plan.create_mv, dialect=DIALECT)
    query = create.expression
    if not isinstance(query, exp.Query):
        return
    fields = {f.name: f.dataType for f in spark.sql(query.sql(dialect=DIALECT)).schema.fields}
    # An AVG's visible value reads its running total's type (engine.avg's typeof).
    averaged = {
        column.name for call in query.find_all(exp.Typeof) for column in call.find_all(exp.Column)
    }
    from pyspark.sql.types import DecimalType

    for name, type_ in fields.items():
        if f"{name}_n" not in fields or not isinstance(type_, DecimalType):
            continue  # not a SUM / AVG running total (its non-NULL count beside it)
        total = Decimal(type_.precision, type_.scale)
        # SUM adds 10 digits; a 38-digit total's argument has 28 or more, and the scale a
        # running total loses does not shrink with more digits: 28 decides for all of them.
        argument = Decimal(total.precision - 10, total.scale)
        if name in averaged and total.scale > AVG_MAX_SCALE:
            message = avg_message(total.scale, f"its running total {name}")
            raise UnsupportedSQLError(
                "spark_unsupported", f"duckstream: {plan.mv_table}: {message}"
            )
        if running_total_scale(argument) < argument.scale:
            raise UnsupportedSQLError(
                "spark_unsupported",
                f"duckstream: {plan.mv_table} sums a DECIMAL of scale {total.scale} into a"
                f" DECIMAL({total.precision},{total.scale}) running total, which Spark rounds"
                " to fewer digits of scale as changes merge; cast the argument (e.g. to"
                " DECIMAL(p,6) or DOUBLE) or compile with schema= to be told which",
            )
