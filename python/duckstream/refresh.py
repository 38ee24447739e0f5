"""How a refresh is chosen, for every engine: the strategies, and the cost model behind
``strategy='auto'`` (incremental refresh or full rebuild?).

Engine-free: each engine's runner estimates a window's changes from its own catalog (DuckLake:
:mod:`duckstream.engines.ducklake.estimate`; Iceberg: :mod:`duckstream.engines.iceberg.estimate`)
as one
:class:`SourceEstimate` per source, and :func:`decide` compares the two paths in *rows read*,
because both are dominated by scans:

* full refresh: every source is scanned once: ``full = sum(rows of each source)``;
* incremental: a fixed cost per refresh (its statements, the writes to the view's table and
  cursors, the commit), then for every source ``s`` that changed, its delta term reads the
  inserted rows, the data files holding its deleted rows (deletions are positional or
  file-level: reading the deleted rows scans the files they sit in) and the other sources it
  joins with: ``incr = overhead + sum_s(inserted_s + scanned_s + reach_s * rows of the
  other sources)``. ``reach`` is the part of a joined source the term cannot prune: deleted or
  updated rows are scattered over the key range and prune nothing (``delete_reach``);
  appended rows carry fresh keys, and the semi-join filters on the materialized changes let
  the scans of the tables joined by those keys skip nearly everything (``insert_reach``; what
  remains is mostly dimension tables joined by other columns, read whole).

Auto picks full when ``incr > margin * full``, or when any source changed by more than
``max_fraction`` of its rows.

>>> ten_rows = {"t": SourceEstimate("t", rows=1_000_000, inserted=10)}
>>> decide(ten_rows, Policy()).strategy  # the fixed cost outweighs a rebuild of 1M rows
'full'
>>> decide(ten_rows, Policy(overhead_rows=0)).strategy
'incremental'
"""

from __future__ import annotations

from dataclasses import dataclass, field

# ``auto``: estimate and pick; ``incremental``: maintain (errors propagate); ``full``: rebuild.
STRATEGIES: tuple[str, ...] = ("auto", "incremental", "full")


def check_strategy(strategy: str) -> None:
    """Raise ``ValueError`` unless ``strategy`` is one of :data:`STRATEGIES`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")


@dataclass(frozen=True)
class Policy:
    """The constants of the cost model (see the module docstring); rows are rows read.

    Calibrated on the TPC-H benchmark in ``bench/`` (SF 0.1 and 1, DuckDB 1.5.5, 2 cores): an
    incremental refresh costs about 40-60 ms before it reads any change (its statements, the
    change copies, the cursor update, the commit), what a recomputation spends on about 2M
    rows; appended keys leave about a tenth of the joined rows to read. Set
    ``overhead_rows=0`` to keep small views incremental regardless of the fixed cost.
    """

    insert_reach: float = 0.1
    delete_reach: float = 1.0
    overhead_rows: int = 2_000_000
    max_fraction: float = 0.10
    margin: float = 1.0


@dataclass(frozen=True)
class SourceEstimate:
    """What the catalog says about one source's changes in the refresh window."""

    source: str
    rows: int  # live rows at the newest snapshot
    inserted: int = 0
    deleted: int = 0
    scanned: int = 0  # rows of the data files that hold the deleted rows

    @property
    def changed(self) -> int:
        return self.inserted + self.deleted

    @property
    def fraction(self) -> float:
        return self.changed / max(self.rows, 1)


@dataclass
class RefreshReport:
    """What one refresh did: the strategy taken, why, the estimate, and how long it took."""

    strategy: str  # "incremental" or "full": what ran
    requested: str  # "auto", "incremental" or "full"
    reason: str
    sources: dict[str, SourceEstimate] = field(default_factory=dict)
    incremental_cost: float | None = None  # estimated rows read by each path
    full_cost: float | None = None
    estimate_seconds: float = 0.0
    elapsed: float = 0.0  # seconds, estimate included

    @property
    def change_rows(self) -> dict[str, int]:
        """Estimated changed rows (inserted + deleted; an update counts twice) per source."""
        return {name: s.changed for name, s in self.sources.items()}


def decide(sources: dict[str, SourceEstimate], policy: Policy) -> RefreshReport:
    """The choice for one window, from the estimated changes of every source."""
    changed = {name: s for name, s in sources.items() if s.changed}
    if not changed:
        return RefreshReport("incremental", "auto", "no source changed", sources, 0.0, 0.0)
    full = float(sum(s.rows for s in sources.values()))
    incremental = float(policy.overhead_rows)
    for name, s in changed.items():
        others = sum(o.rows for n, o in sources.items() if n != name)
        reach = policy.delete_reach if s.deleted else policy.insert_reach
        incremental += s.inserted + s.scanned + reach * others
    summary = ", ".join(
        f"{name.rsplit('.', 1)[-1]} +{s.inserted:,}/-{s.deleted:,} ({s.fraction:.2%})"
        for name, s in changed.items()
    )
    biggest = max(changed.values(), key=lambda s: s.fraction)
    if biggest.fraction > policy.max_fraction:
        reason = (
            f"{summary}: {biggest.source} changed more than {policy.max_fraction:.0%} of its rows"
        )
        return RefreshReport("full", "auto", reason, sources, incremental, full)
    ratio = incremental / max(full, 1.0)
    verdict = "full" if ratio > policy.margin else "incremental"
    reason = (
        f"{summary}: incremental reads ~{ratio:.2f}x the rows of a rebuild"
        f" ({incremental:,.0f} with a fixed {policy.overhead_rows:,}, against {full:,.0f})"
    )
    return RefreshReport(verdict, "auto", reason, sources, incremental, full)
