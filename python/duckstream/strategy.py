"""Choose, per refresh, between incremental maintenance and a full rebuild, and say why.

``refresh(con, plan, strategy="auto")`` first *estimates* the window's changes from DuckLake's
catalog alone (:mod:`duckstream.ducklake_estimate`: one query over the catalog's metadata and
the view's cursors, no changed row read), weighs the two paths with the cost model of
:mod:`duckstream.cost`, then runs either ``plan.maintain`` (apply the change feed) or
``plan.initialize_cursors`` (pin a snapshot, rebuild the table, record the cursors: atomic,
like ``maintain``). It returns a :class:`RefreshReport`: what was done and why. Auto also
rebuilds, and says so, when incremental maintenance is impossible: no cursors yet, a cursor
snapshot that was expired, a source recreated or altered.
"""

from __future__ import annotations

import time
from typing import Literal

from duckstream.cost import Policy, RefreshReport, SourceEstimate, decide
from duckstream.ducklake_estimate import estimate
from duckstream.plan import IVMPlan
from duckstream.runtime import Connection, run_statements

__all__ = ["STRATEGIES", "Policy", "RefreshReport", "SourceEstimate", "choose", "decide", "refresh"]

Strategy = Literal["auto", "incremental", "full"]
STRATEGIES: tuple[str, ...] = ("auto", "incremental", "full")

_REBUILD = "duckstream: rebuild required"


def refresh(
    con: Connection, plan: IVMPlan, strategy: str = "auto", policy: Policy | None = None
) -> RefreshReport:
    """Bring ``plan``'s table up to date with ``strategy`` and report what was done.

    ``incremental`` runs ``plan.maintain`` (errors propagate, e.g. "rebuild required");
    ``full`` runs ``plan.initialize_cursors``; ``auto`` estimates and picks one, and falls back
    to a rebuild when the engine reports that incremental maintenance is impossible.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if plan.dialect != "duckdb":
        raise ValueError(
            f"this refresh runs DuckDB plans; refresh a {plan.dialect} plan with"
            " duckstream.spark.refresh(spark, plan, strategy=...)"
        )
    start = time.perf_counter()
    if strategy == "incremental":
        run_statements(con, plan.maintain)
        report = RefreshReport("incremental", strategy, "requested")
    elif strategy == "full":
        run_statements(con, plan.initialize_cursors)
        report = RefreshReport("full", strategy, "requested")
    else:
        report = _auto(con, plan, policy or Policy())
    report.elapsed = time.perf_counter() - start
    return report


def _auto(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    """Estimate inside the refresh's own transaction, then run the chosen statements in it:
    one DuckLake transaction set-up instead of two (each costs catalog round trips), and the
    estimate sees the snapshot the refresh applies."""
    begin = plan.maintain[0]
    shared = begin == plan.initialize_cursors[0] == "BEGIN TRANSACTION"
    if shared:
        con.execute(begin)
    try:
        report = choose(con, plan, policy)
    except Exception:
        if shared:
            con.execute("ROLLBACK")
        raise
    chosen = plan.maintain if report.strategy == "incremental" else plan.initialize_cursors
    try:
        run_statements(con, chosen[1:] if shared else chosen)
    except Exception as error:
        if report.strategy != "incremental" or _REBUILD not in str(error):
            raise
        report.strategy = "full"  # run_statements rolled the refresh back
        report.reason = str(error).split(_REBUILD + ": ", 1)[-1].splitlines()[0]
        run_statements(con, plan.initialize_cursors)
    return report


# -- the estimate ------------------------------------------------------------------------


def choose(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    """Estimate the window's changes from the catalog and decide; runs nothing else."""
    start = time.perf_counter()
    found = estimate(con, plan)
    if isinstance(found, str):
        report = RefreshReport("full", "auto", found)
    else:
        report = decide(found, policy)
    report.estimate_seconds = time.perf_counter() - start
    return report
