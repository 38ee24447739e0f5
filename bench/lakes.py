"""TPC-H lake templates: generated once per scale factor, then copied for every run.

dbgen is single-threaded (about a minute at SF 1 on two cores), so a loaded lake directory is
kept under the cache directory and copied: ``attach_ducklake`` re-attaches a copied lake with
``OVERRIDE_DATA_PATH`` (the file paths inside the catalog are relative to the data path).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from duckstream.testing.ducklake import connect_ducklake
from duckstream.testing.tpch import load_tpch

LAKE = "lake"
CACHE = Path(__file__).resolve().parent / ".cache"


def template(sf: float, cache: Path = CACHE) -> Path:
    """A lake directory holding TPC-H at ``sf`` (catalog ``lake``, schema ``main``)."""
    directory = cache / f"tpch-sf{sf:g}-duckdb{duckdb.__version__}"
    done = directory / ".complete"
    if done.exists():
        return directory
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    partial.mkdir(parents=True)
    con = connect_ducklake(str(partial), LAKE)
    try:
        load_tpch(con, LAKE, sf)
    finally:
        con.close()
    partial.rename(directory)
    done.touch()
    return directory


def copy_lake(source: Path, target: Path) -> Path:
    """Replace ``target`` by a copy of the lake directory ``source``."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


def connect(directory: Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB with the lake attached and ``USE lake.main``."""
    con = connect_ducklake(str(directory), LAKE)
    con.execute(f"USE {LAKE}.main")
    return con
