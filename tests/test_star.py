"""``SELECT *`` and ``alias.*`` maintained through insert, delete and update windows: over
tables (their columns read from the catalog with ``schema_of``, as a user of the Python API
would), over derived tables and CTEs (their own select lists, no schema needed), in joins and
outer joins, the dbt staging idiom, DuckDB's ``* EXCLUDE`` / ``* REPLACE``, and upper-case and
quoted names. ``tests/spark/test_spark_star.py`` runs the same scenarios on Spark + Iceberg."""

from __future__ import annotations

from decimal import Decimal

import pytest

from duckstream import UnsupportedSQLError, compile_ivm
from duckstream.engines.ducklake.schema import schema_of
from duckstream.testing.differential import (
    FROM_CATALOG,
    Column,
    Cycle,
    Delete,
    DuckLakeHarness,
    Insert,
    Scenario,
    TableSpec,
    Update,
)

ORDERS = TableSpec(
    "orders",
    [
        Column("order_id", "INTEGER"),
        Column("customer_id", "INTEGER"),
        Column("amount", "DECIMAL(10,2)"),
        Column("note", "VARCHAR"),
    ],
    [(1, 1, Decimal("5.00"), "a"), (2, 1, Decimal("7.50"), None), (3, 2, None, "c"),
     (3, 2, None, "c"), (4, None, Decimal("1.00"), "d")],
)  # fmt: skip
CUSTOMERS = TableSpec(
    "customers",
    [Column("id", "INTEGER"), Column("name", "VARCHAR"), Column("country", "VARCHAR")],
    [(1, "ann", "NL"), (2, "bob", None), (3, "cy", "BR")],
)
CYCLES: list[Cycle] = [
    [[Insert("orders", ((5, 3, Decimal("2.00"), "e"), (5, 3, Decimal("2.00"), "e")))]],
    [[Delete("orders", "order_id = 2")], [Update("customers", "country = 'DE'", "id = 1")]],
    [[Update("orders", "amount = amount + 1, note = NULL", "customer_id = 2")]],
    [[Delete("customers", "id = 3"), Insert("customers", ((4, "dee", "NL"),))]],
    [[Insert("orders", ((6, None, None, None),))], [Delete("orders", "customer_id = 1")]],
]

# Upper-case and quoted names: a table "Orders" with columns "Id" and "select".
QUOTED = TableSpec(
    "Orders",
    [Column("Id", "INTEGER"), Column("select", "VARCHAR")],
    [(1, "x"), (2, None), (2, None)],
)
QUOTED_CYCLES: list[Cycle] = [
    [[Insert("Orders", ((3, "z"),))]],
    [[Update("Orders", "\"select\" = 'q'", '"Id" = 2')], [Delete("Orders", '"Id" = 1')]],
]

NO_EXCEPT = "Spark SQL (3.5) has no * EXCEPT / * REPLACE: the view itself does not run on Spark"

