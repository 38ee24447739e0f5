"""``python -m bench``: refresh vs recomputation on TPC-H in DuckLake; writes the report.

Examples: ``python -m bench`` (SF 0.1, 1 and, with the memory for it, 3; every supported
query and workload, 3 reps);
``python -m bench --sf 0.01 --queries 1 3 --workloads append --reps 1 --out /tmp/b``.
Exits 1 when a refreshed view differs from recomputation.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
from pathlib import Path

import duckdb

from bench import lakes, report
from bench.run import SUPPORTED, WORKLOADS, Config, run_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def default_sfs() -> list[float]:
    """SF 0.1 and 1, and SF 3 "when the machine allows": DuckDB generates TPC-H in memory and
    the heaviest recomputations (Q9, Q18) hold a few GiB at SF 3."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    return [0.1, 1.0, 3.0] if memory >= 8 * 2**30 else [0.1, 1.0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--sf",
        type=float,
        nargs="+",
        default=default_sfs(),
        help="scale factors (default 0.1 and 1, and 3 with 8 GiB of memory or more)",
    )
    parser.add_argument(
        "--queries",
        nargs="+",
        default=list(SUPPORTED),
        choices=SUPPORTED,
        help="TPC-H query numbers; 13_inner: Q13 with an inner join (default: all)",
    )
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--reps", type=int, default=3, help="repetitions (medians are reported)")
    parser.add_argument(
        "--history",
        type=int,
        default=3,
        help="batches of the same workload each view is refreshed by auto (untimed) before"
        " the measured one, so auto decides on the view's own measurements (0: the model)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs", help="where benchmarks.md and charts go"
    )
    parser.add_argument("--cache", type=Path, default=lakes.CACHE, help="TPC-H lake templates")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "bench" / "results", help="raw JSON results"
    )
    parser.add_argument(
        "--no-scaling",
        action="store_true",
        help="skip the fixed-size batches at the smaller scale factors",
    )
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: rewrite the report and charts from the --results JSON",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.history < 0:
        parser.error("--history must be at least 0")

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    if args.report_only:
        results, environment = report.read_json(args.results / "latest.json")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "benchmarks.md").write_text(report.markdown(results, environment))
        written = [] if args.no_chart else report.charts(results, args.out)
        log(f"wrote {args.out / 'benchmarks.md'} {' '.join(str(p) for p in written)}")
        return 0 if all(r.equal for r in results.runs) else 1
    environment = {
        "command": "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "duckdb": duckdb.__version__,
        "cpus": os.cpu_count(),
        "load_before": _load(),
        "reps": args.reps,
        "history": args.history,
    }
    config = Config(
        sfs=args.sf,
        queries=args.queries,
        workloads=args.workloads,
        reps=args.reps,
        history=args.history,
        scaling=not args.no_scaling,
        cache=args.cache,
    )
    results = run_benchmark(config, log)
    environment["load_after"] = _load()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "benchmarks.md").write_text(report.markdown(results, environment))
    report.write_json(results, environment, args.results / "latest.json")
    written = [] if args.no_chart else report.charts(results, args.out)
    log(f"wrote {args.out / 'benchmarks.md'}, {args.results / 'latest.json'}")
    for path in written:
        log(f"wrote {path}")
    if not args.no_chart and not written:
        log("no chart: matplotlib is not installed")
    different = [r for r in results.runs if not r.equal]
    if different:
        log(f"{len(different)} refreshed views differ from recomputation")
        return 1
    return 0
