"""Load DuckDB extensions from their PyPI packages, never from the network.

``pip install duckdb-extension-ducklake`` puts ``ducklake.duckdb_extension`` inside the
``duckdb_extension_ducklake`` package; a plain ``INSTALL ducklake`` would download it, which
fails offline. The dbt adapter and the test helpers both load extensions through here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
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


# Extensions whose entry point is named otherwise than their package: DuckDB loading a file
# (``LOAD '<path>'``, as dbt-duckdb's ``extensions:`` does) looks for the entry point of the
# file's base name, and the postgres extension's is ``postgres_scanner``'s.
_ENTRY_NAMES = {"postgres": "postgres_scanner"}


def loadable_path(name: str) -> str:
    """A path of ``<name>``'s extension file that DuckDB can also load by path: the
    package's file, or for an extension whose entry point has another name a link to it of
    that name (made once, in ``~/.cache/duckstream/extensions/``; a copy where links fail).

    >>> loadable_path("ducklake") == extension_path("ducklake")
    True
    >>> Path(loadable_path("postgres")).name
    'postgres_scanner.duckdb_extension'
    """
    path = extension_path(name)
    entry = _ENTRY_NAMES.get(name)
    if entry is None:
        return path
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "duckstream" / "extensions" / f"v{duckdb.__version__}"
    target.mkdir(parents=True, exist_ok=True)
    target = target / f"{entry}.duckdb_extension"
    if not _same_file(target, Path(path)):
        made = target.with_suffix(f".{os.getpid()}.tmp")
        try:
            made.symlink_to(path)
        except OSError:
            shutil.copyfile(path, made)
        os.replace(made, target)  # atomic: processes racing here agree
    return str(target)


def _same_file(made: Path, package: Path) -> bool:
    """Whether ``made`` is a link to ``package``'s file, or a copy of it (same size)."""
    with contextlib.suppress(OSError):
        if made.is_symlink():
            return made.resolve() == package.resolve()
        return made.stat().st_size == package.stat().st_size
    return False


def load_extension(con: Connection, name: str) -> None:
    """Install (from the local package file) and load a DuckDB extension."""
    path = extension_path(name).replace("'", "''")
    con.execute(f"INSTALL '{path}'")
    con.execute(f"LOAD {name}")
