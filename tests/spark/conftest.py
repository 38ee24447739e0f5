"""One local Spark session with an Iceberg catalog ``lake`` for the whole test run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs Java and pyspark (a local Spark session)")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java")
    from duckstream.spark import local_session

    session = local_session(str(tmp_path_factory.mktemp("warehouse")))
    session.sql("CREATE NAMESPACE IF NOT EXISTS db")
    yield session
    session.stop()
