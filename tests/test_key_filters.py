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


@pytest.mark.parametrize("query", ["4", "17", "21"])
def test_terms_of_changed_keys_group_only_those_keys(query):
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
