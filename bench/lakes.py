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
from duckstream.testing.tpch import load_tpch, load_tpch_by_month

LAKE = "lake"
CACHE = Path(__file__).resolve().parent / ".cache"


# How a template's orders and lineitem were written: "bulk", in one commit (each change then
# hits files spread over the whole table: the worst case for DuckLake's positional deletes);
# "monthly", by monthly appends in order-date order, as real lakes grow (load_tpch_by_month).
LAYOUTS = ("bulk", "monthly")


def template(sf: float, cache: Path = CACHE, layout: str = "bulk") -> Path:
    """A lake directory holding TPC-H at ``sf`` (catalog ``lake``, schema ``main``), its
    orders and lineitem written as ``layout`` says (:data:`LAYOUTS`)."""
    suffix = "" if layout == "bulk" else f"-{layout}"
    directory = cache / f"tpch-sf{sf:g}{suffix}-duckdb{duckdb.__version__}"
    done = directory / ".complete"
    if done.exists():
        return directory
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    partial.mkdir(parents=True)
    con = connect_ducklake(str(partial), LAKE)
    try:
        if layout == "monthly":
            load_tpch_by_month(con, LAKE, sf)
        else:
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
