"""Run a plan: ``setup`` once, then ``refresh``, on the engine the plan was compiled for; and
``schema_of``, the tables' columns ``compile_ivm`` needs to expand ``SELECT *``.

``setup(con, plan)`` and ``refresh(con, plan, strategy="auto")`` take a DuckDB connection for
a DuckDB plan (:mod:`duckstream.engines.ducklake.runner`) and a Spark session for a Spark plan
(:mod:`duckstream.engines.iceberg.runner`); both return the same
:class:`~duckstream.strategy.RefreshReport`.
"""

from __future__ import annotations

import logging
from typing import Any

from duckstream.errors import RefreshConflict
from duckstream.plan import IVMPlan
from duckstream.strategy import Policy, RefreshReport

logger = logging.getLogger("duckstream")


def setup(con: Any, plan: IVMPlan) -> Any:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    if plan.dialect == "spark":
        from duckstream.engines.iceberg import runner as iceberg

        return iceberg.setup(con, plan)
    from duckstream.engines.ducklake import runner as ducklake

    return ducklake.setup(con, plan)


def refresh(
    con: Any,
    plan: IVMPlan,
    strategy: str = "auto",
    policy: Policy | None = None,
    conflict_retries: int = 0,
) -> RefreshReport:
    """Apply every change committed to the sources since the last refresh (one transaction on
    DuckLake, one commit of the view on Iceberg) and report what ran and why.

    ``strategy``: ``"auto"`` (the default) estimates the change from the catalog's metadata
    and runs whichever is cheaper, falling back to a rebuild when maintenance is impossible;
    ``"incremental"`` runs ``maintain`` (errors such as ``rebuild required`` propagate);
    ``"full"`` rebuilds the table and its cursors atomically (``initialize_cursors``).

    ``conflict_retries``: how many times a refresh that lost the race to another refresh of
    the same view (:class:`~duckstream.errors.RefreshConflict`) starts over, logged each time;
    then the conflict is raised. Starting over is safe: the lost refresh applied nothing, and
    the new one reads the cursors the winner committed."""
    for attempt in range(conflict_retries + 1):
        try:
            return _refresh(con, plan, strategy, policy)
        except RefreshConflict as conflict:
            if attempt == conflict_retries:
                raise
            logger.warning(
                "%s; starting over (retry %d of %d)", conflict, attempt + 1, conflict_retries
            )
    raise AssertionError("unreachable")  # the loop returns or raises


def _refresh(con: Any, plan: IVMPlan, strategy: str, policy: Policy | None) -> RefreshReport:
    if plan.dialect == "spark":
        from duckstream.engines.iceberg import runner as iceberg

        return iceberg.refresh(con, plan, strategy=strategy, policy=policy)
    from duckstream.engines.ducklake import runner as ducklake

    return ducklake.refresh(con, plan, strategy, policy)


def schema_of(
    con: Any, sql: str, *, catalog: str | None = None, schema: str | None = None
) -> dict[str, Any]:
    """The columns and types of the tables ``sql`` reads, as ``compile_ivm``'s ``schema=``
    wants them (``SELECT *`` over a table and ``NATURAL JOIN`` need it; with it, refreshes
    read only the columns the view uses). ``con`` is a DuckDB connection or a Spark session
    (then ``sql`` is Spark SQL); pass the ``mv_catalog`` and ``mv_schema`` you compile with,
    which default to the connection's current ones::

        plan = compile_ivm(sql, mv_name="v", mv_catalog="lake", mv_schema="main",
                           schema=schema_of(con, sql, catalog="lake", schema="main"))
    """
    if hasattr(con, "sparkContext"):
        from duckstream.engines.iceberg.schema import schema_of as iceberg_schema_of

        return iceberg_schema_of(con, sql, catalog=catalog, schema=schema)
    from duckstream.engines.ducklake.schema import schema_of as ducklake_schema_of

    return ducklake_schema_of(con, sql, catalog=catalog, schema=schema)
