"""TPC-H data, queries and reproducible change workloads on a DuckLake catalog.

The workloads give tests and benchmarks realistic change batches: each applies one committed
DuckLake snapshot of inserts, deletes or updates to the TPC-H tables. Randomness comes from a
seed drawn from the caller's ``random.Random`` and is evaluated in SQL as ``hash(seed, ...)``,
so a batch is the same on every run (and independent of DuckDB's thread scheduling) while the
work stays set-based and fast at scale factor 1.

Query texts keep unqualified table names: run them after ``USE <catalog>.<schema>``, which is
also how the compiler resolves them.
"""

from __future__ import annotations

import functools
import random

import duckdb
import sqlglot
from sqlglot import exp

from duckstream.testing.ducklake import quote
from duckstream.testing.generated import (
    Counts,
    Workload,
    counts,
    generated,
    generated_schema,
    load_generated,
    merge,
    query_texts,
    scalar,
    transaction,
)

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def load_tpch(
    con: duckdb.DuckDBPyConnection, catalog: str, scale_factor: float, schema: str = "main"
) -> None:
    """Generate TPC-H at ``scale_factor`` and copy its 8 tables into ``catalog.schema``.

    dbgen writes into a scratch in-memory catalog; the copy is one DuckLake commit. dbgen is
    single-threaded (about 20 s at SF1; concurrent dbgen calls crash), so for large scale
    factors copy a loaded lake directory instead of reloading (see ``attach_ducklake``).
    """
    load_generated(con, "tpch", TABLES, catalog, scale_factor, schema)


def load_tpch_by_month(
    con: duckdb.DuckDBPyConnection, catalog: str, scale_factor: float, schema: str = "main"
) -> int:
    """TPC-H at ``scale_factor`` laid out as a lake that grew over time: the six dimension
    tables in one commit, then orders and lineitem appended month by month of the order date
    (one commit, and so one data file per table, each month: ~80). Updates and deletes of
    recent rows then touch the newest files only, as late corrections do in real lakes,
    instead of every file of a bulk load. Returns the number of monthly commits."""
    target = f"{quote(catalog)}.{quote(schema)}"
    month = "date_trunc('month', o_orderdate)"
    with generated(con, "tpch", scale_factor) as scratch:
        with transaction(con):
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {target}")
            for table in TABLES:
                empty = " LIMIT 0" if table in ("orders", "lineitem") else ""
                con.execute(
                    f"CREATE TABLE {target}.{table} AS SELECT * FROM {scratch}.main.{table}{empty}"
                )
        months = [
            m
            for (m,) in con.execute(
                f"SELECT DISTINCT {month} FROM {scratch}.main.orders ORDER BY 1"
            ).fetchall()
        ]
        for m in months:
            with transaction(con):
                con.execute(
                    f"INSERT INTO {target}.orders SELECT * FROM {scratch}.main.orders"
                    f" WHERE {month} = ? ORDER BY o_orderdate, o_orderkey",
                    [m],
                )
                con.execute(
                    f"INSERT INTO {target}.lineitem SELECT l.* FROM {scratch}.main.lineitem l"
                    f" JOIN {scratch}.main.orders ON l_orderkey = o_orderkey"
                    f" WHERE {month} = ? ORDER BY o_orderdate, l_orderkey, l_linenumber",
                    [m],
                )
    return len(months)


@functools.cache
def tpch_query(n: int) -> str:
    """TPC-H query ``n`` (1-22) as DuckDB's tpch extension prints it, minus top ORDER BY/LIMIT.

    A maintained view is a bag, so the final ordering and row limit are dropped.
    """
    tree = sqlglot.parse_one(query_texts("tpch")[n], dialect="duckdb")
    tree.set("order", None)
    tree.set("limit", None)
    return tree.sql(dialect="duckdb", pretty=True)


# Benchmark views beyond the TPC-H queries: dbt's dedup idiom, each customer's latest order.
NAMED_VIEWS = {
    "dedup": (
        "SELECT o_custkey, o_orderkey, o_orderdate, o_totalprice FROM orders QUALIFY"
        " row_number() OVER (PARTITION BY o_custkey ORDER BY o_orderdate DESC, o_orderkey DESC)"
        " = 1"
    ),
}


