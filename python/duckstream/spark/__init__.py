"""Spark + Apache Iceberg support: a local, offline Spark session with an Iceberg catalog, and
the runner for compiled Spark plans (``setup`` once, then ``refresh``), and ``schema_of``
(the tables' columns, for ``compile_ivm(..., schema=)``)."""

from duckstream.engines.iceberg.runner import RebuildRequired, refresh, setup
from duckstream.engines.iceberg.schema import schema_of
from duckstream.engines.iceberg.session import local_session, sql_with_commit_properties
from duckstream.engines.iceberg.steps import run_steps

__all__ = [
    "RebuildRequired",
    "local_session",
    "refresh",
    "run_steps",
    "schema_of",
    "setup",
    "sql_with_commit_properties",
]
