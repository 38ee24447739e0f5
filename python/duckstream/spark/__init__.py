"""Spark + Apache Iceberg support: a local, offline Spark session with an Iceberg catalog."""

from duckstream.spark.session import local_session, sql_with_commit_properties

__all__ = ["local_session", "sql_with_commit_properties"]
