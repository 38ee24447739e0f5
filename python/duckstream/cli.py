"""Command line: ``python -m duckstream compile "<sql>"`` prints the plan as a runnable script.

Every protocol step, in order (``create_cursors_table``, ``create_mv``,
``initialize_cursors``, ``maintain``, ``query_mv``), as the plain SQL the engine renders: on
DuckDB, with the DuckLake catalog attached, the script builds the view, maintains it once and
reads it; ``maintain`` alone is what to run after each batch of source changes. ``--pretty``
reformats each statement with sqlglot (for reading; the default is the exact rendering)."""

from __future__ import annotations

import argparse
import sys

from duckstream.compiler import compile_ivm
from duckstream.engines import engine_for
from duckstream.errors import DuckstreamError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duckstream", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_cmd = commands.add_parser("compile", help="print the SQL that maintains a view")
    compile_cmd.add_argument("sql", help="the view's SELECT (or - to read it from stdin)")
    compile_cmd.add_argument("--dialect", default="duckdb", choices=["duckdb", "spark"])
    compile_cmd.add_argument("--mv-name", default="mv")
    compile_cmd.add_argument("--mv-catalog", default="dl")
    compile_cmd.add_argument("--mv-schema", default="main")
    compile_cmd.add_argument(
        "--pretty", action="store_true", help="reformat each statement (for reading)"
    )
    args = parser.parse_args(argv)
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    try:
        plan = compile_ivm(
            sql,
            mv_name=args.mv_name,
            mv_catalog=args.mv_catalog,
            mv_schema=args.mv_schema,
            dialect=args.dialect,
        )
    except DuckstreamError as error:
        print(f"duckstream: {error}", file=sys.stderr)
        return 2
    engine = engine_for(args.dialect)
    print(f"-- features: {', '.join(sorted(plan.features))}")
    for step, statements in plan.statements().items():
        print(f"\n-- {step}")
        for statement in statements:
            print(engine.pretty(statement) if args.pretty else statement, end=";\n")
    return 0
