"""How a refresh is chosen, for every engine: the strategies, and the cost model behind
``strategy='auto'`` (incremental refresh or full rebuild?).

Engine-free: each engine's runner estimates a window's changes from its own catalog (DuckLake:
:mod:`duckstream.engines.ducklake.estimate`; Iceberg: :mod:`duckstream.engines.iceberg.estimate`)
as one
:class:`SourceEstimate` per source, and :func:`decide` compares the two paths in *rows read*,
because both are dominated by scans. What each path scans comes from the plan
(:mod:`duckstream.scans`: ``plan.maintain_reads``, ``plan.rebuild_reads``); without it, the
view is taken for a plain join that reads each source once (:func:`join_reads`).

* full refresh: every scan of the rebuild reads its source whole:
  ``full = sum(rows of the source of each rebuild scan)``;
* incremental: a fixed cost per refresh (its statements, the writes to the view's table and
  cursors, the commit), then every changed source's inserted rows and the data files holding
  its deleted rows (deletions are positional or file-level: reading the deleted rows scans
  the files they sit in), then each scan of the delta terms that the window's changes enable
  (a term guarded by a source that did not change does not run):
  ``incr = overhead + sum_changed(inserted + scanned) + sum_scans(reach * rows of its
  source)``. ``reach`` is the part of a scanned table the term cannot prune: deleted or
  updated rows are scattered over the key range and prune nothing (``delete_reach``);
  appended rows carry fresh keys, and the semi-join filters on the materialized changes let
  scans restricted by those keys skip nearly everything (``insert_reach``; what remains is
  mostly dimension tables joined by other columns, read whole). A scan aggregated before any
  restriction by the changes (a decorrelated subquery's grouped derived table, a global
  aggregate recomputed) reads its whole table: reach 1.

Auto picks full when ``incr > margin * full``, or when any source changed by more than
``max_fraction`` of its rows.

The constants are fitted on one machine; on another a rebuild may cost more or less against a
refresh. So each view also keeps its own measurements (:class:`History`): every path a refresh
or a fill runs records how long it took, with the cost the model gave it, in the commit of
the view's cursors. Once the view has measured both paths, auto compares their measured times
instead, the refresh's scaled by its estimated cost (:func:`calibrate`): ``incr_ms = last
incremental ms * incr / its incr`` against ``full_ms = last rebuild ms`` (scaled the same way
when that rebuild was estimated too). A view whose refresh was never measured (a fill records
the rebuild) tries it once when the model puts its reads, the fixed cost left out, within
``explore`` times the rebuild's: the fixed cost is the same whatever the view, while a
rebuild's cost a row is not (dbt's dedup idiom, a window function's sort over 150K orders,
rebuilds at SF 0.1 in as long as a refresh's fixed cost, which the model puts at 10x the
rows), so only the measured times can say whether it is worth paying.

The catalog counts rows written, not rows changed in the columns the view reads: an update of
a column the view does not read counts as a delete and an insert, which net to nothing. So
when the estimate picks the rebuild, but would not were the cheaply copied updated sources to
net to nothing (:func:`sources_to_net`), auto first copies their netted changes, cheapest
first, as the incremental refresh would anyway, and decides again on the exact counts
(:func:`decide_netted`; a copy is paid, so its scan no longer counts). It stops at the first
copy that still holds changes when the rebuild still wins. Changes that net to nothing leave
the view as it is: the refresh only advances the cursors.

>>> ten_rows = {"t": SourceEstimate("t", rows=1_000_000, inserted=10)}
>>> decide(ten_rows, Policy()).strategy  # the fixed cost outweighs a rebuild of 1M rows
'full'
>>> decide(ten_rows, Policy(overhead_rows=0)).strategy
'incremental'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from statistics import median
from typing import NamedTuple

from duckstream.plan import Read

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
    change copies, the cursor update, the commit), what a recomputation spends on about 1.5M
    rows; appended keys leave about a tenth of the joined rows to read. Deleted or updated
    keys prune no file, but a scan filtered by them costs less per row than the rebuild's
    joins and aggregates: 0.4, fitted by ``python -m bench.fit_policy`` over every run of
    one SF 0.1 and one SF 1 benchmark (1.0, a rebuild's cost a row, picked the rebuild for
    updates of customer, part and supplier that refreshed 1.2-2.2x faster). Set
    ``overhead_rows=0`` to keep small views incremental regardless of the fixed cost.
    ``net_first``: the most a source's change copy may cost, as a part of the rebuild's rows
    plus ``overhead_rows``, for auto to copy it before it settles on a rebuild (0: never;
    0.3 copies Q13's customer updates at SF 0.1 and 1, and Q21's lineitem updates, whose
    copies net to nothing, but not Q17's or Q18's, whose do not); ``copy_rows``: a copy's
    fixed cost (its statements, the change feed's two reads: 8-10 ms); ``copy_reach``: what
    a copy's read of one row costs against a rebuild's row (copying 0.1% of lineitem's rows
    updated at SF 1 took 90-110 ms, reading the 6M rows of the files that hold them, whatever
    the columns; the rebuilds spend 15-25 ms per 1M rows).
    """

    insert_reach: float = 0.1
    use_measurements: bool = True  # False: the model alone decides (:func:`calibrate`)
    explore: float = 4.0  # 0: never try an unmeasured refresh the model says is slower
    delete_reach: float = 0.4
    overhead_rows: int = 1_500_000
    max_fraction: float = 0.10
    margin: float = 1.0
    net_first: float = 0.3
    copy_rows: int = 400_000
    copy_reach: float = 0.8


