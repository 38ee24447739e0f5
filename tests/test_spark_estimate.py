"""The Spark estimate without Spark: windows read from hand-made Iceberg snapshot logs, the
rebuild reasons, and the choices of the Spark-calibrated policy.

``tests/spark/test_spark_strategy.py`` runs the same on real Iceberg tables.
"""

from __future__ import annotations

import dataclasses
import time

import duckdb
import pytest
import sqlglot

from duckstream import compile_ivm
from duckstream.engines.ducklake.runner import refresh as duckdb_refresh
from duckstream.engines.iceberg.estimate import SparkPolicy, choose, estimate_window
from duckstream.engines.iceberg.window import Snapshot, TableLog, pin
from duckstream.errors import RebuildRequired
from duckstream.plan import PinSnapshot, PinWindow
from duckstream.strategy import Measured, SourceEstimate, decide

MV, T, U = "lake.db.mv", "lake.db.t", "other.s.u"


def _plan():
    view = "SELECT t.k, count(*) AS n FROM db.t AS t JOIN other.s.u AS u ON t.k = u.k GROUP BY t.k"
    sql = sqlglot.transpile(view, read="duckdb", write="spark")[0]
    return compile_ivm(sql, dialect="spark", mv_catalog="lake", mv_schema="db", mv_name="mv")


def _log(*snapshots: tuple[int, str, dict[str, int | str]]) -> TableLog:
    """A linear history: each (id, operation, summary) is the child of the one before; the
    last is current."""
    log, parent = TableLog(None, {}), None
    for snapshot_id, operation, summary in snapshots:
        text = {k: str(v) for k, v in summary.items()}
        log.snapshots[snapshot_id] = Snapshot(snapshot_id, parent, operation, text)
        log.current = parent = snapshot_id
    return log


def _mv(cursors: dict[str, int], *after: tuple[int, str, dict]) -> TableLog:
    properties = {f"duckstream.cursor.{source}": c for source, c in cursors.items()}
    return _log((100, "overwrite", properties), *after)


def _source(rows: int, *window: tuple[int, str, dict]) -> TableLog:
    """A table loaded with ``rows`` rows at snapshot 1 (the cursor), then ``window``."""
    return _log((1, "append", {"added-records": rows, "total-records": rows}), *window)


def test_sources_are_read_from_the_plans_cursor_properties() -> None:
    plan = _plan()
    assert plan.tables == [T, U]
    spec = next(s.spec for s in plan.steps["maintain"] if isinstance(s, PinWindow))
    assert spec.view == MV and [s.table for s in spec.sources] == [T, U]


def test_append_counts_the_added_rows() -> None:
    logs = {
        MV: _mv({T: 1, U: 1}),
        T: _source(1000, (2, "append", {"added-records": 10, "total-records": 1010})),
        U: _source(50),
    }
    assert estimate_window(MV, [T, U], logs) == {
        T: SourceEstimate(T, rows=1010, inserted=10),
        U: SourceEstimate(U, rows=50),
    }


def test_a_copy_on_write_rewrite_counts_the_rewritten_files_and_compactions_nothing() -> None:
    rewrite = {"added-records": 499, "deleted-records": 500, "total-records": 999}
    compaction = {"added-records": 999, "deleted-records": 999, "total-records": 999}
    logs = {
        MV: _mv({T: 1, U: 1}),
        T: _source(1000, (2, "overwrite", rewrite), (3, "replace", compaction)),
        U: _source(50),
    }
    found = estimate_window(MV, [T, U], logs)
    assert isinstance(found, dict)
    assert found[T] == SourceEstimate(T, rows=999, inserted=499, deleted=500, scanned=500)


def test_cursors_come_from_the_views_latest_snapshot_that_is_not_a_compaction() -> None:
    logs = {
        MV: _mv({T: 2, U: 1}, (101, "replace", {})),
        T: _source(1000, (2, "append", {"added-records": 10, "total-records": 1010})),
        U: _source(50),
    }
    found = estimate_window(MV, [T, U], logs)
    assert isinstance(found, dict) and found[T].changed == 0


