"""Recursive CTEs on DuckLake: an incremental refresh against a rebuild, over a tree.

``python -m bench.recursive --nodes 100000 --windows 5``: a fresh lake in a temporary
directory with a tree ``cat(id, parent)`` (10 roots, each other node under a smaller id), two
views over it (``paths_all``: every node's root and depth, ``UNION ALL``; ``reach_set``: every
node's root, ``UNION``), each set up twice: one refreshed ``incremental``, one ``full``. Each
window adds 100 leaves (and, unless ``--appends``, deletes 20 leaves); the four refreshes run
in alternating order and are timed by ``time.process_time`` (the CPU time of all threads of
this process: DuckDB's too). Prints the medians per view and strategy as JSON, after checking
that both tables of a view hold the same rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from duckstream import compile_ivm
from duckstream.runtime import refresh, setup
from duckstream.testing.ducklake import connect_ducklake

VIEWS = {
    "paths_all": (
        "WITH RECURSIVE tree(id, root, depth) AS ("
        " SELECT id, id, 0 FROM cat WHERE parent IS NULL"
        " UNION ALL SELECT c.id, tree.root, tree.depth + 1 FROM tree"
        " JOIN cat AS c ON c.parent = tree.id) SELECT id, root, depth FROM tree"
    ),
    "reach_set": (
        "WITH RECURSIVE tree(id, root) AS (SELECT id, id FROM cat WHERE parent IS NULL"
        " UNION SELECT c.id, tree.root FROM tree JOIN cat AS c ON c.parent = tree.id)"
        " SELECT id, root FROM tree"
    ),
}
STRATEGIES = ("incremental", "full")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recursive", description=__doc__)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--appends", action="store_true", help="windows only add leaves")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp()
    con = connect_ducklake(f"{directory}/lake", "dl", 0)
    con.execute(
        "CREATE TABLE dl.main.cat AS SELECT i::INTEGER AS id, CASE WHEN i <= 10 THEN NULL"
        " ELSE hash(i) % (i - 1) + 1 END::INTEGER AS parent"
        f" FROM range(1, {args.nodes + 1}) t(i)"
    )
    plans = {}
    for name, sql in VIEWS.items():
        for strategy in STRATEGIES:
            plan = compile_ivm(sql, mv_name=f"{name}_{strategy}", mv_catalog="dl")
            setup(con, plan)
            plans[name, strategy] = plan
    times: dict[tuple[str, str], list[float]] = {key: [] for key in plans}
    for window in range(args.windows):
        first = 10_000_000 * (window + 1)
        con.execute(
            f"INSERT INTO dl.main.cat SELECT {first} + i,"
            f" hash(i + {window}) % {args.nodes} + 1 FROM range(100) t(i)"
        )
        if not args.appends:
            con.execute(
                "DELETE FROM dl.main.cat WHERE id IN (SELECT id FROM dl.main.cat WHERE id > 10"
                " AND id NOT IN (SELECT parent FROM dl.main.cat WHERE parent IS NOT NULL)"
                f" ORDER BY hash(id + {window}) LIMIT 20)"
            )
        for name in VIEWS:
            for strategy in STRATEGIES if window % 2 == 0 else STRATEGIES[::-1]:
                started = time.process_time()
                refresh(con, plans[name, strategy], strategy=strategy)
                times[name, strategy].append(time.process_time() - started)
    result = {}
    for name, sql in VIEWS.items():
        columns = sql.rsplit("SELECT ", 1)[1].split(" FROM")[0]
        tables = [f"SELECT {columns} FROM dl.main.{name}_{s}" for s in STRATEGIES]
        differ = con.execute(f"({tables[0]} EXCEPT ALL {tables[1]}) UNION ALL"
                             f" ({tables[1]} EXCEPT ALL {tables[0]})").fetchall()  # fmt: skip
        assert not differ, (name, differ[:5])
        result[name] = {s: round(statistics.median(times[name, s]), 3) for s in STRATEGIES}
    print(json.dumps({"nodes": args.nodes, "appends": args.appends, "cpu_seconds": result}))


if __name__ == "__main__":
    main()