@functools.cache
def tpch_view(name: str) -> str:
    """A view the benchmarks maintain: ``"<n>"`` is TPC-H query n (:func:`tpch_query`);
    ``"<n>_inner"`` is that query with its outer joins made inner joins: the same view but
    for the rows an outer join NULL-extends, to compare the two refreshes' costs;
    ``"<n>_limit"`` is the query with its ORDER BY ... LIMIT kept (a top-k); a name of
    :data:`NAMED_VIEWS` is that view.

    >>> "JOIN orders" in tpch_view("13_inner") and "OUTER" not in tpch_view("13_inner")
    True
    >>> tpch_view("3_limit").endswith("LIMIT 10")
    True
    """
    if name in NAMED_VIEWS:
        return NAMED_VIEWS[name]
    number, _, variant = name.partition("_")
    text = tpch_query(int(number))
    if not variant:
        return text
    if variant == "limit":
        original = sqlglot.parse_one(query_texts("tpch")[int(number)], dialect="duckdb")
        if not original.args.get("limit"):
            raise ValueError(f"TPC-H Q{number} has no LIMIT")
        return original.sql(dialect="duckdb", pretty=True)
    if variant != "inner":
        raise ValueError(f"no benchmark view {name!r}: '<n>', '<n>_inner' or '<n>_limit'")
    tree = sqlglot.parse_one(text, dialect="duckdb")
    joins = [j for j in tree.find_all(exp.Join) if j.side]
    if not joins:
        raise ValueError(f"TPC-H Q{number} has no outer join to make inner")
    for join in joins:
        join.set("side", None)
        join.set("kind", None)
    return tree.sql(dialect="duckdb", pretty=True)


def tpch_schema() -> dict[str, dict[str, str]]:
    """The TPC-H tables' columns and types (``compile_ivm``'s ``schema=``), from an empty dbgen."""
    return generated_schema("tpch")


# The newest share of the orders that the "recent" workloads change (late corrections).
RECENT_SHARE = 0.02


def _tables(catalog: str, schema: str) -> dict[str, str]:
    return {t: f"{quote(catalog)}.{quote(schema)}.{t}" for t in TABLES}


def _how_many(con: duckdb.DuckDBPyConnection, table: str, fraction: float) -> int:
    """Rows a batch touches: ``fraction`` of the table, at least one unless fraction is 0."""
    if fraction <= 0:
        return 0
    return max(1, round(fraction * scalar(con, f"SELECT count(*) FROM {table}")))


# New lineitems for orders base+1 .. base+n. Each order gets 1-7 lines; (partkey, suppkey) pairs
# are drawn from partsupp and prices from the part's retail price, dates follow the TPC-H spec
# (order dates 1992-01-01 .. 1998-08-02, "current date" 1995-06-17 for flags/status).
_APPEND_LINEITEM = """
INSERT INTO {lineitem}
WITH o AS (
    SELECT {base} + i AS ok,
        DATE '1992-01-01' + CAST(hash({s}, 'od', {base} + i) % 2406 AS INT) AS od
    FROM range(1, {n} + 1) r(i)
), l AS (
    SELECT ok, od, ln, CAST(hash({s}, 'line', ok, ln) >> 1 AS BIGINT) AS h,
        hash({s}, 'ps', ok, ln) % (SELECT count(*) FROM {partsupp}) AS psn,
        od + CAST(1 + hash({s}, 'ship', ok, ln) % 121 AS INT) AS ship
    FROM o, range(1, 8) g(ln)
    WHERE ln <= 1 + hash({s}, 'lines', ok) % 7
), ps AS (
    SELECT ps_partkey, ps_suppkey, row_number() OVER (ORDER BY ps_partkey, ps_suppkey) - 1 AS psn
    FROM {partsupp}
)
SELECT ok, ps_partkey, ps_suppkey, ln,
    CAST(1 + h % 50 AS DECIMAL(15, 2)),
    CAST((1 + h % 50) * p_retailprice AS DECIMAL(15, 2)),
    CAST((h // 50 % 11) / 100 AS DECIMAL(15, 2)),
    CAST((h // 550 % 9) / 100 AS DECIMAL(15, 2)),
    CASE WHEN ship + CAST(1 + h // 4950 % 30 AS INT) > DATE '1995-06-17' THEN 'N'
        WHEN h // 148500 % 2 = 0 THEN 'R' ELSE 'A' END,
    CASE WHEN ship > DATE '1995-06-17' THEN 'O' ELSE 'F' END,
    ship,
    od + CAST(30 + h // 297000 % 61 AS INT),
    ship + CAST(1 + h // 4950 % 30 AS INT),
    ['DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'][1 + h // 18117000 % 4],
    ['REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'][1 + h // 72468000 % 7],
    'duckstream appended line'
FROM l JOIN ps USING (psn) JOIN {part} ON p_partkey = ps_partkey
"""

