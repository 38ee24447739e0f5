"""Attach the integration tests' DuckLake exactly as profiles.yml does.

The directory comes from ``--lake`` or ``$DUCKSTREAM_LAKE_DIR`` (default ``lake``); DuckLake
remembers the data path as first spelled, so the spelling here matches the profile's.
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
    metadata = f"{root}/metadata.ducklake".replace("'", "''")
    data = f"{root}/data/".replace("'", "''")
    con.execute(f"ATTACH IF NOT EXISTS 'ducklake:{metadata}' AS lake (DATA_PATH '{data}')")
    return con
