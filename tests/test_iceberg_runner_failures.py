"""The Spark runner's steps, each failed in turn, without a Spark session (a fake one).

Spark has no multi-statement transactions: a refresh writes the view's data and cursors in
one Iceberg commit (:class:`~duckstream.plan.CommitWith`). A failure up to that commit
raises (nothing was written); after it (the cursors table, a mirror) it is a warning, the
refresh being applied; the clean-up runs either way.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from duckstream.engines.iceberg import steps as iceberg_steps
from duckstream.plan import Begin, Cleanup, Commit, CommitWith, Sql

STEPS = [
    Begin(),
    Sql("SELECT 'check the window'"),
    Sql("CALL lake.system.create_changelog_view(...)"),
    CommitWith("MERGE INTO lake.db.mv ...", (("duckstream.cursor.lake.db.t", "7"),)),
    Sql("INSERT OVERWRITE lake.db._ivm_cursors ..."),
    Commit(),
    Cleanup("DROP VIEW IF EXISTS _ivm_changes"),
]
WRITES = [s.statement for s in STEPS if isinstance(s, Sql | CommitWith)]


class Injected(Exception):
    pass


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class FakeSpark:
    """Runs nothing: records the statements, and raises on ``failing``."""

    def __init__(self, failing: str | None = None) -> None:
        self.conf, self.failing, self.ran = _Conf(), failing, []

    def sql(self, statement: str) -> Any:
        if statement == self.failing:
            raise Injected(statement)
        self.ran.append(statement)
        return self

    def collect(self) -> list:
        return []


@pytest.fixture(autouse=True)
def _commit_with_properties(monkeypatch):
    monkeypatch.setattr(
        iceberg_steps, "sql_with_commit_properties", lambda spark, sql, properties: spark.sql(sql)
    )


@pytest.mark.parametrize("failing", WRITES)
def test_each_statement_failed(failing):
    spark = FakeSpark(failing)
    commit = WRITES.index("MERGE INTO lake.db.mv ...")
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        if WRITES.index(failing) <= commit:
            with pytest.raises(Injected):
                iceberg_steps.run_steps(spark, list(STEPS))
            assert "MERGE INTO lake.db.mv ..." not in spark.ran  # nothing written
            assert not warned
        else:
            iceberg_steps.run_steps(spark, list(STEPS))
            assert [w.category for w in warned] == [RuntimeWarning]
            assert "the refresh is applied" in str(warned[0].message)
    assert spark.ran[-1] == "DROP VIEW IF EXISTS _ivm_changes"  # the clean-up ran
