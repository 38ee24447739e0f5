"""Attach a DuckLake kept in a directory: its metadata in ``<dir>/metadata.ducklake`` (or a
PostgreSQL catalog), its data files under ``<dir>/data/``, the extensions loaded from their
PyPI packages (offline).

>>> import tempfile
>>> con = connect_ducklake(tempfile.mkdtemp(), alias="lake")
>>> _ = con.execute("CREATE TABLE lake.t AS SELECT 1 AS k")
>>> con.execute("SELECT k FROM lake.t").fetchall()
[(1,)]
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from duckstream.engines.ducklake.extension import load_extension
from duckstream.engines.ducklake.names import quote


def attach_ducklake(
    con: duckdb.DuckDBPyConnection,
    directory: str,
    alias: str = "lake",
    data_inlining_row_limit: int | None = None,
    metadata: str | None = None,
) -> None:
    """Attach (creating if needed) the DuckLake kept in ``directory`` as catalog ``alias``.

    Metadata lives in ``<dir>/metadata.ducklake`` and data in ``<dir>/data/``; ``metadata``:
    another DuckLake metadata target instead of the file (``postgres:dbname=... host=...``: a
    PostgreSQL catalog, the postgres extension loaded from its PyPI package). While
    DuckLake stores
    DATA_PATH as first given and rejects other spellings, so paths are made absolute, and
    OVERRIDE_DATA_PATH keeps a copied or moved lake directory usable (file paths inside the
    catalog are relative to DATA_PATH): a loaded TPC-H lake can be reused as a template.
    ``data_inlining_row_limit``: DuckLake's option of that name for the catalog (0 turns
    inlining off, as large loads behave: every change is a data or delete file); None keeps
    DuckLake's default.
    """
    root = Path(directory).resolve()
    (root / "data").mkdir(parents=True, exist_ok=True)
    load_extension(con, "ducklake")
    if metadata is None:
        metadata = str(root / "metadata.ducklake")
    elif metadata.startswith("postgres:"):
        load_extension(con, "postgres")
    metadata = metadata.replace("'", "''")
    data = (str(root / "data") + "/").replace("'", "''")
    options = f"DATA_PATH '{data}', OVERRIDE_DATA_PATH true"
    con.execute(f"ATTACH 'ducklake:{metadata}' AS {quote(alias)} ({options})")
    if data_inlining_row_limit is not None:
        limit = int(data_inlining_row_limit)
        con.execute(f"CALL {quote(alias)}.set_option('data_inlining_row_limit', {limit})")


def connect_ducklake(
    directory: str,
    alias: str = "lake",
    data_inlining_row_limit: int | None = None,
    metadata: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB connection with the DuckLake in ``directory`` attached (USE unchanged)."""
    con = duckdb.connect()
    attach_ducklake(con, directory, alias, data_inlining_row_limit, metadata)
    return con
