"""duckstream's account of Spark's decimal types (``engines/iceberg/decimals.py``) against
Spark's own ``typeof``, over random arithmetic, CASE, COALESCE and aggregates of DECIMAL and
integer columns and literals; and a view dividing DECIMAL sums maintained on Spark."""

from __future__ import annotations

import decimal
import os
import random

import pytest
import sqlglot

from duckstream.engines.iceberg.decimals import Decimal, Integer, Typer
from duckstream.testing.differential import (
    Column,
    Cycle,
    Delete,
    Insert,
    Scenario,
    TableSpec,
    Update,
    tables_schema,
)
from duckstream.testing.spark_harness import expect_outcome

pytestmark = pytest.mark.spark

COLUMNS = {
    "k": "INT",
    "d15": "DECIMAL(15,2)",
    "d38": "DECIMAL(38,10)",
    "d5": "DECIMAL(5,0)",
    "d20": "DECIMAL(20,6)",
    "i": "INT",
    "b": "BIGINT",
    "s": "SMALLINT",
}
LITERALS = ["1", "0", "7.0", "0.2", "100.00", "12345", "0.05"]


def random_expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.7:
            return f"t.{rng.choice(list(COLUMNS)[1:])}"
        return rng.choice(LITERALS)
    kind = rng.choice(["op", "op", "op", "case", "coalesce"])
    left, right = random_expression(rng, depth - 1), random_expression(rng, depth - 1)
    if kind == "op":
        return f"({left} {rng.choice('+-*/%')} {right})"
    if kind == "case":
        return f"CASE WHEN t.k > 0 THEN {left} ELSE {right} END"
    return f"COALESCE({left}, {right})"


def spark_name(type_: object) -> str | None:
    if isinstance(type_, Decimal):
        return f"decimal({type_.precision},{type_.scale})"
    if isinstance(type_, Integer):
        if type_.literal:
            return "int"
        return {3: "tinyint", 5: "smallint", 10: "int", 20: "bigint"}.get(type_.precision)
    return None


