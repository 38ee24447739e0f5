"""Run a plan: ``setup`` once, then ``refresh``, on the engine the plan was compiled for.

``setup(con, plan)`` and ``refresh(con, plan, strategy="auto")`` take a DuckDB connection for
a DuckDB plan (:mod:`duckstream.engines.ducklake.runner`) and a Spark session for a Spark plan
(:mod:`duckstream.engines.iceberg.runner`); both return the same
:class:`~duckstream.refresh.RefreshReport`.
"""

from __future__ import annotations

from typing import Any

from duckstream.plan import IVMPlan
from duckstream.refresh import Policy, RefreshReport


def setup(con: Any, plan: IVMPlan) -> Any:
    """Create the cursors table and the materialized view, and fill it at a pinned snapshot."""
    if plan.dialect == "spark":
        from duckstream.engines.iceberg import runner as iceberg

        return iceberg.setup(con, plan)
    from duckstream.engines.ducklake import runner as ducklake

    return ducklake.setup(con, plan)


def refresh(
    con: Any, plan: IVMPlan, strategy: str = "auto", policy: Policy | None = None
) -> RefreshReport:
    """Apply every change committed to the sources since the last refresh (one transaction on
    DuckLake, one commit of the view on Iceberg) and report what ran and why.

    ``strategy``: ``"auto"`` (the default) estimates the change from the catalog's metadata
    and runs whichever is cheaper, falling back to a rebuild when maintenance is impossible;
    ``"incremental"`` runs ``maintain`` (errors such as ``rebuild required`` propagate);
    ``"full"`` rebuilds the table and its cursors atomically (``initialize_cursors``)."""
    if plan.dialect == "spark":
        from duckstream.engines.iceberg import runner as iceberg

        return iceberg.refresh(con, plan, strategy=strategy, policy=policy)
    from duckstream.engines.ducklake import runner as ducklake

    return ducklake.refresh(con, plan, strategy, policy)
