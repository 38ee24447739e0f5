"""The dbt conventions of materialized-view materializations, on incremental_ivm models:
on_configuration_change, dbt retry, contracts, --empty, dbt show, unit tests, and a
source-freshness-style lag (the ivm_lag test, the duckstream_status operation).

One shop project (module fixture ``shop``); each test adds its own models under
``models/conventions/`` and leaves the project building.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbt.adapters.duckdb", reason="needs dbt-core and dbt-duckdb")

from duckstream.demo_dbt import Invocation, Shop  # noqa: E402

PAYMENTS = """{{{{ config(materialized='incremental_ivm', ivm_strategy='incremental',
            on_configuration_change='{change}') }}}}
select p.method, count(*) as payments, sum(p.amount) as amount{extra}
from {{{{ ref('int_payments') }}}} as p
group by p.method
"""
PAYMENTS_YML = """version: 2
models:
  - name: payments_per_method
    data_tests: [dbt_duckstream.ivm_equivalent]
"""


def write(shop: Shop, path: str, text: str) -> Path:
    target = shop.project / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def columns_of(shop: Shop, table: str) -> list[str]:
    con = shop.connect()
    try:
        rows = con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = 'lake'"
            " AND table_name = ? AND NOT starts_with(column_name, '_ivm_')"
            " ORDER BY column_index",
            [table],
        ).fetchall()
    finally:
        con.close()
    return [name for (name,) in rows]


def ok(invocation: Invocation) -> None:
    failed = {n: v for n, v in invocation.nodes.items() if v[0] not in ("success", "pass")}
    assert invocation.success and not failed, failed


def test_on_configuration_change_fail_continue_apply_and_retry(shop: Shop) -> None:
    """The model's SQL edited: 'fail' fails naming the model and leaves the table; after the
    config says 'continue', `dbt retry` reruns the failed model, which keeps maintaining the
    table by the SQL it was built with (warning); 'apply' rebuilds it from the new SQL."""
    model = "models/conventions/payments_per_method.sql"
    write(shop, "models/conventions/payments.yml", PAYMENTS_YML)
    write(shop, model, PAYMENTS.format(change="fail", extra=""))
    ok(shop.dbt("build", "--select", "payments_per_method"))
    assert columns_of(shop, "payments_per_method") == ["method", "payments", "amount"]

    write(shop, model, PAYMENTS.format(change="fail", extra=", max(p.amount) as largest"))
    shop.apply_changes(1)  # new payments, which int_payments (a dbt incremental model) takes
    failed = shop.dbt("build", "--select", "int_payments", "payments_per_method")
    assert not failed.success
    status, message, _ = failed.nodes["payments_per_method"]
    assert status == "error", failed.nodes
    assert "duckstream: model payments_per_method: model SQL changed" in message, message
    assert "on_configuration_change is 'fail'" in message, message
    assert columns_of(shop, "payments_per_method") == ["method", "payments", "amount"]

    write(shop, model, PAYMENTS.format(change="continue", extra=", max(p.amount) as largest"))
    retried = shop.dbt("retry")
    ok(retried)
    message = retried.nodes["payments_per_method"][1]
    assert message.startswith(
        "incremental (model SQL changed, not applied: on_configuration_change is 'continue')"
    ), message
    assert any("is 'continue': the table is maintained by the SQL" in line for line in retried.log)
    assert "payments_per_method" in " ".join(retried.nodes)  # its ivm_equivalent test ran
    assert len(retried.nodes) == 2, retried.nodes  # the failed model and its skipped test
    assert columns_of(shop, "payments_per_method") == ["method", "payments", "amount"]

    write(shop, model, PAYMENTS.format(change="apply", extra=", max(p.amount) as largest"))
    applied = shop.dbt("build", "--select", "payments_per_method")
    ok(applied)
    assert applied.nodes["payments_per_method"][1].startswith("rebuilt (model SQL changed)")
    assert columns_of(shop, "payments_per_method") == ["method", "payments", "amount", "largest"]
    shop.apply_changes(2)
    again = shop.dbt("build", "--select", "int_payments", "payments_per_method")
    ok(again)
    assert again.nodes["payments_per_method"][1].startswith("incremental: +")


def test_a_redefined_view_under_continue_leaves_the_table_and_says_so(shop: Shop) -> None:
    """A view the model reads is redefined: the SQL it was built with no longer compiles to
    its plan, so 'continue' cannot maintain it: the table is left as it is, with a warning."""
    write(
        shop,
        "models/conventions/big_items.sql",
        "{{ config(materialized='view') }}\n"
        "select * from {{ ref('stg_order_items') }} where quantity > 1\n",
    )
    write(
        shop,
        "models/conventions/big_item_units.sql",
        "{{ config(materialized='incremental_ivm', ivm_strategy='incremental',"
        " on_configuration_change='continue') }}\n"
        "select product_id, sum(quantity) as units from {{ ref('big_items') }}"
        " group by product_id\n",
    )
    ok(shop.dbt("run", "--select", "big_items", "big_item_units"))
    write(
        shop,
        "models/conventions/big_items.sql",
        "{{ config(materialized='view') }}\n"
        "select * from {{ ref('stg_order_items') }} where quantity > 2\n",
    )
    kept = shop.dbt("run", "--select", "big_items", "big_item_units")
    ok(kept)
    message = kept.nodes["big_item_units"][1]
    assert message.startswith(
        "unchanged (a view the model reads was redefined, not applied:"
        " on_configuration_change is 'continue'): table left as it was"
    ), message
    assert any("NOT refreshed" in line for line in kept.log), kept.log


CONTRACT_YML = """version: 2
models:
  - name: method_totals
    config:
      contract: {{enforced: true}}
    data_tests: [dbt_duckstream.ivm_equivalent, {lag}]
    columns:
      - name: method
        data_type: varchar
      - name: payments
        data_type: {payments_type}