# Orders for the lines just inserted (read back inside the same transaction), with a customer
# drawn from the customer table and status/total price consistent with the lines.
_APPEND_ORDERS = """
INSERT INTO {orders}
WITH c AS (
    SELECT c_custkey, row_number() OVER (ORDER BY c_custkey) - 1 AS cn FROM {customer}
), l AS (
    SELECT l_orderkey AS ok, CAST(hash({s}, 'order', l_orderkey) >> 1 AS BIGINT) AS h,
        hash({s}, 'cust', l_orderkey) % (SELECT count(*) FROM {customer}) AS cn,
        CASE WHEN bool_and(l_linestatus = 'F') THEN 'F'
            WHEN bool_and(l_linestatus = 'O') THEN 'O' ELSE 'P' END AS status,
        sum(l_extendedprice * (1 + l_tax) * (1 - l_discount)) AS total
    FROM {lineitem} WHERE l_orderkey > {base}
    GROUP BY l_orderkey
)
SELECT ok, c_custkey, status, CAST(total AS DECIMAL(15, 2)),
    DATE '1992-01-01' + CAST(hash({s}, 'od', ok) % 2406 AS INT),
    ['1-URGENT', '2-HIGH', '3-MEDIUM', '4-NOT SPECIFIED', '5-LOW'][1 + h % 5],
    'Clerk#' || lpad(CAST(1 + h // 5 % {clerks} AS VARCHAR), 9, '0'),
    0,
    CASE WHEN h // 5000 % 10 = 0 THEN 'duckstream special requests' ELSE 'duckstream order' END
FROM l JOIN c USING (cn)
"""


