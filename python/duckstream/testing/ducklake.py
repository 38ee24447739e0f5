"""DuckLake helpers for tests and benchmarks.

Extensions are loaded from the installed ``duckdb_extension_<name>`` PyPI packages, never from
the network (a plain ``INSTALL ducklake`` downloads, which fails offline).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb


def quote(name: str) -> str:
    """Quote an SQL identifier (catalog, schema or table name)."""
    return '"' + name.replace('"', '""') + '"'


def extension_path(name: str) -> str:
    """Path of ``<name>.duckdb_extension`` inside the installed ``duckdb_extension_<name>``."""
    package = f"duckdb_extension_{name}"
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"DuckDB extension {name!r} needs the package {package} (pip install)")
    root = Path(next(iter(spec.submodule_search_locations)))
    wanted = root / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.is_file():
        return str(wanted)
    found = sorted(root.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"{package} holds no {name}.duckdb_extension under {root}")
    return str(found[-1])


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Install (from the local package file) and load a DuckDB extension."""
    path = extension_path(name).replace("'", "''")
    con.execute(f"INSTALL '{path}'")
    con.execute(f"LOAD {name}")


def attach_ducklake(con: duckdb.DuckDBPyConnection, directory: str, alias: str = "lake") -> None:
    """Attach (creating if needed) the DuckLake kept in ``directory`` as catalog ``alias``.

    Metadata lives in ``<dir>/metadata.ducklake`` and data in ``<dir>/data/``. DuckLake stores
    DATA_PATH as first given and rejects other spellings, so paths are made absolute, and
    OVERRIDE_DATA_PATH keeps a copied or moved lake directory usable (file paths inside the
    catalog are relative to DATA_PATH): a loaded TPC-H lake can be reused as a template.
    """
    root = Path(directory).resolve()
    (root / "data").mkdir(parents=True, exist_ok=True)
    load_extension(con, "ducklake")
    metadata = str(root / "metadata.ducklake").replace("'", "''")
    data = (str(root / "data") + "/").replace("'", "''")
    options = f"DATA_PATH '{data}', OVERRIDE_DATA_PATH true"
    con.execute(f"ATTACH 'ducklake:{metadata}' AS {quote(alias)} ({options})")


def connect_ducklake(directory: str, alias: str = "lake") -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB connection with the DuckLake in ``directory`` attached (USE unchanged)."""
    con = duckdb.connect()
    attach_ducklake(con, directory, alias)
    return con


def current_snapshot(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    """Id of the latest committed snapshot of the DuckLake catalog ``catalog``."""
    row = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots(?)", [catalog]).fetchone()
    assert row is not None
    return int(row[0])
