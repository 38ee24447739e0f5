"""`make demo`: a small pipeline maintained incrementally on an embedded DuckLake catalog.

Builds orders in ./demo/lake, compiles a revenue-per-customer view, commits a few change
batches, refreshes, and shows the maintained table equals recomputation after each step.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from duckstream import compile_ivm
from duckstream.lake import connect_ducklake
from duckstream.runtime import refresh, setup
from duckstream.testing.differential import as_multiset

VIEW = """
SELECT customer, count(*) AS orders, sum(amount) AS revenue, max(amount) AS largest
FROM orders
WHERE status <> 'cancelled'
GROUP BY customer
"""

BATCHES = [
    (
        "new orders",
        [
            "INSERT INTO dl.main.orders SELECT 100000 + i, 'c' || (i % 50), (i % 97) * 1.5, 'open'"
            " FROM range(2000) t(i)"
        ],
    ),
    ("cancel some orders", ["UPDATE dl.main.orders SET status = 'cancelled' WHERE id % 37 = 0"]),
    ("delete the largest orders", ["DELETE FROM dl.main.orders WHERE amount > 140"]),
]


def main() -> None:
    root = Path("demo").resolve()
    shutil.rmtree(root, ignore_errors=True)
    con = connect_ducklake(str(root / "lake"), alias="dl")
    con.execute(
        "CREATE TABLE dl.main.orders AS SELECT i AS id, 'c' || (i % 50) AS customer,"
        " CAST((i % 89) * 1.75 AS DECIMAL(10, 2)) AS amount,"
        " CASE WHEN i % 11 = 0 THEN 'cancelled' ELSE 'open' END AS status FROM range(100000) t(i)"
    )
    plan = compile_ivm(VIEW, mv_name="revenue_per_customer", mv_catalog="dl")
    print(f"view: {' '.join(VIEW.split())}")
    print(f"features: {', '.join(sorted(plan.features))}")
    print(f"maintenance: {len(plan.maintain)} statements (python -m duckstream compile to see)")
    setup(con, plan)
    for label, statements in BATCHES:
        for statement in statements:
            con.execute(statement)
        started = time.perf_counter()
        refresh(con, plan, strategy="incremental")  # auto would rebuild a table this small
        refreshed = time.perf_counter() - started
        started = time.perf_counter()
        con.execute("USE dl.main")
        expected = as_multiset(con.execute(VIEW).fetchall())
        recomputed = time.perf_counter() - started
        actual = as_multiset(con.execute(plan.query_mv).fetchall())
        con.execute("USE memory.main")
        status = "equal to recomputation" if actual == expected else "DIFFERENT FROM RECOMPUTATION"
        print(
            f"{label:28s} refresh {refreshed * 1000:7.1f} ms | recompute query"
            f" {recomputed * 1000:6.1f} ms | {sum(actual.values())} rows, {status}"
        )
        if actual != expected:
            raise SystemExit(1)
    print(f"demo catalog kept in {root}")


if __name__ == "__main__":
    main()