@pytest.mark.parametrize(
    ("logs", "reason"),
    [
        ({MV: _log((100, "overwrite", {})), T: _source(10), U: _source(5)}, "no cursor for"),
        ({MV: _mv({T: 1, U: 1}), T: TableLog(None, {}), U: _source(5)}, "has no snapshot"),
        (  # re-created: its history no longer holds the cursor
            {MV: _mv({T: 1, U: 1}), T: _log((7, "append", {})), U: _source(5)},
            "no longer in its history",
        ),
        (  # the cursor snapshot expired: the chain stops before reaching it
            {
                MV: _mv({T: 1, U: 1}),
                T: TableLog(3, {3: Snapshot(3, 2, "append", {})}),
                U: _source(5),
            },
            "no longer in its history",
        ),
        (
            {
                MV: _mv({T: 1, U: 1}),
                T: _source(10, (2, "overwrite", {"added-equality-delete-files": 1})),
                U: _source(5),
            },
            "equality delete files",
        ),
    ],
)
def test_rebuild_reasons(logs: dict[str, TableLog], reason: str) -> None:
    found = estimate_window(MV, [T, U], logs)
    assert isinstance(found, str) and reason in found


def _tpch_q3(sf: float, *, rewritten: bool) -> dict[str, SourceEstimate]:
    """Q3's sources after the benchmark's 0.1% batch: appended orders and lineitems, or (with
    ``rewritten``) orders deleted too, which rewrites every data file of both tables."""
    rows = {"customer": 150_000, "orders": 1_500_000, "lineitem": 6_000_000}
    estimates = {}
    for name, n in rows.items():
        n = int(n * sf)
        added = n // 1000 if name != "customer" else 0
        deleted = n if rewritten and name != "customer" else 0
        estimates[name] = SourceEstimate(name, n, added + deleted, deleted, deleted)
    return estimates


def test_the_spark_policy_rebuilds_the_measured_benchmark_and_maintains_big_appends() -> None:
    policy = SparkPolicy()
    for sf in (0.1, 1):  # docs/benchmarks_spark.md: recomputing was faster
        assert decide(_tpch_q3(sf, rewritten=False), policy).strategy == "full"
        assert decide(_tpch_q3(sf, rewritten=True), policy).strategy == "full"
    assert decide(_tpch_q3(10, rewritten=False), policy).strategy == "incremental"
    assert decide(_tpch_q3(10, rewritten=True), policy).strategy == "full"
    assert SparkPolicy(overhead_rows=0).overhead_rows == 0  # tests keep small views incremental


@pytest.mark.parametrize(
    ("measured", "chosen"),
    [
        ((), "full"),  # the model alone: a one-row append to 1,000 rows rebuilds
        ((Measured("full", 900.0),), "incremental"),  # a rebuild measured: the refresh tried
        ((Measured("incremental", 300.0, 12_000_000.0), Measured("full", 900.0)), "incremental"),
        ((Measured("incremental", 3000.0, 12_000_000.0), Measured("full", 900.0)), "full"),
    ],
)
def test_auto_decides_again_on_the_views_measured_refreshes(
    measured: tuple[Measured, ...], chosen: str
) -> None:
    # no Spark: the logs are given, and choose reads nothing else
    logs = {
        MV: dataclasses.replace(_mv({T: 1, U: 1}), measured=measured),
        T: _source(1000, (2, "append", {"added-records": 1, "total-records": 1001})),
        U: _source(50),
    }
    report = choose(None, _plan(), logs=logs)  # type: ignore[arg-type]
    assert report.strategy == chosen, report.reason


def test_the_duckdb_refresh_refuses_a_spark_plan() -> None:
    with pytest.raises(ValueError, match="duckstream.spark.refresh"):
        duckdb_refresh(duckdb.connect(), _plan())


