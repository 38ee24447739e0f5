"""dbt's own adapter test suites (``dbt-tests-adapter``) against ``type: duckstream``.

The duckstream adapter is dbt-duckdb's with one more materialization: every other thing a
project does (tables, views, dbt's incremental, ephemeral models, seeds, snapshots, generic
and singular tests, ``--empty``, adapter methods) must behave as dbt-duckdb's does. dbt-duckdb
proves that by running dbt Labs' base classes; these are the same classes, run on the
target users run: a DuckDB file with a DuckLake attached as the models' database
(``integration_tests/profiles.yml``). Each class builds a dbt project in a temporary directory
with a schema of its own (the ``project`` fixture of ``dbt.tests.fixtures.project``).

``make test`` runs the classes that go through what the adapter overrides or wraps (tables,
views and dbt's incremental through its materialization dispatch, ``--empty``, ephemeral
models, snapshots' MERGE on DuckLake); the rest (tests, adapter methods, the timestamp
snapshot) run with ``DUCKSTREAM_DEEP=1`` (``make test-deep``): ~3 s of CPU each.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.util import run_dbt

pytest_plugins = ["dbt.tests.fixtures.project"]
# dbt-tests-adapter's class-scoped fixtures are instance methods, which pytest 9 warns about
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")
deep = pytest.mark.skipif(
    not os.environ.get("DUCKSTREAM_DEEP"), reason="dbt-tests-adapter class run by make test-deep"
)


@pytest.fixture(scope="class")
def dbt_profile_target(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The integration project's DuckLake target, in a directory of the test class's own."""
    lake = Path(tmp_path_factory.mktemp("lake"))
    return {
        "type": "duckstream",
        "path": str(lake / "dbt.duckdb"),
        "database": "lake",
        "threads": 1,
        "attach": [
            {
                "path": f"ducklake:{lake / 'metadata.ducklake'}",
                "alias": "lake",
                "options": {"data_path": f"{lake / 'data'}/"},
            }
        ],
    }


class TestSimpleMaterializations(BaseSimpleMaterializations):
    def test_models_live_in_the_ducklake(self, project):
        """The target these classes run on: dbt's relations are DuckLake tables (this test
        runs first in the class: pytest collects a class's own methods before inherited ones)."""
        run_dbt(["seed"])
        lake = project.run_sql(
            "SELECT type FROM duckdb_databases() WHERE database_name = 'lake'", fetch="all"
        )
        assert [tuple(row) for row in lake] == [("ducklake",)]
        seeded = project.run_sql(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake'"
            f" AND table_schema = '{project.test_schema}'",
            fetch="all",
        )
        assert [tuple(row) for row in seeded] == [("base",)]


@deep
class TestSingularTests(BaseSingularTests):
    pass


@deep
class TestSingularTestsEphemeral(BaseSingularTestsEphemeral):
    pass


class TestEmpty(BaseEmpty):
    pass


class TestEphemeral(BaseEphemeral):
    pass


class TestIncremental(BaseIncremental):
    pass


@deep
class TestGenericTests(BaseGenericTests):
    pass


class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    pass


@deep
class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    pass


@deep
class TestAdapterMethod(BaseAdapterMethod):
    pass