@dataclass(frozen=True)
class Measured:
    """One run of a path: how long it took (ms, from the first statement after the window
    pin to the cursors' record, the commit left out: the same for both paths) and the cost
    the model gave it (rows read; None when it ran without an estimate: a fill, or a path
    that was requested)."""

    path: str  # "incremental" or "full"
    ms: float
    cost: float | None = None


@dataclass(frozen=True)
class History:
    """A view's typical time on each path, from its newest runs (None: not measured, or not
    recently)."""

    full: Measured | None = None
    incremental: Measured | None = None

    @classmethod
    def from_dict(cls, fields: dict | None) -> History:
        """The history ``dataclasses.asdict`` wrote (None: an empty one)."""
        found = fields or {}
        full, incremental = found.get("full"), found.get("incremental")
        return cls(
            None if full is None else Measured(**full),
            None if incremental is None else Measured(**incremental),
        )

    @classmethod
    def of(cls, newest_first: Iterable[Measured], runs: int = 3) -> History:
        """Each path's typical time over its newest ``runs`` runs in ``newest_first``: the
        median, each run's time scaled to the newest run's cost when every one has a cost
        (a refresh without one, a requested path, is left out: it cannot be scaled). One
        run alone can mislead: a busy machine, or a change that happened to be cheap
        (TPC-H Q19's refresh costs 2-4x more when its changed parts pass the filter).

        >>> History.of([Measured("incremental", 5.0), Measured("full", 9.0)])  # no cost
        History(full=Measured(path='full', ms=9.0, cost=None), incremental=None)
        >>> runs = [Measured("incremental", 40.0, 2.0), Measured("incremental", 90.0, 1.0),
        ...         Measured("incremental", 10.0, 1.0), Measured("incremental", 1.0, 1.0)]
        >>> History.of(runs).incremental  # 40, 180 and 20 at cost 2; the fourth too old
        Measured(path='incremental', ms=40.0, cost=2.0)
        """
        found: dict[str, list[Measured]] = {"full": [], "incremental": []}
        for m in newest_first:
            kept = found.get(m.path)
            if kept is None or len(kept) >= runs or (m.path == "incremental" and not m.cost):
                continue
            kept.append(m)
        return cls(_typical(found["full"]), _typical(found["incremental"]))


def _typical(newest_first: list[Measured]) -> Measured | None:
    """The median run of ``newest_first`` (see :meth:`History.of`), at the newest's cost."""
    if not newest_first:
        return None
    newest = newest_first[0]
    cost = newest.cost
    if cost and all(m.cost for m in newest_first):
        times = [m.ms * cost / m.cost for m in newest_first if m.cost]
    else:
        times = [m.ms for m in newest_first]
    return replace(newest, ms=round(median(times), 3))


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


