"""DuckLakes whose catalog is a PostgreSQL database, for tests and examples.

DuckLake's multi-process setup keeps its catalog (the metadata tables) in PostgreSQL: every
process that attaches ``ducklake:postgres:dbname=... host=...`` with the same ``DATA_PATH``
sees one lake, and commits from all of them are serialised by the catalog. The test suite
starts a real PostgreSQL server itself with PyPI's ``pgserver`` (the server binaries in a
wheel: no root, no network, a unix socket in a temporary directory), and gives each lake
directory its own database on it.

While :func:`serving` is active, :func:`duckstream.testing.ducklake.attach_ducklake` attaches
the lake of a directory with its catalog in that directory's database instead of the file
``<dir>/metadata.ducklake`` (its data files stay in ``<dir>/data/``): the DuckLake tests run
unchanged against a PostgreSQL catalog (``DUCKSTREAM_CATALOG=postgres``).

>>> catalogs = PostgresCatalogs(host="/tmp/pg", create=lambda name: None)
>>> catalogs.target("/tmp/x/lake", create=False)  # doctest: +ELLIPSIS
'postgres:dbname=lake_... host=/tmp/pg user=postgres'
>>> catalogs.target("/tmp/x/lake", create=False) == catalogs.target("/tmp/x/lake/", create=False)
True
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class PostgresCatalogs:
    """A PostgreSQL server that holds DuckLake catalogs, one database per lake directory.

    ``host``: the server's host or unix socket directory; ``create``: makes a database of a
    name (PostgreSQL's ``CREATE DATABASE`` cannot run inside a transaction, and DuckDB's
    postgres extension runs every statement inside one: it is made by ``psql``)."""

    host: str
    create: Callable[[str], None]
    user: str = "postgres"
    port: int | None = None
    _made: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def connection_string(self, database: str) -> str:
        """The libpq key/value string of ``database`` on this server."""
        port = f" port={self.port}" if self.port else ""
        return f"dbname={database} host={self.host}{port} user={self.user}"

    def target(self, directory: str, *, create: bool = True) -> str:
        """The DuckLake metadata target (``postgres:...``) of the lake kept in ``directory``:
        a database named after the directory's absolute path, made the first time."""
        path = str(Path(directory).resolve())
        database = "lake_" + hashlib.sha1(path.encode()).hexdigest()[:20]
        if create:
            with self._lock:
                if database not in self._made:
                    self.create(database)
                    self._made.add(database)
        return "postgres:" + self.connection_string(database)


_active: PostgresCatalogs | None = None


def active() -> PostgresCatalogs | None:
    """The catalogs :func:`serving` made the default for ``attach_ducklake`` (None: files)."""
    return _active


@contextlib.contextmanager
def serving(catalogs: PostgresCatalogs) -> Generator[PostgresCatalogs]:
    """Attach lake directories with their catalog in ``catalogs`` while inside."""
    global _active
    previous, _active = _active, catalogs
    try:
        yield catalogs
    finally:
        _active = previous


def start_server(directory: str) -> tuple[Any, PostgresCatalogs]:
    """Start (or join) the PostgreSQL server of ``pgserver`` kept in ``directory``; returns
    the server handle (it stops when the process exits) and its :class:`PostgresCatalogs`."""
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (harmless)
        warnings.simplefilter("ignore")
        import pgserver  # the dev/test extra: only tests start a server

        server = pgserver.get_server(directory, cleanup_mode="stop")
    uri = urlparse(server.get_uri())
    host = parse_qs(uri.query).get("host", [uri.hostname or "localhost"])[0]
    existing: set[str] = set()

    def create(database: str) -> None:
        if not existing:
            listed = server.psql("SELECT datname FROM pg_database;")
            existing.update(line.strip() for line in listed.splitlines())
        if database not in existing:
            server.psql(f"CREATE DATABASE {database};")
            existing.add(database)

    catalogs = PostgresCatalogs(
        host=host, create=create, user=uri.username or "postgres", port=uri.port
    )
    return server, catalogs
