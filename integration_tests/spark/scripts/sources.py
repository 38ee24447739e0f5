"""The Spark project's sources: ``raw.customers`` and ``raw.orders`` in the Iceberg catalog.

python scripts/sources.py WAREHOUSE [setup|change]   (tests call the functions in-process)
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

COUNTRIES = ["DE", "FR", "NL", "US", "JP"]
# Copy-on-write: Iceberg's changelog cannot read windows of tables with delete files.
COW = (
    "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'copy-on-write',"
    " 'write.update.mode' = 'copy-on-write', 'write.merge.mode' = 'copy-on-write')"
)


def setup_sources(spark: SparkSession) -> None:
    """(Re)create both tables with 20 customers and 100 orders."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS raw")
    spark.sql("DROP TABLE IF EXISTS raw.customers")
    spark.sql("DROP TABLE IF EXISTS raw.orders")
    spark.sql("CREATE TABLE raw.customers (customer_id INT, country STRING) USING iceberg " + COW)
    spark.sql(
        "CREATE TABLE raw.orders (order_id INT, customer_id INT, amount DECIMAL(10, 2))"
        " USING iceberg " + COW
    )
    countries = ", ".join(f"'{c}'" for c in COUNTRIES)
    spark.sql(
        "INSERT INTO raw.customers SELECT CAST(id AS INT),"
        f" element_at(array({countries}), CAST(id % {len(COUNTRIES)} AS INT) + 1)"
        " FROM range(20)"
    )
    spark.sql(
        "INSERT INTO raw.orders SELECT CAST(id AS INT), CAST(id % 20 AS INT),"
        " CAST(id * 1.25 AS DECIMAL(10, 2)) FROM range(100)"
    )


def change_sources(spark: SparkSession) -> None:
    """New orders, a deleted one, an updated one, a customer moving country, a customer
    losing all their orders and a new customer without any."""
    spark.sql(
        "INSERT INTO raw.orders SELECT CAST(id AS INT), CAST(id % 7 AS INT),"
        " CAST(id * 0.5 AS DECIMAL(10, 2)) FROM range(100, 130)"
    )
    spark.sql("DELETE FROM raw.orders WHERE order_id = 3")
    spark.sql("UPDATE raw.orders SET amount = amount + 100 WHERE order_id = 4")
    spark.sql("UPDATE raw.customers SET country = 'BR' WHERE customer_id = 1")
    spark.sql("DELETE FROM raw.orders WHERE customer_id = 19")
    spark.sql("INSERT INTO raw.customers VALUES (20, 'NL')")


if __name__ == "__main__":
    from duckstream.spark import local_session

    session = local_session(sys.argv[1])
    (change_sources if sys.argv[2:] == ["change"] else setup_sources)(session)
