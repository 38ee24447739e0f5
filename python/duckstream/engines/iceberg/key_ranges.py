"""The range of a source's changed keys, per refresh, for the join's range filters on Spark.

A join's delta term ``ΔR ⋈ S_old`` reads the whole state of ``S``: Spark pushes neither a
semi-join (``S.k IN (SELECT k FROM <changes>)``) nor a join's keys into an Iceberg scan. It
does push a literal range: ``S.k BETWEEN <least changed k> AND <greatest>``, with which
Iceberg skips every data file whose column bounds lie outside it. Tables appended in key or
date order (TPC-H's orders and lineitem, most lakes) keep the new keys in the newest files,
and the term reads those alone. The tree places the filter where the equality implies it
(:meth:`duckstream.tree.base.Term.range_filters`, spelled ``S.k BETWEEN COALESCE(${low},
S.k) AND COALESCE(${high}, S.k)``: a NULL bound is none); this module gives the bounds.

The plan's SQL computes them as a person would (:class:`KeyRanges`' query: ``min`` and
``max`` of each key over the changes views), a Spark job over the changes. The runner reads
the same bounds from Iceberg's metadata instead (:func:`window_bounds`, no Spark job): the
column bounds of the data files the window added, and for a window that also deletes (read
through the changelog) of those it removed, where the deleted rows were. They cover every
changed key, and a superset of the keys keeps the filter implied (Iceberg's own
``Snapshot.removedDataFiles`` drops the bounds: the manifests' entries keep them). No bound
(NULL) where the files have none (metrics off for the column, a format without bounds), for
a window read by position (merge-on-read: the rows deleted are in files the window does not
list), and for a column whose type compares otherwise than the joined column's
(:func:`comparable`).

Only types whose bounds are exact and whose order is Spark's: integers, DECIMAL, DATE and
STRING (Parquet's bounds compare UTF-8 bytes, as Spark does; Iceberg truncates long ones to
a shorter lower and a greater upper bound, still bounds). Not floating point: a NaN key joins
a NaN in Spark but lies outside every bound. Not timestamps (time zones).
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from duckstream.engines.iceberg.window import java_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_INTEGERS = {"int", "long"}


@dataclass(frozen=True)
class RangeSpec:
    """One column's range: the source (full name, index in the view), its ``column``, the
    temp view its changes are read into, the run-time values' names (``low``, ``high``),
    and the (source, column) pairs filtered by it, whose types must compare as its own."""

    table: str
    index: int
    column: str
    changes_view: str
    low: str
    high: str
    uses: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class KeyRanges:
    """The spec of a refresh's :class:`~duckstream.plan.SetValues` step of key ranges: the
    value query (``query``: min and max over the changes views) and what a runner needs to
    read the same bounds from metadata (:meth:`values`)."""

    query: str
    ranges: tuple[RangeSpec, ...]

    def __str__(self) -> str:
        return self.query

    @property
    def note(self) -> str:
        """What the values are, for a person running the plan."""
        return (
            "-- the bounds of the changed keys (for the range filters on the states they"
            " join): each value\n-- as a literal of the key's type (42, DATE '1995-03-15',"
            " 'text'), NULL for no bound. The runner reads\n-- them from the column bounds"
            " of the window's data files instead (no Spark job)."
        )

    def values(
        self, spark: SparkSession, windows: Callable[[str], tuple[str, int, int, bool] | None]
    ) -> dict[str, str]:
        """Each range's bounds as Spark SQL literals (``NULL``: none): ``windows(changes
        view)`` gives the window of the source read into it (table, cursor, end, and
        whether its deletions are in the data files it removed: read through the
        changelog), or ``None`` where its bounds are not in the metadata (unchanged: its
        terms are off; read by position)."""
        jvm = spark.sparkContext._jvm
        tables: dict[str, Any] = {}

        def table(name: str) -> Any:
            if name not in tables:
                tables[name] = java_table(spark, name)
            return tables[name]

        def type_of(name: str, column: str) -> str | None:
            found = table(name).schema().caseInsensitiveFindField(column)
            return None if found is None else str(found.type().toString())

        values: dict[str, str] = {}
        wanted: dict[str, list[RangeSpec]] = {}
        for spec in self.ranges:
            values[spec.low] = values[spec.high] = "NULL"
            window = windows(spec.changes_view)
            own = type_of(spec.table, spec.column) if window is not None else None
            if own is None or not all(comparable(own, type_of(t, c)) for t, c in spec.uses):
                continue
            wanted.setdefault(spec.changes_view, []).append(spec)
        for view, specs in wanted.items():
            found = windows(view)
            assert found is not None
            name, cursor, end, removed = found
            columns = [s.column for s in specs]
            bounds = window_bounds(jvm, table(name), cursor, end, columns, removed)
            for spec in specs:
                found_bounds = bounds.get(spec.column)
                if found_bounds is not None:
                    values[spec.low], values[spec.high] = found_bounds
        return values


def comparable(changed: str, other: str | None) -> bool:
    """Whether a range of a column of Iceberg type ``changed`` bounds the values of a column
    of type ``other`` equal to them, as Spark compares the two: the same type, or both exact
    numbers (Spark widens both sides of ``=`` and of ``>=`` alike, and widening keeps order).
    Not a string against a number or a date: Spark casts the string, whose order is not the
    number's (``'10' < '9'``).

    >>> comparable("long", "int"), comparable("decimal(12, 2)", "long"), comparable("date", "date")
    (True, True, True)
    >>> comparable("string", "long"), comparable("date", "string"), comparable("long", None)
    (False, False, False)
    """
    if other is None:
        return False
    if changed == other:
        return True

    def exact(name: str) -> bool:
        return name in _INTEGERS or _DECIMAL.fullmatch(name) is not None

    return exact(changed) and exact(other)


def ranged(type_name: str) -> bool:
    """Whether a column of the Iceberg type ``type_name`` gets ranges (module docstring).

    >>> ranged("int"), ranged("decimal(38, 4)"), ranged("string"), ranged("double")
    (True, True, True, False)
    """
    return type_name in _INTEGERS | {"date", "string"} or _DECIMAL.fullmatch(type_name) is not None


def literal(type_name: str, value: Any) -> str | None:
    """A bound ``value`` (as Iceberg's ``Conversions.fromByteBuffer`` gives it, through
    py4j) as a Spark SQL literal of the Iceberg type ``type_name``; ``None`` for a type
    without ranges (module docstring). A DECIMAL keeps its type (a comparison with another
    DECIMAL type would cast the column, and the scan would not prune); a string is written
    as the hex of its UTF-8 bytes, which nothing in it can escape from.

    >>> literal("long", -7), literal("decimal(12, 2)", "1234.50"), literal("date", 9204)
    ('-7', "CAST('1234.50' AS DECIMAL(12,2))", "DATE '1995-03-15'")
    >>> literal("string", "it's"), literal("double", 1.5), literal("date", 10**9)
    ("CAST(X'69742773' AS STRING)", None, None)
    """
    if type_name in _INTEGERS:
        return str(int(value))
    found = _DECIMAL.fullmatch(type_name)
    if found is not None:
        number = decimal.Decimal(str(value))
        if not number.is_finite():
            return None
        return f"CAST('{number:f}' AS DECIMAL({found[1]},{found[2]}))"
    if type_name == "date":
        try:
            day = datetime.date(1970, 1, 1) + datetime.timedelta(days=int(value))
        except OverflowError:
            return None
        return f"DATE '{day.isoformat()}'"
    if type_name == "string":
        return f"CAST(X'{str(value).encode().hex().upper()}' AS STRING)"
    return None


def _key(type_name: str, value: Any) -> Any:
    """``value`` as Python orders it as Spark does: numbers, days, strings (code points, the
    order of their UTF-8 bytes)."""
    if _DECIMAL.fullmatch(type_name):
        return decimal.Decimal(str(value))
    return str(value) if type_name == "string" else int(value)


def window_bounds(
    jvm: Any, java: Any, cursor: int, end: int, columns: list[str], removed: bool
) -> dict[str, tuple[str, str] | None]:
    """The least and the greatest value of each of ``columns`` in the rows the Iceberg
    table ``java``'s snapshots after ``cursor`` up to ``end`` changed, as Spark SQL literals
    (:func:`literal`), from the column bounds of the data files they added (and, with
    ``removed``, of those they removed); ``None`` for a column some file has no bound for
    (a file of only NULLs in it is skipped: a NULL key joins nothing). Compactions
    (``replace``) change no row and are skipped, as the change feeds skip them.

    Read from the manifests each snapshot wrote (their ``ADDED`` and ``DELETED`` entries):
    Iceberg's ``Snapshot.removedDataFiles`` gives the removed files without their bounds.
    ``jvm``: Spark's (py4j), ``java``: the table (:func:`.window.java_table`)."""
    manifests = jvm.org.apache.iceberg.ManifestFiles
    schema, io, specs = java.schema(), java.io(), java.specs()
    fields = {}
    for column in columns:
        found = schema.caseInsensitiveFindField(column)
        if found is not None and ranged(str(found.type().toString())):
            fields[column] = (int(found.fieldId()), found.type(), str(found.type().toString()))
    bounds = _Bounds(fields, jvm.org.apache.iceberg.types.Conversions)
    statuses = {"ADDED", "DELETED"} if removed else {"ADDED"}
    at = end
    while at != cursor and at is not None and bounds.fields:
        snapshot = java.snapshot(at)
        if snapshot is None:  # expired under the refresh: no bounds (the read fails anyway)
            return dict.fromkeys(columns)
        written = int(snapshot.snapshotId())
        if str(snapshot.operation()) != "replace":
            for manifest in snapshot.dataManifests(io):
                if int(manifest.snapshotId()) != written:
                    continue  # listed again: its files' changes are an earlier snapshot's
                entries = manifests.read(manifest, io, specs).entries().iterator()
                while entries.hasNext():
                    entry = entries.next()
                    if str(entry.status().toString()) in statuses:
                        bounds.add(entry.file())
        at = snapshot.parentId()
    return {column: bounds.literals(column) for column in columns}