class Phase(NamedTuple):
    """One phase of a refresh (:attr:`RefreshReport.phases`): its name, how long it took
    (seconds, wall clock) and how many statements it ran.

    The names follow the plan's steps (:mod:`duckstream.plan`), not the SQL: ``check`` (is a
    transaction open?), ``settings`` (the statistics guard, on the way in and out), ``begin``,
    ``pin`` (the window, or a rebuild's snapshot), ``estimate`` (auto's reads of the catalog),
    ``changes <source>`` (a change copy), ``count`` (are the copies empty?), ``netting`` (auto
    counting its copies), ``delta`` (each temporary table of the delta, one entry each),
    ``apply`` (each statement writing the view, one entry each), ``cursors`` (the measurement
    and the cursors' record), ``commit``, ``guard`` (a run-time flag read), ``after commit``
    (statements after the commit, e.g. a rebuild's re-layout), ``cleanup``. Consecutive
    statements of one phase (not ``delta`` or ``apply``) make one entry."""

    name: str
    seconds: float
    statements: int


def phases_text(phases: Sequence[Phase]) -> str:
    """``phases`` on one line, for a log.

    >>> phases_text([Phase("pin", 0.0042, 3), Phase("commit", 0.0191, 1)])
    'pin 4.2 ms (3), commit 19.1 ms (1)'
    """
    return ", ".join(f"{p.name} {p.seconds * 1000:.1f} ms ({p.statements})" for p in phases)


@dataclass
class RefreshReport:
    """What one refresh did: the strategy taken, why, the estimate, and how long it took
    (``phases``: where the time went, in order, statements included: :class:`Phase`)."""

    strategy: str  # "incremental" or "full": what ran
    requested: str  # "auto", "incremental" or "full"
    reason: str
    sources: dict[str, SourceEstimate] = field(default_factory=dict)
    incremental_cost: float | None = None  # estimated rows read by each path
    full_cost: float | None = None
    estimate_seconds: float = 0.0
    elapsed: float = 0.0  # seconds, estimate included
    # The exact changes after netting, when auto copied them before deciding (sources: the
    # catalog's estimate, which the decision started from).
    netted: dict[str, SourceEstimate] | None = None
    by_fraction: bool = False  # a source changed by more than max_fraction: a rebuild, always
    history: History | None = None  # the view's measurements auto decided with (calibrate)
    phases: list[Phase] = field(default_factory=list)

    @property
    def statements(self) -> int:
        """How many statements the refresh ran (its phases')."""
        return sum(p.statements for p in self.phases)

    @property
    def change_rows(self) -> dict[str, int]:
        """Estimated changed rows (inserted + deleted; an update counts twice) per source."""
        return {name: s.changed for name, s in self.sources.items()}


def join_reads(sources: Iterable[str]) -> list[Read]:
    """The scans of a plain join of ``sources`` that reads each once: the term of each
    source's changes scans every other source once. The cost model's assumption when a plan
    does not list its scans.

    >>> [(r.table, sorted(r.when[0])) for r in join_reads(["a", "b"])]
    [('b', ['a']), ('a', ['b'])]
    """
    names = list(dict.fromkeys(sources))
    return [Read(o, (frozenset({s}),)) for s in names for o in names if o != s]


