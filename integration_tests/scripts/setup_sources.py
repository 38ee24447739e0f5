"""Create the shop's source tables in the DuckLake (schema ``raw``), with deterministic data.

python scripts/setup_sources.py [--lake DIR] [--scale N]
"""

from __future__ import annotations

import argparse

import duckdb
from lake import connect

COUNTRIES = ["DE", "FR", "NL", "US", "CA", "BR", "JP", "IN", "XX"]  # XX: no region (seed)
CATEGORIES = ["books", "games", "garden", "kitchen", "music", "toys"]
METHODS = ["card", "paypal", "transfer", "voucher"]


def _pick(values: list[str], expr: str) -> str:
    items = ", ".join(f"'{v}'" for v in values)
    return f"([{items}])[1 + ({expr}) % {len(values)}]"


def setup_sources(con: duckdb.DuckDBPyConnection, scale: int = 1) -> None:
    """(Re)create raw.customers, raw.products, raw.orders, raw.order_items, raw.payments,
    raw.page_views, raw.categories."""
    customers, products, orders = 300 * scale, 60, 3000 * scale
    con.execute("CREATE SCHEMA IF NOT EXISTS lake.raw")
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.customers AS SELECT i::INTEGER AS customer_id,"
        " 'customer ' || i AS name,"
        f" {_pick(COUNTRIES, 'i * 7')} AS country,"
        " DATE '2023-01-01' + (i % 365)::INTEGER AS signup_date"
        f" FROM range(1, {customers + 1}) t(i)"
    )
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.products AS SELECT i::INTEGER AS product_id,"
        " 'product ' || i AS name,"
        f" {_pick(CATEGORIES, 'i')} AS category,"
        " (5 + (i * 37) % 95 + 0.99)::DECIMAL(10, 2) AS price"
        f" FROM range(1, {products + 1}) t(i)"
    )
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.orders AS SELECT i::INTEGER AS order_id,"
        f" (1 + (i * 13) % {customers})::INTEGER AS customer_id,"
        " DATE '2024-01-01' + (i % 90)::INTEGER AS order_date,"
        " CASE WHEN i % 23 = 0 THEN 'cancelled' WHEN i % 5 = 0 THEN 'shipped'"
        " ELSE 'placed' END AS status"
        f" FROM range(1, {orders + 1}) t(i)"
    )
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.order_items AS SELECT o.order_id,"
        " l::INTEGER AS line_no,"
        f" (1 + (o.order_id * 11 + l * 29) % {products})::INTEGER AS product_id,"
        " (1 + (o.order_id + l) % 4)::INTEGER AS quantity,"
        " p.price AS unit_price"
        " FROM lake.raw.orders o, range(1, 4) t(l), lake.raw.products p"
        f" WHERE p.product_id = 1 + (o.order_id * 11 + l * 29) % {products}"
        " AND (l < 3 OR o.order_id % 2 = 0)"
    )
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.payments AS SELECT o.order_id AS payment_id,"
        f" o.order_id, {_pick(METHODS, 'o.order_id')} AS method,"
        " sum(i.quantity * i.unit_price)::DECIMAL(12, 2) AS amount,"
        " o.order_date::TIMESTAMP + INTERVAL 1 HOUR AS paid_at"
        " FROM lake.raw.orders o JOIN lake.raw.order_items i ON i.order_id = o.order_id"
        " WHERE o.order_id % 10 <> 0 GROUP BY ALL"
    )
    # page views of the last weeks, relative to the clock: models/marts/recent_page_views
    # keeps the last 7 days of them (a temporal filter), whatever the day the tests run
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.page_views AS SELECT i::INTEGER AS view_id,"
        f" (1 + (i * 17) % {customers})::INTEGER AS customer_id,"
        " date_trunc('hour', now()::TIMESTAMP) - INTERVAL (i * 5) HOUR AS viewed_at"
        f" FROM range(1, {100 * scale + 1}) t(i)"
    )
    # a category tree (parent_id NULL at the roots, else a smaller id): the recursive CTE of
    # models/marts/category_paths walks it
    con.execute(
        "CREATE OR REPLACE TABLE lake.raw.categories AS SELECT i::INTEGER AS category_id,"
        " CASE WHEN i <= 4 THEN NULL ELSE 1 + (i * 7) % (i - 1) END::INTEGER AS parent_id,"
        " 'category ' || i AS name FROM range(1, 41) t(i)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lake", help="DuckLake directory (default $DUCKSTREAM_LAKE_DIR or lake)")
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    con = connect(args.lake)
    setup_sources(con, args.scale)
    counts = {
        t: con.execute(f"SELECT count(*) FROM lake.raw.{t}").fetchone()[0]  # type: ignore[index]
        for t in [
            "customers",
            "products",
            "orders",
            "order_items",
            "payments",
            "page_views",
            "categories",
        ]
    }
    con.close()
    print("sources: " + ", ".join(f"{t} {n}" for t, n in counts.items()))


if __name__ == "__main__":
    main()
