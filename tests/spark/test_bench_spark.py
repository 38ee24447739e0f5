"""The Spark benchmark runs end to end at a tiny scale and every refreshed view is exact.

No timing assertions: this only guards ``python -m bench.spark`` against rot. By default the
``mixed`` workload (inserts, deletes and updates); DUCKSTREAM_SPARK_ALL adds ``update``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import spark as bench_spark  # noqa: E402
from duckstream.testing.spark_harness import spark_all  # noqa: E402

pytestmark = pytest.mark.spark


def test_spark_bench_runs_and_views_equal_recomputation(spark, tmp_path):
    log: list[str] = []
    workloads = ["mixed", "update"] if spark_all() else ["mixed"]
    results = bench_spark.run(spark, tmp_path, [0.01], ["3", "12"], workloads, 1, log.append)
    rows = results.rows
    assert {(r.workload, r.query) for r in rows} == {(w, q) for w in workloads for q in ("3", "12")}
    assert all(r.equal for r in rows), log
    # Tiny tables and whole-file rewrites: auto rebuilds, and says why.
    assert all(r.picked[0] == "full" and "more than 10%" in r.picked[1] for r in rows), log
    assert all(len(r.auto) == len(r.incremental) == len(r.recompute) == 1 for r in rows)
    text = bench_spark.markdown(results, {k: "x" for k in bench_spark.ENVIRONMENT_KEYS})
    assert "| 3 | full |" in text
    for workload in workloads:
        assert f"## SF 0.01, {workload}" in text
        assert f"- SF 0.01 {workload}: **full** for Q3, Q12 (Q3: " in text
