"""The fixed cost of a DuckLake refresh (issue "Performance", item 3): a one-row view
(``SELECT k, v FROM t``) refreshed after a one-row insert, per phase.

``python -m bench.fixed_cost --refreshes 30 --strategy incremental``: a fresh lake in a
temporary directory, the view set up, then ``--refreshes`` rounds of (insert one row, refresh),
after three untimed ones; prints the medians of the refresh's total and of each phase
(``RefreshReport.phases``) and its statements, as JSON. The phases are timed by the runner's
``time.perf_counter``; ``--cpu`` (the default) swaps it for ``time.process_time`` in this
process (the CPU time of all its threads: DuckDB's too), steadier than wall time on a machine
shared with other work. To compare two versions, run it alternately from each checkout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost", description=__doc__)
    parser.add_argument("--refreshes", type=int, default=30)
    parser.add_argument("--strategy", default="incremental")
    parser.add_argument("--view", default="SELECT k, v FROM t")
    parser.add_argument("--wall", action="store_true", help="time phases by the wall clock")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time
    if not args.wall:
        time.perf_counter = time.process_time  # the runner's phases: CPU time

    from duckstream.engines.ducklake.runner import refresh
    from duckstream.runtime import setup
    from duckstream.testing.differential import DuckLakeHarness
    from duckstream.testing.ducklake import connect_ducklake

    with tempfile.TemporaryDirectory(prefix="duckstream-fixed-") as directory:
        con = connect_ducklake(f"{directory}/lake", alias="dl")
        con.execute("CREATE TABLE dl.main.t (k INTEGER, v INTEGER)")
        con.execute("INSERT INTO dl.main.t VALUES (0, 0)")
        plan = DuckLakeHarness(con).compile(args.view)
        setup(con, plan)
        totals: list[float] = []
        statements: list[int] = []
        phases: dict[str, list[float]] = {}
        for i in range(args.refreshes + 3):
            con.execute(f"INSERT INTO dl.main.t VALUES ({i + 1}, {i})")
            start = clock()
            report = refresh(con, plan, strategy=args.strategy)
            took = clock() - start
            if i < 3:
                continue
            totals.append(took)
            statements.append(report.statements)
            summed: dict[str, float] = {}
            for phase in report.phases:
                summed[phase.name] = summed.get(phase.name, 0.0) + phase.seconds
            for name, seconds in summed.items():
                phases.setdefault(name, []).append(seconds)
        con.close()
    print(
        json.dumps(
            {
                "ms": round(statistics.median(totals) * 1000, 2),
                "statements": statistics.median(statements),
                "phases": {k: round(statistics.median(v) * 1000, 2) for k, v in phases.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
