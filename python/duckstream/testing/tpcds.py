"""TPC-DS data, queries and reproducible change workloads on a DuckLake catalog.

The TPC-DS counterpart of :mod:`duckstream.testing.tpch`: ``load_tpcds`` copies dsdgen's 24
tables into a DuckLake catalog, ``tpcds_query`` gives DuckDB's texts of the 99 queries, and the
workloads commit change batches (one DuckLake snapshot each) to the three sales channels
(store, catalog, web: a sales table and its returns table), inventory and the dimensions.

The workloads are generic rather than faithful to the TPC-DS refresh functions: new orders
are copies of sampled orders (sales lines and their returns) under new order numbers; deleted
orders take their returns along; fact updates redraw quantities, scale every DECIMAL measure
of a row by one factor and sometimes move its date; dimension updates redraw attribute columns
from each column's own values, so predicates such as ``i_category = 'Books'`` flip. Randomness
comes from a seed drawn from the caller's ``random.Random`` and is evaluated in SQL as
``hash(seed, ...)``, so a batch is the same on every run.

Query texts keep unqualified table names: run them after ``USE <catalog>.<schema>``, which is
also how the compiler resolves them.
"""

from __future__ import annotations

import functools
import random
from typing import NamedTuple

import duckdb
import sqlglot

from duckstream.testing.ducklake import quote
from duckstream.testing.generated import (
    Counts,
    Workload,
    counts,
    generated_schema,
    load_generated,
    merge,
    query_texts,
    scalar,
    transaction,
)

TABLES = (
    "call_center",
    "catalog_page",
    "catalog_returns",
    "catalog_sales",
    "customer",
    "customer_address",
    "customer_demographics",
    "date_dim",
    "household_demographics",
    "income_band",
    "inventory",
    "item",
    "promotion",
    "reason",
    "ship_mode",
    "store",
    "store_returns",
    "store_sales",
    "time_dim",
    "warehouse",
    "web_page",
    "web_returns",
    "web_sales",
    "web_site",
)


class Fact(NamedTuple):
    """A fact table: its key columns, the date column updates move, the quantity they redraw."""

    key: tuple[str, ...]
    date: str | None
    quantity: str


FACTS = {
    "store_sales": Fact(("ss_item_sk", "ss_ticket_number"), "ss_sold_date_sk", "ss_quantity"),
    "store_returns": Fact(
        ("sr_item_sk", "sr_ticket_number"), "sr_returned_date_sk", "sr_return_quantity"
    ),
    "catalog_sales": Fact(("cs_item_sk", "cs_order_number"), "cs_sold_date_sk", "cs_quantity"),
    "catalog_returns": Fact(
        ("cr_item_sk", "cr_order_number"), "cr_returned_date_sk", "cr_return_quantity"
    ),
    "web_sales": Fact(("ws_item_sk", "ws_order_number"), "ws_sold_date_sk", "ws_quantity"),
    "web_returns": Fact(
        ("wr_item_sk", "wr_order_number"), "wr_returned_date_sk", "wr_return_quantity"
    ),
    "inventory": Fact(
        ("inv_date_sk", "inv_item_sk", "inv_warehouse_sk"), None, "inv_quantity_on_hand"
    ),
}

# The sales channels: (sales table, its order number), (returns table, its order number).
CHANNELS = (
    (("store_sales", "ss_ticket_number"), ("store_returns", "sr_ticket_number")),
    (("catalog_sales", "cs_order_number"), ("catalog_returns", "cr_order_number")),
    (("web_sales", "ws_order_number"), ("web_returns", "wr_order_number")),
)


class Dimension(NamedTuple):
    """A dimension: its key, the columns updates redraw, which rows they pick (SQL filter)."""

    key: str
    columns: tuple[str, ...]
    where: str = "TRUE"