class _Bounds:
    """The least and greatest value of some columns over data files (:func:`window_bounds`);
    a column leaves ``fields`` at the first file with no bound for it."""

    def __init__(self, fields: dict[str, tuple[int, Any, str]], convert: Any) -> None:
        self.fields, self.convert = dict(fields), convert
        self.lows: dict[str, Any] = {}
        self.highs: dict[str, Any] = {}

    def add(self, file: Any) -> None:
        lower, upper = file.lowerBounds(), file.upperBounds()
        nulls, rows = file.nullValueCounts(), int(file.recordCount())
        for column, (field_id, type_, name) in list(self.fields.items()):
            low = lower.get(field_id) if lower is not None else None
            high = upper.get(field_id) if upper is not None else None
            if low is None or high is None:
                null_count = nulls.get(field_id) if nulls is not None else None
                if rows == 0 or (null_count is not None and int(null_count) == rows):
                    continue  # no row, or NULLs only: no key that joins
                del self.fields[column]  # unknown: no bound
                continue
            low = _key(name, _java_value(self.convert.fromByteBuffer(type_, low)))
            high = _key(name, _java_value(self.convert.fromByteBuffer(type_, high)))
            if column not in self.lows or low < self.lows[column]:
                self.lows[column] = low
            if column not in self.highs or high > self.highs[column]:
                self.highs[column] = high

    def literals(self, column: str) -> tuple[str, str] | None:
        if column not in self.fields or column not in self.lows:
            return None
        name = self.fields[column][2]
        low, high = literal(name, self.lows[column]), literal(name, self.highs[column])
        return None if low is None or high is None else (low, high)


def _java_value(value: Any) -> Any:
    """A bound as py4j returns it, as Python: numbers (BigDecimal as ``decimal.Decimal``)
    and strings come through; another CharSequence is a Java object, read as its text."""
    if isinstance(value, int | str | decimal.Decimal):
        return value
    return str(value.toString())
