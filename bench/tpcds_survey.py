"""Survey: which of the 99 TPC-DS queries duckstream maintains, checked against recomputation.

``python -m bench.tpcds_survey [--sf 0.01] [--queries 1-99] [--out survey.jsonl]``

For every query, two variants: ``limit`` (DuckDB's text as is, top-level ORDER BY/LIMIT kept)
and ``bag`` (those removed, as tests/test_tpcds.py maintains it). Each variant is compiled
with the TPC-DS schema; one that compiles is set up on a copy of one loaded lake, refreshed
through ``duckstream.testing.tpcds.WINDOWS`` and compared with recomputation as a multiset
after setup and after every refresh. Records the view's row count after each check: a view
empty throughout shows little. Each variant runs in its own process (a crash
or a hang costs one query, not the survey), one process at a time. Prints one JSON line per
variant (also written to ``--out``) and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

FRACTION = 0.02
SPILL_LIMIT = "4GB"


def progress(query: int, variant: str, phase: str) -> None:
    """Tell the parent (on stderr) what the child is doing, for the record of a timeout."""
    print(f"q{query} {variant}: {phase}", file=sys.stderr, flush=True)


def run_one(query: int, variant: str, template: str, work: str) -> dict:
    """Compile, set up and maintain one variant of one query; the record of what happened."""
    from duckstream.errors import UnsupportedSQLError
    from duckstream.testing.differential import DuckLakeHarness
    from duckstream.testing.ducklake import connect_ducklake
    from duckstream.testing.tpcds import WINDOWS, WORKLOADS, tpcds_query, tpcds_schema

    view = tpcds_query(query, keep_limit=variant == "limit")
    record: dict = {"query": query, "variant": variant}
    start = time.perf_counter()
    phase = "compile"
    progress(query, variant, phase)
    con = None
    try:
        directory = Path(work) / "lake"
        shutil.copytree(template, directory)
        con = connect_ducklake(str(directory), alias="dl")
        # A refresh whose plan goes wrong can spill tens of GB (Q72 did): fail it instead.
        con.execute(f"SET temp_directory = '{Path(work) / 'spill'}'")
        con.execute(f"SET max_temp_directory_size = '{SPILL_LIMIT}'")
        harness = DuckLakeHarness(con)
        try:
            plan = harness.compile(view, mv_name=f"q{query}", schema=tpcds_schema())
        except UnsupportedSQLError as error:
            record.update(status="unsupported", feature=error.feature, error=error.message)
            return record
        record["compile_s"] = round(time.perf_counter() - start, 3)
        record["features"] = sorted(plan.features)
        record["rows"] = []
        phase = "setup"
        progress(query, variant, phase)
        t = time.perf_counter()
        harness.setup(plan)
        record["setup_s"] = round(time.perf_counter() - t, 3)
        phase = "check after setup"
        progress(query, variant, phase)
        harness.check(plan, view, "after setup")
        record["rows"].append(len(harness.rows(view)))
        rng = random.Random(query)
        record["refresh_s"] = []
        for n, window in enumerate(WINDOWS, 1):
            phase = f"workloads of window {n}"
            progress(query, variant, phase)
            for workload in window:
                WORKLOADS[workload](con, "dl", rng, FRACTION)
            phase = f"refresh {n}"
            progress(query, variant, phase)
            t = time.perf_counter()
            harness.refresh(plan)
            record["refresh_s"].append(round(time.perf_counter() - t, 3))
            phase = f"check after window {n}"
            progress(query, variant, phase)
            harness.check(plan, view, f"after window {n} ({', '.join(window) or 'no changes'})")
            record["rows"].append(len(harness.rows(view)))
        record["status"] = "pass"
    except AssertionError as error:
        record.update(status="wrong", phase=phase, error=str(error)[:3000])
    except Exception as error:
        status = "compile_error" if phase == "compile" else "crash"
        record.update(
            status=status,
            phase=phase,
            error=f"{type(error).__name__}: {str(error)[:3000]}",
            where=traceback.format_exc(limit=-3)[-2000:],
        )
    finally:
        if con is not None:
            con.close()
        record["total_s"] = round(time.perf_counter() - start, 3)
    return record


def make_template(sf: float, directory: Path) -> None:
    from duckstream.testing.ducklake import connect_ducklake
    from duckstream.testing.tpcds import load_tpcds

    con = connect_ducklake(str(directory), alias="dl")
    load_tpcds(con, "dl", sf)
    con.close()


def parse_queries(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


def summary(records: list[dict]) -> str:
    lines = []
    for variant in ("limit", "bag"):
        by_status: dict[str, list[int]] = defaultdict(list)
        features: Counter = Counter()
        for r in records:
            if r["variant"] == variant:
                by_status[r["status"]].append(r["query"])
                if r["status"] == "unsupported":
                    features[r["feature"]] += 1
        lines.append(f"[{variant}]")
        for status, queries in sorted(by_status.items()):
            lines.append(f"  {status} ({len(queries)}): {' '.join(map(str, sorted(queries)))}")
        lines.append(f"  unsupported features: {dict(features.most_common())}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tpcds_survey")
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--queries", default="1-99")
    parser.add_argument("--variants", default="limit,bag")
    parser.add_argument("--out", default="tpcds_survey.jsonl")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--child", nargs=3, metavar=("QUERY", "VARIANT", "TEMPLATE"))
    args = parser.parse_args(argv)
    if args.child:
        query, variant, template = args.child
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(run_one(int(query), variant, template, work)))
        return 0
    records = []
    with tempfile.TemporaryDirectory() as scratch, open(args.out, "w") as out:
        template = Path(scratch) / "template"
        make_template(args.sf, template)
        for query in parse_queries(args.queries):
            for variant in args.variants.split(","):
                command = [sys.executable, "-m", "bench.tpcds_survey", "--child"]
                command += [str(query), variant, str(template)]
                start = time.perf_counter()
                try:
                    done = subprocess.run(
                        command, capture_output=True, text=True, timeout=args.timeout
                    )
                    lines = done.stdout.strip().splitlines()
                    if done.returncode == 0 and lines:
                        record = json.loads(lines[-1])
                    else:
                        error = f"exit {done.returncode}: {done.stderr[-2000:]}"
                        record = {"query": query, "variant": variant, "status": "crash"}
                        record["error"] = error
                except subprocess.TimeoutExpired as expired:
                    record = {"query": query, "variant": variant, "status": "timeout"}
                    stderr = expired.stderr or b""
                    text = stderr.decode() if isinstance(stderr, bytes) else stderr
                    record["phase"] = (text.strip().splitlines() or ["?"])[-1]
                record["process_s"] = round(time.perf_counter() - start, 3)
                record["sf"] = args.sf
                records.append(record)
                out.write(json.dumps(record) + "\n")
                out.flush()
                brief = {k: record.get(k) for k in ("query", "variant", "status", "feature")}
                print(json.dumps(brief), record.get("total_s"), flush=True)
    print(summary(records))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
