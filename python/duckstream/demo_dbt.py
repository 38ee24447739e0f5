"""`make demo`: the integration tests' shop, maintained by dbt with ``incremental_ivm``.

In ./demo: create the sources in a DuckLake, ``dbt seed`` and ``dbt run`` (first build), commit
a batch of source changes, ``dbt run`` again (incremental refreshes, each model's log line says
what it did), ``dbt test`` (every model equals a recomputation), and time the incremental run
against ``dbt run --full-refresh`` of the same models.

    python -m duckstream.demo_dbt [--dir demo] [--scale 10] [--threads 4]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import shutil
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# The models downstream of the (unchanged) staging views: dbt-incremental and incremental_ivm.
MAINTAINED = ("--select", "path:models/intermediate", "path:models/marts", "--threads", "4")


def maintained(threads: int = 4) -> tuple[str, ...]:
    """:data:`MAINTAINED` run with ``threads`` threads.

    >>> maintained(1)[-2:]
    ('--threads', '1')
    """
    return (*MAINTAINED[:-1], str(threads))


LAKE_VARIABLE = "DUCKSTREAM_LAKE_DIR"
CATALOG_VARIABLE = "DUCKSTREAM_LAKE_CATALOG"
IVM_ACTIONS = ("built", "rebuilt", "incremental", "up to date", "recomputed", "unchanged")
WAITING = re.compile(r", (\d+) of them waiting")


@dataclass
class Invocation:
    """One dbt command: success, wall time, and per node (status, message, seconds)."""

    args: list[str]
    success: bool
    seconds: float
    nodes: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    # per node that returned rows (``dbt show``): the names of their columns
    columns: dict[str, list[str]] = field(default_factory=dict)
    # the process's CPU time during the command (all its threads: dbt's and DuckDB's), which
    # other work on a shared machine does not inflate as it does wall time
    cpu_seconds: float = 0.0
    # of it, from the first node's start to the last node's end: the nodes' work without
    # dbt's start-up (parsing the project, the adapter's connection, the relation cache)
    nodes_cpu_seconds: float = 0.0

    def ivm_seconds(self) -> float:
        """Time spent in incremental_ivm models (their messages say what they did)."""
        return sum(
            seconds
            for _, message, seconds in self.nodes.values()
            if message.startswith(IVM_ACTIONS)
        )

    def ivm_waiting_seconds(self) -> float:
        """Of :meth:`ivm_seconds`, the time the models spent waiting for other models'
        statements (``--threads``: one DuckDB statement at a time per process), as their
        messages say (``..., 480 ms, 120 of them waiting``)."""
        return sum(
            float(found.group(1)) / 1000
            for _, message, _ in self.nodes.values()
            if message.startswith(IVM_ACTIONS) and (found := WAITING.search(message)) is not None
        )


def find_project() -> Path:
    """The repository's integration_tests/ dbt project."""
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (base / "integration_tests" / "dbt_project.yml").is_file():
            return base / "integration_tests"
    raise SystemExit("duckstream demo: integration_tests/ not found (run from the repository)")