# -- the window pinned from the same logs (window.pin), as the plan's SQL pin would -------
def _spec():
    return next(s.spec for s in _plan().steps["maintain"] if isinstance(s, PinWindow))


def test_the_pin_gives_the_sql_pins_values_and_reads_appends_with_the_append_scan() -> None:
    spec = _spec()
    logs = {
        MV: _mv({T: 1, U: 1}),
        T: _source(1000, (2, "append", {}), (3, "replace", {}), (4, "append", {})),
        U: _source(50),
    }
    pinned = pin(spec, logs)
    prefix = spec.prefix
    assert pinned.values == {
        f"{prefix}end_0": "4",
        f"{prefix}cursor_0": "1",
        f"{prefix}changed_0": "true",
        f"{prefix}end_1": "1",
        f"{prefix}cursor_1": "1",
        f"{prefix}changed_1": "false",
        f"{prefix}changed": "true",
    }
    t_changes, u_changes = (s.changes_view for s in spec.sources)
    assert pinned.appends == {t_changes: (T, 1, 4)}  # appends and a compaction only
    assert pinned.unchanged == {u_changes: U}


def test_a_rebuild_pins_the_snapshots_its_refresh_read() -> None:
    # auto read every source's metadata for its estimate: the rebuild it chose pins those
    # snapshots without loading the tables again (no Spark needed: no session is touched)
    spec = next(s.spec for s in _plan().steps["initialize_cursors"] if isinstance(s, PinSnapshot))
    logs = {
        MV: _mv({T: 1, U: 1}),
        T: _source(1000, (2, "append", {}), (3, "delete", {})),
        U: _source(50, (7, "append", {})),
    }
    values = spec.values(None, logs)  # type: ignore[arg-type]
    prefix = spec.prefix
    assert values == {
        f"{prefix}end_0": "3",
        f"{prefix}cursor_0": "3",
        f"{prefix}end_1": "7",
        f"{prefix}cursor_1": "7",
    }


@pytest.mark.parametrize("operation", ["overwrite", "delete"])
def test_a_window_with_rewrites_is_read_from_the_changelog(operation: str) -> None:
    logs = {
        MV: _mv({T: 1, U: 1}),
        T: _source(10, (2, "append", {}), (3, operation, {})),
        U: _source(5),
    }
    assert pin(_spec(), logs).appends == {}


def test_the_pin_refuses_what_the_sql_check_refuses() -> None:
    """The estimate's rebuild reasons, and a schema changed since the cursor's snapshot
    (``schema_id`` of the cursor snapshot against the table's current schema)."""
    t = _source(10, (2, "append", {}))
    t.snapshots[1] = dataclasses.replace(t.snapshots[1], schema_id=0)
    t.schema_id = 1
    logs = {MV: _mv({T: 1, U: 1}), T: t, U: _source(5)}
    with pytest.raises(RebuildRequired, match="rebuild required: the schema of lake.db.t changed"):
        pin(_spec(), logs)
    assert estimate_window(MV, [T, U], logs) == "the schema of lake.db.t changed"
    t.schema_id = 0
    assert pin(_spec(), logs).appends
    logs[T] = TableLog(None, {})
    with pytest.raises(RebuildRequired, match="has no snapshot"):
        pin(_spec(), logs)


def test_a_window_with_position_deletes_counts_them_and_scans_the_table() -> None:
    """Merge-on-read (position delete files): maintained by reading positions, its deletions
    the position deletes the window added, its scan the whole table (which data files they
    touch only the manifests say)."""
    deletes = {"added-position-deletes": 30, "removed-position-deletes": 10}
    summary = {**deletes, "total-delete-files": 1, "added-records": 4, "total-records": 1000}
    t = _source(10, (2, "overwrite", summary))
    found = estimate_window(MV, [T, U], {MV: _mv({T: 1, U: 1}), T: t, U: _source(5)})
    assert not isinstance(found, str)
    assert (found[T].inserted, found[T].deleted, found[T].scanned) == (4, 20, 1000)