def test_typer_agrees_with_spark(spark) -> None:
    spark = spark.newSession()  # the temp view ``t`` stays in this test's own session
    spark.sql(
        "CREATE OR REPLACE TEMP VIEW t AS SELECT "
        + ", ".join(f"CAST(1 AS {type_}) AS {name}" for name, type_ in COLUMNS.items())
    )
    schema = {"t": COLUMNS}
    # DUCKSTREAM_EXAMPLES / DUCKSTREAM_SEED: a deeper or another run.
    n = int(os.environ.get("DUCKSTREAM_EXAMPLES", "300"))
    rng = random.Random(int(os.environ.get("DUCKSTREAM_SEED", "20261124")))
    scalars = [random_expression(rng, 3) for _ in range(n)]

    def aggregate() -> str:
        return f"{rng.choice(['SUM', 'AVG', 'MIN', 'MAX'])}({random_expression(rng, 2)})"

    aggregates = [aggregate() for _ in range(n // 2)]
    aggregates += [
        f"({aggregate()} {rng.choice('+-*/')} {rng.choice([aggregate(), *LITERALS])})"
        for _ in range(n // 2)
    ]
    checked = 0
    for expressions, tail in ((scalars, ""), (aggregates, " GROUP BY t.k")):
        query = "SELECT " + ", ".join(f"typeof({e})" for e in expressions) + f" FROM t{tail}"
        (row,) = spark.sql(query).collect()
        select = sqlglot.parse_one(
            "SELECT " + ", ".join(expressions) + f" FROM t{tail}", read="spark"
        )
        typer = Typer(select, schema)
        for item, expression, actual in zip(select.expressions, expressions, row, strict=True):
            ours = typer.type_of(item)
            if ours is None:
                continue  # not known: the engine refuses what depends on it
            name = spark_name(ours)
            if name is None:
                assert not actual.startswith("decimal"), (expression, actual, ours)
            else:
                assert name == actual, (expression, actual, ours)
                checked += 1
    assert checked > n * 4 // 3, checked


# -- views dividing DECIMAL aggregates, maintained on Spark --------------------------------
def _d(text: str) -> decimal.Decimal:
    return decimal.Decimal(text)


T = TableSpec(
    "t",
    [Column("k", "INTEGER"), Column("x", "DECIMAL(15,2)"), Column("d", "DECIMAL(15,2)")],
    [
        (1, _d("10.01"), _d("0.05")),
        (1, _d("10.01"), _d("0.05")),
        (1, _d("3.33"), _d("0.10")),
        (2, _d("99999.99"), _d("0.00")),
        (2, None, _d("0.07")),
        (3, _d("0.01"), None),
    ],
)
T_SCHEMA = tables_schema([T])
T_CYCLES: list[Cycle] = [
    [[Insert("t", ((1, _d("7.77"), _d("0.03")), (4, _d("1.00"), _d("0.01"))))]],
    [[Delete("t", "x = 3.33")], [Update("t", "x = x + 0.01", "k = 2")]],
    [[Update("t", "d = 0.09", "k = 1"), Insert("t", ((3, _d("123456.78"), _d("0.02")),))]],
    [[Delete("t", "k = 4")], [Insert("t", ((2, _d("0.03"), _d("0.04")),) * 2)]],
    [[Delete("t", "k = 1")]],
]
HIGH_SCALE = TableSpec(
    "h",
    [Column("k", "INTEGER"), Column("x", "DECIMAL(18,8)")],
    [(1, _d("1.01234567")), (1, _d("2.00000001")), (2, _d("3.55555555"))],
)
SCALE_SIX = TableSpec(
    "h",
    [Column("k", "INTEGER"), Column("x", "DECIMAL(38,6)")],
    [(1, _d("1.012345")), (1, _d("2.000001")), (2, _d("3555555555555555555.555555"))],
)
SCALE_THREE = TableSpec(
    "h",
    [Column("k", "INTEGER"), Column("x", "DECIMAL(15,3)")],
    [(1, _d("1.012")), (1, _d("2.001")), (2, _d("3.555"))],
)
HIGH_SCALE_CYCLES: list[Cycle] = [
    [[Insert("h", ((1, _d("0.00000007")), (2, _d("1.11111111"))))]],
    [[Delete("h", "k = 1 AND x > 2")], [Update("h", "x = x + 0.00000003", "k = 2")]],
]
PROMO = "CASE WHEN t.d > 0.05 THEN t.x * (1 - t.d) ELSE 0 END"
SCENARIOS = {
    # TPC-H Q17's shape: a DECIMAL sum over a decimal literal
    "sum_over_literal": Scenario(
        [T],
        "SELECT t.k, SUM(t.x) / 7.0 AS a FROM t GROUP BY t.k",
        T_CYCLES,
        compile_kwargs={"schema": T_SCHEMA},
    ),
    # TPC-H Q14's shape: a share of two sums of products
    "share_of_sums": Scenario(
        [T],
        f"SELECT t.k, 100.00 * SUM({PROMO}) / SUM(t.x * (1 - t.d)) AS share FROM t GROUP BY t.k",
        T_CYCLES,
        compile_kwargs={"schema": T_SCHEMA},
    ),
    # TPC-H Q8's shape: a share of two sums of a derived table's products, the CASE's ELSE
    # an integer
    "share_over_derived_table": Scenario(
        [T],
        "SELECT a.y, SUM(CASE WHEN a.n = 'B' THEN a.v ELSE 0 END) / SUM(a.v) AS share"
        " FROM (SELECT t.k AS y, t.x * (1 - t.d) AS v,"
        " CASE WHEN t.d > 0.05 THEN 'B' ELSE 'A' END AS n FROM t) AS a GROUP BY a.y",
        T_CYCLES,
        compile_kwargs={"schema": T_SCHEMA},
    ),
    "avg_and_sum_over_count": Scenario(
        [T],
        "SELECT t.k, AVG(t.x) / 3 AS a, SUM(t.x) / COUNT(*) AS b, SUM(t.d) AS c"
        " FROM t GROUP BY t.k HAVING SUM(t.x) / 2 > 1",
        T_CYCLES,
        compile_kwargs={"schema": T_SCHEMA},
    ),
    "global_ratio": Scenario(
        [T],
        "SELECT SUM(t.x) / SUM(t.d) AS r, AVG(t.d) * 2 AS a FROM t",
        T_CYCLES,
        compile_kwargs={"schema": T_SCHEMA},
    ),
    # without the schema the argument's type is not known: refused, as before
    "no_schema_refused": Scenario(
        [T],
        "SELECT t.k, SUM(t.x) / 7.0 AS a FROM t GROUP BY t.k",
        T_CYCLES,
        spark_refused="spark_unsupported",
    ),
    # a scale above 6 with many digits: Spark rounds the running total (DECIMAL(18,8) sums lost
    # two digits); refused when compiling with the schema, else at setup, from Spark's types
    "high_scale_refused": Scenario(
        [HIGH_SCALE],
        "SELECT h.k, SUM(h.x) AS s FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        compile_kwargs={"schema": tables_schema([HIGH_SCALE])},
        spark_refused="spark_unsupported",
    ),
    "high_scale_refused_at_setup": Scenario(
        [HIGH_SCALE],
        "SELECT h.k, SUM(h.x) AS s FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        spark_refused="spark_unsupported",
    ),
    # an AVG of a DECIMAL with scale 3 would keep 6 digits of its 7 (found by these tests)
    "avg_scale_three_refused": Scenario(
        [SCALE_THREE],
        "SELECT h.k, AVG(h.x) AS a FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        compile_kwargs={"schema": tables_schema([SCALE_THREE])},
        spark_refused="spark_unsupported",
    ),
    "avg_scale_three_refused_at_setup": Scenario(
        [SCALE_THREE],
        "SELECT h.k, AVG(h.x) AS a FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        spark_refused="spark_unsupported",
    ),
    "sum_scale_three_maintained": Scenario(
        [SCALE_THREE],
        "SELECT h.k, SUM(h.x) / 3 AS s FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        compile_kwargs={"schema": tables_schema([SCALE_THREE])},
    ),
    # scale 6 keeps its digits
    "scale_six_maintained": Scenario(
        [SCALE_SIX],
        "SELECT h.k, SUM(h.x) AS s FROM h GROUP BY h.k",
        HIGH_SCALE_CYCLES,
        compile_kwargs={"schema": tables_schema([SCALE_SIX])},
    ),
}
CHECK_TYPES = True


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_decimal_division_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