"""


def test_contract_is_checked_and_lag_is_reported(shop: Shop) -> None:
    """An enforced contract: the model's columns and types as the yaml says build (query and
    table checked); a wrong type fails with dbt's contract error. The ivm_lag test fails
    while the model is behind its sources and passes once refreshed; duckstream_status logs
    its lag and refreshes."""
    write(
        shop,
        "models/conventions/method_totals.sql",
        "{{ config(materialized='incremental_ivm', ivm_strategy='incremental') }}\n"
        "select method, count(*) as payments from {{ ref('int_payments') }} group by method\n",
    )
    lag = "{dbt_duckstream.ivm_lag: {arguments: {max_snapshots: 0}}}"
    yml = "models/conventions/method_totals.yml"
    write(shop, yml, CONTRACT_YML.format(lag=lag, payments_type="bigint"))
    built = shop.dbt("build", "--select", "method_totals")
    ok(built)
    assert built.nodes["method_totals"][1].startswith("built: ")

    # int_payments (a dbt incremental model, the source here) gets new rows
    shop.apply_changes(3)
    ok(shop.dbt("run", "--select", "int_payments"))
    behind = shop.dbt("test", "--select", "method_totals,test_name:ivm_lag")
    assert not behind.success
    ((status, message, _),) = behind.nodes.values()
    assert status == "fail", behind.nodes
    status_op = shop.dbt("run-operation", "duckstream_status", "--args", "{model: method_totals}")
    assert status_op.success
    text = "\n".join(status_op.log)
    assert "method_totals | 1 snapshots, oldest" in text, text
    caught_up = shop.dbt("build", "--select", "method_totals")
    ok(caught_up)
    assert caught_up.nodes["method_totals"][1].startswith("incremental: +")
    after = shop.dbt("run-operation", "duckstream_status", "--args", "{model: method_totals}")
    assert "method_totals | up to date" in "\n".join(after.log)

    write(shop, yml, CONTRACT_YML.format(lag=lag, payments_type="integer"))
    broken = shop.dbt("build", "--select", "method_totals")
    assert not broken.success
    status, message, _ = broken.nodes["method_totals"]
    assert status == "error" and "contract" in message.lower(), message
    assert "payments" in message and "INTEGER" in message.upper(), message
    write(shop, yml, CONTRACT_YML.format(lag=lag, payments_type="bigint"))


def test_empty_builds_the_shape_then_the_next_run_fills_and_maintains(shop: Shop) -> None:
    """``--empty``: the model built from empty inputs (its columns, no rows); the next run
    builds it in full, later ones maintain it; an existing table is kept."""
    write(
        shop,
        "models/conventions/units_per_product.sql",
        "{{ config(materialized='incremental_ivm', ivm_strategy='incremental') }}\n"
        "select i.product_id, sum(i.quantity) as units, count(*) as lines\n"
        "from {{ ref('stg_order_items') }} as i\n"
        "join {{ ref('stg_orders') }} as o on o.order_id = i.order_id\n"
        "group by i.product_id\n",
    )
    write(
        shop,
        "models/conventions/units.yml",
        "version: 2\nmodels:\n  - name: units_per_product\n"
        "    data_tests:\n      - dbt_duckstream.ivm_equivalent\n"
        "      - dbt_duckstream.ivm_lag: {arguments: {max_snapshots: 0}}\n",
    )
    empty = shop.dbt("build", "--empty", "--select", "units_per_product")
    ok(empty)
    assert empty.nodes["units_per_product"][1].startswith("built (--empty): 0 rows")
    assert columns_of(shop, "units_per_product") == ["product_id", "units", "lines"]
    full = shop.dbt("build", "--select", "units_per_product")
    ok(full)
    message = full.nodes["units_per_product"][1]
    assert message.startswith("rebuilt (built empty by --empty): "), message
    assert not message.startswith("rebuilt (built empty by --empty): 0 rows"), message
    kept = shop.dbt("run", "--empty", "--select", "units_per_product")
    ok(kept)
    message = kept.nodes["units_per_product"][1]
    assert message.startswith("unchanged (--empty: the built table is kept)"), message
    shop.apply_changes(4)
    maintained = shop.dbt("build", "--select", "units_per_product")
    ok(maintained)
    assert maintained.nodes["units_per_product"][1].startswith("incremental: +")


UNIT_WRONG = """version: 2
unit_tests:
  - name: revenue_per_day_wrong_expectation
    model: revenue_per_day
    given:
      - input: ref('stg_orders')
        rows:
          - {order_id: 1, order_date: 2026-01-01}
      - input: ref('stg_order_items')
        rows:
          - {order_id: 1, quantity: 2, line_amount: 10}
    expect:
      rows:
        - {order_date: 2026-01-01, orders: 1, order_lines: 1, units: 2, revenue: 11}