def decide(
    sources: dict[str, SourceEstimate],
    policy: Policy,
    reads: Sequence[Read] | None = None,
    rebuild: Sequence[Read] | None = None,
) -> RefreshReport:
    """The choice for one window, from the estimated changes of every source; ``reads`` and
    ``rebuild``: the scans of the incremental refresh and of the rebuild (the plan's
    ``maintain_reads`` and ``rebuild_reads``; None: a plain join, each source read once)."""
    changed = {name: s for name, s in sources.items() if s.changed}
    if not changed:
        return RefreshReport("incremental", "auto", "no source changed", sources, 0.0, 0.0)

    def rows(name: str) -> int:
        found = sources.get(name)
        return found.rows if found is not None else 0

    if rebuild is None:
        full = float(sum(s.rows for s in sources.values()))
    else:
        full = float(sum(rows(r.table) for r in rebuild))
    incremental = float(policy.overhead_rows)
    incremental += sum(s.inserted + s.scanned for s in changed.values())
    scans = 0
    for read in join_reads(sources) if reads is None else reads:
        if not read.runs(changed):
            continue
        scans += 1
        if read.whole:
            reach = 1.0
        elif any(changed[n].deleted for n in read.enabled_by(changed) or changed):
            reach = policy.delete_reach
        else:
            reach = policy.insert_reach
        incremental += reach * rows(read.table)
    summary = ", ".join(
        f"{name.rsplit('.', 1)[-1]} +{s.inserted:,}/-{s.deleted:,} ({s.fraction:.2%})"
        for name, s in changed.items()
    )
    biggest = max(changed.values(), key=lambda s: s.fraction)
    if biggest.fraction > policy.max_fraction:
        reason = (
            f"{summary}: {biggest.source} changed more than {policy.max_fraction:.0%} of its rows"
        )
        return RefreshReport("full", "auto", reason, sources, incremental, full, by_fraction=True)
    ratio = incremental / max(full, 1.0)
    verdict = "full" if ratio > policy.margin else "incremental"
    reason = (
        f"{summary}: incremental reads ~{ratio:.2f}x the rows of a rebuild"
        f" ({incremental:,.0f} in {scans} scans with a fixed {policy.overhead_rows:,},"
        f" against {full:,.0f})"
    )
    return RefreshReport(verdict, "auto", reason, sources, incremental, full)


def sources_to_net(
    report: RefreshReport,
    policy: Policy,
    reads: Sequence[Read] | None = None,
    rebuild: Sequence[Read] | None = None,
) -> list[str]:
    """The changed sources whose changes auto copies, netted, before it settles on the rebuild
    ``report`` chose, cheapest first (``reads``, ``rebuild``: as for :func:`decide`).

    Only a source with as many rows inserted as deleted can net to nothing (an update), and
    only when the rebuild would lose were they all to do so is any worth copying. A copy must
    cost at most ``policy.net_first`` of the rebuild: its rows plus ``overhead_rows`` (a
    rebuild pays statements and a commit too; on small tables they are most of its time). A
    copy costs ``copy_rows``, then ``copy_reach`` for each of its inserted rows and each row
    of the files holding its deleted rows.

    >>> customer = SourceEstimate("customer", 150_000, 150, 150, 150_000)
    >>> supplier = SourceEstimate("supplier", 10_000, 10, 10, 10_000)
    >>> sources = {s.source: s for s in (customer, supplier)}
    >>> full = RefreshReport("full", "auto", "", sources, 9_000_000.0, 8_000_000.0)
    >>> sources_to_net(full, Policy())
    ['supplier', 'customer']
    >>> sources_to_net(full, Policy(net_first=0))
    []

    Appended orders cannot net away, and alone they keep the rebuild:

    >>> orders = SourceEstimate("orders", 1_500_000, 750_000, 0, 0)
    >>> full.sources["orders"] = orders
    >>> sources_to_net(full, Policy())
    []
    """
    if report.strategy != "full" or report.full_cost is None:
        return []
    cost = {
        name: policy.copy_rows + policy.copy_reach * (s.inserted + s.scanned)
        for name, s in report.sources.items()
        if s.inserted == s.deleted > 0
    }
    rebuild_cost = report.full_cost + policy.overhead_rows
    cheap = [name for name, c in cost.items() if c <= policy.net_first * rebuild_cost]
    if not cheap:
        return []
    best = {
        name: SourceEstimate(name, s.rows) if name in cheap else s
        for name, s in report.sources.items()
    }
    without = calibrate(decide(best, policy, reads, rebuild), history_of(report), policy)
    if without.strategy == "full":
        return []
    return sorted(cheap, key=cost.__getitem__)


