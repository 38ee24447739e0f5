"""Shared fixtures: real DuckLake catalogs in temporary directories."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from duckstream.testing import postgres
from duckstream.testing.ducklake import connect_ducklake

# CI runs the default profile; DUCKSTREAM_DEEP=1 (or HYPOTHESIS_PROFILE=deep) digs deeper.
settings.register_profile(
    "ci",
    max_examples=int(os.environ.get("DUCKSTREAM_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
settings.register_profile(
    "deep",
    max_examples=int(os.environ.get("DUCKSTREAM_EXAMPLES", "500")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
profile = os.environ.get("HYPOTHESIS_PROFILE") or (
    "deep" if os.environ.get("DUCKSTREAM_DEEP") else "ci"
)
settings.load_profile(profile)


@pytest.fixture
def lake(tmp_path):
    """A DuckDB connection with an empty DuckLake catalog attached as ``dl``."""
    con = connect_ducklake(str(tmp_path / "lake"), alias="dl")
    yield con
    con.close()


@pytest.fixture(scope="session")
def postgres_catalogs() -> Iterator[postgres.PostgresCatalogs]:
    """A real PostgreSQL server (PyPI's ``pgserver``: a unix socket, no network) for the
    session, holding one DuckLake catalog database per lake directory; stopped and removed
    at the end. Its directory is not pytest's: pytest removes old ``pytest-<n>`` directories
    of other sessions of the same user, a running server's included."""
    directory = tempfile.mkdtemp(prefix="duckstream-pg-")
    server, catalogs = postgres.start_server(directory)
    yield catalogs
    server.cleanup()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def on_postgres(postgres_catalogs) -> Iterator[postgres.PostgresCatalogs]:
    """While the test runs, ``attach_ducklake`` puts each lake's catalog in PostgreSQL."""
    with postgres.serving(postgres_catalogs) as catalogs:
        yield catalogs


@pytest.fixture(scope="session", autouse=os.environ.get("DUCKSTREAM_CATALOG") == "postgres")
def every_catalog_on_postgres(request) -> Iterator[None]:
    """``DUCKSTREAM_CATALOG=postgres``: every DuckLake the tests attach through
    ``attach_ducklake`` keeps its catalog in PostgreSQL (the full opt-in run, e.g.
    ``DUCKSTREAM_CATALOG=postgres pytest tests/test_properties.py``)."""
    if os.environ.get("DUCKSTREAM_CATALOG") != "postgres":
        yield
        return
    with postgres.serving(request.getfixturevalue("postgres_catalogs")):
        yield
