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
# off: a few. And under DUCKSTREAM_SPARK_ALL a context per test module (the ``spark`` fixture).
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


@pytest.fixture(scope="session")
def _contexts() -> Iterator[list[SparkSession]]:
    """The Spark sessions the run started, stopped at its end."""
    started: list[SparkSession] = []
    yield started
    for session in started:
        session.stop()


@pytest.fixture(scope="module")
def spark(warehouse: str, _contexts: list[SparkSession]) -> Iterator[SparkSession]:
    """One Spark context for the whole run (starting one costs seconds). Under
    DUCKSTREAM_SPARK_ALL a context per test module (in the one JVM pyspark starts): the driver
    keeps state of what ran (broadcast blocks, accumulators, shuffle outputs, metrics) until
    its cleaner catches up, and over the full matrix's statements that outgrew a 2 GB heap and
    the JVM died. Stopping the context frees it all; a new one starts in a few seconds."""
    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java")
    from duckstream.spark import local_session
    from duckstream.testing.spark_harness import spark_all

    if spark_all():
        session = local_session(warehouse, extra_conf=FAST_SMALL)
        session.sql("CREATE NAMESPACE IF NOT EXISTS db")
        yield session
        session.stop()
        return
    if not _contexts:
        _contexts.append(local_session(warehouse, extra_conf=FAST_SMALL))
        _contexts[0].sql("CREATE NAMESPACE IF NOT EXISTS db")
    session = _contexts[0]
    yield session
    # What a module leaves in the session must not reach the next: a temp view ``t`` would
    # hide every table ``t`` (the session itself is kept: dbt-spark takes it with getOrCreate).
    # (listTables in a namespace of ``lake`` leaves temp views out; the session catalog's lists
    # them without loading a table.)
    for row in session.sql("SHOW TABLES IN spark_catalog.default").collect():
        if row.isTemporary:
            session.catalog.dropTempView(row.tableName)
    session.catalog.clearCache()
    session.sql("USE lake.db")


@pytest.fixture(scope="module")
def outcomes(spark, request: pytest.FixtureRequest) -> dict[str, BaseException | None]:
    """The outcome of each of the test module's ``SCENARIOS`` selected for this run (``-k``),
    run at once in parallel threads (``spark_harness.scenario_outcomes``); Spark's column
    types are compared with the view's too where the module sets ``CHECK_TYPES``."""
    from duckstream.testing.spark_harness import scenario_outcomes, selected_params, spark_windows

    names = selected_params(request, "name")
    check_types = getattr(request.module, "CHECK_TYPES", False)
    return scenario_outcomes(
        spark, request.module.SCENARIOS, names, check_types=check_types, windows=spark_windows()
    )


def _literal(value: object) -> str:
    """A value of a plan's value queries as a person writes it in ``SET``: a literal of its
    type (the key ranges' note says so), NULL for none."""
    import datetime
    import decimal

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    assert isinstance(value, int | decimal.Decimal), value
    return str(value)


@pytest.fixture
def run_by_hand(spark):
    """Run a plan's ``maintain`` the way the runner's docstring tells a person: each value
    query's row ``SET`` as Spark variables (``${...}`` substituted by Spark), the window check
    in SQL, the guard asserted true, the commit with its snapshot properties, the clean-up
    last."""
    from duckstream.engines.iceberg.engine import render, value_query
    from duckstream.plan import Cleanup, CommitWith, PinSnapshot, PinWindow, SetValues, StopUnless
    from duckstream.spark import sql_with_commit_properties

    def run(plan) -> None:
        cleanup = []
        for step in plan.steps["maintain"]:
            if isinstance(step, Cleanup):
                cleanup.append(step.statement)
            elif isinstance(step, PinSnapshot | PinWindow | SetValues):
                for key, value in spark.sql(value_query(step)).collect()[0].asDict().items():
                    spark.sql(f"SET {key} = {_literal(value)}")
                if isinstance(step, PinWindow):
                    spark.sql(step.spec.check).collect()  # the window check, in SQL
            elif isinstance(step, StopUnless):
                assert spark.conf.get(step.value[2:-1]) == "true"
            elif isinstance(step, CommitWith):
                resolved = {k: spark.conf.get(v[2:-1]) for k, v in step.properties}
                sql_with_commit_properties(spark, step.statement, resolved)
            else:
                for sql in render(step):
                    spark.sql(sql).collect()
        for sql in cleanup:
            spark.sql(sql)

    return run
