"""dbt runs with several threads: every model equal to a recomputation, no error, no hang.

dbt-duckdb runs dbt's threads on cursors of one DuckDB database; DuckLake does not survive two
of them running statements at once (dbt.adapters.duckstream.connections serialises them).
Opt in to the stress test with ``DUCKSTREAM_STRESS=1``: it runs the integration project's full
cycle (tests/dbt/cycle.py: build, changes, build, full refresh, every ivm_equivalent test)
``DUCKSTREAM_STRESS_CYCLES`` times (default 20) under ``--threads 4`` and ``--threads 8``, each
cycle in its own process under ``DUCKSTREAM_STRESS_SECONDS`` (default 600): a crash or a hang
fails the cycle instead of the test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbt.adapters.duckdb", reason="needs dbt-core and dbt-duckdb")

from dbt.adapters.duckstream import connections  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CYCLE = Path(__file__).with_name("cycle.py")
STRESS = os.environ.get("DUCKSTREAM_STRESS") == "1"


def run_cycle(root: Path, threads: int, seconds: float) -> str:
    """Run one cycle in a process of its own; ``""`` when it passed, else what went wrong."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "python"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = [sys.executable, str(CYCLE), str(root), "--threads", str(threads)]
    try:
        done = subprocess.run(
            command, env=env, cwd=root.parent, capture_output=True, text=True, timeout=seconds
        )
    except subprocess.TimeoutExpired:
        return f"hung: no end after {seconds:.0f} s"
    if done.returncode != 0:
        return f"exit code {done.returncode}: {done.stderr[-2000:]}"
    return ""


@pytest.mark.skipif(not STRESS, reason="stress test: set DUCKSTREAM_STRESS=1")
@pytest.mark.parametrize("threads", [4, 8])
def test_full_cycles_under_threads(tmp_path: Path, threads: int) -> None:
    cycles = int(os.environ.get("DUCKSTREAM_STRESS_CYCLES", "20"))
    seconds = float(os.environ.get("DUCKSTREAM_STRESS_SECONDS", "600"))
    failures = {}
    for n in range(cycles):
        problem = run_cycle(tmp_path / f"cycle{n}", threads, seconds)
        if problem:
            failures[n] = problem
    assert not failures, f"{len(failures)} of {cycles} cycles failed: {failures}"


def test_statements_of_two_threads_never_overlap(lake) -> None:
    """The serialised cursor holds the lock through each statement, not the fetch after."""
    import threading

    inside = []
    real = lake

    class Probe:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def execute(self, *args: object) -> object:
            inside.append(connections.STATEMENTS._is_owned())  # type: ignore[attr-defined]
            return real.execute(*args)

    cursor = connections.SerializedCursor(Probe())
    assert cursor.execute("SELECT 42").fetchone() == (42,)
    assert inside == [True]
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with connections.STATEMENTS:
            held.set()
            release.wait(5)

    other = threading.Thread(target=hold)
    other.start()
    held.wait(5)
    blocked = threading.Thread(target=cursor.execute, args=("SELECT 1",))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # waits for the other thread's statement
    release.set()
    blocked.join(5)
    other.join(5)
    assert not blocked.is_alive() and inside == [True, True]
