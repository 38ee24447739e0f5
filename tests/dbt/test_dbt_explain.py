"""``dbt run-operation duckstream_explain`` and a model's refresh history, on DuckLake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from duckstream.demo_dbt import Shop
from duckstream.engines.ducklake.status import views_status


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    """The shop's sources and ``revenue_per_day`` built with what it reads (all these tests
    use; the conftest's ``shop`` builds the whole project)."""
    shop = Shop.create(tmp_path_factory.mktemp("shop"))
    shop.setup_sources()
    built = shop.dbt("build", "--select", "+revenue_per_day")
    assert built.success, built.nodes
    assert "revenue_per_day" in built.nodes, built.nodes
    yield shop


def test_explain_operation_prints_how_a_model_is_maintained(shop: Shop) -> None:
    done = shop.dbt("run-operation", "duckstream_explain", "--args", "{model: revenue_per_day}")
    assert done.success
    text = "\n".join(done.log)
    assert "duckstream explain of" in text and "revenue_per_day" in text
    assert "grouped table by" in text and "COUNT(DISTINCT o.order_id)" in text
    # the staging views are inlined: the sources are the lake's tables
    assert "lake.raw.orders: " in text and "lake.raw.order_items: " in text
    missing = shop.dbt("run-operation", "duckstream_explain", "--args", "{model: no_such_model}")
    assert not missing.success


def test_history_records_why_dbt_rebuilt_and_what_refreshes_did(shop: Shop) -> None:
    model = shop.project / "models/marts/revenue_per_day.sql"
    model.write_text(model.read_text().replace("as revenue", "as revenue, max(i.quantity) as most"))
    rebuilt = shop.dbt("run", "--select", "revenue_per_day")
    assert rebuilt.success
    # a rebuild the user did not ask for says why at dbt's default (info) level
    assert any("rebuilt (model SQL changed)" in line for line in rebuilt.log)
    shop.apply_changes(3)
    refreshed = shop.dbt("run", "--select", "revenue_per_day")
    assert refreshed.nodes["revenue_per_day"][1].startswith("incremental: +")
    con = shop.connect()
    try:
        (status,) = [s for s in views_status(con, "lake") if s.view.endswith(".revenue_per_day")]
    finally:
        con.close()
    newest, rebuild = status.refreshes[0], status.refreshes[1]
    assert newest.entry is not None and rebuild.entry is not None
    assert newest.entry.outcome == "incremental" and newest.entry.requested == "incremental"
    assert newest.entry.inserted is not None and newest.entry.inserted > 0
    assert sum(newest.entry.changes.values()) > 0
    assert rebuild.entry.outcome == "rebuild" and rebuild.entry.reason == "dbt: model SQL changed"
