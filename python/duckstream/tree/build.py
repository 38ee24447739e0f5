"""Build the operator tree of a normalized SELECT, bottom-up.

A SELECT block becomes Join (its FROM leaves) -> Filter (WHERE) -> Project / Distinct /
Aggregate; a subquery in FROM becomes a Derived leaf over its own tree; a set operation
becomes UnionAll or IntersectExcept over its branches' trees (``UNION`` was rewritten to
DISTINCT over ``UNION ALL``). The top of the view is not built here: the compiler hands its
block to a sink (see ``duckstream.sinks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from duckstream.clock import clock_kinds
from duckstream.engines.base import Source
from duckstream.errors import UnsupportedSQLError, ViewSQLError
from duckstream.expressions import CTE_MARK, conjuncts, has_window
from duckstream.recursion import parts as recursive_parts
from duckstream.recursion import self_reference
from duckstream.tree.aggregate import Aggregate
from duckstream.tree.base import Block, Context, Leaf, Relation
from duckstream.tree.constant import ConstantLeaf, ConstantRelation, reads_no_table
from duckstream.tree.derived import Derived
from duckstream.tree.distinct import Distinct
from duckstream.tree.filter import Filter
from duckstream.tree.intersect_except import IntersectExcept
from duckstream.tree.join import Join
from duckstream.tree.lateral_function import LateralFunction
from duckstream.tree.lateral_subquery import LateralSubquery
from duckstream.tree.project import Project
from duckstream.tree.recursive import RecursiveCTE, SelfReference
from duckstream.tree.scan import Scan
from duckstream.tree.shared_cte import SharedCte
from duckstream.tree.temporal_filter import TemporalFilter
from duckstream.tree.top_k import TopK, top_k_form
from duckstream.tree.union import UnionAll
from duckstream.tree.window import Window, partition_keys

ResolveTable = Callable[[exp.Table], Source]


@dataclass
class SelectParts:
    """A SELECT split into what the operators need."""

    block: Block
    items: list[exp.Expr]
    names: list[str]
    groups: list[exp.Expr]
    having: exp.Expr | None
    distinct: bool

    @property
    def aggregated(self) -> bool:
        return bool(self.groups) or any(i.find(exp.AggFunc) for i in self.items)


def output_name(item: exp.Expr) -> str:
    """The column name a select item produces."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return item.sql()


