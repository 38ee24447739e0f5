"""Issue 14's compiler regressions (``tests/test_regressions_compiler.py``) on Spark + Iceberg,
run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``); column names are
compared with the view's after every refresh, and with ``names`` where a scenario gives them.
"""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_regressions_compiler import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default; DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "distinct_only_literals",
    "global_aggregate_literal",
    "mixed_case_grouped",
    "non_ascii_table_joined",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_regression_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
