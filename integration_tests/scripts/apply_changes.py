"""Commit one batch of source changes (inserts, updates, deletes) to the shop's DuckLake.

    python scripts/apply_changes.py --batch N [--lake DIR]

Batches are deterministic in N and change about as many rows at any --scale of the sources;
each statement commits its own DuckLake snapshot, as an application writing to the lake would.
"""

from __future__ import annotations

import argparse

import duckdb
from lake import connect


def change_batch(batch: int, orders: int = 40) -> list[tuple[str, str]]:
    """(label, statement) pairs of batch number ``batch`` (1, 2, ...)."""
    base = 1_000_000 * batch
    return [
        (
            "new orders",
            "INSERT INTO lake.raw.orders SELECT "
            f"{base} + i, 1 + (i * 31 + {batch}) % 300, DATE '2024-03-01' + (i % 20)::INTEGER,"
            f" 'placed' FROM range({orders}) t(i)",
        ),
        (
            "their items",
            "INSERT INTO lake.raw.order_items SELECT o.order_id, l, p.product_id,"
            " 1 + (o.order_id + l) % 3, p.price FROM lake.raw.orders o, range(1, 3) t(l),"
            " lake.raw.products p WHERE o.order_id >= "
            f"{base} AND p.product_id = 1 + (o.order_id * 7 + l * {batch}) % 60",
        ),
        (
            "their payments",
            "INSERT INTO lake.raw.payments SELECT o.order_id, o.order_id, 'card',"
            " (10 + o.order_id % 50)::DECIMAL(12, 2), TIMESTAMP '2024-03-02 10:00:00'"
            f" FROM lake.raw.orders o WHERE o.order_id >= {base} AND o.order_id % 3 <> 0",
        ),
        (
            "cancel orders",
            "UPDATE lake.raw.orders SET status = 'cancelled'"
            f" WHERE order_id % 97 = {batch % 97} AND order_id <= 3000 AND status <> 'cancelled'",
        ),
        (
            "re-price products",
            "UPDATE lake.raw.products SET category = 'sale', price = price - 1"
            f" WHERE product_id % 13 = {batch % 13}",
        ),
        (
            "drop order lines",
            "DELETE FROM lake.raw.order_items"
            f" WHERE (order_id * 7 + line_no) % 173 = {batch} AND order_id <= 3000",
        ),
        (
            "customers move",
            "UPDATE lake.raw.customers SET country = 'JP'"
            f" WHERE customer_id % 41 = {batch % 41} AND customer_id <= 300",
        ),
        (
            "new customers",  # no orders yet: NULL-extended in customer_orders
            "INSERT INTO lake.raw.customers SELECT"
            f" {base} + i, 'customer ' || ({base} + i), 'FR', DATE '2024-03-01'"
            " FROM range(3) t(i)",
        ),
        (
            "customers leave",  # their orders stay: NULL-extended in order_facts
            f"DELETE FROM lake.raw.customers WHERE customer_id % 53 = {batch % 53}"
            " AND customer_id <= 300",
        ),
        (
            "orders withdrawn",
            f"DELETE FROM lake.raw.orders WHERE order_id % 211 = {batch % 211}"
            " AND order_id <= 3000",
        ),
        (
            "page views",  # now: they enter models/marts/recent_page_views' window
            "INSERT INTO lake.raw.page_views SELECT"
            f" {base} + i, 1 + (i * 31 + {batch}) % 300,"
            " now()::TIMESTAMP - INTERVAL (i * 3) HOUR FROM range(8) t(i)",
        ),
        (
            "page views forgotten",
            f"DELETE FROM lake.raw.page_views WHERE view_id % 37 = {batch % 37}"
            " AND view_id <= 1000",
        ),
        (
            "new categories",  # under existing ones: new paths in models/marts/category_paths
            "INSERT INTO lake.raw.categories SELECT"
            f" {base} + i, 1 + (i * 5 + {batch}) % 40, 'category ' || ({base} + i)"
            " FROM range(2) t(i)",
        ),
        (
            "categories move",  # under a root: their subtrees' paths change
            f"UPDATE lake.raw.categories SET parent_id = 1 + (category_id + {batch}) % 4"
            f" WHERE category_id % 11 = {batch % 11} AND category_id BETWEEN 5 AND 40",
        ),
        (
            "categories removed",  # their subtrees lose their paths
            f"DELETE FROM lake.raw.categories WHERE category_id % 17 = {batch % 17}"
            " AND category_id BETWEEN 5 AND 40",
        ),
        (
            "refunds",
            f"DELETE FROM lake.raw.payments WHERE payment_id % 89 = {batch % 89}"
            " AND payment_id <= 3000",
        ),
    ]


def apply_changes(con: duckdb.DuckDBPyConnection, batch: int) -> dict[str, int]:
    """Run batch ``batch``; returns the rows each statement changed."""
    changed = {}
    for label, statement in change_batch(batch):
        row = con.execute(statement).fetchone()
        changed[label] = int(row[0]) if row else 0
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--lake", help="DuckLake directory (default $DUCKSTREAM_LAKE_DIR or lake)")
    args = parser.parse_args()
    con = connect(args.lake)
    changed = apply_changes(con, args.batch)
    con.close()
    print(f"batch {args.batch}: " + ", ".join(f"{k} {v}" for k, v in changed.items()))


if __name__ == "__main__":
    main()