def split_select(select: exp.Select, ctx: Context, resolve: ResolveTable) -> SelectParts:
    # a SELECT without FROM that reads the clock (one that reads nothing that changes is a
    # constant relation; one that reads a table in a subquery, refused by normalize) is one
    # row: the clock's values, read from a one-row constant relation
    from_ = (
        select.args["from_"].this.copy()
        if select.args.get("from_") is not None
        else exp.Values(
            expressions=[exp.tuple_(exp.Literal.number(1))],
            alias=exp.TableAlias(
                this=exp.to_identifier("_ivm_one"), columns=[exp.to_identifier("_ivm_one")]
            ),
        )
    )
    joins = tuple(j.copy() for j in select.args.get("joins") or [])
    leaves: list[Leaf] = []

    def placeholder(node: exp.Expr) -> exp.Expr:
        """Replace a FROM item by ``:i`` and remember its leaf."""
        alias = node.args.get("alias")
        if isinstance(node, exp.Values) or (
            isinstance(node, exp.Table) and isinstance(node.this, exp.GenerateSeries)
        ):
            ctx.features.add("constant_relation")
            leaves.append(ConstantLeaf(node.copy()))
        elif isinstance(node, exp.Lateral) and not isinstance(node.this, exp.Subquery):
            ctx.features.add("lateral_function")
            leaves.append(LateralFunction(node.copy()))
        elif isinstance(node, exp.Lateral):
            ctx.features.add("lateral_subquery")
            tables = [
                resolve(t) for t in node.find_all(exp.Table) if isinstance(t.this, exp.Identifier)
            ]
            outer = frozenset(leaf.name for leaf in leaves)
            leaves.append(LateralSubquery(node.copy(), tables, outer))
        elif isinstance(node, exp.Table):
            alias = alias or exp.TableAlias(this=exp.to_identifier(node.name))
            leaves.append(Scan(resolve(node), alias))
        elif self_reference(node):  # a recursive CTE's term reading the CTE
            leaves.append(SelfReference(node.args["alias"].copy()))
        elif isinstance(node, exp.Subquery) and isinstance(
            node.this, exp.Select | exp.SetOperation
        ):
            if alias is None:
                raise UnsupportedSQLError("derived_table", "a subquery in FROM needs an alias")
            if not alias.name.startswith("_ivm_"):  # not one normalize made
                ctx.features.add("derived_table")
            elif alias.name == "_ivm_u":  # normalize.rewrite_union's
                ctx.features.add("union")
            elif alias.name.startswith("_ivm_sq"):  # normalize.decorrelate_subqueries'
                ctx.features.add("subquery")
            relation = build_relation(node.this, ctx, resolve)
            shared = ctx.shared_ctes.get((node.meta.get(CTE_MARK, ""), node.this.sql()))
            if shared is not None:  # a CTE read more than once: its delta and states shared
                ctx.features.add("shared_cte")
                leaves.append(SharedCte(relation, alias, shared))
            else:
                leaves.append(Derived(relation, alias))
        else:
            raise UnsupportedSQLError(
                "from_item", f"only tables and subqueries may stand in FROM: `{node.sql()}`"
            )
        return exp.Placeholder(this=str(len(leaves) - 1))

    from_ = placeholder(from_)
    new_joins = []
    for join in joins:
        join.set("this", placeholder(join.this))
        new_joins.append(join)
    block: Block = Join(exp.From(this=from_).this, tuple(new_joins), leaves)
    if len(leaves) > 1:
        ctx.features.add("join")
        if any(j.side for j in new_joins):
            ctx.features.add("outer_join")
        if len({s.fqn for s in block.sources()}) < len(block.sources()):
            ctx.features.add("self_join")
    where = select.args.get("where")
    if where is not None:
        every = conjuncts(where.this)
        temporal = [c for c in every if clock_kinds(c)]  # the compiler kept only these marks
        plain = [c for c in every if not clock_kinds(c)]
        if plain:
            ctx.features.add("filter")
            block = Filter(block, exp.and_(*(c.copy() for c in plain)))
        if temporal:
            ctx.features.add("temporal_filter")
            block = TemporalFilter(block, exp.and_(*(c.copy() for c in temporal)))
    items = [i.copy() for i in select.expressions]
    names = [output_name(i) for i in items]
    if len(set(n.lower() for n in names)) < len(names):
        raise UnsupportedSQLError(
            "duplicate_column", f"output columns must have distinct names: {', '.join(names)}"
        )
    items = [
        i if isinstance(i, exp.Alias) else exp.alias_(i, n)
        for i, n in zip(items, names, strict=True)
    ]
    group = select.args.get("group")
    groups = [g.copy() for g in group.expressions] if group else []
    having = select.args.get("having")
    return SelectParts(
        block=block,
        items=items,
        names=names,
        groups=groups,
        having=having.this.copy() if having else None,
        distinct=bool(select.args.get("distinct")),
    )


