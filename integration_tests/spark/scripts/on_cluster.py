"""The Spark project run by dbt on a Spark cluster, through several refreshes.

python scripts/on_cluster.py MASTER_URL WAREHOUSE PROJECT_DIR PROFILES_DIR

A driver session on ``MASTER_URL`` (a standalone master: ``duckstream.testing.spark_cluster``)
with the Iceberg catalog ``lake`` in ``WAREHOUSE``; dbt-spark's ``session`` method takes that
same session (``getOrCreate``). The sources are built, every model is built, then the
sources change and each model is maintained incrementally (twice), and dbt's
``ivm_equivalent`` tests compare each model with its recomputation; the chained model is
also compared here, row for row. Prints one JSON line (what ran where) and exits non-zero
on any difference.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

from dbt.cli.main import dbtRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sources import change_sources, setup_sources  # noqa: E402

from duckstream.spark import local_session  # noqa: E402

MODELS = ("revenue_per_country", "big_countries", "customer_orders")
INCREMENTAL = ["--vars", "{ivm_strategy: incremental}"]


def dbt(project: str, profiles: str, *args: str) -> dict[str, str]:
    """Run dbt; each node's message, by name (fails unless dbt succeeded)."""
    result = dbtRunner().invoke(
        [*args, "--project-dir", project, "--profiles-dir", profiles]
        + ["--target", "spark", "--threads", "1"]
    )
    nodes = {
        r.node.name: f"{r.status}: {r.message or ''}"
        for r in (getattr(result.result, "results", None) or [])
    }
    if not result.success:
        raise SystemExit(f"dbt {' '.join(args)} failed: {result.exception} {nodes}")
    return nodes


def main(master: str, warehouse: str, project: str, profiles: str) -> None:
    os.environ["DUCKSTREAM_SPARK_WAREHOUSE"] = warehouse
    os.environ["DUCKSTREAM_SPARK_MASTER"] = master
    spark = local_session(
        warehouse,
        extra_conf={"spark.master": master, "spark.executor.memory": "1g", "spark.cores.max": "1"},
    )
    setup_sources(spark)
    runs = {"build": dbt(project, profiles, "run")}
    change_sources(spark)
    runs["after changes"] = dbt(project, profiles, "run", *INCREMENTAL)
    spark.sql("INSERT INTO raw.orders VALUES (500, 1, 12.50), (501, 20, 3.00)")
    spark.sql("DELETE FROM raw.orders WHERE order_id = 7")
    runs["after more changes"] = dbt(project, profiles, "run", *INCREMENTAL)
    runs["tests"] = dbt(project, profiles, "test")
    got = collections.Counter(
        tuple(r) for r in spark.table("db.big_countries").select("country", "revenue").collect()
    )
    want = collections.Counter(
        tuple(r)
        for r in spark.sql(
            "SELECT c.country, sum(o.amount) FROM raw.orders o JOIN raw.customers c"
            " ON o.customer_id = c.customer_id GROUP BY c.country HAVING count(*) >= 3"
        ).collect()
    )
    if got != want:
        raise SystemExit(f"big_countries differs from its recomputation: {got} != {want}")
    context = spark.sparkContext
    print(
        json.dumps(
            {
                "master": context.master,
                "executors": context._jsc.sc().getExecutorMemoryStatus().size() - 1,
                "runs": runs,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
