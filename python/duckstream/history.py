"""A refresh's entry in its view's history: the path it took, why, rows in and out, its phases.

Every refresh that commits (a build, a rebuild, an incremental refresh, and one whose changes
netted to nothing and only moved the cursors) writes one :class:`Entry` in that same commit,
beside the cursors, so maintenance, cursors and history commit together or not at all: on
DuckLake in the commit's extra info (the ``measured`` object auto already reads its times
from, :mod:`duckstream.engines.ducklake.cursors`), on Iceberg as the view's snapshot property
``duckstream.refresh`` (:data:`ICEBERG_PROPERTY`). Nothing else is written: no table, no
statement (on DuckLake a second table in a commit costs 6-7 ms). A refresh in which no source
changed commits nothing and leaves no entry; ``status`` shows the view up to date.

``changes`` are the rows in: per source, the rows of its netted change copy (exact) on an
incremental refresh; the catalog's estimate (inserted + deleted rows) when only that is known
(a rebuild, Iceberg). ``inserted`` / ``deleted`` are the rows out: the view's rows written and
removed (None: not counted; Iceberg's own snapshot summary has ``added-records`` and
``deleted-records``). ``phases`` stop at the cursors' record: the commit that carries the
entry cannot time itself.

>>> e = Entry("incremental", "auto", "t +1/-0: ...", {"l.m.t": 1}, 1, 0,
...           (("pin", 1.25, 3), ("apply", 2.5, 2)), ms=12.5, cost=9.0)
>>> e.outcome, e.rows_text(), e.phases_text()
('incremental', 'in 1, out +1 -0', 'pin 1.2, apply 2.5')
>>> Entry.from_dict(e.as_dict()) == e
True
>>> Entry("incremental", "auto", "", {"l.m.t": 0}, 0, 0).outcome
'nothing to apply'
>>> Entry.from_dict({"path": "full", "ms": 3.0, "cost": None}).reason  # before entries
''
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ICEBERG_PROPERTY = "duckstream.refresh"
FIRST_BUILD = "first build"


@dataclass(frozen=True)
class Entry:
    """One refresh, as its commit recorded it."""

    path: str  # "incremental" or "full"
    requested: str = ""  # "auto", "incremental", "full" (or a dbt decision: "dbt")
    reason: str = ""
    changes: dict[str, int] = field(default_factory=dict)  # rows in, per source
    inserted: int | None = None  # rows out: the view's rows written and removed
    deleted: int | None = None
    phases: tuple[tuple[str, float, int], ...] = ()  # (name, ms, statements)
    ms: float = 0.0
    cost: float | None = None
    # per source, (snapshot, rows) it held at the view's new cursor: counted only on a catalog
    # other processes commit to, where the next refresh checks that DuckLake did not rewrite
    # that snapshot's history since (:func:`duckstream.engines.ducklake.window.read`)
    source_rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """``rebuild``, ``incremental``, or ``nothing to apply`` (the changes netted away in
        the columns the view reads: only the cursors moved)."""
        if self.path == "full":
            return "rebuild"
        if self.inserted == self.deleted == 0 and not any(self.changes.values()):
            return "nothing to apply"
        return "incremental"

    def rows_text(self) -> str:
        rows_in = sum(self.changes.values()) if self.changes else "?"
        out = "?" if self.inserted is None else f"+{self.inserted} -{self.deleted}"
        return f"in {rows_in}, out {out}"

    def phases_text(self) -> str:
        return ", ".join(f"{name} {ms:.1f}" for name, ms, _ in self.phases)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ms": self.ms,
            "cost": self.cost,
            "requested": self.requested,
            "reason": self.reason,
            "changes": self.changes,
            "inserted": self.inserted,
            "deleted": self.deleted,
            "phases": [list(p) for p in self.phases],
            **({"source_rows": self.source_rows} if self.source_rows else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, found: Mapping[str, Any]) -> Entry:
        """An entry from its dict; an older commit's measurement (path, ms, cost) too."""
        cost = found.get("cost")
        return cls(
            str(found["path"]),
            str(found.get("requested") or ""),
            str(found.get("reason") or ""),
            {str(k): int(v) for k, v in (found.get("changes") or {}).items()},
            _int(found.get("inserted")),
            _int(found.get("deleted")),
            tuple((str(n), float(ms), int(k)) for n, ms, k in found.get("phases") or []),
            float(found.get("ms") or 0.0),
            None if cost is None else float(cost),
            {
                str(k): (int(snapshot), int(rows))
                for k, (snapshot, rows) in (found.get("source_rows") or {}).items()
            },
        )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def phase_list(phases: Iterable[Any]) -> tuple[tuple[str, float, int], ...]:
    """``duckstream.strategy.Phase`` records as an entry keeps them (ms, rounded)."""
    return tuple((p.name, round(p.seconds * 1000, 2), p.statements) for p in phases)