def build_relation(select: exp.Query, ctx: Context, resolve: ResolveTable) -> Relation:
    """The closed operator of a SELECT or set operation used inside the view (a derived
    table, a branch of a set operation)."""
    while isinstance(select, exp.Subquery):  # a parenthesized branch
        select = select.this
    recursive = recursive_parts(select)
    if recursive is not None:
        return build_recursive(*recursive, select.named_selects, ctx, resolve)
    if reads_no_table(select):
        ctx.features.add("constant_relation")
        return ConstantRelation(select.copy())
    if isinstance(select, exp.SetOperation):
        return build_set_operation(select, ctx, resolve)
    assert isinstance(select, exp.Select), select
    top_k = build_top_k(select, ctx, resolve)
    if top_k is not None:
        return top_k
    parts = split_select(select, ctx, resolve)
    if has_window(select):  # normalize.isolate_windows left it alone over a derived table
        ctx.features.add("window_function")
        if not partition_keys(parts.items):
            # one partition: every change recomputes the window's whole input (explain says so)
            ctx.features.add("window_recomputes_whole_input")
        return Window(parts.block, parts.items, parts.names)
    if parts.aggregated:
        ctx.features.add("aggregate")
        relation: Relation = Aggregate(
            parts.block, parts.groups, parts.items, parts.names, parts.having
        )
        if parts.distinct:
            raise UnsupportedSQLError(
                "distinct_aggregate", "SELECT DISTINCT over GROUP BY in a subquery"
            )
        return relation
    if parts.distinct:
        ctx.features.add("distinct")
        return Distinct(parts.block, parts.items, parts.names)
    ctx.features.add("project")
    return Project(parts.block, parts.items, parts.names)


def build_top_k(select: exp.Select, ctx: Context, resolve: ResolveTable) -> TopK | None:
    """The top-k operator of a SELECT that ``normalize.rewrite_top_k`` wrote (ORDER BY ...
    LIMIT), or ``None`` (then a window numbers the rows, :mod:`duckstream.tree.window`)."""
    form = top_k_form(select)
    if form is None:
        return None
    ctx.features.add("top_k")
    parts = split_select(form.numbered, ctx, resolve)
    read = form.numbered.args["from_"].this.this
    return TopK(
        parts.block,
        parts.items[:-1],  # the numbering's own item last
        [o.copy() for o in form.order],
        list(read.named_selects),
        form.names,
        form.skip,
        form.count,
    )


def build_recursive(
    base: exp.Query,
    step: exp.Select,
    distinct: bool,
    names: list[str],
    ctx: Context,
    resolve: ResolveTable,
) -> Relation:
    """A recursive CTE (``normalize.recursive_ctes``'s stand-in) over its two terms."""
    ctx.features.add("recursive_cte")
    if not ctx.engine.recursive_ctes:
        raise UnsupportedSQLError(
            "recursive_cte", f"{ctx.engine.dialect} has no recursive CTEs (WITH RECURSIVE)"
        )
    base_relation = build_relation(base, ctx, resolve)
    parts = split_select(step, ctx, resolve)
    join = parts.block
    while not isinstance(join, Join):  # under its filters
        assert isinstance(join, Filter | TemporalFilter), join
        join = join.input
    found = [leaf for leaf in join.leaves if isinstance(leaf, SelfReference)]
    assert len(found) == 1, "normalize.recursive_ctes takes one recursive reference"
    if parts.aggregated or parts.distinct or has_window(step):
        raise UnsupportedSQLError(
            "recursive_cte",
            f"an aggregate, DISTINCT or window in a recursive term: `{step.sql()[:80]}`",
        )
    if any(j.side for j in join.joins):
        raise UnsupportedSQLError("recursive_cte", "an outer join in a recursive term")
    step_relation = Project(parts.block, parts.items, parts.names)
    return RecursiveCTE(
        base_relation, step_relation, found[0], list(names), distinct, found[0].name
    )


def build_set_operation(node: exp.SetOperation, ctx: Context, resolve: ResolveTable) -> Relation:
    """``UNION ALL``, ``INTERSECT [ALL]`` or ``EXCEPT [ALL]`` over its two branches."""
    left = build_relation(node.this, ctx, resolve)
    right = build_relation(node.expression, ctx, resolve)
    operation = node.key  # union, intersect, except
    every = not node.args.get("distinct")
    if len(left.columns()) != len(right.columns()):
        raise ViewSQLError(
            f"the branches of {operation.upper()} have {len(left.columns())} and"
            f" {len(right.columns())} columns: `{node.sql()[:80]}`"
        )
    ctx.features.add(f"{operation}_all" if every else operation)
    if operation == "union":
        if not every:
            raise AssertionError("UNION is rewritten to DISTINCT over UNION ALL first")
        return UnionAll([left, right])
    return IntersectExcept(operation, every, left, right)
