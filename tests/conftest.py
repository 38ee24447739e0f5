"""Shared fixtures: real DuckLake catalogs in temporary directories."""

from __future__ import annotations

import os
from pathlib import Path

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


# ``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``). Tests
# that share module-scoped state (a dbt project built once, TPC-H lakes, one recorded path)
# stay together on one worker, in order; the Spark tests all share one Spark context, so they
# are one group (one JVM); every other test goes wherever a worker is free.
_MODULE_GROUPS = ('scope="module"', "scope='module'")


def _shares_module_state(path: Path) -> bool:
    text = path.read_text()
    return any(marker in text for marker in _MODULE_GROUPS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shared: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if item.get_closest_marker("spark") or "spark" in path.parent.name:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif path.suffix == ".py" and path.parent.name == "dbt":
            item.add_marker(pytest.mark.xdist_group(path.stem))
        else:
            if path not in shared:
                shared[path] = path.name.startswith("test_") and _shares_module_state(path)
            if shared[path]:
                item.add_marker(pytest.mark.xdist_group(path.stem))
