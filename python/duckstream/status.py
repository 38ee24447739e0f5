"""What ``python -m duckstream status`` shows of a catalog's maintained views, for any engine.

Each engine reads its catalog's metadata into :class:`ViewStatus` records (DuckLake:
:mod:`duckstream.engines.ducklake.status`, Iceberg: :mod:`duckstream.engines.iceberg.status`):
per view its cursors, how far behind its sources it is (snapshots committed to them after its
cursors, and since when), and its newest refreshes with their history entries
(:mod:`duckstream.history`). :func:`status_text` prints them.

>>> t = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
>>> entry = Entry("full", "auto", "t +9/-0 (50.00%): ...", {"l.m.t": 9}, 18, 9, ms=41.0)
>>> view = ViewStatus("l.m.v", {"l.m.t": 7}, [Refresh(8, t, entry)])
>>> print(status_text([view], now=t + datetime.timedelta(minutes=2)))
view | behind | last refresh | path | ms | recent paths
l.m.v | up to date | 2m ago (snapshot 8) | rebuild | 41 | rebuild
l.m.v: cursors l.m.t at 7
  snapshot 8, 2m ago: rebuild (auto: t +9/-0 (50.00%): ...), in 9, out +18 -9, 41 ms
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from duckstream.history import Entry
from duckstream.strategy import Measured


@dataclass(frozen=True)
class Refresh:
    """One commit that recorded a view's cursors: a refresh, a rebuild or the first build."""

    snapshot: int
    at: datetime.datetime
    entry: Entry | None  # its history entry (None: run as plain SQL)

    @property
    def measured(self) -> Measured | None:
        """The path and its time, as auto reads them."""
        e = self.entry
        return None if e is None else Measured(e.path, e.ms, e.cost)

    @property
    def outcome(self) -> str:
        return "sql" if self.entry is None else self.entry.outcome


@dataclass
class ViewStatus:
    """One maintained view: its cursors, how far behind its sources it is, its refreshes."""

    view: str  # catalog.schema.name
    cursors: dict[str, int]  # source -> the snapshot the view has caught up to
    refreshes: list[Refresh] = field(default_factory=list)  # newest first
    pending: int = 0  # snapshots after the cursors that changed one of its sources
    behind_since: datetime.datetime | None = None  # the oldest of them (None: up to date)

    @property
    def last(self) -> Refresh:
        return self.refreshes[0]


def status_text(statuses: list[ViewStatus], now: datetime.datetime | None = None) -> str:
    """``statuses`` as a table for a terminal: per view its lag, its last refresh and the
    paths of its recent ones; then, per view, its cursors and its recent refreshes one a
    line: the path, why, rows in and out, time."""
    if not statuses:
        return "no maintained views"
    now = now or datetime.datetime.now(datetime.UTC)
    lines = ["view | behind | last refresh | path | ms | recent paths"]
    details = []
    for s in statuses:
        behind = (
            "up to date"
            if s.behind_since is None
            else f"{s.pending} snapshots, oldest {_ago(now, s.behind_since)} ago"
        )
        if not s.refreshes:
            lines.append(f"{s.view} | {behind} | - | - | - | -")
            continue
        last = s.last
        ms = f"{last.entry.ms:.0f}" if last.entry else "-"
        recent = " ".join(r.outcome.replace(" ", "-") for r in s.refreshes)
        lines.append(
            f"{s.view} | {behind} | {_ago(now, last.at)} ago (snapshot {last.snapshot})"
            f" | {last.outcome} | {ms} | {recent}"
        )
        cursors = ", ".join(f"{source} at {snapshot}" for source, snapshot in s.cursors.items())
        details.append(f"{s.view}: cursors {cursors or 'none (it reads only the clock)'}")
        details += [f"  {line}" for line in (_refresh_line(r, now) for r in s.refreshes)]
    return "\n".join(lines + details)


def _refresh_line(r: Refresh, now: datetime.datetime) -> str:
    head = f"snapshot {r.snapshot}, {_ago(now, r.at)} ago"
    e = r.entry
    if e is None:
        return f"{head}: run as plain SQL (no entry)"
    why = ": ".join(p for p in (e.requested, e.reason) if p)
    because = f" ({why})" if why else ""
    return f"{head}: {e.outcome}{because}, {e.rows_text()}, {e.ms:.0f} ms"


def _ago(now: datetime.datetime, then: datetime.datetime) -> str:
    """A duration, coarsely.

    >>> t = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    >>> [_ago(t + datetime.timedelta(seconds=s), t) for s in (5, 300, 7200, 200000)]
    ['5s', '5m', '2h', '2d']
    """
    seconds = max((now - then).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def age(text: str) -> datetime.timedelta:
    """``7d``, ``12h``, ``30m`` as a duration (``--older-than``).

    >>> age("7d"), age("90m")
    (datetime.timedelta(days=7), datetime.timedelta(seconds=5400))
    """
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isdigit():
        raise ValueError(f"duckstream: older than takes 7d, 12h or 30m, not {text!r}")
    return datetime.timedelta(**{_UNITS[unit]: int(number)})


def older_than(text: str | None) -> datetime.datetime | None:
    """The time ``text`` (an :func:`age`) ago; None for None (no bound)."""
    return None if text is None else datetime.datetime.now(datetime.UTC) - age(str(text))
