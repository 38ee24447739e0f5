"""How a view is maintained, operator by operator: ``python -m duckstream explain "<sql>"``.

The view is compiled as :func:`~duckstream.compiler.compile_ivm` compiles it (so what cannot
be maintained raises the same :class:`~duckstream.errors.UnsupportedSQLError`), then its
operator tree is walked: each operator with what it works on and its delta rule in a line
(each operator class's ``rule``), the sources and the columns a refresh reads, what a refresh
recomputes rather than derives from the changes (groups, partitions, rows touched), the
tables it scans whole, when it falls back to a rebuild, and the normalized SQL.

>>> x = explain("SELECT k, sum(v) AS s FROM t WHERE v > 0 GROUP BY k", mv_name="totals")
>>> x.sources
{'dl.main.t': ['k', 'v']}
>>> [(o.depth, o.operator) for o in x.operators]
[(0, 'grouped table'), (1, 'aggregate'), (1, 'filter'), (2, 'scan')]
>>> x.operators[1].detail, x.operators[2].detail
('SUM(t.v)', 't.v > 0')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from duckstream.clock import at_clock
from duckstream.compiler import build_tree, compile_ivm
from duckstream.engines import engine_for
from duckstream.engines.base import Engine
from duckstream.plan import IVMPlan, Naming
from duckstream.sinks.aggregates import KEPT
from duckstream.sinks.bag import BagSink
from duckstream.sinks.grouped import GroupedSink
from duckstream.tree.aggregate import Aggregate
from duckstream.tree.constant import ConstantLeaf, ConstantRelation
from duckstream.tree.derived import Derived
from duckstream.tree.distinct import Distinct
from duckstream.tree.filter import Filter
from duckstream.tree.intersect_except import IntersectExcept
from duckstream.tree.join import Join
from duckstream.tree.key_filters import key_semijoins
from duckstream.tree.lateral_function import LateralFunction
from duckstream.tree.lateral_subquery import LateralSubquery
from duckstream.tree.project import Project
from duckstream.tree.recursive import RecursiveCTE, SelfReference
from duckstream.tree.scan import Scan
from duckstream.tree.shared_cte import SharedCte
from duckstream.tree.temporal_filter import TemporalFilter
from duckstream.tree.top_k import TopK
from duckstream.tree.union import UnionAll
from duckstream.tree.window import Window, partition_keys

# When each engine cannot read a window incrementally (the refresh rebuilds, or refuses
# under strategy="incremental").
_REBUILDS = {
    "duckdb": "a source altered, recreated or renamed away, or a cursor snapshot expired",
    "spark": (
        "a source replaced, rolled back or with equality delete files, its schema changed,"
        " or a cursor snapshot expired"
    ),
}


@dataclass(frozen=True)
class Operator:
    """One operator of the tree: how deep, its kind, what it works on, its delta rule."""

    depth: int
    operator: str
    detail: str
    rule: str


@dataclass
class Explanation:
    """What ``explain`` found; :meth:`text` prints it."""

    view: str
    dialect: str
    sql: str  # the normalized view SQL, as the engine runs it
    sources: dict[str, list[str] | None]  # source -> the columns read (None: all, unknown)
    operators: list[Operator]
    recomputed: list[str] = field(default_factory=list)  # what a refresh recomputes
    whole_scans: list[str] = field(default_factory=list)  # tables read whole, and when
    rebuilds: list[str] = field(default_factory=list)  # when a refresh rebuilds instead
    features: list[str] = field(default_factory=list)
    clock: list[str] = field(default_factory=list)  # the clock values it reads (current_date)

    def as_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "dialect": self.dialect,
            "sql": self.sql,
            "sources": self.sources,
            "operators": [o.__dict__ for o in self.operators],
            "recomputed": self.recomputed,
            "whole_scans": self.whole_scans,
            "rebuilds": self.rebuilds,
            "features": self.features,
            "clock": self.clock,
        }

    def text(self) -> str:
        lines = [f"view {self.view} ({self.dialect})", "", "sources read (columns):"]
        for source, columns in self.sources.items():
            lines.append(f"  {source}: {', '.join(columns) if columns is not None else 'all'}")
        if self.clock:
            alone = "" if self.sources else " (its only source: no table)"
            lines.append(f"  the clock: {', '.join(self.clock)}{alone}")
        lines += ["", "operators (each with its delta rule):"]
        for o in self.operators:
            indent = "  " * (o.depth + 1)
            detail = f" {o.detail}" if o.detail else ""
            lines.append(f"{indent}{o.operator}{detail}")
            lines.append(f"{indent}  Δ: {o.rule}")
        sections = (
            ("recomputed by a refresh (not derived from the changes alone):", self.recomputed),
            ("tables a refresh scans whole:", self.whole_scans),
            ("a refresh rebuilds instead when:", self.rebuilds),
        )
        for title, items in sections:
            lines += ["", title, *(f"  - {item}" for item in items or ["nothing"])]
        lines += ["", f"features: {', '.join(self.features)}", "", "normalized SQL:", self.sql]
        return "\n".join(lines)


def explain(
    view_sql: str,
    *,
    mv_name: str = "mv",
    mv_catalog: str = "dl",
    mv_schema: str = "main",
    dialect: str = "duckdb",
    sources: dict[str, dict] | None = None,
    schema: dict | None = None,
    max_recursion_depth: int = 1000,
) -> Explanation:
    """How ``view_sql`` is maintained (arguments as :func:`~duckstream.compiler.compile_ivm`'s)."""
    plan = compile_ivm(
        view_sql,
        mv_name=mv_name,
        mv_catalog=mv_catalog,
        mv_schema=mv_schema,
        dialect=dialect,
        sources=sources,
        schema=schema,
        max_recursion_depth=max_recursion_depth,
    )
    engine = engine_for(dialect)
    with key_semijoins(engine.key_semijoins):
        tree = build_tree(
            view_sql, engine, Naming(mv_name=mv_name), mv_catalog, mv_schema, dialect, sources,
            schema, max_recursion_depth=max_recursion_depth,
        )  # fmt: skip
    walk = _Walk(engine)
    walk.sink(tree.sink)
    return Explanation(
        view=plan.mv_table,
        dialect=dialect,
        sql=engine.pretty(plan.view_sql),
        sources={
            s.fqn: None if s.columns is None else sorted(s.columns) for s in tree.found.values()
        },
        operators=walk.operators,
        recomputed=walk.recomputed,
        whole_scans=_whole_scans(plan),
        rebuilds=_rebuilds(plan, dialect),
        features=sorted(plan.features),
        clock=sorted(engine.clock_filters | engine.clock_rebuilds),
    )


def _whole_scans(plan: IVMPlan) -> list[str]:
    found = []
    for read in plan.maintain_reads or []:
        if read.whole:
            when = " and ".join(" or ".join(sorted(c)) for c in read.when) or "every refresh"
            found.append(f"{read.table} (grouped before the changes restrict it), when {when}")
    return list(dict.fromkeys(found))


def _rebuilds(plan: IVMPlan, dialect: str) -> list[str]:
    found = [
        _REBUILDS.get(dialect, _REBUILDS["duckdb"]),
        "auto (the default): the estimate, or the view's measured times, say a rebuild is"
        " cheaper, or a source changed by more than 10% of its rows",
    ]
    if not plan.sources:  # its only source is the clock: no table to alter or estimate
        found = ["no clock was recorded with the view's commit (it was never built)"]
    if _reads_clock_elsewhere(plan):
        found.append(
            "the view reads the clock (current_date, now()...) outside a temporal filter and"
            " the value it reads moved since the last refresh"
        )
    if "window_recomputes_whole_input" in plan.features:
        found.append(
            "(not a rebuild, but as costly) any change reaching a window without PARTITION BY,"
            " or a LIMIT, recomputes that window's whole input at both snapshots"
        )
    return found


def _reads_clock_elsewhere(plan: IVMPlan) -> bool:
    """Whether the view reads the clock outside temporal filters (its window pin lists the
    clock values whose moving makes it rebuild)."""
    steps = plan.steps.get("maintain", []) if plan.steps else []
    return any(getattr(getattr(s, "spec", None), "clock_rebuilds", ()) for s in steps)


def _column_of(key: exp.Expr, below: object) -> exp.Expr:
    """``key``, a column of the derived table a window reads (``normalize.isolate_windows``
    numbers its columns), as that table computes it: ``t.k`` rather than ``_ivm_wi._ivm_c0``.
    """
    if not (isinstance(key, exp.Column) and isinstance(below, Join) and len(below.leaves) == 1):
        return key
    leaf = below.leaves[0]
    if not (isinstance(leaf, Derived) and isinstance(leaf.query, Project)):
        return key
    for name, item in zip(leaf.query.names, leaf.query.items, strict=False):
        if name == key.name:
            return item.unalias() if isinstance(item, exp.Alias) else item
    return key


class _Walk:
    """The operators of a tree, depth first, and what each recomputes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.operators: list[Operator] = []
        self.recomputed: list[str] = []

    def sql(self, expressions: list[exp.Expr] | exp.Expr) -> str:
        items = expressions if isinstance(expressions, list) else [expressions]
        return ", ".join(self.engine.sql(e) for e in items)

    def add(self, depth: int, operator: str, detail: str, rule: str) -> None:
        self.operators.append(Operator(depth, operator, detail, rule))

    def sink(self, sink: object) -> None:
        if isinstance(sink, GroupedSink):
            keys = self.sql(sink.groups) if sink.groups else "(one row: no GROUP BY)"
            self.add(0, "grouped table", f"by {keys}", sink.rule)
            for spec in sink.aggregates:
                self.add(1, "aggregate", self.sql(spec.node), KEPT[spec.kind])
                if spec.kind == "holistic":
                    self.recomputed.append(
                        f"{self.sql(spec.node)}: the groups the changes touch, from the sources"
                    )
                elif spec.kind in ("min", "max"):
                    self.recomputed.append(
                        f"{self.sql(spec.node)}: a group whose extreme may be deleted"
                    )
            if sink.having is not None:
                self.add(1, "having", self.sql(sink.having), "kept out groups rescanned")
                self.recomputed.append("groups HAVING keeps out, when the changes touch them")
            self.node(sink.block, 1)
        elif isinstance(sink, BagSink):
            self.add(0, "table", "of rows (duplicates kept)", sink.rule)
            self.node(sink.relation, 1)

    def node(self, node: object, depth: int) -> None:
        if isinstance(node, Scan):
            self.add(depth, "scan", f"{node.source.fqn} AS {node.name}", node.rule)
        elif isinstance(node, LateralFunction):
            self.add(depth, "lateral function", self.sql(node.lateral), node.rule)
        elif isinstance(node, LateralSubquery):
            self.add(depth, "lateral subquery", f"AS {node.name}", node.rule)
            self.recomputed.append(
                f"LATERAL subquery {node.name}: re-evaluated at both snapshots for the rows"
                " whose correlation keys the changes touch (every row without an equality)"
            )
        elif isinstance(node, SharedCte):
            self.add(depth, "CTE read more than once", f"AS {node.name}", node.rule)
            self.node(node.query, depth + 1)
        elif isinstance(node, Derived):
            self.add(depth, "derived table", f"AS {node.name}", node.rule)
            self.node(node.query, depth + 1)
        elif isinstance(node, TemporalFilter):
            # each mark of the clock as the value it stands for (``current_date``)
            read = at_clock(node.predicate, lambda kind: exp.var(kind))
            self.add(depth, "temporal filter", self.sql(read), node.rule)
            self.node(node.input, depth + 1)
        elif isinstance(node, ConstantLeaf):
            self.add(depth, "constant relation", f"AS {node.name}", node.rule)
        elif isinstance(node, ConstantRelation):
            self.add(depth, "constant relation", ", ".join(node.columns()), node.rule)
        elif isinstance(node, Filter):
            self.add(depth, "filter", self.sql(node.predicate), node.rule)
            self.node(node.input, depth + 1)
        elif isinstance(node, Join):
            self.join(node, depth)
        elif isinstance(node, Project):
            self.add(depth, "project", ", ".join(node.names), node.rule)
            self.node(node.input, depth + 1)
        elif isinstance(node, Aggregate):
            keys = self.sql(node.groups) if node.groups else "(no GROUP BY)"
            self.add(depth, "aggregate", f"by {keys}", node.rule)
            self.recomputed.append(f"aggregate by {keys}: the groups the changes touch")
            self.node(node.input, depth + 1)
        elif isinstance(node, Distinct):
            self.add(depth, "distinct", ", ".join(node.names), node.rule)
            self.recomputed.append("DISTINCT: the rows the changes touch, recounted")
            self.node(node.input, depth + 1)
        elif isinstance(node, Window):
            keys = [_column_of(key, node.input) for key in partition_keys(node.items)]
            by = f"partitioned by {self.sql(keys)}" if keys else "over the whole input"
            self.add(depth, "window", by, node.rule)
            self.recomputed.append(
                f"window {by}: the partitions the changes touch"
                if keys
                else "window without PARTITION BY: its whole input, when a change reaches it"
            )
            self.node(node.input, depth + 1)
        elif isinstance(node, TopK):
            limit = f"LIMIT {node.count}" + (f" OFFSET {node.skip}" if node.skip else "")
            self.add(depth, "top-k", limit, node.rule)
            kept = "from the view's table" if node.kept_rows is not None else "at the cursor"
            self.recomputed.append(
                f"top-k ({limit}): the rows it keeps read {kept}; its whole input at the new"
                " snapshot only when a kept row leaves (or falls behind) the rows kept"
            )
            self.node(node.input, depth + 1)
        elif isinstance(node, UnionAll):
            self.add(depth, "union all", f"{len(node.inputs)} branches", node.rule)
            for branch in node.inputs:
                self.node(branch, depth + 1)
        elif isinstance(node, IntersectExcept):
            name = f"{node.operation}{' all' if node.all else ''}"
            self.add(depth, name, "", node.rule)
            self.recomputed.append(f"{name.upper()}: the rows the changes touch, recounted")
            self.node(node.left, depth + 1)
            self.node(node.right, depth + 1)
        elif isinstance(node, RecursiveCTE):
            kind = "UNION" if node.distinct else "UNION ALL"
            rule = f"{node.rule}; {self.engine.recursion}"
            self.add(depth, "recursive CTE", f"{node.name} ({kind})", rule)
            if node.old_rows is None:
                self.recomputed.append(
                    f"recursive CTE {node.name}: its old state, from the sources at the cursor"
                    " (the changes' seeds join it)"
                )
            self.node(node.base, depth + 1)
            self.node(node.step, depth + 1)
        elif isinstance(node, SelfReference):
            self.add(depth, "recursive reference", f"AS {node.name}", node.rule)
        else:  # an operator this walk does not know yet: named, not explained
            self.add(depth, type(node).__name__, "", getattr(node, "rule", ""))

    def join(self, node: Join, depth: int) -> None:
        names = [leaf.name for leaf in node.leaves]
        kinds = node.kinds
        if not kinds:  # FROM one relation: nothing to say but the relation
            self.node(node.leaves[0], depth)
            return
        else:
            chain = names[0] + "".join(
                f" {kind.upper()} JOIN {name}" for kind, name in zip(kinds, names[1:], strict=False)
            )
            self.add(depth, "join", chain, node.rule)
            lateral = (LateralFunction, LateralSubquery)
            outer = [
                k
                for k, leaf in zip(kinds, node.leaves[1:], strict=True)
                if k in ("left", "right", "full") and not isinstance(leaf, lateral)
            ]
            if outer:
                self.recomputed.append(
                    f"{', '.join(k.upper() for k in outer)} JOIN: the NULL-extended rows of the"
                    " join keys the changes touch, at both snapshots"
                )
        for leaf in node.leaves:
            self.node(leaf, depth + 1)
