"""``python -m bench.fit_policy RESULTS.json [RESULTS.json ...]``: how ``strategy='auto'``
would have chosen with other cost-model constants (:class:`duckstream.strategy.Policy`), from
the results of one or more benchmarks.

Each run records auto's estimate of every source (``Run.estimates``), the view's measurements
auto read (``Run.measured``) and the measured wall-clock time of both forced paths; this replays
:func:`duckstream.strategy.decide` on those estimates and the plans' reads, then
:func:`duckstream.strategy.calibrate` on those measurements, and counts the runs where the
chosen path took more than ``--slack`` (10%) the time of the other: the benchmark's
target. Nothing is measured again.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace
from pathlib import Path

from bench.report import read_json
from bench.run import compile_views
from duckstream.strategy import History, Policy, SourceEstimate, calibrate, decide


def misses(runs, plans, policy: Policy, slack: float) -> list[str]:
    """The runs (``sf workload Q: ratio``) where ``policy`` picks the slower path."""
    found = []
    for run in runs:
        changed = any(e["inserted"] + e["deleted"] for e in run.estimates.values())
        if not changed:
            continue
        sources = {n: SourceEstimate(**e) for n, e in run.estimates.items()}
        plan = plans[run.query]
        model = decide(sources, policy, plan.maintain_reads, plan.rebuild_reads)
        choice = calibrate(model, History.from_dict(run.measured), policy).strategy
        chosen = getattr(run, choice).seconds
        other = getattr(run, "full" if choice == "incremental" else "incremental").seconds
        if chosen > slack * other:
            ratio = chosen / other
            found.append(f"SF {run.sf:g} {run.workload} Q{run.query} {choice} {ratio:.2f}x")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fit_policy", description=__doc__)
    parser.add_argument("results", type=Path, nargs="+", help="one or more results files")
    parser.add_argument("--slack", type=float, default=1.10)
    args = parser.parse_args(argv)
    runs = [run for path in args.results for run in read_json(path)[0].runs]
    plans = compile_views(sorted({r.query for r in runs}))
    current = Policy()
    missed = misses(runs, plans, current, args.slack)
    print(f"current {current}: {len(missed)} misses")
    for line in missed:
        print("  ", line)
    grid = itertools.product(
        (0.02, 0.05, 0.1, 0.2, 0.3),  # insert_reach
        (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0),  # delete_reach
        (500_000, 1_000_000, 1_500_000, 2_000_000, 3_000_000),  # overhead_rows
    )
    scored = []
    for insert_reach, delete_reach, overhead in grid:
        policy = replace(
            current, insert_reach=insert_reach, delete_reach=delete_reach, overhead_rows=overhead
        )
        scored.append((misses(runs, plans, policy, args.slack), policy))
    scored.sort(key=lambda x: len(x[0]))
    for missed, policy in scored[:10]:
        print(f"{len(missed)} misses: {policy}")
        for line in missed:
            print("  ", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
