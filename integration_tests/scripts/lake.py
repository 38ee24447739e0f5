"""Attach the integration tests' DuckLake exactly as profiles.yml does.

The directory comes from ``--lake`` or ``$DUCKSTREAM_LAKE_DIR`` (default ``lake``); DuckLake
remembers the data path as first spelled, so the spelling here matches the profile's. The
catalog is ``<dir>/metadata.ducklake``, or ``$DUCKSTREAM_LAKE_CATALOG`` when set (a
``postgres:dbname=... host=...`` target: a catalog in PostgreSQL).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from duckstream.engines.ducklake.extension import load_extension


def lake_dir(given: str | None = None) -> str:
    return given or os.environ.get("DUCKSTREAM_LAKE_DIR", "lake")


def connect(directory: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the DuckLake attached as ``lake``."""
    root = lake_dir(directory)
    Path(root, "data").mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    load_extension(con, "ducklake")
    metadata = os.environ.get("DUCKSTREAM_LAKE_CATALOG") or f"{root}/metadata.ducklake"
    if metadata.startswith("postgres:"):  # the catalog in PostgreSQL, as the profile's
        load_extension(con, "postgres")
    metadata = metadata.replace("'", "''")
    data = f"{root}/data/".replace("'", "''")
    con.execute(f"ATTACH IF NOT EXISTS 'ducklake:{metadata}' AS lake (DATA_PATH '{data}')")
    return con
