"""The top-k and DISTINCT ON scenarios of ``tests/test_top_k.py`` on Spark + Iceberg, from the
same view SQL (transpiled: Spark has no DISTINCT ON and no FETCH), run at once by the
``outcomes`` fixture (``tests/spark/conftest.py``): rows after every refresh compared with
recomputation under the same tie-break."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_top_k import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default (DISTINCT ON: ``test_distinct_on_written_for_spark`` maintains
# distinct_on_latest_per_group's view); DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "limit_and_offset_nulls_first",
    "top_3_with_ties",
    "top_groups_by_an_aggregate",  # tree.top_k's path over an aggregate's touched groups
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_top_k_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])


def test_distinct_on_written_for_spark(spark) -> None:
    """Spark SQL has no DISTINCT ON, but a model on Spark may use it: duckstream parses it and
    maintains it as its own numbering window (the scenarios above reach Spark already
    rewritten by sqlglot's transpiler)."""
    from duckstream import compile_ivm
    from duckstream.testing.differential import run_scenario
    from duckstream.testing.spark_harness import SparkHarness, fewer_windows, spark_windows
    from test_top_k import CYCLES, S, U

    spark_text = "SELECT DISTINCT ON (s.g) s.g, s.id, s.v FROM s ORDER BY s.g, s.v DESC"

    class SparkText(SparkHarness):
        def compile(self, view_sql, mv_name="mv", **kwargs):
            return compile_ivm(
                spark_text,
                dialect="spark",
                mv_name=mv_name,
                mv_catalog=self.catalog,
                mv_schema=self.schema,
            )

    cycles = fewer_windows(CYCLES, spark_windows())
    plan = run_scenario(SparkText(spark, check_names=True), [S, U], spark_text, cycles)
    assert "window_function" in plan.features
