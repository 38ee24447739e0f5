"""``python -m bench.spark_fixed``: the fixed cost of a Spark + Iceberg refresh.

A one-row append to a source of ``--rows`` rows, then ``refresh(strategy="incremental")``,
per view, ``--reps`` times (each refresh after its own one-row append). Prints, per view, the
median wall time of the refresh, of each of its steps (by kind, the first words of the
statement), the Spark jobs it ran (``statusTracker``) and the JVM's CPU time (``/proc``),
and checks the view against recomputation after every refresh.

``--compare-merge``: each refresh of a view that only grows (an INSERT on a window of appends)
alternates with one of the same view applied by the MERGE (its plan without the INSERT):
before and after in one process.

Runs against whatever ``duckstream`` is importable: compare two trees by alternating runs
(``PYTHONPATH=<tree>/python``), e.g. ``for i in 1 2; do for t in a b; do ...; done; done``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

from duckstream import compile_ivm
from duckstream.engines.iceberg import steps as iceberg_steps
from duckstream.plan import CommitWith, IVMPlan
from duckstream.spark import local_session, refresh, schema_of, setup
from duckstream.testing.differential import as_multiset, multiset_diff

VIEWS = {
    "grouped": "SELECT k % 100 AS g, count(*) AS n, sum(v) AS s FROM t GROUP BY k % 100",
    "join": "SELECT u.w, sum(t.v) AS s FROM t JOIN u ON t.k % 1000 = u.k GROUP BY u.w",
    "rows": "SELECT k, v FROM t WHERE v > 10",
    "join_rows": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k % 1000 = u.k WHERE t.v > 10",
}


def _jvm_cpu_seconds() -> float:
    """utime + stime of the Java processes that are children of this one."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[1] == me and "java" in stat[: stat.rindex(")")]:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _without_appends_only(plan: IVMPlan) -> IVMPlan:
    """``plan`` applying every window with its MERGE (the append-only INSERT left out), or
    ``plan`` itself when it has no such INSERT."""
    maintain = [
        dataclasses.replace(s, appends_only=None) if isinstance(s, CommitWith) else s
        for s in plan.steps["maintain"]
    ]
    if maintain == plan.steps["maintain"]:
        return plan
    return dataclasses.replace(plan, steps={**plan.steps, "maintain": maintain})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--views", nargs="*", default=list(VIEWS))
    parser.add_argument("--strategy", default="incremental")
    parser.add_argument("--conf", nargs="*", default=[], help="key=value Spark settings")
    parser.add_argument(
        "--compare-merge",
        action="store_true",
        help="alternate each refresh of a view that only grows with one applied by the MERGE"
        " (its plan without the append-only INSERT): both medians, in one process",
    )
    args = parser.parse_args()

    warehouse = tempfile.mkdtemp(prefix="spark_fixed_")
    spark = local_session(
        warehouse, cores=2, extra_conf={"spark.driver.memory": "3g", "spark.locality.wait": "0"}
    )
    for setting in args.conf:
        spark.conf.set(*setting.split("=", 1))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS db")
    spark.sql("USE lake.db")
    spark.sql("CREATE TABLE db.t (k BIGINT, v BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO db.t SELECT id, id % 97 FROM range({args.rows})")
    spark.sql("CREATE TABLE db.u (k BIGINT, w BIGINT) USING iceberg")
    spark.sql("INSERT INTO db.u SELECT id, id % 13 FROM range(1000)")

    steps: dict[str, list[float]] = collections.defaultdict(list)
    execute = iceberg_steps._execute

    step_jobs: dict[str, list[int]] = collections.defaultdict(list)

    def timed(spark_, run, step):  # noqa: ANN001, ANN202
        start, before = time.perf_counter(), len(tracker.getJobIdsForGroup())
        try:
            return execute(spark_, run, step)
        finally:
            text = getattr(step, "statement", "") or getattr(step, "query", "")
            key = f"{type(step).__name__} {' '.join(str(text).split()[:2])}"
            steps[key].append(time.perf_counter() - start)
            step_jobs[key].append(len(tracker.getJobIdsForGroup()) - before)

    iceberg_steps._execute = timed
    tracker = spark.sparkContext.statusTracker()
    next_key = args.rows
    for name in args.views:
        sql = VIEWS[name]
        plan = compile_ivm(
            sql,
            mv_name=f"v_{name}",
            mv_catalog="lake",
            mv_schema="db",
            dialect="spark",
            schema=schema_of(spark, sql, catalog="lake", schema="db"),
        )
        setup(spark, plan)
        merging = _without_appends_only(plan)
        variants = {name: plan}
        if args.compare_merge and merging is not plan:
            variants[f"{name} (MERGE)"] = merging
        measured: dict[str, tuple[list[float], list[float], list[int]]] = {
            v: ([], [], []) for v in variants
        }
        steps.clear()
        step_jobs.clear()
        for _ in range(args.reps + 1):  # the first refresh warms up, left out
            for variant, chosen in variants.items():  # alternating pairs
                walls, cpus, jobs = measured[variant]
                spark.sql(f"INSERT INTO db.t VALUES ({next_key}, 42)")
                next_key += 1
                before_jobs = len(tracker.getJobIdsForGroup())
                cpu, start = _jvm_cpu_seconds(), time.perf_counter()
                report = refresh(spark, chosen, strategy=args.strategy)
                walls.append(time.perf_counter() - start)
                cpus.append(_jvm_cpu_seconds() - cpu)
                jobs.append(len(tracker.getJobIdsForGroup()) - before_jobs)
                got = as_multiset(spark.sql(plan.query_mv).collect())
                want = as_multiset(spark.sql(sql).collect())
                if got != want:
                    diff = multiset_diff(want, got)
                    raise SystemExit(f"{name}: the view differs from recomputation:\n{diff}")
                if variant == name:
                    for phase in getattr(report, "phases", []) or []:
                        steps[f"phase {phase.name}"].append(phase.seconds)
        for variant, (walls, cpus, jobs) in measured.items():
            walls, cpus, jobs = walls[1:], cpus[1:], jobs[1:]
            print(
                f"{variant}: refresh median {statistics.median(walls) * 1000:.0f} ms wall,"
                f" {statistics.median(cpus) * 1000:.0f} ms JVM CPU,"
                f" {statistics.median(jobs)} jobs ({report.strategy})"
            )
        for key, times in steps.items() if len(variants) == 1 else ():  # both kinds mixed
            kept = times[-args.reps :] if len(times) > args.reps else times
            each = len(times) / (args.reps + 1)
            jobs_each = statistics.median(step_jobs[key]) if step_jobs.get(key) else ""
            print(
                f"    {key:<40} {statistics.median(kept) * 1000:8.0f} ms  (x{each:.1g})"
                f" {jobs_each} jobs"
            )
    spark.stop()


if __name__ == "__main__":
    main()