DIMENSIONS = {
    "item": Dimension(
        "i_item_sk",
        (
            "i_category",
            "i_class",
            "i_brand",
            "i_color",
            "i_manager_id",
            "i_manufact_id",
            "i_current_price",
        ),
    ),
    "customer": Dimension(
        "c_customer_sk",
        ("c_birth_country", "c_birth_year", "c_preferred_cust_flag", "c_current_addr_sk"),
    ),
    "customer_address": Dimension(
        "ca_address_sk", ("ca_state", "ca_city", "ca_county", "ca_zip", "ca_gmt_offset")
    ),
    "customer_demographics": Dimension(
        "cd_demo_sk", ("cd_gender", "cd_marital_status", "cd_education_status")
    ),
    "household_demographics": Dimension(
        "hd_demo_sk", ("hd_dep_count", "hd_vehicle_count", "hd_buy_potential")
    ),
    # Only dates the sales fall on (1998-2003), and not the calendar (year, month, week and
    # month sequence), which a real date dimension never changes and queries rely on: Q6's
    # and Q54's `(SELECT DISTINCT d_month_seq ... WHERE d_year = 2001 AND d_moy = 1)` is one
    # row only while every date of that month keeps its month.
    "date_dim": Dimension(
        "d_date_sk",
        ("d_holiday", "d_weekend", "d_following_holiday"),
        "d_year BETWEEN 1998 AND 2003",
    ),
    "promotion": Dimension("p_promo_sk", ("p_channel_email", "p_channel_event", "p_channel_tv")),
    "ship_mode": Dimension("sm_ship_mode_sk", ("sm_type", "sm_carrier")),
}


def load_tpcds(
    con: duckdb.DuckDBPyConnection, catalog: str, scale_factor: float, schema: str = "main"
) -> None:
    """Generate TPC-DS at ``scale_factor`` and copy its 24 tables into ``catalog.schema``.

    dsdgen writes into a scratch in-memory catalog (SF 0.01 takes about half a second, SF 0.1
    about two); the copy is one DuckLake commit.
    """
    load_generated(con, "tpcds", TABLES, catalog, scale_factor, schema)


@functools.cache
def tpcds_query(n: int, keep_limit: bool = False) -> str:
    """TPC-DS query ``n`` (1-99) as DuckDB's tpcds extension prints it, minus the top-level
    ORDER BY and LIMIT (a maintained view is a bag) unless ``keep_limit``.

    ORDER BY and LIMIT inside subqueries and CTEs stay.

    >>> "LIMIT" in tpcds_query(1, keep_limit=True), "LIMIT" in tpcds_query(1)
    (True, False)
    """
    text = query_texts("tpcds")[n].strip().rstrip(";")
    if keep_limit:
        return text
    tree = sqlglot.parse_one(text, dialect="duckdb")
    tree.set("order", None)
    tree.set("limit", None)
    return tree.sql(dialect="duckdb", pretty=True)


def tpcds_schema() -> dict[str, dict[str, str]]:
    """The TPC-DS tables' columns and types (``compile_ivm``'s ``schema=``), from an empty
    dsdgen."""
    return generated_schema("tpcds")


def _fqn(catalog: str, schema: str, table: str) -> str:
    return f"{quote(catalog)}.{quote(schema)}.{table}"


def _how_many(con: duckdb.DuckDBPyConnection, sql: str, fraction: float) -> int:
    """Rows (or orders) a batch touches: ``fraction`` of ``sql``'s count, at least one."""
    if fraction <= 0:
        return 0
    return max(1, round(fraction * scalar(con, f"SELECT count(*) FROM ({sql})")))


def _orders(table: str, number: str) -> str:
    return f"SELECT DISTINCT {number} FROM {table} WHERE {number} IS NOT NULL"


def _pick_orders(table: str, number: str, seed: int, n: int) -> str:
    return (
        f"SELECT {number} FROM ({_orders(table, number)}) ORDER BY hash({seed}, {number}) LIMIT {n}"
    )


Channel = tuple[tuple[str, str], tuple[str, str]]


