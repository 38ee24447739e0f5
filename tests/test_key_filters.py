"""Delta terms read a grouped subquery only for the keys the window changed.

A view that joins a subquery grouped by a key (a decorrelated EXISTS / IN / scalar subquery:
TPC-H Q4, Q17, Q21) must not group the whole source in the terms that read the changes of
the tables it joins by that key: the key filter reaches the subquery through the equalities
of the join (``Term.key_filters``, ``Term.carried_filters``) or from the subquery's own
changed groups (``Leaf.delta_rows`` of a derived table). Compiled as the benchmark and the
dbt adapter compile them (``schema=``). Correctness is the scenario and property tests' job;
this is about what the plan reads.
"""

from __future__ import annotations

import re

import pytest
import sqlglot
from sqlglot import exp

from duckstream import compile_ivm
from duckstream.testing.tpch import tpch_schema, tpch_view


def _branches(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Union):
        return _branches(node.this) + _branches(node.expression)
    return [node]


def _grouped_relations(term: exp.Select) -> list[exp.Subquery]:
    """The FROM / JOIN relations of ``term`` that group (GROUP BY or DISTINCT) a source."""
    relations = [term.args["from_"].this] + [j.this for j in term.args.get("joins") or []]
    return [
        r
        for r in relations
        if isinstance(r, exp.Subquery) and r.find(exp.Group, exp.Distinct) is not None
    ]


def _append_delta(query: str) -> tuple[exp.Select, set[int]]:
    """TPC-H ``query``'s delta statement as compiled with the schema (its netting SELECT),
    and the indexes of its sources an append changes (orders, lineitem)."""
    plan = compile_ivm(
        tpch_view(query), mv_name="v", mv_catalog="lake", mv_schema="main", schema=tpch_schema()
    )
    names = [s.table for s in plan.sources]
    keyed = {i for i, name in enumerate(names) if name in ("orders", "lineitem")}
    (delta,) = [
        s for s in plan.maintain if s.startswith("CREATE") and s.split(" AS ")[0].endswith("_delta")
    ]
    netted = sqlglot.parse_one(delta, read="duckdb").find(exp.Select)
    assert netted is not None
    return netted, keyed


@pytest.mark.parametrize("query", ["4", "17", "21"])
def test_terms_of_changed_keys_group_only_those_keys(query):
    netted, keyed = _append_delta(query)
    checked = 0
    for term in _branches(netted.args["from_"].this.this):
        assert isinstance(term, exp.Select)
        where = term.args["where"].sql()
        guards = {int(i) for i in re.findall(r"\.changed_(\d+)\)", where)}
        if not guards or not guards <= keyed:
            continue  # a dimension's change: not what an append touches
        for relation in _grouped_relations(term):
            checked += 1
            assert " IN (SELECT " in relation.sql(), (
                f"term guarded by {guards} groups {relation.alias_or_name} whole"
            )
    assert checked


# dbt's shape (integration_tests' customer_orders and order_facts, staging views inlined):
# the joined relations and the grouped one read their tables through projections and filters
STAGED = {
    "customer_orders": """
        WITH customers AS (SELECT * FROM (SELECT customer_id, name, country FROM customers) AS s),
        orders AS (SELECT order_id, customer_id, order_date FROM orders WHERE status <> 'x'),
        summary AS (SELECT customer_id, count(*) AS n, max(order_date) AS last_order
                    FROM orders GROUP BY customer_id)
        SELECT customers.*, coalesce(summary.n, 0) AS n, summary.last_order
        FROM customers LEFT JOIN summary ON summary.customer_id = customers.customer_id""",
    "order_facts": """
        WITH orders AS (SELECT order_id, customer_id FROM orders WHERE status <> 'x'),
        customers AS (SELECT customer_id, name FROM customers),
        totals AS (SELECT order_id, count(*) AS lines, sum(amount) AS amount
                   FROM (SELECT order_id, quantity * price AS amount FROM items) AS i
                   GROUP BY order_id)
        SELECT orders.*, customers.name, totals.lines, totals.amount
        FROM orders LEFT JOIN customers ON customers.customer_id = orders.customer_id
        LEFT JOIN totals ON totals.order_id = orders.order_id""",
}
STAGED_SCHEMA = {
    "customers": {"customer_id": "INT", "name": "VARCHAR", "country": "VARCHAR"},
    "orders": {"order_id": "INT", "customer_id": "INT", "order_date": "DATE", "status": "VARCHAR"},
    "items": {"order_id": "INT", "quantity": "INT", "price": "DECIMAL(10, 2)"},
}
# the tables whose changed keys reach the grouped relation by an equality of its key (a
# customer's change reaches order_facts' totals only through the orders of that customer)
STAGED_KEYED = {"customer_orders": {"customers", "orders"}, "order_facts": {"orders", "items"}}


@pytest.mark.parametrize("view", sorted(STAGED))
def test_staged_relations_offer_their_changed_keys(view):
    """A projection of one table's changes (a staging model, a CTE) is cheap to read again,
    so it offers its changed keys as the table's changes do: every term that joins the
    grouped relation groups only the changed keys, and no term computes the grouped
    relation's delta (its affected groups regrouped at two snapshots) more than once, where
    its changed keys (the affected groups) would do."""
    plan = compile_ivm(
        STAGED[view], mv_name="v", mv_catalog="lake", mv_schema="main", schema=STAGED_SCHEMA
    )
    names = [s.table for s in plan.sources]
    keyed = {i for i, name in enumerate(names) if name in STAGED_KEYED[view]}
    (delta,) = [
        s for s in plan.maintain if s.startswith("CREATE") and s.split(" AS ")[0].endswith("_delta")
    ]
    terms = sqlglot.parse_one(delta, read="duckdb").find(exp.Union)  # under the netting
    assert terms is not None
    checked = 0
    for term in _branches(terms):
        assert isinstance(term, exp.Select)
        regrouped = [
            c for c in term.find_all(exp.CTE) if c.alias_or_name.startswith("_ivm_affected")
        ]
        assert len(regrouped) <= 1, f"a term regroups {len(regrouped)} times:\n{term.sql()}"
        guards = {int(i) for i in re.findall(r"\.changed_(\d+)\)", term.args["where"].sql())}
        if not guards <= keyed:
            continue  # a change whose keys reach the grouped relation only through a join
        for relation in _grouped_relations(term):
            if relation.find(exp.CTE) is not None:
                continue  # the grouped relation's own delta: its affected groups
            checked += 1
            assert " IN (SELECT " in relation.sql(), f"{relation.alias_or_name} grouped whole"
    assert checked


