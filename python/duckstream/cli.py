"""Command line: ``python -m duckstream compile "<sql>"`` prints the plan as a runnable script.

Every protocol step, in order (``create_cursors_table``, ``create_mv``,
``initialize_cursors``, ``maintain``, ``query_mv``), as the plain SQL the engine renders: on
DuckDB, with the DuckLake catalog attached, the script builds the view, maintains it once and
reads it; ``maintain`` alone is what to run after each batch of source changes. ``--pretty``
reformats each statement with sqlglot (for reading; the default is the exact rendering).

``python -m duckstream explain "<sql>" [--schema JSON-or-file] [--engine duckdb|spark]`` says
how the view is maintained, per operator (:mod:`duckstream.explain`).

``python -m duckstream status <lake>`` lists the maintained views of a DuckLake catalog (a lake
directory as ``attach_ducklake`` lays it out, or an ATTACH target such as
``ducklake:postgres:dbname=lake``): how far behind its sources each is, and its recent
refreshes (the path, why, rows in and out, how long it took), read from the catalog's snapshot
log; ``--engine spark <warehouse> --namespace db``: the same for an Iceberg namespace.

``python -m duckstream expire <lake>`` expires the DuckLake catalog's snapshots that no
maintained view needs (older than every view's cursors into it and the commits holding them:
:mod:`duckstream.engines.ducklake.expire`); ``--older-than 7d`` keeps a week of time travel
too, ``--dry-run`` only says what, ``--cleanup`` deletes the files only expired snapshots
used; ``--engine spark <warehouse> --namespace db``: the same for an Iceberg namespace's views
and the tables they read (:mod:`duckstream.engines.iceberg.expire`)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

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
    explain_cmd = commands.add_parser("explain", help="how a view is maintained, per operator")
    explain_cmd.add_argument("sql", help="the view's SELECT (or - to read it from stdin)")
    explain_cmd.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    explain_cmd.add_argument(
        "--schema", help="the sources' columns, sqlglot's {table: {column: type}}: JSON or a file"
    )
    explain_cmd.add_argument("--mv-name", default="mv")
    explain_cmd.add_argument("--mv-catalog", default=None, help="default: dl (duckdb), lake")
    explain_cmd.add_argument("--mv-schema", default=None, help="default: main (duckdb), db")
    explain_cmd.add_argument("--json", action="store_true", help="print it as JSON")
    status_cmd = commands.add_parser("status", help="list a catalog's maintained views")
    status_cmd.add_argument(
        "lake",
        help="a lake directory, or a DuckLake ATTACH target; with --engine spark, the"
        " warehouse directory of a local session's Iceberg catalog",
    )
    status_cmd.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    status_cmd.add_argument("--catalog", default="lake", help="the name to attach it as")
    status_cmd.add_argument("--data-path", help="DATA_PATH, for an ATTACH target")
    status_cmd.add_argument("--namespace", default="db", help="the Iceberg namespace (spark)")
    status_cmd.add_argument("--recent", type=int, default=5, help="refreshes to list per view")
    expire_cmd = commands.add_parser(
        "expire", help="expire a DuckLake's snapshots that no maintained view needs"
    )
    expire_cmd.add_argument(
        "lake",
        help="a lake directory, or a DuckLake ATTACH target; with --engine spark, the"
        " warehouse directory of a local session's Iceberg catalog",
    )
    expire_cmd.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    expire_cmd.add_argument(
        "--namespace", nargs="+", default=["db"], help="the Iceberg namespaces (spark)"
    )
    expire_cmd.add_argument("--catalog", default="lake", help="the name to attach it as")
    expire_cmd.add_argument("--data-path", help="DATA_PATH, for an ATTACH target")
    expire_cmd.add_argument(
        "--also",
        nargs="*",
        default=[],
        metavar="LAKE",
        help="other lake directories whose views read this one (attached as lake1, lake2...)",
    )
    expire_cmd.add_argument(
        "--older-than", help="only snapshots older than this too: 7d, 12h, 30m (time travel kept)"
    )
    expire_cmd.add_argument("--dry-run", action="store_true", help="say what, expire nothing")
    expire_cmd.add_argument(
        "--cleanup", action="store_true", help="then delete files only expired snapshots used"
    )
    args = parser.parse_args(argv)
    if args.command == "expire":
        return expire(args)
    if args.command == "status" and args.engine == "spark":
        return spark_status(args.lake, args.catalog, args.namespace, args.recent)
    if args.command == "status":
        return status(args.lake, args.catalog, args.data_path, args.recent)
    if args.command == "explain":
        return explain(args)
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


def _attach(con: Any, lake: str, catalog: str, data_path: str | None, read_only: bool) -> bool:
    """Attach the DuckLake at ``lake`` (a directory or an ATTACH target) as ``catalog``; False
    (and a message) when there is none."""
    from duckstream.connection import literal
    from duckstream.engines.ducklake.extension import load_extension
    from duckstream.lake import attach_ducklake, quote

    if lake.startswith("ducklake:"):
        load_extension(con, "ducklake")
        if lake.startswith("ducklake:postgres:"):  # a catalog in PostgreSQL
            load_extension(con, "postgres")
        options = ["READ_ONLY"] if read_only else []
        options += [f"DATA_PATH {literal(data_path)}"] if data_path else []
        suffix = f" ({', '.join(options)})" if options else ""
        con.execute(f"ATTACH {literal(lake)} AS {quote(catalog)}{suffix}")
        return True
    if (Path(lake) / "metadata.ducklake").is_file():
        attach_ducklake(con, lake, catalog)
        return True
    print(f"duckstream: no DuckLake at {lake!r} (no metadata.ducklake)", file=sys.stderr)
    return False


def status(lake: str, catalog: str, data_path: str | None, recent: int) -> int:
    import duckdb

    from duckstream.engines.ducklake.status import status_text, views_status

    con = duckdb.connect()
    try:
        if not _attach(con, lake, catalog, data_path, read_only=True):
            return 2
        print(status_text(views_status(con, catalog, recent)))
    finally:
        con.close()
    return 0


def expire(args: argparse.Namespace) -> int:
    import duckdb

    from duckstream.engines.ducklake.expire import expire as expire_snapshots
    from duckstream.status import older_than

    try:
        bound = older_than(args.older_than)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if args.engine == "spark":
        return _spark_expire(args, bound)
    con = duckdb.connect()
    try:
        if not _attach(con, args.lake, args.catalog, args.data_path, read_only=False):
            return 2
        for k, other in enumerate(args.also, start=1):
            if not _attach(con, other, f"lake{k}", None, read_only=True):
                return 2
        done = expire_snapshots(
            con, args.catalog, bound, dry_run=args.dry_run, cleanup=args.cleanup
        )
        print(done.text(args.dry_run))
    finally:
        con.close()
    return 0


def explain(args: argparse.Namespace) -> int:
    from duckstream.explain import explain as explained

    spark = args.engine == "spark"
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    schema = None
    if args.schema:
        path = Path(args.schema)
        text = path.read_text() if path.is_file() else args.schema
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as error:
            print(f"duckstream: --schema is neither a file nor JSON: {error}", file=sys.stderr)
            return 2
    try:
        found = explained(
            sql,
            mv_name=args.mv_name,
            mv_catalog=args.mv_catalog or ("lake" if spark else "dl"),
            mv_schema=args.mv_schema or ("db" if spark else "main"),
            dialect=args.engine,
            schema=schema,
        )
    except DuckstreamError as error:
        print(f"duckstream: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found.as_dict(), indent=2) if args.json else found.text())
    return 0


def _spark_expire(args: argparse.Namespace, older_than: datetime.datetime | None) -> int:
    """``expire`` of Iceberg namespaces, in a local Spark session over the warehouse (on a
    cluster, call :func:`duckstream.engines.iceberg.expire.expire` with your own session)."""
    from duckstream.engines.iceberg.expire import expire
    from duckstream.engines.iceberg.session import local_session

    if not Path(args.lake).is_dir():
        print(f"duckstream: no warehouse directory at {args.lake!r}", file=sys.stderr)
        return 2
    spark = local_session(str(Path(args.lake).resolve()))
    for done in expire(spark, args.catalog, args.namespace, older_than, dry_run=args.dry_run):
        print(done.text(args.dry_run))
    return 0


def spark_status(warehouse: str, catalog: str, namespace: str, recent: int) -> int:
    """The status of an Iceberg namespace, in a local Spark session over ``warehouse`` (its
    catalog is ``lake``; on a cluster, call
    :func:`duckstream.engines.iceberg.status.views_status` with your own session)."""
    from duckstream.engines.iceberg.session import local_session
    from duckstream.engines.iceberg.status import views_status
    from duckstream.status import status_text

    if not Path(warehouse).is_dir():
        print(f"duckstream: no warehouse directory at {warehouse!r}", file=sys.stderr)
        return 2
    spark = local_session(str(Path(warehouse).resolve()))
    print(status_text(views_status(spark, catalog, namespace, recent)))
    return 0
