"""Command line: ``python -m duckstream compile "<sql>"`` prints the plan's statements."""

from __future__ import annotations

import argparse
import sys

import sqlglot

from duckstream.compiler import compile_ivm
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
    print(f"-- features: {', '.join(sorted(plan.features))}")
    for step, statements in plan.statements().items():
        print(f"\n-- {step}")
        for statement in statements:
            try:
                text = sqlglot.transpile(
                    statement, read=args.dialect, write=args.dialect, pretty=True
                )[0]
            except sqlglot.errors.SqlglotError:
                text = statement
            print(text + ";")
    return 0
