"""Shared fixtures: real DuckLake catalogs in temporary directories."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

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
