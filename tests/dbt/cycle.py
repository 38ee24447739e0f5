"""One full cycle of the integration project under ``--threads N``, in its own process.

    python tests/dbt/cycle.py DIR --threads 4 [--scale 1]

Sources, ``dbt build`` (seed, views, models, every ``ivm_equivalent`` test), one batch of
source changes, ``dbt build`` again (incremental refreshes), ``dbt build --full-refresh``: all
with ``--threads N``. Exits 0 when every node of every build succeeded or passed, 1 (with the
failed nodes on stderr) otherwise; a crash or a hang shows as the process dying or not ending
(tests/dbt/test_dbt_threads.py runs it under a time limit).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from duckstream.demo_dbt import Shop


def cycle(root: Path, threads: int, scale: int = 1) -> list[str]:
    """Problems of one cycle in ``root`` (recreated): ``[]`` when all went well."""
    shop = Shop.create(root)
    shop.setup_sources(scale=scale)
    problems: list[str] = []
    for step, args in (
        ("first build", ()),
        ("changes", ()),
        ("incremental build", ()),
        ("full refresh", ("--full-refresh",)),
    ):
        if step == "changes":
            shop.apply_changes(1)
            continue
        build = shop.dbt("build", "--threads", str(threads), *args)
        failed = {n: v for n, v in build.nodes.items() if v[0] not in ("success", "pass")}
        if not build.success or failed or not build.nodes:
            problems.append(f"{step}: success={build.success} {failed}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    problems = cycle(args.dir.resolve(), args.threads, args.scale)
    for problem in problems:
        print(problem, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
