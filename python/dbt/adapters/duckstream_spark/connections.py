"""The connection manager of ``type: duckstream_spark``: dbt-spark's, under its own type name."""

from __future__ import annotations

from dbt.adapters.spark.connections import SparkConnectionManager


class DuckstreamSparkConnectionManager(SparkConnectionManager):
    TYPE = "duckstream_spark"
