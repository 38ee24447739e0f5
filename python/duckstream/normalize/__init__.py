"""Rewrites from the user's SELECT to the normal form the operator tree is built from.

Like sqlglot's optimizer: one transformation per module, each a pure function from AST to
AST, applied in order by :func:`normalize`.
"""

from __future__ import annotations

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


def normalize(
    expression: exp.Expr,
    *,
    dialect: str,
    catalog: str,
    schema: str,
    sources: dict[str, dict] | None = None,
    columns: dict | None = None,
    grand_total_over_no_rows: bool = True,
) -> exp.Select:
    """Validate, then rewrite ``expression`` into the form the operator tree expects."""
    return normalize_forms(
        expression,
        dialect=dialect,
        catalog=catalog,
        schema=schema,
        sources=sources,
        columns=columns,
        grand_total_over_no_rows=grand_total_over_no_rows,
    )[0]


def normalize_forms(
    expression: exp.Expr,
    *,
    dialect: str,
    catalog: str,
    schema: str,
    sources: dict[str, dict] | None = None,
    columns: dict | None = None,
    grand_total_over_no_rows: bool = True,
) -> tuple[exp.Select, exp.Query]:
    """:func:`normalize`'s SELECT, and the view's query as a recomputation runs it: the
    same, qualified, its CTEs inlined, before the rewrites that serve maintenance alone
    (subqueries kept as the user wrote them, not decorrelated into joins; windows not
    isolated; unions not rewritten). The same rows, and the engine plans it as the user's
    query: an ``EXISTS`` as a semi-join rather than a join to a ``DISTINCT`` of the whole
    subquery, a correlated aggregate over the outer keys alone (TPC-H Q4, Q17, Q21)."""
    # the time functions as the refresh's clock: not refused as volatile
    expression = pin_clock(expression)
    expression = temporal_filters_to_where(expression)
    validate(expression, has_schema=columns is not None)
    expression = inline_ctes(expression)
    # VALUES and series in FROM with their columns named: qualify_view then knows them
    expression = constant_relations(expression, dialect)
    # table functions over a row's columns as LATERAL joins, their columns named
    expression = lateral_functions(expression, dialect)
    expression = drop_order(expression)
    expression = rewrite_filtered_aggregates(expression)
    # a derived table and a WHERE, its names left for qualify_view to resolve as in QUALIFY
    expression = eliminate_qualify(expression, columns, dialect)
    expression = qualify_view(
        expression,
        dialect=dialect,
        catalog=catalog,
        schema=schema,
        sources=sources,
        columns=columns,
    )
    # after qualify_view: the keys are the items as resolved
    expression = expand_group_by_all(expression)
    validate(expression, has_schema=True, after_qualify=True)
    # after validation: these introduce _ivm_ names
    expression = rewrite_distinct_on(expression)
    expression = rewrite_top_k(expression)
    # a LATERAL subquery's LIMIT stays (re-evaluated per row): its ties broken
    expression = lateral_subqueries(expression)
    # after the top-k: its ORDER BY / LIMIT apply to the union of the grouping sets
    expression = expand_grouping_sets(expression, grand_total_over_no_rows)
    recompute = expression.copy()
    assert isinstance(recompute, exp.Query)
    # a correlation repeated in each branch of an OR is one equality (TPC-DS Q41)
    expression = factor_disjunctions(expression)
    # an EXISTS correlated by one inequality compares an aggregate (TPC-H Q21)
    expression = aggregate_inequalities(expression)
    expression = decorrelate_subqueries(expression)
    check_subqueries(expression)  # what decorrelate_subqueries left in place
    expression = isolate_windows(expression)
    expression = rewrite_union(expression)
    expression = wrap_set_operation(expression)
    assert isinstance(expression, exp.Select)
    return expression, recompute


__all__ = ["normalize", "normalize_forms"]
