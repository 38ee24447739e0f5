"""What one model run did: the run result's message (one log line) and the SQL it ran.

>>> Outcome("built", rows=120, elapsed_ms=40).message()
'built: 120 rows, 40 ms'
>>> Outcome("incremental", inserted=12, deleted=3, sources_changed=2, snapshots=4,
...         elapsed_ms=38).message()
'incremental: +12 -3 rows from 2 sources, 4 snapshots, 38 ms'
>>> Outcome("incremental", reason="auto: ...", sources_changed=1, rows=9).message()
'incremental (auto: ...): from 1 source, 9 rows, 0 ms'
>>> Outcome("up to date", elapsed_ms=5).message()
'up to date: no source changes, 5 ms'
>>> Outcome("rebuilt", reason="model SQL changed", rows=9, elapsed_ms=5).message()
'rebuilt (model SQL changed): 9 rows, 5 ms'
>>> Outcome("up to date", elapsed_ms=50, waited_ms=12).message()
'up to date: no source changes, 50 ms, 12 of them waiting'
>>> Outcome("unchanged", reason="--empty: the built table is kept", elapsed_ms=2).message()
'unchanged (--empty: the built table is kept): table left as it was, 2 ms'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from duckstream.strategy import phases_text

ACTIONS = ("built", "rebuilt", "incremental", "up to date", "recomputed", "unchanged")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class Outcome:
    """What one materialization did, for the run log and the run result. Counts an engine
    does not know cheaply are ``None`` and left out of the message."""

    action: str  # one of ACTIONS
    reason: str = ""
    rows: int | None = None  # rows of the table after the run
    inserted: int | None = None  # rows inserted into / deleted from the table (incremental)
    deleted: int | None = None
    sources: int = 0
    sources_changed: int = 0
    snapshots: int | None = None  # source snapshots the refresh applied
    elapsed_ms: float = 0.0
    waited_ms: float = 0.0  # of elapsed_ms: waiting for other models' statements (threads)
    replaced: bool = False  # the table is a new table (grants and docs to apply again)
    warnings: list[str] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)  # the statements the run executed
    # where the time went: the core's phases (name, seconds, of them waiting for other
    # models' statements), the engine's inside build or refresh (duckstream.strategy.Phase:
    # name, seconds, statements; waits included)
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    engine_phases: list[Any] = field(default_factory=list)

    def message(self) -> str:
        """One line, e.g. ``incremental: +120 -3 rows from 2 sources, 14 snapshots, 38 ms``;
        with dbt's threads, the time spent waiting for other models' statements is said
        (``38 ms, 12 of them waiting``): it is not this model's work."""
        ms = f"{self.elapsed_ms:.0f} ms"
        if round(self.waited_ms) > 0:
            ms += f", {self.waited_ms:.0f} of them waiting"
        because = f" ({self.reason})" if self.reason else ""
        if self.action == "up to date":
            return f"up to date{because}: no source changes, {ms}"
        if self.action == "unchanged":
            return f"unchanged{because}: table left as it was, {ms}"
        if self.action != "incremental":
            rows = f"{self.rows} rows" if self.rows is not None else "rows unknown"
            return f"{self.action}{because}: {rows}, {ms}"
        parts = []
        if self.inserted is not None and self.deleted is not None:
            parts.append(f"+{self.inserted} -{self.deleted} rows")
        parts.append(f"from {_plural(self.sources_changed, 'source')}")
        line = " ".join(parts)
        if self.snapshots is not None:
            line += f", {_plural(self.snapshots, 'snapshot')}"
        if self.rows is not None:
            line += f", {self.rows} rows"
        return f"incremental{because}: {line}, {ms}"

    def add_phase(self, name: str, seconds: float, waited: float = 0.0) -> None:
        """Count a phase run after the core's (the adapter's): in the time and the phases."""
        self.elapsed_ms += seconds * 1000
        self.waited_ms += waited * 1000
        self.phases.append((name, seconds, waited))

    def profile(self) -> str:
        """Where the run's time went, for dbt's debug log: the core's phases (waits for
        other models' statements said), and the engine's inside its build or refresh
        (statements in parentheses).

        >>> from duckstream.strategy import Phase
        >>> Outcome("up to date", phases=[("look", 0.0041, 0), ("refresh", 0.0123, 0.002)],
        ...         engine_phases=[Phase("pin", 0.0042, 3)]).profile()
        'look 4.1 ms, refresh 12.3 ms (2.0 waiting) [pin 4.2 ms (3)]'
        """
        parts = []
        for name, seconds, waiting in self.phases:
            part = f"{name} {seconds * 1000:.1f} ms"
            if waiting * 1000 >= 0.05:
                part += f" ({waiting * 1000:.1f} waiting)"
            if name in ("build", "refresh") and self.engine_phases:
                part += f" [{phases_text(self.engine_phases)}]"
            parts.append(part)
        return ", ".join(parts)

    def script(self, model: str) -> str:
        """The SQL the run executed, as one script (what ``target/run/`` holds)."""
        head = f"-- duckstream: {model}: {self.message()}\n"
        return head + "".join(f"{s.rstrip().rstrip(';')};\n" for s in self.sql)


def log_line(relation: str, outcome: Outcome) -> str:
    """The run log's line for one model, e.g. ``"lake"."main"."totals" built: 2 rows, 4 ms``.

    >>> log_line('"lake"."main"."t"', Outcome("up to date", elapsed_ms=3))
    '"lake"."main"."t" up to date: no source changes, 3 ms'
    """
    return f"{relation} {outcome.message()}"