SCENARIOS: dict[str, Scenario] = {
    "star_over_table": Scenario(
        [ORDERS, CUSTOMERS], "SELECT * FROM orders", CYCLES, {"schema": FROM_CATALOG}
    ),
    "qualified_star_in_join": Scenario(
        [ORDERS, CUSTOMERS],
        "SELECT o.*, c.name FROM orders AS o JOIN customers AS c ON c.id = o.customer_id",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    "star_of_dimension_in_left_join": Scenario(
        [ORDERS, CUSTOMERS],
        "SELECT o.order_id, c.* FROM orders AS o LEFT JOIN customers AS c ON c.id = o.customer_id",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    "star_with_where_and_distinct": Scenario(
        [ORDERS, CUSTOMERS],
        "SELECT DISTINCT * FROM orders WHERE amount IS NOT NULL",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    # dbt's staging idiom, then a mart that selects * from it: no schema needed but the source's
    "dbt_staging_idiom": Scenario(
        [ORDERS, CUSTOMERS],
        """WITH source AS (SELECT * FROM orders),
        renamed AS (SELECT order_id AS id, customer_id, amount AS total FROM source)
        SELECT * FROM renamed""",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    "star_over_cte_without_schema": Scenario(
        [ORDERS, CUSTOMERS],
        """WITH renamed AS (SELECT order_id AS id, amount FROM orders WHERE note IS NOT NULL)
        SELECT * FROM renamed""",
        CYCLES,
    ),
    "star_over_grouped_derived_table": Scenario(
        [ORDERS, CUSTOMERS],
        """SELECT * FROM (
            SELECT customer_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY 1
        ) AS s""",
        CYCLES,
    ),
    "star_over_left_join_to_aggregate_cte": Scenario(
        [ORDERS, CUSTOMERS],
        """WITH summary AS (
            SELECT customer_id, count(*) AS orders FROM orders GROUP BY customer_id
        )
        SELECT c.*, coalesce(s.orders, 0) AS orders
        FROM customers AS c LEFT JOIN summary AS s ON s.customer_id = c.id""",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    "star_grouped_over": Scenario(
        [ORDERS, CUSTOMERS],
        """WITH o AS (SELECT * FROM orders)
        SELECT customer_id, count(*) AS n, sum(amount) AS total FROM o GROUP BY customer_id""",
        CYCLES,
        {"schema": FROM_CATALOG},
    ),
    "star_exclude": Scenario(
        [ORDERS, CUSTOMERS],
        "SELECT * EXCLUDE (note) FROM orders",
        CYCLES,
        {"schema": FROM_CATALOG},
        spark_gap=NO_EXCEPT,
    ),
    "qualified_star_exclude_over_cte": Scenario(
        [ORDERS, CUSTOMERS],
        """WITH o AS (SELECT * FROM orders)
        SELECT o.* EXCLUDE (note, amount), c.name
        FROM o JOIN customers AS c ON c.id = o.customer_id""",
        CYCLES,
        {"schema": FROM_CATALOG},
        spark_gap=NO_EXCEPT,
    ),
    "star_replace": Scenario(
        [ORDERS, CUSTOMERS],
        "SELECT * REPLACE (amount * 2 AS amount, upper(note) AS note) FROM orders",
        CYCLES,
        {"schema": FROM_CATALOG},
        spark_gap=NO_EXCEPT,
    ),
    "star_over_quoted_names": Scenario(
        [QUOTED], 'SELECT * FROM "Orders"', QUOTED_CYCLES, {"schema": FROM_CATALOG}
    ),
    "star_over_quoted_names_in_cte": Scenario(
        [QUOTED],
        'WITH "O" AS (SELECT * FROM "Orders" WHERE "Id" > 1) SELECT * FROM "O"',
        QUOTED_CYCLES,
        {"schema": FROM_CATALOG},
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_star(lake, name):
    SCENARIOS[name].run(DuckLakeHarness(lake, check_names=True))


def test_star_over_table_without_schema_names_what_to_pass():
    with pytest.raises(UnsupportedSQLError, match="schema=") as error:
        compile_ivm("SELECT * FROM orders", mv_name="v")
    assert error.value.feature == "star"


def test_schema_of_resolves_like_duckdb(lake):
    """Unqualified names in the given catalog and schema, ``s.t`` as a schema of it, CTE names
    skipped, tables that do not exist left out, ``_ivm_*`` columns left out."""
    lake.execute("CREATE SCHEMA dl.raw")
    lake.execute("CREATE TABLE dl.raw.events (id INTEGER, _ivm_count BIGINT)")
    lake.execute('CREATE TABLE dl.main."Orders" ("Id" INTEGER, amount DECIMAL(10, 2))')
    sql = 'WITH events AS (SELECT 1 AS id) SELECT * FROM "Orders", raw.events, events, nowhere'
    assert schema_of(lake, sql, catalog="dl", schema="main") == {
        "dl": {
            "main": {"Orders": {"Id": "INTEGER", "amount": "DECIMAL(10,2)"}},
            "raw": {"events": {"id": "INTEGER"}},
        }
    }
