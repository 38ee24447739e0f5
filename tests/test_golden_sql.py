"""Golden generated SQL: what ``python -m duckstream compile`` prints for a handful of views
per operator, per engine, kept in ``tests/golden/<engine>/<view>.sql``.

A change to the generated SQL fails here with a unified diff and shows up in review as a diff
of these files. When the change is meant, rewrite them::

    DUCKSTREAM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_sql.py

Each file starts with the command that prints it. The DuckDB scripts are also run statement
by statement with plain ``con.execute`` on a DuckLake catalog, through changes to every
table, and the view checked against recomputation after each ``maintain``: the golden SQL is
known to run.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import shlex
from pathlib import Path

import pytest
import sqlglot

from duckstream.cli import main
from duckstream.plan import PROTOCOL
from test_plan_sql import CHANGES, create_orders_and_customers, execute_all, rows
from test_plan_sql import VIEW as JOIN_AGGREGATE

GOLDEN = Path(__file__).parent / "golden"
ENGINES = ("duckdb", "spark")
UPDATE = bool(os.environ.get("DUCKSTREAM_UPDATE_GOLDEN"))

# In DuckDB SQL; the Spark files compile sqlglot's transpilation to Spark SQL.
VIEWS = {
    "scan_project": "SELECT id, customer, amount * 2 AS doubled FROM orders",
    "filter": "SELECT id, amount FROM orders WHERE amount >= 10 AND customer <> 2",
    "join_two_tables": (
        "SELECT o.id, o.amount, c.region FROM orders AS o JOIN customers AS c ON o.customer = c.id"
    ),
    "join_three_tables": (
        "SELECT o.id, c.region, r.manager FROM orders AS o"
        " JOIN customers AS c ON o.customer = c.id JOIN regions AS r ON c.region = r.name"
    ),
    # each side's filter also narrows the changed keys the other side is read for
    "join_filtered": (
        "SELECT o.id, c.region FROM orders AS o JOIN customers AS c ON o.customer = c.id"
        " WHERE o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)"
    ),
    "distinct": "SELECT DISTINCT customer FROM orders",
    "group_by_aggregates": (
        "SELECT customer, sum(amount) AS total, count(*) AS n, count(amount) AS counted,"
        " avg(amount) AS mean, min(amount) AS lowest, max(amount) AS highest"
        " FROM orders GROUP BY customer"
    ),
    "global_aggregate": (
        "SELECT count(*) AS n, sum(amount) AS total, max(amount) AS highest FROM orders"
    ),
    "join_aggregate": JOIN_AGGREGATE,
    "derived_table": (
        "SELECT t.customer, t.total"
        " FROM (SELECT customer, sum(amount) AS total FROM orders GROUP BY customer) AS t"
        " WHERE t.total > 15"
    ),
    "cte": (
        "WITH large AS (SELECT customer, amount FROM orders WHERE amount >= 10)"
        " SELECT customer, count(*) AS n FROM large GROUP BY customer"
    ),
    # a CTE read twice (TPC-H Q15's shape): on DuckDB its delta and its old state (read whole
    # by max()) are made once, into temporary tables both reads use; Spark inlines it
    "shared_cte": (
        "WITH totals AS (SELECT customer, sum(amount) AS total FROM orders GROUP BY customer)"
        " SELECT customer, total FROM totals WHERE total = (SELECT max(total) FROM totals)"
    ),
    "having": (
        "SELECT customer, sum(amount) AS total FROM orders GROUP BY customer"
        " HAVING sum(amount) > 20"
    ),
    # a constant relation joined to a table: its delta is empty, so only the orders' changes
    "constant_spine": (
        "SELECT s.customer, count(o.id) AS orders FROM (VALUES (1), (2), (3)) AS s(customer)"
        " LEFT JOIN orders AS o ON o.customer = s.customer GROUP BY s.customer"
    ),
    # the rows kept merged with the changes; the input renumbered only when they cannot decide
    "top_k": "SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 2",
    # mixed case, a reserved word, non-ASCII letters: quoted as each engine needs
    "quoted_names": (
        'SELECT "Group", count(*) AS "N", sum("Maß") AS "Summe" FROM "Größe" GROUP BY "Group"'
    ),
}

# The tables the views read beyond test_plan_sql's orders and customers, and changes to them.
MORE_TABLES = [
    "CREATE TABLE dl.main.regions (name VARCHAR, manager VARCHAR)",
    "INSERT INTO dl.main.regions VALUES ('north', 'ada'), ('west', 'bo'), ('east', 'cy')",
    'CREATE TABLE dl.main."Größe" ("Group" VARCHAR, "Maß" INTEGER)',
    """INSERT INTO dl.main."Größe" VALUES ('a', 1), ('a', 2), ('b', 5)""",
]
MORE_CHANGES = [
    [
        "UPDATE dl.main.regions SET manager = 'di' WHERE name = 'north'",
        "INSERT INTO dl.main.regions VALUES ('south', 'ed')",
        """INSERT INTO dl.main."Größe" VALUES ('c', 7), ('a', 3)""",
    ],
    [
        "DELETE FROM dl.main.regions WHERE name = 'west'",
        """UPDATE dl.main."Größe" SET "Maß" = "Maß" + 10 WHERE "Group" = 'a'""",
        """DELETE FROM dl.main."Größe" WHERE "Group" = 'b'""",
    ],
]


def command(engine: str, name: str) -> list[str]:
    """The ``python -m duckstream`` arguments that print the golden file of ``name``."""
    view = VIEWS[name]
    if engine == "spark":
        view = sqlglot.transpile(view, read="duckdb", write="spark")[0]
    return ["compile", "--dialect", engine, view]


def generate(engine: str, name: str) -> str:
    """The golden file's text: the command, then what it prints."""
    argv = command(engine, name)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(argv) == 0
    return f"-- {shlex.join(['python', '-m', 'duckstream', *argv])}\n{printed.getvalue()}"


