"""One local Spark session with an Iceberg catalog ``lake`` for the whole test run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# Tiny tables, thousands of short statements, 2 cores: interpret instead of generating code,
# let the JIT stop at C1 (C2 compiles would compete with the tests for the cores), and never
# wait for task locality.
FAST_SMALL = {
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC",
    "spark.locality.wait": "0",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs Java and pyspark (a local Spark session)")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java")
    from duckstream.spark import local_session

    session = local_session(str(tmp_path_factory.mktemp("warehouse")), extra_conf=FAST_SMALL)
    session.sql("CREATE NAMESPACE IF NOT EXISTS db")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def outcomes(spark, request: pytest.FixtureRequest) -> dict[str, BaseException | None]:
    """The outcome of each of the test module's ``SCENARIOS`` selected for this run (``-k``),
    run at once in parallel threads (``spark_harness.scenario_outcomes``); Spark's column
    types are compared with the view's too where the module sets ``CHECK_TYPES``."""
    from duckstream.testing.spark_harness import scenario_outcomes, selected_params

    names = selected_params(request, "name")
    check_types = getattr(request.module, "CHECK_TYPES", False)
    return scenario_outcomes(spark, request.module.SCENARIOS, names, check_types=check_types)
