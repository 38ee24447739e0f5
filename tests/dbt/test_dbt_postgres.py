"""The integration project on a DuckLake whose catalog is in PostgreSQL (a real server, the
session's): the profile's ``attach:`` path is ``ducklake:postgres:dbname=... host=...`` and
the adapter loads the postgres extension itself. Build, a batch of source changes, build
again (the models refresh incrementally, every ``ivm_equivalent`` test passes)."""

from __future__ import annotations

from duckstream.demo_dbt import Shop


def test_the_integration_project_on_a_postgres_catalog(postgres_catalogs, tmp_path):
    shop = Shop.create(tmp_path / "shop")
    shop.catalog = postgres_catalogs.target(str(shop.lake))
    shop.setup_sources()
    con = shop.connect()
    try:
        (kind,) = con.execute("SELECT catalog_type FROM ducklake_settings('lake')").fetchone()
    finally:
        con.close()
    assert kind == "postgres"
    messages = []
    for step in ("first build", "changes", "incremental build"):
        if step == "changes":
            shop.apply_changes(1)
            continue
        build = shop.dbt("build")
        failed = {n: v for n, v in build.nodes.items() if v[0] not in ("success", "pass")}
        assert build.success and build.nodes and not failed, (step, failed)
        messages = [message for _, message, _ in build.nodes.values()]
    assert any(m.startswith("incremental") for m in messages), messages
