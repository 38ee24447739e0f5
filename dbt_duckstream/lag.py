"""The ``ivm_lag`` test: how far a maintained table is behind its sources, ``dbt source
freshness``-style.

A source's freshness in dbt is the age of its newest row; a maintained table's is what it has
not applied yet: the snapshots committed to its sources after its cursors (``pending``) and
the age of the oldest of them (``behind_seconds``: 0 when up to date), as
:mod:`duckstream.status` reads them from the catalog's metadata. The test's query returns one
row when the table is further behind than allowed (or not maintained at all), none otherwise;
dbt's ``severity`` / ``warn_if`` / ``error_if`` turn that into a warning or an error, as
freshness's ``warn_after`` / ``error_after`` do.

>>> import datetime
>>> from duckstream.status import ViewStatus
>>> now = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
>>> late = ViewStatus("l.m.v", {"l.m.t": 7}, pending=3,
...                   behind_since=now - datetime.timedelta(minutes=5))
>>> print(lag_sql("l.m.v", late, max_snapshots=5, now=now))
SELECT 3 AS pending_snapshots, 300 AS behind_seconds, 'l.m.v is 3 snapshots (300 s) behind its sources' AS problem WHERE false
>>> print(lag_sql("l.m.v", late, max_seconds=60, now=now))
SELECT 3 AS pending_snapshots, 300 AS behind_seconds, 'l.m.v is 3 snapshots (300 s) behind its sources' AS problem
>>> print(lag_sql("l.m.t", None))
SELECT NULL AS pending_snapshots, NULL AS behind_seconds, 'l.m.t is not maintained by incremental_ivm' AS problem
"""  # noqa: E501

from __future__ import annotations

import datetime

from duckstream.status import ViewStatus


def lag_sql(
    relation: str,
    status: ViewStatus | None,
    max_snapshots: int | None = None,
    max_seconds: float | None = None,
    now: datetime.datetime | None = None,
) -> str:
    """A constant query (no FROM: the same on every engine) returning one row when
    ``relation`` lags more than ``max_snapshots`` or ``max_seconds`` (None: not checked;
    both None: any lag is too much), or when it is not maintained (``status`` None)."""
    if status is None:
        problem = _string(f"{relation} is not maintained by incremental_ivm")
        return f"SELECT NULL AS pending_snapshots, NULL AS behind_seconds, {problem} AS problem"
    now = now or datetime.datetime.now(datetime.UTC)
    since = status.behind_since
    seconds = 0 if since is None else max(round((now - since).total_seconds()), 0)
    if max_snapshots is None and max_seconds is None:
        late = status.pending > 0
    else:
        late = (max_snapshots is not None and status.pending > max_snapshots) or (
            max_seconds is not None and seconds > max_seconds
        )
    problem = _string(f"{relation} is {status.pending} snapshots ({seconds} s) behind its sources")
    sql = (
        f"SELECT {status.pending} AS pending_snapshots, {seconds} AS behind_seconds,"
        f" {problem} AS problem"
    )
    return sql if late else sql + " WHERE false"


def _string(text: str) -> str:
    """``text`` as a SQL string literal that reads the same on DuckDB and Spark (which
    escape quotes differently): without quotes or backslashes (it names a relation)."""
    return "'" + text.replace("\\", "").replace("'", "") + "'"
