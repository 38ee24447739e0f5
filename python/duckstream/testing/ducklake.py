"""DuckLake helpers for tests and benchmarks.

Extensions are loaded from the installed ``duckdb_extension_<name>`` PyPI packages, never from
the network (a plain ``INSTALL ducklake`` downloads, which fails offline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from duckstream import lake
from duckstream.engines.ducklake.extension import extension_path, load_extension
from duckstream.lake import quote
from duckstream.testing import postgres

__all__ = [
    "attach_ducklake",
    "connect_ducklake",
    "current_snapshot",
    "extension_path",
    "load_extension",
    "quote",
    "Recording",
]


def attach_ducklake(
    con: duckdb.DuckDBPyConnection,
    directory: str,
    alias: str = "lake",
    data_inlining_row_limit: int | None = None,
    metadata: str | None = None,
) -> None:
    """:func:`duckstream.lake.attach_ducklake`, whose catalog defaults to the directory's
    database on the test suite's PostgreSQL server while
    :func:`duckstream.testing.postgres.serving` is active."""
    metadata = _suite_default(directory, metadata)
    lake.attach_ducklake(con, directory, alias, data_inlining_row_limit, metadata)


def connect_ducklake(
    directory: str, alias: str = "lake", data_inlining_row_limit: int | None = None, **kw: Any
) -> duckdb.DuckDBPyConnection:
    """:func:`duckstream.lake.connect_ducklake` with :func:`attach_ducklake`'s default
    (``metadata=`` as there)."""
    metadata = _suite_default(directory, kw.get("metadata"))
    return lake.connect_ducklake(directory, alias, data_inlining_row_limit, metadata)


def _suite_default(directory: str, metadata: str | None) -> str | None:
    if metadata is None and (catalogs := postgres.active()) is not None:
        return catalogs.target(str(Path(directory).resolve()))
    return metadata


def current_snapshot(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    """Id of the latest committed snapshot of the DuckLake catalog ``catalog``."""
    row = con.execute("SELECT id FROM ducklake_current_snapshot(?)", [catalog]).fetchone()
    assert row is not None
    return int(row[0])


class Recording:
    """A connection that keeps the statements it ran (``statements``), for a test to read
    what a refresh ran."""

    def __init__(self, con: Any) -> None:
        self.con, self.statements = con, []

    def execute(self, sql: str, *args: Any) -> Any:
        self.statements.append(sql)
        return self.con.execute(sql, *args)