def _channels(catalog: str, schema: str) -> list[Channel]:
    """The channels with their tables' qualified names."""
    return [
        ((_fqn(catalog, schema, s), sn), (_fqn(catalog, schema, r), rn))
        for (s, sn), (r, rn) in CHANNELS
    ]


def _channel_counts(channel: Channel, what: str, sales: int, returns: int) -> Counts:
    (s_table, _), (r_table, _) = channel
    bare = (s_table.rsplit(".", 1)[-1], r_table.rsplit(".", 1)[-1])
    return merge(counts(bare[0], **{what: sales}), counts(bare[1], **{what: returns}))


def _max_order(con: duckdb.DuckDBPyConnection, channel: Channel) -> int:
    return max(scalar(con, f"SELECT max({number}) FROM {table}") for table, number in channel)


def _append_channel(
    con: duckdb.DuckDBPyConnection, channel: Channel, seed: int, fraction: float, base: int
) -> Counts:
    """Copy ``fraction`` of a channel's orders (lines and returns) as orders base+1, base+2..."""
    (s_table, s_number), (r_table, r_number) = channel
    n = _how_many(con, _orders(s_table, s_number), fraction)
    renumber = (
        f"(SELECT {s_number} AS old, {base} + row_number() OVER (ORDER BY {s_number}) AS new"
        f" FROM ({_pick_orders(s_table, s_number, seed, n)})) renumber"
    )
    copy = (
        "INSERT INTO {t} SELECT src.* REPLACE (renumber.new AS {c})"
        " FROM {t} src JOIN {r} ON src.{c} = renumber.old"
    )
    # Returns first: the pick reads the sales table, which must not hold the copies yet.
    returns = scalar(con, copy.format(t=r_table, c=r_number, r=renumber))
    sales = scalar(con, copy.format(t=s_table, c=s_number, r=renumber))
    return _channel_counts(channel, "inserted", sales, returns)


def _delete_channel(
    con: duckdb.DuckDBPyConnection, channel: Channel, seed: int, fraction: float
) -> Counts:
    """Delete ``fraction`` of a channel's orders: their lines and their returns."""
    (s_table, s_number), (r_table, r_number) = channel
    picked = _pick_orders(
        s_table, s_number, seed, _how_many(con, _orders(s_table, s_number), fraction)
    )
    returns = scalar(con, f"DELETE FROM {r_table} WHERE {r_number} IN ({picked})")
    sales = scalar(con, f"DELETE FROM {s_table} WHERE {s_number} IN ({picked})")
    return _channel_counts(channel, "deleted", sales, returns)


