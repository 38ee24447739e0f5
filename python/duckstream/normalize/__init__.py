"""Rewrites from the user's SELECT to the normal form the operator tree is built from.

Like sqlglot's optimizer: one transformation per module, each a pure function from AST to
AST, applied in order by :func:`normalize` from the tuple :data:`RULES`. A rule takes the
expression and, by the names of its other parameters, the settings it needs (``dialect``,
``catalog``, ``schema``, ``sources``, ``columns``, ``grand_total_over_no_rows``), as
sqlglot's ``optimize`` passes its keyword arguments. Each rule has a fixture file of input
and expected pairs, ``tests/fixtures/normalize/<rule>.sql`` (``tests/test_normalize.py``).

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT g, count(*) AS n FROM t GROUP BY ALL")
>>> normalize(view, dialect="duckdb", catalog="dl", schema="main", rules=(qualify_view,)).sql()
'SELECT t.g AS g, COUNT(*) AS n FROM dl.main.t AS t GROUP BY ALL'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from duckstream.normalize.aggregate_inequalities import aggregate_inequalities
from duckstream.normalize.constant_relations import constant_relations
from duckstream.normalize.decorrelate_subqueries import decorrelate_subqueries
from duckstream.normalize.drop_order import drop_order
from duckstream.normalize.eliminate_qualify import eliminate_qualify
from duckstream.normalize.expand_group_by_all import expand_group_by_all
from duckstream.normalize.expand_grouping_sets import expand_grouping_sets
from duckstream.normalize.factor_disjunctions import factor_disjunctions
from duckstream.normalize.inline_ctes import inline_ctes
from duckstream.normalize.isolate_windows import isolate_windows
from duckstream.normalize.lateral_functions import lateral_functions
from duckstream.normalize.lateral_subqueries import lateral_subqueries
from duckstream.normalize.pin_clock import pin_clock
from duckstream.normalize.qualify_view import qualify_view
from duckstream.normalize.rewrite_distinct_on import rewrite_distinct_on
from duckstream.normalize.rewrite_filtered_aggregates import rewrite_filtered_aggregates
from duckstream.normalize.rewrite_top_k import rewrite_top_k
from duckstream.normalize.rewrite_union import rewrite_union
from duckstream.normalize.temporal_filters_to_where import temporal_filters_to_where
from duckstream.normalize.validate import check_subqueries, validate
from duckstream.normalize.wrap_set_operation import wrap_set_operation
from duckstream.recursion import restore


def validate_view(expression: exp.Expr, columns: dict | None = None) -> exp.Expr:
    """Refuse what duckstream cannot maintain, as the user wrote it (:func:`validate`)."""
    validate(expression, has_schema=columns is not None)
    return expression


def validate_qualified(expression: exp.Expr) -> exp.Expr:
    """Refuse what shows only once every column is resolved (:func:`validate`)."""
    validate(expression, has_schema=True, after_qualify=True)
    return expression


def subqueries_left(expression: exp.Expr) -> exp.Expr:
    """Refuse the subqueries :func:`decorrelate_subqueries` left in place."""
    check_subqueries(expression)
    return expression


Rule = Callable[..., exp.Expr]

# The view's query as a recomputation runs it: qualified, its CTEs inlined, its top-k and
# grouping sets in the forms the operators maintain.
RECOMPUTE_RULES: tuple[Rule, ...] = (
    pin_clock,  # the time functions as the refresh's clock: not refused as volatile
    temporal_filters_to_where,
    validate_view,
    inline_ctes,
    constant_relations,  # VALUES and series named: qualify_view then knows their columns
    lateral_functions,  # table functions over a row's columns as LATERAL joins, columns named
    drop_order,
    rewrite_filtered_aggregates,
    # a derived table and a WHERE, its names left for qualify_view to resolve as in QUALIFY
    eliminate_qualify,
    qualify_view,
    expand_group_by_all,  # after qualify_view: the keys are the items as resolved
    validate_qualified,
    rewrite_distinct_on,  # after validation: these introduce _ivm_ names
    rewrite_top_k,
    lateral_subqueries,  # a LATERAL subquery's LIMIT stays (re-evaluated per row): ties broken
    # after the top-k: its ORDER BY / LIMIT apply to the union of the grouping sets
    expand_grouping_sets,
)

# The rewrites that serve maintenance alone: subqueries decorrelated into joins, windows
# isolated, unions rewritten.
MAINTENANCE_RULES: tuple[Rule, ...] = (
    factor_disjunctions,  # a correlation repeated in each branch of an OR (TPC-DS Q41)
    aggregate_inequalities,  # an EXISTS correlated by one inequality (TPC-H Q21)
    decorrelate_subqueries,
    subqueries_left,
    isolate_windows,
    rewrite_union,
    wrap_set_operation,
)

RULES: tuple[Rule, ...] = RECOMPUTE_RULES + MAINTENANCE_RULES


def normalize(expression: exp.Expr, *, rules: tuple[Rule, ...] = RULES, **settings: Any) -> Any:
    """Run ``rules`` in order over ``expression``, each given the ``settings`` it names."""
    for rule in rules:
        expression = rule(expression, **_settings_for(rule, settings))
    return expression


def _settings_for(rule: Rule, settings: dict[str, Any]) -> dict[str, Any]:
    parameters = list(inspect.signature(rule).parameters)[1:]
    return {name: settings[name] for name in parameters if name in settings}


def normalize_forms(expression: exp.Expr, **settings: Any) -> tuple[exp.Select, exp.Query]:
    """:func:`normalize`'s SELECT, and the view's query as a recomputation runs it: the
    same, qualified, its CTEs inlined, before the rewrites that serve maintenance alone
    (:data:`MAINTENANCE_RULES`: subqueries kept as the user wrote them, not decorrelated
    into joins; windows not isolated; unions not rewritten). The same rows, and the engine
    plans it as the user's query: an ``EXISTS`` as a semi-join rather than a join to a
    ``DISTINCT`` of the whole subquery, a correlated aggregate over the outer keys alone
    (TPC-H Q4, Q17, Q21)."""
    expression = normalize(expression, rules=RECOMPUTE_RULES, **settings)
    recompute = restore(expression)  # recursive CTEs as written (not their stand-ins)
    assert isinstance(recompute, exp.Query)
    select = normalize(expression, rules=MAINTENANCE_RULES, **settings)
    assert isinstance(select, exp.Select)
    return select, recompute


__all__ = ["MAINTENANCE_RULES", "RECOMPUTE_RULES", "RULES", "normalize", "normalize_forms"]
