"""The ``duckstream_spark`` dbt adapter on integration_tests/spark, in this process.

dbt-spark's ``session`` method takes ``SparkSession.builder.getOrCreate()``: the session of
the ``spark`` fixture, so the test changes the sources dbt reads on the same JVM.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "integration_tests" / "spark"
MODELS = ("revenue_per_country", "big_countries", "customer_orders")  # the last: LEFT JOIN
INCREMENTAL = ("--vars", "{ivm_strategy: incremental}")  # else auto rebuilds these tiny tables


def _sources() -> Any:
    spec = importlib.util.spec_from_file_location("spark_sources", PROJECT / "scripts/sources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dbt(project: Path, *args: str, success: bool = True) -> dict[str, tuple[str, str]]:
    """Run dbt (expecting ``success``); the status and message of each node, by name."""
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke(
        [*args, "--project-dir", str(project), "--profiles-dir", str(project.parent)]
        + ["--target", "spark", "--threads", "1"]
    )
    nodes = {
        r.node.name: (str(r.status), r.message or "")
        for r in (getattr(result.result, "results", None) or [])
        if getattr(r, "node", None) is not None  # run-operation's result has none
    }
    assert result.success is success, (args, result.exception, nodes)
    return nodes


def test_run_change_run_test(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dbt.adapters.spark")
    project = tmp_path / "spark"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    shutil.copy(PROJECT.parent / "profiles.yml", tmp_path / "profiles.yml")
    monkeypatch.setenv(
        "DUCKSTREAM_SPARK_WAREHOUSE", spark.conf.get("spark.sql.catalog.lake.warehouse") or ""
    )
    monkeypatch.chdir(tmp_path)  # dbt-spark's session method may leave metastore_db/ here
    sources = _sources()
    sources.setup_sources(spark)
    for model in MODELS:
        spark.sql(f"DROP TABLE IF EXISTS db.{model}")

    first = _dbt(project, "run")
    assert {m: first[m][1].split(":")[0] for m in MODELS} == {m: "built" for m in MODELS}
    script = (project / "target/run/duckstream_spark_tests/models/big_countries.sql").read_text()
    assert (
        script.startswith("-- duckstream: big_countries: built: ") and "INSERT OVERWRITE" in script
    )

    sources.change_sources(spark)
    second = _dbt(project, "run", *INCREMENTAL)
    for model in MODELS:
        assert second[model][1].startswith("incremental: "), second[model]
    assert second["revenue_per_country"][1].startswith("incremental: from 2 sources")

    third = _dbt(project, "run")  # auto: the estimate sees no change
    assert all(third[m][1].startswith("up to date") for m in MODELS), third

    tests = _dbt(project, "test")
    assert tests and all(status == "pass" for status, _ in tests.values()), tests

    # The chained model really is the filter of the maintained aggregate.
    got = {r[0]: r[1] for r in spark.table("db.big_countries").collect()}
    want = {
        r[0]: r[1]
        for r in spark.sql(
            "SELECT c.country, sum(o.amount) FROM raw.orders o JOIN raw.customers c"
            " ON o.customer_id = c.customer_id GROUP BY c.country HAVING count(*) >= 3"
        ).collect()
    }
    assert got == want

    # auto: one new order; on tables this small a rebuild is cheaper than Spark's fixed cost.
    spark.sql("INSERT INTO raw.orders VALUES (500, 1, 12.50)")
    auto = _dbt(project, "run")
    assert auto["revenue_per_country"][1].startswith("rebuilt (auto: orders +1/-0"), auto
    assert "fixed 12,000,000" in auto["revenue_per_country"][1], auto
    assert auto["big_countries"][1].startswith("rebuilt (auto: "), auto
    # auto again: both paths of the view now measured (the requested refresh and the rebuild
    # auto chose recorded their start), it decides on their times, as spark.refresh does
    spark.sql("INSERT INTO raw.orders VALUES (501, 2, 7.50)")
    measured = _dbt(project, "run")
    assert "measured: a refresh ~" in measured["revenue_per_country"][1], measured
    tests = _dbt(project, "test")
    assert tests and all(status == "pass" for status, _ in tests.values()), tests

    # A source's schema changes (no change feed across it) and a model's SQL is edited.
    spark.sql("ALTER TABLE raw.customers ADD COLUMN note STRING")
    spark.sql("INSERT INTO raw.customers VALUES (99, 'DE', 'no orders yet')")
    edited = project / "models" / "big_countries.sql"
    edited.write_text(edited.read_text().replace(">= 3", ">= 4"))
    fourth = _dbt(project, "run", *INCREMENTAL)
    assert fourth["revenue_per_country"][1].startswith("rebuilt (the schema of"), fourth
    assert fourth["big_countries"][1].startswith("rebuilt (model SQL changed)"), fourth

    # Unsupported SQL fails naming the model and the construct, or is recomputed if allowed.
    # (a table function duckstream does not maintain on Spark: posexplode counts from 0 where
    # DuckDB's ordinality counts from 1; explode itself is maintained)
    spread = project / "models" / "spread.sql"
    table_function = (
        "select c.country, r.pos, r.id from {{ ref('big_countries') }} as c"
        " lateral view posexplode(array(1, 2)) r as pos, id"
    )
    spread.write_text(table_function)
    failed = _dbt(project, "run", "--select", "spread", success=False)
    assert "model spread" in failed["spread"][1], failed
    assert "table_function" in failed["spread"][1], failed
    spread.write_text("{{ config(ivm_on_unsupported='full_refresh') }}\n" + table_function)
    recomputed = _dbt(project, "run", "--select", "spread")
    assert recomputed["spread"][1].startswith("recomputed ("), recomputed
    tests = _dbt(project, "test")
    assert all(status == "pass" for status, _ in tests.values()), tests


COUNTRY_ORDERS = """{{ config(materialized='incremental_ivm', ivm_strategy='incremental',
            on_configuration_change='fail') }}