def _append(
    con: duckdb.DuckDBPyConnection, t: dict[str, str], seed: int, n: int, base: int
) -> Counts:
    """Insert ``n`` orders with keys ``base+1 .. base+n`` and their lineitems."""
    if n == 0:
        return merge(counts("orders"), counts("lineitem"))
    clerks = max(1, scalar(con, f"SELECT count(*) FROM {t['supplier']}") // 10)
    fill = {**t, "s": seed, "n": n, "base": base, "clerks": clerks}
    lines = scalar(con, _APPEND_LINEITEM.format(**fill))
    orders = scalar(con, _APPEND_ORDERS.format(**fill))
    return merge(counts("orders", inserted=orders), counts("lineitem", inserted=lines))


def _delete(
    con: duckdb.DuckDBPyConnection,
    t: dict[str, str],
    seed: int,
    n: int,
    among: str | None = None,
) -> Counts:
    """Delete ``n`` pseudo-randomly chosen orders (of the keys ``among`` selects, if given)
    and all their lineitems (lines first)."""
    where = f" WHERE o_orderkey IN ({among})" if among else ""
    keys = (
        f"SELECT o_orderkey FROM {t['orders']}{where} ORDER BY hash({seed}, o_orderkey) LIMIT {n}"
    )
    lines = scalar(con, f"DELETE FROM {t['lineitem']} WHERE l_orderkey IN ({keys})")
    orders = scalar(con, f"DELETE FROM {t['orders']} WHERE o_orderkey IN ({keys})")
    return merge(counts("orders", deleted=orders), counts("lineitem", deleted=lines))


def append(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Insert ``fraction`` x |orders| new orders (keys above the current max), 1-7 lines each."""
    t = _tables(catalog, schema)
    with transaction(con):
        n = _how_many(con, t["orders"], fraction)
        base = scalar(con, f"SELECT max(o_orderkey) FROM {t['orders']}")
        return _append(con, t, rng.getrandbits(32), n, base)


def delete_orders(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Delete ``fraction`` of the orders together with all their lineitems."""
    t = _tables(catalog, schema)
    with transaction(con):
        return _delete(con, t, rng.getrandbits(32), _how_many(con, t["orders"], fraction))


def mixed(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Delete ``fraction`` of the orders and append as many new ones, in one snapshot.

    New keys start above the max before the delete, so no deleted key is reused.
    """
    t = _tables(catalog, schema)
    delete_seed, append_seed = rng.getrandbits(32), rng.getrandbits(32)
    with transaction(con):
        n = _how_many(con, t["orders"], fraction)
        base = scalar(con, f"SELECT max(o_orderkey) FROM {t['orders']}")
        deleted = _delete(con, t, delete_seed, n)
        return merge(deleted, _append(con, t, append_seed, n, base))


def large(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float = 0.05,
    schema: str = "main",
) -> Counts:
    """A large ``mixed`` batch: 5% of the orders replaced (``fraction`` is ignored)."""
    return mixed(con, catalog, rng, 0.05, schema=schema)


_UPDATE_LINEITEM = """
UPDATE {lineitem} SET
    l_quantity = CAST(1 + h % 50 AS DECIMAL(15, 2)),
    l_extendedprice = CAST(l_extendedprice / l_quantity * (1 + h % 50) AS DECIMAL(15, 2)),
    l_discount = CAST((h // 50 % 11) / 100 AS DECIMAL(15, 2)),
    l_shipdate = CASE WHEN h // 550 % 3 = 0
        THEN l_shipdate + CAST(h // 1650 % 61 - 30 AS INT) ELSE l_shipdate END,
    l_returnflag = CASE WHEN h // 100650 % 4 = 0
        THEN ['R', 'A', 'N'][1 + h // 402600 % 3] ELSE l_returnflag END
FROM (
    SELECT l_orderkey AS k, l_linenumber AS ln,
        CAST(hash({s}, l_orderkey, l_linenumber) >> 1 AS BIGINT) AS h
    FROM {candidates}
    ORDER BY hash({s}, 'pick', l_orderkey, l_linenumber) LIMIT {n}
) pick
WHERE l_orderkey = pick.k AND l_linenumber = pick.ln
"""


def update_lineitem(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Update ``fraction`` of the lineitems: quantity/price/discount, sometimes ship date/flag."""
    t = _tables(catalog, schema)
    return _update_lineitem(con, t, rng.getrandbits(32), fraction, t["lineitem"])


def _update_lineitem(
    con: duckdb.DuckDBPyConnection, t: dict[str, str], seed: int, fraction: float, candidates: str
) -> Counts:
    """Update ``fraction`` of the lineitems, picked among the rows ``candidates`` (a table,
    or a table and its WHERE) reads."""
    with transaction(con):
        n = _how_many(con, t["lineitem"], fraction)
        sql = _UPDATE_LINEITEM.format(**t, candidates=candidates, s=seed, n=n)
        updated = scalar(con, sql) if n else 0
    return counts("lineitem", updated=updated)


def _recent_orders(t: dict[str, str], share: float) -> str:
    """The keys of the newest ``share`` of the orders (by order date)."""
    return (
        f"SELECT o_orderkey FROM {t['orders']} WHERE o_orderdate >="
        f" (SELECT quantile_disc(o_orderdate, {1 - share}) FROM {t['orders']})"
    )


def recent_update(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
    share: float = RECENT_SHARE,
) -> Counts:
    """Update ``fraction`` of the lineitems, all of orders among the newest ``share`` of them
    (late corrections): quantity/price/discount, sometimes ship date/flag."""
    t = _tables(catalog, schema)
    recent = f"{t['lineitem']} WHERE l_orderkey IN ({_recent_orders(t, share)})"
    return _update_lineitem(con, t, rng.getrandbits(32), fraction, recent)


def recent_delete(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
    share: float = RECENT_SHARE,
) -> Counts:
    """Delete ``fraction`` of the orders, all among the newest ``share`` of them (cancelled
    orders), together with their lineitems."""
    t = _tables(catalog, schema)
    seed = rng.getrandbits(32)
    with transaction(con):
        n = _how_many(con, t["orders"], fraction)
        return _delete(con, t, seed, n, among=_recent_orders(t, share))


def _pick(table: str, key: str, seed: int, n: int) -> str:
    return f"SELECT {key} FROM {table} ORDER BY hash({seed}, {key}) LIMIT {n}"


def _domain(table: str, column: str) -> str:
    return f"(SELECT list(DISTINCT {column} ORDER BY {column}) FROM {table})"


def _choose(domain: str, seed: int, tag: str, key: str) -> str:
    """SQL picking one value of a domain list per row, from a hash of the row key."""
    return f"{domain}[1 + CAST(hash({seed}, '{tag}', {key}) % len({domain}) AS BIGINT)]"


def update_dimensions(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    rng: random.Random,
    fraction: float,
    schema: str = "main",
) -> Counts:
    """Update ``fraction`` of customer, part, supplier and partsupp rows (at least one each).

    New values come from each column's existing domain (segments, nations, types, brands,
    containers, sizes), so TPC-H predicates such as ``c_mktsegment = 'BUILDING'`` flip.
    """
    t = _tables(catalog, schema)
    s = rng.getrandbits(32)
    nations = _domain(t["nation"], "n_nationkey")
    c, p, su, ps = t["customer"], t["part"], t["supplier"], t["partsupp"]
    with transaction(con):
        n = {name: _how_many(con, t[name], fraction) for name in ("customer", "part", "supplier")}
        n_ps = _how_many(con, ps, fraction)
        statements = {
            "customer": f"""UPDATE {c} SET
                c_mktsegment = {_choose(_domain(c, "c_mktsegment"), s, "seg", "c_custkey")},
                c_nationkey = {_choose(nations, s, "nat", "c_custkey")},
                c_acctbal = CAST((CAST(hash({s}, 'bal', c_custkey) % 1100000 AS INT) - 100000)
                    / 100 AS DECIMAL(15, 2))
                WHERE c_custkey IN ({_pick(c, "c_custkey", s, n["customer"])})""",
            "part": f"""UPDATE {p} SET
                p_type = {_choose(_domain(p, "p_type"), s, "type", "p_partkey")},
                p_brand = {_choose(_domain(p, "p_brand"), s, "brand", "p_partkey")},
                p_container = {_choose(_domain(p, "p_container"), s, "cont", "p_partkey")},
                p_size = CAST(1 + hash({s}, 'size', p_partkey) % 50 AS INT)
                WHERE p_partkey IN ({_pick(p, "p_partkey", s, n["part"])})""",
            "supplier": f"""UPDATE {su} SET
                s_nationkey = {_choose(nations, s, "nat", "s_suppkey")}
                WHERE s_suppkey IN ({_pick(su, "s_suppkey", s, n["supplier"])})""",
            "partsupp": f"""UPDATE {ps} SET
                ps_supplycost = CAST((100 + hash({s}, 'cost', ps_partkey, ps_suppkey) % 99901) / 100
                    AS DECIMAL(15, 2)),
                ps_availqty = CAST(1 + hash({s}, 'qty', ps_partkey, ps_suppkey) % 9999 AS INT)
                FROM (SELECT ps_partkey AS pk, ps_suppkey AS sk FROM {ps}
                    ORDER BY hash({s}, ps_partkey, ps_suppkey) LIMIT {n_ps}) pick
                WHERE ps_partkey = pick.pk AND ps_suppkey = pick.sk""",
        }
        return merge(*(counts(k, updated=scalar(con, sql)) for k, sql in statements.items()))


WORKLOADS: dict[str, Workload] = {
    "append": append,
    "delete_orders": delete_orders,
    "mixed": mixed,
    "update_lineitem": update_lineitem,
    "update_dimensions": update_dimensions,
    "large": large,
    "recent_update": recent_update,
    "recent_delete": recent_delete,
}
