"""A refresh's commit to its view on Iceberg: applied to the view as the refresh pinned it, or
not at all (:class:`~duckstream.errors.RefreshConflict`).

A refresh reads the view's cursors from its current snapshot ``V`` (the pin), computes the
window's delta from them, and commits the delta with the new cursors. Iceberg commits
optimistically, and what its own checks validate does not make such a delta safe when another
process refreshes the same view at the same time:

* an ``INSERT`` (the appends-only path) is an append, which Iceberg validates against nothing
  and re-applies on whatever the table holds when its commit is retried: two refreshes of one
  window would both add its rows;
* a ``MERGE`` (copy-on-write, ``write.merge.isolation-level`` serializable by default)
  validates from the snapshot its own scan read, the table's state when Spark planned the
  statement, not ``V``: a refresh that committed between the pin and that planning becomes the
  MERGE's base, and the delta is applied over a state that already holds it.

``commit.retry.*`` only bounds how often a commit is retried, and isolation levels validate
from the scan: no table property makes the commit depend on ``V``. So the commit is a
compare-and-swap. The statement writes into a branch of the view made at ``V``, this refresh's
own (nothing else writes it, so the delta applies to exactly the state it was computed
against); then ``main`` moves to the branch's new snapshot in one metadata commit, built from
the metadata just read and only if ``main`` is still at ``V``, that the catalog accepts only
over that same metadata (no retry), which also drops the branch. Otherwise the refresh raises
``RefreshConflict`` and the view is as the other refresh left it; the branch is dropped then
too. A fill (the whole
table replaced with its cursors) needs none of this: whatever came first, it leaves a view
consistent with its own cursors. By hand, the same is::

    ALTER TABLE lake.ns.mv CREATE BRANCH duckstream_refresh_1 AS OF VERSION <V>;
    MERGE INTO lake.ns.mv.branch_duckstream_refresh_1 AS _ivm_t USING ...;
    CALL lake.system.fast_forward('ns.mv', 'main', 'duckstream_refresh_1');  -- fails if main moved
    ALTER TABLE lake.ns.mv DROP BRANCH duckstream_refresh_1;

This is as safe as the catalog's own commit: a Hadoop catalog on a local file system checks
and renames in two steps across processes (use a catalog with atomic commits, such as REST,
JDBC, Hive or Glue, for writers on several machines).

Both metadata commits (the move, or the branch dropped) go through the table instance the
refresh loaded before its statement, which need not be the one Spark reads the view through:
Spark's Iceberg catalog caches one instance per table (``cache-enabled``, the default) and
drops it 30 s after its last use, and a reader only sees commits made through that instance
or made before it was loaded. A statement planned more than 30 s after the load (a recursion
iterated before the MERGE, under load) loads and caches a new instance, which never sees the
move: a read right after the refresh returned the view's old rows. So the refresh ends with
``REFRESH TABLE`` of the view (:func:`_reload`), which drops the catalog's instance (the next
read loads the table's current metadata) and re-caches a ``CACHE TABLE`` of it.
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.engines.iceberg.window import java_table
from duckstream.errors import RefreshConflict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BRANCH_PREFIX = "duckstream_refresh_"
_NAME = r"(?:`[^`]*`|[^\s.`(]+)"
_TARGET = re.compile(rf"^(\s*(?:MERGE|INSERT)\s+INTO\s+{_NAME}(?:\.{_NAME})*)", re.IGNORECASE)


def into_branch(statement: str, branch: str | None) -> str:
    """``statement`` (a MERGE or INSERT into the view) writing into the view's ``branch``.

    >>> into_branch("MERGE INTO lake.ns.mv AS t USING d ON t.k = d.k", "b1")
    'MERGE INTO lake.ns.mv.branch_b1 AS t USING d ON t.k = d.k'
    >>> into_branch("INSERT INTO lake.`my ns`.mv (k) SELECT 1", "b1")
    'INSERT INTO lake.`my ns`.mv.branch_b1 (k) SELECT 1'
    >>> into_branch("INSERT INTO lake.ns.mv SELECT 1", None)
    'INSERT INTO lake.ns.mv SELECT 1'
    """
    if branch is None:
        return statement
    found = _TARGET.match(statement)
    if found is None:
        raise ValueError(f"not a MERGE or INSERT into a table: {statement[:80]}")
    return f"{found[1]}.branch_{branch}{statement[found.end() :]}"


@contextmanager
def pinned_commit(spark: SparkSession, view: str, pinned: int | None) -> Generator[str | None]:
    """Yield a new branch of ``view`` at snapshot ``pinned`` to write the refresh into; then
    move ``main`` to it if ``main`` is still at ``pinned`` (else :class:`RefreshConflict`),
    and drop the branch. ``pinned`` None (a view never written): no branch, a plain commit."""
    if pinned is None:
        yield None
        return
    table = java_table(spark, view)
    branch = f"{BRANCH_PREFIX}{uuid.uuid4().hex[:12]}"
    table.manageSnapshots().createBranch(branch, pinned).commit()
    moved = False
    try:
        yield branch
        moved = fast_forward(spark, table, view, branch, pinned)
    finally:
        if not moved:  # the move drops it
            _drop(table, view, branch)
        _reload(spark, view)


def _reload(spark: SparkSession, view: str) -> None:
    """Make this session read ``view`` as committed now: drop the instance its catalog holds
    (see the module's docstring). A failure here undoes nothing: a warning."""
    try:
        spark.sql(f"REFRESH TABLE {exp.to_table(view).sql(DIALECT)}")
    except Exception as error:  # noqa: BLE001 - the refresh is applied (or failed) already
        warnings.warn(
            f"duckstream: could not refresh {view} in Spark's catalog ({error});"
            f" reads of it in this session may show its metadata before this refresh for up"
            f" to 30 s (REFRESH TABLE {view})",
            RuntimeWarning,
            stacklevel=4,
        )


def _drop(table: Any, view: str, branch: str) -> None:
    try:
        table.refresh()
        table.manageSnapshots().removeBranch(branch).commit()
    except Exception as error:  # noqa: BLE001 - a leftover branch changes no row
        warnings.warn(
            f"duckstream: could not drop branch {branch} of {view} ({error});"
            f" drop it with ALTER TABLE {view} DROP BRANCH {branch}",
            RuntimeWarning,
            stacklevel=4,
        )


def fast_forward(spark: SparkSession, table: Any, view: str, branch: str, pinned: int) -> bool:
    """Move ``table``'s ``main`` to ``branch``'s snapshot and drop ``branch``, in one catalog
    commit, if ``main`` is at ``pinned`` in the metadata the commit is built from (a catalog
    commit only succeeds over the metadata it was built from: a concurrent commit makes it
    fail, never retry). True once done."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    iceberg = jvm.org.apache.iceberg
    operations = table.operations()
    base = operations.refresh()
    main = base.ref(iceberg.SnapshotRef.MAIN_BRANCH)
    at = None if main is None else int(main.snapshotId())
    if at != pinned:
        raise RefreshConflict(
            view,
            f"main is at snapshot {at}, not {pinned}, the one the cursors were read from",
            "Iceberg",
        )
    head = base.ref(branch).snapshotId()
    moved = iceberg.SnapshotRef.builderFrom(main, head).build()
    updated = iceberg.TableMetadata.buildFrom(base).setRef(iceberg.SnapshotRef.MAIN_BRANCH, moved)
    try:
        operations.commit(base, updated.removeRef(branch).build())
    except Exception as error:
        if "CommitFailedException" not in str(error):
            raise  # CommitStateUnknownException among them: not known to be rolled back
        raise RefreshConflict(view, error, "Iceberg") from error
    table.refresh()
    return True