class _Statements:
    """A SparkSession stand-in that only writes down the statements it is given."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    def sql(self, query: str) -> None:
        self.executed.append(query)


@pytest.mark.parametrize(
    ("strategy", "measured", "chosen", "says"),
    [
        ("auto", (), "full", "fixed"),  # the model alone: a one-row append rebuilds
        (
            "auto",
            (Measured("incremental", 300.0, 12_000_000.0), Measured("full", 900.0)),
            "incremental",
            "measured: a refresh ~",
        ),
        (
            "auto",
            (Measured("incremental", 3000.0, 12_000_000.0), Measured("full", 900.0)),
            "full",
            "measured: a refresh ~",
        ),
        ("incremental", (Measured("full", 900.0),), "incremental", "requested"),
    ],
)
def test_a_dbt_model_on_spark_decides_on_its_measured_refreshes_and_records_its_start(
    monkeypatch: pytest.MonkeyPatch,
    strategy: str,
    measured: tuple[Measured, ...],
    chosen: str,
    says: str,
) -> None:
    # The dbt adapter's refresh as the runner's: auto reads the view's measured refreshes
    # (read_logs(measured=True)) and decides on them, and the commit of whichever path ran
    # records the refresh's start and the model's cost (what the next auto measures). No
    # Spark: the logs are given and the steps are only recorded.
    ivm = pytest.importorskip("dbt.adapters.duckstream_spark.ivm")
    from dbt_duckstream.model import ModelRequest, State

    plan, runs = _plan(), measured

    def read(spark: object, view: str, sources: list[str], *, measured: bool = False):
        assert (view, sources) == (MV, [T, U])
        return {  # as window.read_logs: the view's measured refreshes only when asked
            MV: dataclasses.replace(_mv({T: 1, U: 1}), measured=runs if measured else ()),
            T: _source(1000, (2, "append", {"added-records": 1, "total-records": 1001})),
            U: _source(50),
        }

    ran: list[tuple[object, dict]] = []

    def run_steps(spark: object, steps: object, **kwargs: object) -> dict[str, str]:
        ran.append((steps, kwargs))
        return {"x.changed_0": "true", "x.changed_1": "false"}

    from duckstream.engines.iceberg import runner

    monkeypatch.setattr(runner, "read_logs", read)
    monkeypatch.setattr(runner, "run_steps", run_steps)
    monkeypatch.setattr(runner, "check_not_cached", lambda spark, plan: None)
    # a rebuild through the runner's fill would record neither the start nor the cost
    monkeypatch.setattr(ivm, "fill", lambda spark, plan, why: run_steps(spark, "fill"))
    backend = ivm.IcebergBackend.__new__(ivm.IcebergBackend)
    backend.spark = backend.recording = _Statements()
    backend.executed, backend.catalog = [], "lake"
    request = ModelRequest("mv", "", "db", "mv", "select 1", strategy=strategy)
    state = State("incremental", "hash", "select 1", "select 1", ["k", "n"], "0")
    before = int(time.time() * 1000)
    done = backend.refresh(request, plan, state)

    assert done.strategy == chosen
    [(steps, kwargs)] = ran
    assert steps is plan.steps["maintain" if chosen == "incremental" else "initialize_cursors"]
    assert kwargs["logs"] is not None
    started = kwargs["started_ms"]
    assert isinstance(started, int) and before <= started <= int(time.time() * 1000)
    entry = kwargs["entry"]()  # type: ignore[operator]
    assert entry.path == chosen and says in entry.reason, entry.reason
    assert entry.cost  # the model's cost of the path that ran: the next auto scales by it
    if strategy == "auto":
        assert says in done.reason, done.reason
