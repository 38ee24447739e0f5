"""The connection manager of ``type: duckstream``: dbt-duckdb's, under its own type name.

dbt-duckdb keeps its one DuckDB environment on ``DuckDBConnectionManager`` and reads it from
there by name (seeds, external sources); opening and closing through that class keeps the
environment in the one place every dbt-duckdb code path looks.
"""

from __future__ import annotations

import atexit

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.duckdb.connections import DuckDBConnectionManager


class DuckstreamConnectionManager(DuckDBConnectionManager):
    TYPE = "duckstream"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        return DuckDBConnectionManager.open(connection)

    @classmethod
    def close_all_connections(cls) -> None:
        DuckDBConnectionManager.close_all_connections()


atexit.register(DuckstreamConnectionManager.close_all_connections)