def golden_path(engine: str, name: str) -> Path:
    return GOLDEN / engine / f"{name}.sql"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_generated_sql_matches_the_golden_file(engine: str, name: str) -> None:
    path = golden_path(engine, name)
    generated = generate(engine, name)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated, encoding="utf-8")
        return
    golden = path.read_text(encoding="utf-8") if path.exists() else ""
    if generated != golden:
        diff = "".join(
            difflib.unified_diff(
                golden.splitlines(keepends=True),
                generated.splitlines(keepends=True),
                fromfile=str(path.relative_to(GOLDEN.parent)),
                tofile="generated",
            )
        )
        pytest.fail(
            f"the generated SQL differs from {path.name} (if meant: DUCKSTREAM_UPDATE_GOLDEN=1"
            f" rewrites the golden files):\n{diff}",
            pytrace=False,
        )


def test_every_golden_file_has_a_view() -> None:
    files = {(p.parent.name, p.stem) for p in GOLDEN.glob("*/*.sql")}
    assert files == {(engine, name) for engine in ENGINES for name in VIEWS}


def statements_by_step(script: str) -> dict[str, list[str]]:
    """A DuckDB golden script's statements, by protocol step (the ``-- <step>`` headers the
    CLI prints; every statement ends with ``;`` at the end of a line)."""
    steps: dict[str, list[str]] = {}
    for section in script.split("\n-- ")[1:]:
        step, _, body = section.partition("\n")
        if step in PROTOCOL:
            steps[step] = [s.strip() for s in body.split(";\n") if s.strip()]
    assert list(steps) == list(PROTOCOL), "a golden script holds every protocol step"
    return steps


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_duckdb_golden_script_maintains_the_view(lake, name: str) -> None:
    """Run the DuckDB golden file itself, statement by statement."""
    script = statements_by_step(golden_path("duckdb", name).read_text(encoding="utf-8"))
    create_orders_and_customers(lake)
    execute_all(lake, MORE_TABLES)
    lake.execute("USE dl.main")  # the view's unqualified tables, for recomputation
    execute_all(
        lake,
        [*script["create_cursors_table"], *script["create_mv"], *script["initialize_cursors"]],
    )
    (query_mv,) = script["query_mv"]
    assert rows(lake, query_mv) == rows(lake, VIEWS[name])
    for changes in [*CHANGES, *MORE_CHANGES]:
        execute_all(lake, changes)
        execute_all(lake, script["maintain"])
        assert rows(lake, query_mv) == rows(lake, VIEWS[name])
