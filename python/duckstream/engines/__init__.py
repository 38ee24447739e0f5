"""Engines: what differs between DuckDB + DuckLake and Spark + Iceberg, one module each."""

from __future__ import annotations

from duckstream.engines.base import Engine, Source, Version
from duckstream.errors import UnsupportedSQLError


def engine_for(dialect: str) -> Engine:
    """The engine that generates SQL for ``dialect``."""
    if dialect == "duckdb":
        from duckstream.engines.ducklake.engine import DuckLakeEngine

        return DuckLakeEngine()
    if dialect == "spark":
        from duckstream.engines.iceberg.engine import IcebergEngine

        return IcebergEngine()
    raise UnsupportedSQLError("dialect", f"no engine for dialect {dialect!r} (duckdb, spark)")


__all__ = ["Engine", "Source", "Version", "engine_for"]
