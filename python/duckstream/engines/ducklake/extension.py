"""Load DuckDB extensions from their PyPI packages, never from the network.

``pip install duckdb-extension-ducklake`` puts ``ducklake.duckdb_extension`` inside the
``duckdb_extension_ducklake`` package; a plain ``INSTALL ducklake`` would download it, which
fails offline. The dbt adapter and the test helpers both load extensions through here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

from duckstream.connection import Connection


def extension_path(name: str) -> str:
    """Path of ``<name>.duckdb_extension`` inside the installed ``duckdb_extension_<name>``.

    >>> extension_path("ducklake").endswith("ducklake.duckdb_extension")
    True
    """
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


def load_extension(con: Connection, name: str) -> None:
    """Install (from the local package file) and load a DuckDB extension."""
    path = extension_path(name).replace("'", "''")
    con.execute(f"INSTALL '{path}'")
    con.execute(f"LOAD {name}")
