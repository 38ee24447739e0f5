"""The window-function scenarios of ``tests/test_windows.py`` on Spark + Iceberg, from the
same view SQL (transpiled: QUALIFY becomes a derived table), run at once by the ``outcomes``
fixture (``tests/spark/conftest.py``): rows after every refresh compared with recomputation."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_windows import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default; DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "dedup_latest_with_qualify",
    "lag_lead_first_value",
    "nulls_first_order",
    "range_frame_and_cume_dist",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_window_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