select c.country, count(*) as orders
from {{ source('raw', 'orders') }} as o
join {{ source('raw', 'customers') }} as c on o.customer_id = c.customer_id
group by c.country
"""
COUNTRY_ORDERS_YML = """version: 2
models:
  - name: country_orders
    config:
      contract: {enforced: true}
    data_tests:
      - dbt_duckstream.ivm_equivalent
      - dbt_duckstream.ivm_lag: {arguments: {max_snapshots: 0}}
    columns:
      - name: country
        data_type: string
      - name: orders
        data_type: bigint
"""


def test_dbt_conventions_on_spark(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What differs per engine in the dbt conventions (tests/dbt/test_dbt_conventions.py runs
    them all on DuckLake): --empty's build from empty sources, the contract checked on
    Spark's types, the lag read from Iceberg snapshots, dbt docs' catalog without hidden
    columns, on_configuration_change 'fail' and 'continue'."""
    pytest.importorskip("dbt.adapters.spark")
    project = tmp_path / "spark"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    shutil.copy(PROJECT.parent / "profiles.yml", tmp_path / "profiles.yml")
    monkeypatch.setenv(
        "DUCKSTREAM_SPARK_WAREHOUSE", spark.conf.get("spark.sql.catalog.lake.warehouse") or ""
    )
    monkeypatch.chdir(tmp_path)
    sources = _sources()
    sources.setup_sources(spark)
    spark.sql("DROP TABLE IF EXISTS db.country_orders")
    model = project / "models" / "country_orders.sql"
    model.write_text(COUNTRY_ORDERS)
    (project / "models" / "country_orders.yml").write_text(COUNTRY_ORDERS_YML)
    only = ("--select", "country_orders")

    empty = _dbt(project, "run", "--empty", *only)
    assert empty["country_orders"][1].startswith("built (--empty): 0 rows"), empty
    built = _dbt(project, "build", *only)
    assert built["country_orders"][1].startswith("rebuilt (built empty by --empty): 5 rows")
    assert all(status in ("success", "pass") for status, _ in built.values()), built

    sources.change_sources(spark)
    behind = _dbt(project, "test", *only, success=False)
    assert [s for n, (s, _) in behind.items() if "ivm_lag" in n] == ["fail"], behind
    _dbt(project, "run-operation", "duckstream_status", "--args", "{model: country_orders}")
    caught_up = _dbt(project, "build", *only)
    assert caught_up["country_orders"][1].startswith("incremental: "), caught_up
    assert all(status in ("success", "pass") for status, _ in caught_up.values()), caught_up

    # expire the snapshots no model needs: the next refresh (below) still finds its cursors
    _dbt(project, "run-operation", "duckstream_expire", "--args", "{older_than: 0m}")
    _dbt(project, "docs", "generate", *only)
    catalog = json.loads((project / "target/catalog.json").read_text())
    node = catalog["nodes"]["model.duckstream_spark_tests.country_orders"]
    assert list(node["columns"]) == ["country", "orders"], node["columns"]  # no _ivm_*

    edited = COUNTRY_ORDERS.replace("group by", "where o.amount > 0\ngroup by")
    model.write_text(edited)
    failed = _dbt(project, "run", *only, success=False)
    assert "on_configuration_change is 'fail'" in failed["country_orders"][1], failed
    model.write_text(edited.replace("'fail'", "'continue'"))
    sources.change_sources(spark)
    kept = _dbt(project, "build", *only)
    assert kept["country_orders"][1].startswith(
        "incremental (model SQL changed, not applied: on_configuration_change is 'continue')"
    ), kept
    assert all(status in ("success", "pass") for status, _ in kept.values()), kept
    (project / "models" / "country_orders.yml").write_text(
        COUNTRY_ORDERS_YML.replace("bigint", "int")
    )
    model.write_text(COUNTRY_ORDERS)
    broken = _dbt(project, "run", *only, success=False)
    assert "contract" in broken["country_orders"][1].lower(), broken