def append_sales(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """In every channel, copy ``fraction`` of the orders (lines and returns) as new orders."""
    seeds = [rng.getrandbits(32) for _ in CHANNELS]
    parts = []
    with transaction(con):
        for channel, seed in zip(_channels(catalog, schema), seeds, strict=True):
            parts.append(_append_channel(con, channel, seed, fraction, _max_order(con, channel)))
    return merge(*parts)


def delete_sales(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """In every channel, delete ``fraction`` of the orders together with their returns."""
    seeds = [rng.getrandbits(32) for _ in CHANNELS]
    parts = []
    with transaction(con):
        for channel, seed in zip(_channels(catalog, schema), seeds, strict=True):
            parts.append(_delete_channel(con, channel, seed, fraction))
    return merge(*parts)


def mixed(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """In every channel, delete ``fraction`` of the orders and copy as many, in one snapshot.

    New order numbers start above the max before the delete, so no deleted number is reused.
    """
    seeds = [(rng.getrandbits(32), rng.getrandbits(32)) for _ in CHANNELS]
    parts = []
    with transaction(con):
        for channel, (s1, s2) in zip(_channels(catalog, schema), seeds, strict=True):
            base = _max_order(con, channel)
            parts.append(_delete_channel(con, channel, s1, fraction))
            parts.append(_append_channel(con, channel, s2, fraction, base))
    return merge(*parts)


def _decimal_columns(
    con: duckdb.DuckDBPyConnection, catalog: str, schema: str, table: str
) -> list[tuple[str, str]]:
    """The DECIMAL columns of ``table`` with their types."""
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ?"
        " AND schema_name = ? AND table_name = ? AND data_type LIKE 'DECIMAL%'"
        " ORDER BY column_index",
        [catalog, schema, table],
    ).fetchall()


def update_facts(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Update ``fraction`` of the rows of every fact table: redraw the quantity (1-100), scale
    every DECIMAL measure of the row by one factor in [0.5, 1.1) (below 1 on average, so that
    repeated updates do not overflow the column's precision), and move a third of the rows
    by up to 30 days."""
    seed = rng.getrandbits(32)
    parts = []
    with transaction(con):
        for table, fact in FACTS.items():
            t = _fqn(catalog, schema, table)
            n = _how_many(con, f"SELECT * FROM {t}", fraction)
            key = ", ".join(fact.key)
            picked_key = ", ".join(f"{k} AS k{i}" for i, k in enumerate(fact.key))
            sets = [f"{fact.quantity} = CAST(1 + pick.h // 100 % 100 AS INT)"]
            sets += [
                f"{c} = CAST({c} * (0.5 + pick.h % 60 / 100) AS {data_type})"
                for c, data_type in _decimal_columns(con, catalog, schema, table)
            ]
            if fact.date:
                sets.append(
                    f"{fact.date} = CASE WHEN pick.h // 10000 % 3 = 0"
                    f" THEN {fact.date} + pick.h // 30000 % 61 - 30 ELSE {fact.date} END"
                )
            pick = (
                f"SELECT {picked_key}, CAST(hash({seed}, {key}) >> 1 AS BIGINT) AS h FROM {t}"
                f" ORDER BY hash({seed}, 'pick', {key}) LIMIT {n}"
            )
            same_key = " AND ".join(f"{k} = pick.k{i}" for i, k in enumerate(fact.key))
            updated = scalar(
                con, f"UPDATE {t} SET {', '.join(sets)} FROM ({pick}) pick WHERE {same_key}"
            )
            parts.append(counts(table, updated=updated))
    return merge(*parts)


def update_dimensions(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Update ``fraction`` (at least one row) of item, customer, address, demographics, date,
    promotion and ship mode rows: each listed column gets a value drawn from its own values."""
    seed = rng.getrandbits(32)
    parts = []
    with transaction(con):
        for table, dim in DIMENSIONS.items():
            t = _fqn(catalog, schema, table)
            n = _how_many(con, f"SELECT * FROM {t} WHERE {dim.where}", fraction)
            sets = []
            for c in dim.columns:
                domain = f"(SELECT list(DISTINCT {c} ORDER BY {c}) FROM {t} WHERE {dim.where})"
                index = f"1 + CAST(hash({seed}, '{c}', {dim.key}) % len({domain}) AS BIGINT)"
                sets.append(f"{c} = {domain}[{index}]")
            picked = (
                f"SELECT {dim.key} FROM {t} WHERE {dim.where}"
                f" ORDER BY hash({seed}, {dim.key}) LIMIT {n}"
            )
            updated = scalar(con, f"UPDATE {t} SET {', '.join(sets)} WHERE {dim.key} IN ({picked})")
            parts.append(counts(table, updated=updated))
    return merge(*parts)


WORKLOADS: dict[str, Workload] = {
    "append_sales": append_sales,
    "delete_sales": delete_sales,
    "mixed": mixed,
    "update_facts": update_facts,
    "update_dimensions": update_dimensions,
}

# Change windows for maintenance tests: each entry is the workloads committed (as separate
# snapshots) between two refreshes. Appends, deletes, fact and dimension updates, alone and
# several tables in one window, and an empty window.
WINDOWS: list[list[str]] = [
    ["append_sales"],
    ["delete_sales", "update_dimensions"],
    ["update_facts"],
    ["mixed", "update_dimensions", "update_facts"],
    [],
    ["append_sales", "delete_sales"],
]
