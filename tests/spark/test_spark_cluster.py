"""dbt models maintained on a Spark cluster: pyspark's own standalone master and a worker on
loopback (``duckstream.testing.spark_cluster``), the driver in a process of its own
(``integration_tests/spark/scripts/on_cluster.py``: this process may hold a local Spark
already, and a process has one JVM). Its executor runs every task: the changes are read,
the deltas computed and the Iceberg commits written away from the driver, through several
refreshes, and dbt's ``ivm_equivalent`` tests then compare each model with its recomputation.

Starting a cluster and its executor costs a minute or two on 2 cores: the test runs in the
full Spark matrix only (``make test-spark-all``, ``DUCKSTREAM_SPARK_ALL=1``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from duckstream.testing.spark_harness import spark_all

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "integration_tests" / "spark"
MODELS = ("revenue_per_country", "big_countries", "customer_orders")


def test_dbt_models_refresh_on_a_standalone_cluster(tmp_path: Path) -> None:
    if not spark_all():
        pytest.skip("a Spark cluster costs minutes: make test-spark-all (DUCKSTREAM_SPARK_ALL=1)")
    pytest.importorskip("dbt.adapters.spark")
    from duckstream.testing.spark_cluster import standalone_cluster

    project = tmp_path / "spark"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    shutil.copy(PROJECT.parent / "profiles.yml", tmp_path / "profiles.yml")
    warehouse = tmp_path / "warehouse"
    with standalone_cluster(tmp_path / "cluster") as master:
        ran = subprocess.run(
            [sys.executable, str(project / "scripts" / "on_cluster.py"), master]
            + [str(warehouse), str(project), str(tmp_path)],
            cwd=tmp_path,  # dbt-spark's session method may leave metastore_db/ here
            capture_output=True,
            text=True,
            timeout=1800,
        )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
    summary = json.loads(ran.stdout.strip().splitlines()[-1])
    assert summary["master"] == master and summary["executors"] == 1, summary
    runs = summary["runs"]
    assert all(runs["build"][m].startswith("success: built") for m in MODELS), runs
    for window in ("after changes", "after more changes"):
        assert all(runs[window][m].startswith("success: incremental: ") for m in MODELS), runs
    assert runs["tests"] and all(m.startswith("pass") for m in runs["tests"].values()), runs
