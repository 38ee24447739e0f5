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
# wait for task locality. C1 alone gets a 48 MB code cache, full within a minute here, after
# which the JVM stops compiling and interprets everything: give it room.
#
# The driver's memory: with Spark's defaults the JVM filled a 2 GB heap and died in the
# middle of the suite (fresh-clone CI; seen with jmap and jstack, NOTES.md). The context
# cleaner waits for each removal's round trip and fell a million accumulators behind, with
# the plans and broadcast blocks they pin: do not wait, and ask for a GC every minute (not
# 30) so it sees what was collected. Tungsten's page follows the heap (64 MB here), allocated
# and zeroed by every hash aggregate and sort and kept by every broadcast hash table: these
# tables are tiny, 1 MB pages. The status store keeps 1,000 executions' metrics with the UI
# off: a few. And a context per test module (the ``spark`` fixture).
FAST_SMALL = {
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": (
        "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:ReservedCodeCacheSize=256m"
    ),
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    "spark.cleaner.periodicGC.interval": "1min",
    "spark.buffer.pageSize": "1m",
    "spark.cleaner.referenceTracking.blocking": "false",
    "spark.locality.wait": "0",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs Java and pyspark (a local Spark session)")


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="module")
def spark(warehouse: str) -> Iterator[SparkSession]:
    """A Spark context per test module (in the one JVM pyspark starts): the driver keeps
    state of what ran (broadcast blocks, accumulators, shuffle outputs, metrics) until its
    cleaner catches up, and over the whole suite's statements that outgrew a 2 GB heap and the
    JVM died. Stopping the context frees it all; a new one starts in a few seconds."""
    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java")
    from duckstream.spark import local_session

    session = local_session(warehouse, extra_conf=FAST_SMALL)
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