"""


def test_unit_tests_and_show_on_incremental_ivm_models(shop: Shop) -> None:
    """dbt 1.8 unit tests run on incremental_ivm models (the project's pass, a wrong
    expectation fails); dbt show shows the model's columns, none of the hidden ones."""
    units = shop.dbt("test", "--select", "test_type:unit")
    ok(units)
    assert "revenue_per_day_one_day" in " ".join(units.nodes), units.nodes
    write(shop, "models/conventions/unit_wrong.yml", UNIT_WRONG)
    wrong = shop.dbt("test", "--select", "test_type:unit")
    assert not wrong.success
    assert wrong.nodes["revenue_per_day_wrong_expectation"][0] == "fail", wrong.nodes
    (shop.project / "models/conventions/unit_wrong.yml").unlink()

    shown = shop.dbt("show", "--select", "revenue_per_day", "--limit", "3")
    assert shown.success
    assert shown.columns["revenue_per_day"][:5] == [
        "order_date",
        "orders",
        "order_lines",
        "units",
        "revenue",
    ]
    assert not any(c.startswith("_ivm_") for c in shown.columns["revenue_per_day"])


def test_expire_keeps_what_the_models_need(shop: Shop) -> None:
    """``dbt run-operation duckstream_expire``: the lake's snapshots older than every model's
    cursors are expired (the dry run and the bounds: tests/test_expire.py); the next run finds
    every model's cursors (none rebuilds for an expired one) and ivm_equivalent holds."""
    done = shop.dbt("run-operation", "duckstream_expire", "--args", "{cleanup: true}")
    assert done.success
    text = "\n".join(done.log)
    assert "lake: expired " in text and "needed by" in text, text
    shop.apply_changes(5)
    ran = shop.dbt("run")
    ok(ran)
    for name, (_, message, _) in ran.nodes.items():  # no model lost a cursor
        assert "expired" not in message and "no cursors" not in message, (name, message)
    ok(shop.dbt("test", "--select", "test_name:ivm_equivalent"))
