"""The differential harness on Spark + Iceberg: same interface as ``DuckLakeHarness``.

Views and change predicates are written once, in DuckDB's SQL (the test suite's), and
transpiled to Spark SQL with sqlglot, so one scenario runs on both engines. Each harness
works in its own Iceberg namespace, so tests can share one Spark session and warehouse
without dropping tables (DROP is slow and not needed). Differences from DuckLake a test
may notice: every change statement is its own commit (Spark has no multi-statement
transactions), and a table is given an empty commit when created without rows, because an
Iceberg table has no snapshot to pin until it is first written.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from duckstream.compiler import compile_ivm
from duckstream.engines.iceberg.runner import refresh, setup
from duckstream.plan import IVMPlan
from duckstream.testing.differential import (
    Batch,
    Change,
    Insert,
    Scenario,
    TableSpec,
    Update,
    check_result,
    quote_ident,
    sql_literal,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_namespaces = itertools.count(1)
_RUN = uuid.uuid4().hex[:6]  # namespaces of earlier runs may still be in the warehouse


def to_spark(sql: str, read: str = "duckdb") -> str:
    """Transpile one statement (or predicate) to Spark SQL."""
    return sqlglot.transpile(sql, read=read, write="spark")[0]


def spark_ident(name: str) -> str:
    """``name`` for Spark SQL, in backticks unless it is a plain lower-case name (any case,
    reserved words, any character); plain names stay bare so that they read as the catalog
    reports them (``lake.ns.t``, the key of a cursor)."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in {"group", "order", "select"}:
        return name
    return exp.to_identifier(name, quoted=True).sql("spark")


def spark_type(type_: str) -> str:
    return exp.DataType.build(type_, dialect="duckdb").sql("spark")


class SparkHarness:
    """Tables and views in an Iceberg namespace ``catalog.schema`` of a Spark session."""

    def __init__(
        self,
        spark: SparkSession,
        catalog: str = "lake",
        schema: str | None = None,
        check_names: bool = False,
    ) -> None:
        """``check_names``: :meth:`check` also compares the output column names."""
        self.spark = spark
        self.catalog = catalog
        self.check_names = check_names
        self.schema = schema or f"ds_{_RUN}_{next(_namespaces)}"
        self.tables: dict[str, TableSpec] = {}
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{self.schema}")

    def fqn(self, table: str) -> str:
        return f"{self.catalog}.{self.schema}.{spark_ident(table)}"

    def create(self, table: TableSpec) -> None:
        columns = ", ".join(f"{spark_ident(c.name)} {spark_type(c.type)}" for c in table.columns)
        self.spark.sql(f"CREATE TABLE {self.fqn(table.name)} ({columns}) USING iceberg")
        self.tables[table.name] = table
        if table.rows:
            self.apply([Insert(table.name, tuple(table.rows))])
        else:  # an empty commit: the table's first snapshot
            t = self.fqn(table.name)
            self.spark.sql(f"INSERT INTO {t} SELECT * FROM {t} WHERE false")

    def _statement(self, change: Change) -> str | None:
        table = self.fqn(change.table)
        if isinstance(change, Insert):
            if not change.rows:
                return None
            types = [spark_type(c.type) for c in self.tables[change.table].columns]
            values = ", ".join(
                "("
                + ", ".join(
                    f"CAST({sql_literal(v)} AS {t})" for v, t in zip(row, types, strict=True)
                )
                + ")"
                for row in change.rows
            )
            return f"INSERT INTO {table} VALUES {values}"
        # Assignments and predicates are DuckDB SQL: transpile them with the table named in
        # DuckDB's quoting (backticks do not parse as DuckDB).
        duck = f"{self.catalog}.{self.schema}.{quote_ident(change.table)}"
        if isinstance(change, Update):
            return to_spark(f"UPDATE {duck} SET {change.assignments} WHERE {change.where}")
        return to_spark(f"DELETE FROM {duck} WHERE {change.where}")

    def apply(self, batch: Batch) -> None:
        """Commit ``batch``: one Iceberg snapshot per change."""
        for change in batch:
            if statement := self._statement(change):
                self.spark.sql(statement)

    def compile(self, view_sql: str, mv_name: str = "mv", **kwargs: Any) -> IVMPlan:
        return compile_ivm(
            to_spark(view_sql),
            dialect="spark",
            mv_name=mv_name,
            mv_catalog=self.catalog,
            mv_schema=self.schema,
            **kwargs,
        )

    def setup(self, plan: IVMPlan) -> None:
        setup(self.spark, plan)

    def refresh(self, plan: IVMPlan) -> None:
        """Maintain the view (never the cost-based choice: on test-sized tables a rebuild is
        always cheaper, and these tests are about maintenance)."""
        refresh(self.spark, plan, strategy="incremental")

    def rows(self, sql: str) -> list[tuple]:
        """Run Spark SQL with this harness's namespace as the current one."""
        return self.result(sql)[1]

    def result(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Spark SQL's column names and rows, this harness's namespace the current one."""
        self.spark.sql(f"USE {self.catalog}.{self.schema}")
        frame = self.spark.sql(sql)
        return list(frame.columns), [tuple(row) for row in frame.collect()]

    def check(self, plan: IVMPlan, view_sql: str, context: str = "") -> None:
        """Assert the view's table equals recomputation (the view run on Spark) as a multiset
        (and, with ``check_names``, has the SELECT's column names)."""
        expected = self.result(to_spark(view_sql))
        actual = self.result(plan.query_mv)
        check_result(view_sql, context, expected, actual, self.check_names)


def run_scenarios(
    spark: SparkSession, scenarios: Mapping[str, Scenario], names: Sequence[str], threads: int = 3
) -> dict[str, BaseException | None]:
    """Run the scenarios ``names`` at once: each in its own harness (Iceberg namespace) and
    session of the one Spark context (``USE`` is per session), in parallel threads; the
    outcome of each is ``None`` or the error it raised (a refusal too), for its test to
    judge with :func:`expect_outcome`."""

    def run(name: str) -> BaseException | None:
        scenario = scenarios[name]
        harness = SparkHarness(spark.newSession(), check_names=True)
        try:
            plan = scenario.run(harness)
            if scenario.names is not None:
                mv = harness.result(plan.query_mv)[0]
                assert mv == scenario.names, f"query_mv names {mv}, expected {scenario.names}"
        except BaseException as error:  # noqa: BLE001 - judged by the scenario's own test
            return error
        return None

    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(names, pool.map(run, names), strict=True))


def expect_outcome(scenario: Scenario, error: BaseException | None) -> None:
    """Pass, fail or xfail a scenario's test by its outcome on Spark: a refusal it declares
    must be that refusal; a declared gap must still fail (else it is stale)."""
    import pytest

    from duckstream.errors import UnsupportedSQLError

    if scenario.spark_refused is not None:
        assert isinstance(error, UnsupportedSQLError), error
        assert error.feature == scenario.spark_refused
        return
    if scenario.spark_gap is not None:
        assert error is not None, f"passes on Spark now: drop its spark_gap ({scenario.spark_gap})"
        pytest.xfail(scenario.spark_gap)
    if error is not None:
        raise error
