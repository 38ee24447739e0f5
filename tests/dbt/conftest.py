"""dbt runs in temporary copies of integration_tests/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from duckstream.demo_dbt import Shop


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    """The shop's sources and a first ``dbt build`` (seed, models, tests), shared by the tests
    of one module."""
    shop = Shop.create(tmp_path_factory.mktemp("shop"))
    shop.setup_sources()
    built = shop.dbt("build")
    assert built.success, built.nodes
    for name, (status, message, _) in built.nodes.items():
        assert status in ("success", "pass"), (name, status, message)
        assert not message or message.startswith(("built: ", "OK", "INSERT")), (name, message)
    yield shop