@dataclass
class Shop:
    """A copy of the integration tests' project in ``root/project``, its DuckLake in
    ``root/lake``; runs dbt in-process and the project's scripts on the lake."""

    project: Path
    lake: Path
    # the lake's DuckLake catalog when not the file in ``lake`` (``postgres:dbname=...``):
    # $DUCKSTREAM_LAKE_CATALOG for the profile and the scripts
    catalog: str | None = None

    @classmethod
    def create(cls, root: Path, source: Path | None = None) -> Shop:
        """Copy the project into a fresh ``root``."""
        shutil.rmtree(root, ignore_errors=True)
        project = root / "project"
        shutil.copytree(
            source or find_project(),
            project,
            ignore=shutil.ignore_patterns("target", "logs", "lake", "dbt_packages", "__pycache__"),
        )
        (root / "lake").mkdir(parents=True)
        shop = cls(project, root / "lake")
        if (project / "packages.yml").exists():  # local packages only: no network
            installed = shop.dbt("deps")
            assert installed.success, installed.nodes
        return shop

    def dbt(self, *args: str) -> Invocation:
        """Run one dbt command in-process (dbtRunner); the profile finds the lake by
        ``$DUCKSTREAM_LAKE_DIR``, set for the call."""
        from dbt.cli.main import dbtRunner

        log: list[str] = []
        nodes_cpu: list[float] = []  # the process's CPU time at the first node's start, and
        # at each node's end

        def collect(event: Any) -> None:
            name = event.info.name
            if name in ("AdapterEventInfo", "AdapterEventWarning"):
                log.append(event.info.msg)
            elif (name == "NodeStart" and not nodes_cpu) or name == "NodeFinished":
                nodes_cpu.append(time.process_time())

        project = str(self.project)
        argv = [*args, "--project-dir", project, "--profiles-dir", project, "--quiet"]
        started, cpu = time.perf_counter(), time.process_time()
        with self._environment():
            result = dbtRunner(callbacks=[collect]).invoke(argv)
        invocation = Invocation(
            list(args),
            result.success,
            time.perf_counter() - started,
            log=log,
            cpu_seconds=time.process_time() - cpu,
            nodes_cpu_seconds=nodes_cpu[-1] - nodes_cpu[0] if nodes_cpu else 0.0,
        )
        for node in getattr(result.result, "results", None) or []:
            if getattr(node, "node", None) is None:  # run-operation's result: no node
                continue
            invocation.nodes[node.node.name] = (
                str(node.status),
                str(node.message or ""),
                float(node.execution_time or 0.0),
            )
            table = getattr(node, "agate_table", None)
            if table is not None:
                invocation.columns[node.node.name] = [str(name) for name in table.column_names]
        return invocation

    def connect(self) -> Any:
        """A DuckDB connection with the lake attached as ``lake`` (close it before dbt runs)."""
        with self._environment():
            return self.script("lake").connect(str(self.lake))

    @contextlib.contextmanager
    def _environment(self) -> Generator[None]:
        """``$DUCKSTREAM_LAKE_DIR`` (and ``$DUCKSTREAM_LAKE_CATALOG``) set for the lake."""
        wanted = {LAKE_VARIABLE: str(self.lake), CATALOG_VARIABLE: self.catalog}
        previous = {name: os.environ.get(name) for name in wanted}
        try:
            for name, value in wanted.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            yield
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def setup_sources(self, scale: int = 1) -> None:
        self._with_lake("setup_sources", scale=scale)

    def apply_changes(self, batch: int) -> dict[str, int]:
        return self._with_lake("apply_changes", batch=batch)

    def script(self, name: str) -> ModuleType:
        """Import ``scripts/<name>.py`` of the project (the scripts import each other)."""
        scripts = str(self.project / "scripts")
        if scripts not in sys.path:
            sys.path.insert(0, scripts)
        spec = importlib.util.spec_from_file_location(name, self.project / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def _with_lake(self, work: str, **kwargs: Any) -> Any:
        con = self.connect()
        try:
            return getattr(self.script(work), work)(con, **kwargs)
        finally:
            con.close()


def show(title: str, invocation: Invocation, only: str | None = None) -> None:
    state = "ok" if invocation.success else "FAILED"
    print(f"\n$ dbt {' '.join(invocation.args)}   [{state}, {invocation.seconds:.1f} s]")
    shown = 0
    for name, (status, message, seconds) in sorted(invocation.nodes.items()):
        if only is None or only in message or status not in ("success", "pass"):
            print(f"  {name:28s} {status:8s} {message}  ({seconds:.2f} s)")
            shown += 1
    if shown < len(invocation.nodes):
        print(f"  ... and {len(invocation.nodes) - shown} more nodes, all {title}: ok")
    if not invocation.success:
        raise SystemExit(f"duckstream demo: `dbt {' '.join(invocation.args)}` failed ({title})")


TARGET = 1 / 3  # the incremental run's share of the full refresh's time it aims at


def summary(incremental: Invocation, full: Invocation) -> str:
    """The demo's last line: the incremental_ivm models' summed times in the incremental run
    against the full refresh, each less the time the models waited for one another's
    statements (their own work; the sums with the waits follow), the CPU time the process
    spent while the models ran (all its threads, dbt's start-up left out: on a machine shared
    with other work, wall times grow with that work, CPU times much less), and the whole
    commands' wall and CPU times. Says whether the incremental run took at most
    :data:`TARGET` of the full refresh, by model times and by the models' CPU.

    >>> inc = Invocation(["run"], True, 4.0, {"m": ("success", "incremental: ...", 1.0)},
    ...                  cpu_seconds=2.0, nodes_cpu_seconds=1.0)
    >>> full = Invocation(["run"], True, 5.0, {"m": ("success", "rebuilt: ...", 2.0)},
    ...                   cpu_seconds=3.0, nodes_cpu_seconds=2.0)
    >>> print(summary(inc, full).strip())  # doctest: +NORMALIZE_WHITESPACE
    incremental_ivm models: incremental run 1.00 s, full refresh 2.00 s (0.50 of it; summed
    model times less waiting for other models' statements, with it 1.00 s and 2.00 s); CPU
    while the models ran 1.0 s and 2.0 s (0.50 of it); whole dbt commands 4.0 s and 5.0 s
    with start-up, CPU 2.0 s and 3.0 s; target 0.33 of the full refresh: missed (0.50 by
    model times, 0.50 by CPU)
    """
    own = [i.ivm_seconds() - i.ivm_waiting_seconds() for i in (incremental, full)]
    ratio = own[0] / own[1] if own[1] else float("nan")
    nodes = [i.nodes_cpu_seconds for i in (incremental, full)]
    cpu = nodes[0] / nodes[1] if nodes[1] else float("nan")
    verdict = "met" if max(ratio, cpu) <= TARGET else "missed"
    return (
        f"\nincremental_ivm models: incremental run {own[0]:.2f} s, full refresh {own[1]:.2f} s"
        f" ({ratio:.2f} of it; summed model times less waiting for other models' statements,"
        f" with it {incremental.ivm_seconds():.2f} s and {full.ivm_seconds():.2f} s);"
        f" CPU while the models ran {nodes[0]:.1f} s and {nodes[1]:.1f} s ({cpu:.2f} of it);"
        f" whole dbt commands {incremental.seconds:.1f} s and {full.seconds:.1f} s with start-up,"
        f" CPU {incremental.cpu_seconds:.1f} s and {full.cpu_seconds:.1f} s;"
        f" target {TARGET:.2f} of the full refresh: {verdict} ({ratio:.2f} by model times,"
        f" {cpu:.2f} by CPU)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="demo", help="working directory (recreated)")
    parser.add_argument("--scale", type=int, default=10, help="source size (1: 3000 orders)")
    parser.add_argument(
        "--threads", type=int, default=4, help="dbt threads of the incremental and full runs"
    )
    args = parser.parse_args(argv)
    shop = Shop.create(Path(args.dir).resolve())
    shop.setup_sources(scale=args.scale)
    print(f"sources created in {shop.lake} (scale {args.scale})")
    show("seed", shop.dbt("seed"))
    show("first build", shop.dbt("run"))
    changed = shop.apply_changes(batch=1)
    print("\nsource changes committed: " + ", ".join(f"{k} {v}" for k, v in changed.items()))
    incremental = shop.dbt("run", *maintained(args.threads))
    show("incremental run", incremental)
    show("tests", shop.dbt("test"), only="FAIL")
    full = shop.dbt("run", *maintained(args.threads), "--full-refresh")
    show("full refresh", full, only="rebuilt")
    print(summary(incremental, full))
    print(f"demo project kept in {shop.project}")


if __name__ == "__main__":
    main()