def _reads_source_state(select: exp.Select) -> bool:
    """Whether ``select`` reads a source's state directly: FROM ``(SELECT * FROM t AT ...)``,
    or a read shared through the same key column (``SELECT ... FROM _ivm_kept_<n> WHERE
    ...``, ``engines.ducklake.old_states``)."""
    source = select.args.get("from_")
    if source is None or not isinstance(source.this, exp.Subquery):
        return False
    inner = source.this.this
    if not isinstance(inner, exp.Select):
        return False
    table = inner.args["from_"].this
    return table.args.get("when") is not None or _shared_read(table)


def _shared_read(table: exp.Expr) -> bool:
    return isinstance(table, exp.Table) and table.name.startswith("_ivm_kept_")


def test_a_subquery_grouped_over_a_grouped_subquery_reads_the_changed_keys_only():
    """TPC-H Q18: ``o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
    HAVING ...)``, a DISTINCT (the decorrelated IN) of an aggregate. In every term an append
    to orders or lineitem makes, each grouping over lineitem's state groups the changed keys
    only (the key filter pushed through the DISTINCT into the aggregate, or a NULL key's
    term), and the orders and lineitem that the subquery's delta joins are read for its
    changed keys (its affected groups, known from the changes), not whole."""
    netted, keyed = _append_delta("18")
    groupings = states = 0
    for term in _branches(netted.args["from_"].this.this):
        assert isinstance(term, exp.Select)
        guards = {int(i) for i in re.findall(r"\.changed_(\d+)\)", term.args["where"].sql())}
        if not guards or not guards <= keyed:
            continue
        for select in term.find_all(exp.Select):
            if (select.args.get("group") or select.args.get("distinct")) and _reads_source_state(
                select
            ):
                groupings += 1
                # its own key filter, or (a NULL key's term) the test right above it
                own, above = select.args.get("where"), select.parent_select.args.get("where")
                keyed_here = own is not None and " IN (SELECT " in own.sql()
                null_key = any(w is not None and " IS NULL" in w.sql() for w in (own, above))
                assert keyed_here or null_key, select.sql()
        for relation in [term.args["from_"].this] + [j.this for j in term.args.get("joins") or []]:
            inner = relation.this if isinstance(relation, exp.Subquery) else None
            if not isinstance(inner, exp.Select) or _reads_source_state(inner):
                continue
            table = inner.args["from_"].this
            if isinstance(table, exp.Table) and (
                table.name in ("orders", "lineitem") or _shared_read(table)
            ):
                states += 1
                assert " IN (SELECT " in relation.sql(), f"{relation.alias_or_name} read whole"
    assert groupings and states


@pytest.mark.parametrize("query", ["13", "13_inner"])
def test_old_state_through_a_key_filter_is_derived_from_the_new_state(query):
    """TPC-H Q13 recomputes its changed customers' order counts at both ends of the window,
    each through the same key filter on orders: the old read is the new read minus the change
    copy (``engines.ducklake.old_states``), so no read of orders at the cursor carries that
    key filter and one shared CTE reads orders at the end for it."""
    plan = compile_ivm(
        tpch_view(query), mv_name="v", mv_catalog="lake", mv_schema="main", schema=tpch_schema()
    )
    (delta,) = [
        s for s in plan.maintain if s.startswith("CREATE") and s.split(" AS ")[0].endswith("_delta")
    ]
    statement = sqlglot.parse_one(delta, read="duckdb")
    kept = {c.alias for c in statement.find_all(exp.CTE) if c.alias.startswith("_ivm_kept_")}
    assert kept
    for table in statement.find_all(exp.Table):
        when = table.args.get("when")
        if table.name != "orders" or when is None or "cursor" not in when.sql():
            continue
        where = table.parent_select.args.get("where")
        assert where is None or "_ivm_affected" not in where.sql()


def test_reads_through_one_key_column_share_one_read():
    """TPC-H Q17 reads lineitem through the changed parts in several terms, at both ends of
    the window (the outer lineitem, the subquery's average per part): those reads share one
    key-filtered read of lineitem at the end (``_ivm_kept_<n>``), the old ones derived from it."""
    plan = compile_ivm(
        tpch_view("17"), mv_name="v", mv_catalog="lake", mv_schema="main", schema=tpch_schema()
    )
    (delta,) = [
        s for s in plan.maintain if s.startswith("CREATE") and s.split(" AS ")[0].endswith("_delta")
    ]
    statement = sqlglot.parse_one(delta, read="duckdb")
    shared = [
        c
        for c in statement.find_all(exp.CTE)
        if c.alias.startswith("_ivm_kept_") and c.this.find(exp.Table).name == "lineitem"
    ]
    assert len(shared) == 1
    reads = [t for t in statement.find_all(exp.Table) if t.name == shared[0].alias]
    assert len(reads) >= 4