def decide_netted(
    estimated: RefreshReport,
    counts: dict[str, tuple[int, int]],
    policy: Policy,
    reads: Sequence[Read] | None = None,
    rebuild: Sequence[Read] | None = None,
) -> RefreshReport:
    """Decide again once some changes are copied: ``counts`` holds the netted ``(inserted,
    deleted)`` rows of the sources copied (read already: nothing left to scan); the others
    keep the catalog's estimate, ``estimated`` (which picked the rebuild).

    >>> customer = {"customer": SourceEstimate("customer", 150_000, 150, 150, 150_000)}
    >>> full = RefreshReport("full", "auto", "customer +150/-150 (0.20%): ...", customer)
    >>> decide_netted(full, {"customer": (0, 0)}, Policy()).reason
    'customer +150/-150 (0.20%): ...; after netting: no change in the columns the view reads'
    """
    netted = {
        name: SourceEstimate(name, s.rows, *counts[name]) if name in counts else s
        for name, s in estimated.sources.items()
    }
    if any(s.changed for s in netted.values()):
        report = calibrate(decide(netted, policy, reads, rebuild), history_of(estimated), policy)
        why = report.reason
    else:
        report = RefreshReport("incremental", "auto", "", {}, 0.0, estimated.full_cost)
        why = "no change in the columns the view reads"
    report.reason = f"{estimated.reason}; after netting: {why}"
    report.sources, report.netted = estimated.sources, netted
    return report


def history_of(report: RefreshReport) -> History:
    """The measurements ``report`` was decided with (none when it was not calibrated)."""
    return report.history or History()


def calibrate(report: RefreshReport, history: History, policy: Policy) -> RefreshReport:
    """``report`` (the model's choice) decided again on the view's own measurements.

    With both paths measured, the times decide: the refresh's last time scaled by the
    estimated cost of this window against its own, against the last rebuild's time (scaled
    too when it had an estimate). With only the rebuild measured, and the refresh's reads
    beyond the fixed ``policy.overhead_rows`` at most ``policy.explore`` times the
    rebuild's, the refresh is tried, to be measured. Anything else stays as the model chose
    (no estimate; more than ``max_fraction`` changed).

    >>> model = RefreshReport("full", "auto", "model", {}, 3_000_000.0, 2_000_000.0)
    >>> fill = Measured("full", 200.0)
    >>> calibrate(model, History(fill), Policy()).strategy  # the refresh was never measured
    'incremental'
    >>> calibrate(model, History(fill), Policy(explore=0)).strategy
    'full'
    >>> small = RefreshReport("full", "auto", "model", {}, 1_530_000.0, 150_000.0)
    >>> calibrate(small, History(fill), Policy()).strategy  # 30,000 rows beyond the fixed cost
    'incremental'
    >>> seen = History(fill, Measured("incremental", 60.0, 1_500_000.0))
    >>> calibrate(model, seen, Policy()).reason  # 60 ms * 3M / 1.5M: 120 ms, against 200 ms
    'model; measured: a refresh ~120 ms (60 ms at cost 1,500,000), a rebuild ~200 ms'
    """
    report = replace(report, history=history)
    incremental_cost, full_cost = report.incremental_cost, report.full_cost
    if report.requested != "auto" or not incremental_cost or not full_cost or report.by_fraction:
        return report
    if not policy.use_measurements:
        return report
    if history.full is None:
        return report
    full_ms = history.full.ms
    if history.full.cost:
        full_ms *= full_cost / history.full.cost
    if history.incremental is None or history.incremental.cost is None:
        beyond_fixed = max(incremental_cost - policy.overhead_rows, 0.0)
        tried = policy.explore > 0 and beyond_fixed <= policy.explore * full_cost
        if report.strategy == "full" and tried:
            why = (
                f"; measured: a rebuild ~{full_ms:,.0f} ms, a refresh never: trying it"
                f" (its fixed cost left out, at most {policy.explore:g}x the rebuild's rows)"
            )
            return replace(report, strategy="incremental", reason=report.reason + why)
        return report
    measured = history.incremental
    assert measured.cost is not None
    incremental_ms = measured.ms * incremental_cost / measured.cost
    strategy = "full" if incremental_ms > policy.margin * full_ms else "incremental"
    why = (
        f"; measured: a refresh ~{incremental_ms:,.0f} ms ({measured.ms:,.0f} ms at cost"
        f" {measured.cost:,.0f}), a rebuild ~{full_ms:,.0f} ms"
    )
    return replace(report, strategy=strategy, reason=report.reason + why)
