"""Top-k: ``ORDER BY ... LIMIT k [OFFSET m]``, as :mod:`duckstream.normalize.rewrite_top_k`
writes it (the input's rows numbered in the ORDER BY, ties broken by every column, and the
numbers ``m < rank <= m + k`` kept).

Recomputing the numbering reads the whole ordered input at both snapshots (a window without
PARTITION BY, :mod:`.window`). The classic top-k maintenance reads only the input's delta and
the rows kept: with ``K = m + k``, ``T`` the first ``K`` rows of the old input ``R`` (``≤``
the order, a total order of distinct rows) and ``t_K`` the last of them, every row of ``R``
outside ``T`` comes at or after ``t_K``. So, with the candidates

    C = (T ∸ ΔR⁻) ⊎ ΔR⁺        (as bags: per row, max(0, count in T + net count in ΔR))

the rows of the new input outside ``C`` still come at or after ``t_K``, and

    topK(R_new) = topK(C)       when |T| < K (then T is all of R), or when C has at
                                at least K rows (duplicates counted) ordered ≤ t_K;
    topK(R_new) = recomputed    otherwise (a kept row left or fell behind t_K, and fewer than
                                K rows the kept set can vouch for remain: the refill).

and the delta is ``ranks (m, K] of topK(R_new)  −  ranks (m, K] of T``. Only the refill
reads the whole input, at the new snapshot only; an append to a top-k by a sum that only
grows (TPC-H Q3, Q10, Q18 with their LIMIT) never refills. ``T`` is read from the view's
table when it holds exactly this top-k (the view's top, without OFFSET: the compiler's
:func:`~duckstream.compiler.build_tree` sets :attr:`TopK.kept_rows`); else it is the
numbering at the cursor (the old state, recomputed, as before; the new one is spared).

Example: ``SELECT id, v FROM s ORDER BY v DESC LIMIT 2`` holds ``(1, 30), (2, 20)``;
``s`` also has ``(3, 10)``. Insert ``(4, 25)`` and delete ``(2, 20)``:
``C = {(1, 30), (4, 25)}``, ``t_2 = (2, 20)``, two rows of ``C`` come before it: decided,
the delta is ``+(4, 25) −(2, 20)``; ``(3, 10)`` is never read. Delete ``(1, 30)`` instead:
``C = {(2, 20)}``, one row before ``t_2``: the refill numbers ``s`` at the new snapshot.

Over an aggregate whose groups are all output columns (the usual top-k: TPC-H Q3, Q10, Q18)
a row names its group, and ``ΔR`` is the touched groups' old rows out and their new rows in;
an old row matters only where ``T`` holds it, so

    C = {t ∈ T : t's group untouched}  ⊎  γ(R_new ⋉ touched)

reads the touched groups at the new snapshot only (the aggregate's own delta,
:func:`~duckstream.tree.aggregate.regroup_delta`, recomputes them at both). Any other input
gives its delta.

Where the engine makes a temporary table once (:attr:`~duckstream.tree.base.Context.
steps_first`, DuckLake), the parts are steps before the delta's statement: the touched
groups' keys, ``T`` numbered, ``C`` ranked beside ``t_K``, the decision a run-time value,
then the delta. The touched groups recomputed read their sources through key filters pushed
into the sources' states: the keys are a table whose size DuckDB knows (as a CTE, DuckDB
1.5.5 estimated them at billions of rows and built its hash tables on the sources instead:
TPC-H Q18 with its LIMIT took 13.8 s of CPU that way, SF 1 append, so the CTE form keeps
the states unfiltered). The decision, a constant of the delta's statement there, rules the
refill's scans out when planning; as a one-row CTE (where temporary tables are views:
Spark), the refill and the derived answer are each behind a test of it (``EXISTS (SELECT 1
FROM _ivm_decided_<n> WHERE [NOT] _ivm_decided)``), also inside every SELECT of the refill's
input (:func:`~duckstream.tree.base.gated_states`). DuckDB 1.5.5 skips only the scans such a
test stands beside: TPC-H Q10 with its LIMIT read lineitem whole for a refill it did not run
(the hash join's other side). TPC-H with LIMIT, SF 1 append, CPU medians of 3 alternating
runs on a loaded machine, before -> after the steps (recomputing): Q3 523 -> 174 ms (215),
Q18 2214 -> 355 ms (510), Q10 903 -> 654 ms (280: the touched customers' groups need the
lineitems of all their orders, which no key of the change prunes, so lineitem is read whole
as recomputing reads it; bounding a touched group's new sum by ``t_K``'s plus its delta
could spare that, not done).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Source, Version
from duckstream.expressions import conjuncts, ident, parenthesized
from duckstream.tree.aggregate import Aggregate, null_safe_match
from duckstream.tree.base import (
    Block,
    Context,
    Relation,
    Term,
    changed_flag,
    col,
    gated_states,
    union_all,
)
from duckstream.tree.derived import Derived
from duckstream.tree.join import Join
from duckstream.tree.key_filters import states_unfiltered
from duckstream.tree.project import Project

TOP = "_ivm_top"  # the numbered rows (normalize.rewrite_top_k)
RANK = "_ivm_rank"  # their numbers (normalize.number_rows)
INPUT = "_ivm_wi"  # the input the numbering reads (normalize.isolate_windows)


@dataclass(frozen=True)
class TopKForm:
    """A SELECT as :mod:`~duckstream.normalize.rewrite_top_k` writes a top-k, split:
    ``numbered`` (``SELECT _ivm_wi.c AS name, ..., ROW_NUMBER() OVER (ORDER BY ...) AS
    _ivm_rank FROM (...) AS _ivm_wi``), its ``order``, the output ``names`` and the ranks
    kept, ``skip < rank <= skip + count``."""

    numbered: exp.Select
    order: list[exp.Ordered]
    names: list[str]
    skip: int
    count: int


def top_k_form(select: exp.Expr) -> TopKForm | None:
    """``select`` split as a top-k (:class:`TopKForm`), or ``None`` when it is not one
    exactly as the rewrite wrote it, or when its numbering does not order the input's rows
    totally (each input column among the order's keys): the window operator keeps it then.

    >>> from sqlglot import parse_one
    >>> form = top_k_form(parse_one(
    ...     "SELECT _ivm_top.a AS a FROM (SELECT _ivm_wi.c0 AS a, ROW_NUMBER() OVER"
    ...     " (ORDER BY _ivm_wi.c0 DESC) AS _ivm_rank FROM (SELECT t.a AS c0 FROM t) AS _ivm_wi)"
    ...     " AS _ivm_top WHERE _ivm_top._ivm_rank > 1 AND _ivm_top._ivm_rank <= 4"))
    >>> form.names, form.skip, form.count, [o.sql() for o in form.order]
    (['a'], 1, 3, ['_ivm_wi.c0 DESC'])
    >>> top_k_form(parse_one("SELECT a FROM t")) is None
    True
    """
    if not isinstance(select, exp.Select) or _has_any(
        select, "joins", "group", "having", "distinct", "order", "limit", "offset", "qualify"
    ):
        return None
    source = select.args.get("from_")
    top = source.this if source is not None else None
    if not (isinstance(top, exp.Subquery) and top.alias == TOP):
        return None
    names = []
    for item in select.expressions:
        column = item.this if isinstance(item, exp.Alias) else None
        if not (isinstance(column, exp.Column) and column.table == TOP):
            return None
        names.append(item.alias)
    bounds = _rank_bounds(select.args.get("where"))
    numbered = top.this
    if bounds is None or not isinstance(numbered, exp.Select):
        return None
    if _has_any(numbered, "joins", "where", "group", "having", "distinct", "order", "limit"):
        return None
    inner = numbered.args.get("from_")
    read = inner.this if inner is not None else None
    if not (isinstance(read, exp.Subquery) and read.alias == INPUT):
        return None
    *plain, rank = numbered.expressions
    window = rank.this if isinstance(rank, exp.Alias) and rank.alias == RANK else None
    if not (
        isinstance(window, exp.Window)
        and isinstance(window.this, exp.RowNumber)
        and not window.args.get("partition_by")
        and isinstance(window.args.get("order"), exp.Order)
    ):
        return None
    if [i.alias for i in plain] != names or not all(
        isinstance(i, exp.Alias) and _input_column(i.this) for i in plain
    ):
        return None
    order = list(window.args["order"].expressions)
    keyed = {o.this.name for o in order if _input_column(o.this)}
    if not set(read.this.named_selects) <= keyed:
        return None
    skip, end = bounds
    return TopKForm(numbered, order, names, skip, end - skip)


def _has_any(select: exp.Select, *args: str) -> bool:
    return any(select.args.get(a) for a in args)


def _input_column(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.table == INPUT


def _rank_bounds(where: exp.Where | None) -> tuple[int, int] | None:
    """``(m, K)`` of ``WHERE _ivm_top._ivm_rank > m AND _ivm_top._ivm_rank <= K``."""
    found: dict[type, int] = {}
    for condition in conjuncts(where.this if where is not None else None):
        rank, bound = condition.this, condition.expression
        if not (
            isinstance(condition, exp.GT | exp.LTE)
            and isinstance(rank, exp.Column)
            and rank.table == TOP
            and rank.name == RANK
            and isinstance(bound, exp.Literal)
            and bound.is_int
            and type(condition) not in found
        ):
            return None
        found[type(condition)] = int(bound.name)
    if exp.GT not in found or exp.LTE not in found:
        return None  # OFFSET without LIMIT: every row after the m-th, no top-k to keep
    return found[exp.GT], max(found[exp.LTE], found[exp.GT])


@dataclass
class TopK(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "topK((T ∸ ΔR⁻) ⊎ ΔR⁺) − T, T the rows kept: "
        "the input recomputed at the new snapshot only when a kept row leaves the first K"
    )
    input: Block  # the one derived table ``_ivm_wi`` the numbering reads
    items: list[exp.Expr]  # ``_ivm_wi.<column> AS <name>``: the output
    order: list[exp.Ordered]  # over ``_ivm_wi``'s columns: a total order of its rows
    columns_read: list[str]  # ``_ivm_wi``'s columns
    names: list[str]
    skip: int
    count: int
    # the rows kept (the old ``T``), from the view's table: a query of ``names``
    kept_rows: exp.Query | None = None

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def keep_from(self, table: exp.Table) -> None:
        """Read ``T`` from ``table``, the view's table, which holds this top-k's rows as they
        are: only without OFFSET (the table then holds every row of
        ``T``), and when each column the numbering reads is an output column."""
        outputs = {item.this.name for item in self.items}
        if self.skip == 0 and set(self.columns_read) <= outputs:
            self.kept_rows = exp.select(*(col(n) for n in self.names)).from_(table)

    @property
    def last(self) -> int:
        """``K``: the rows kept run up to this rank."""
        return self.skip + self.count

    def _numbered(self, term: Term) -> exp.Select:
        number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=self._order(INPUT)))
        return term.select(*self.items, exp.alias_(number, RANK))

    def _ranks(self, numbered: exp.Query, low: int, high: int) -> exp.Select:
        """The rows of ``numbered`` ranked in ``(low, high]``, in the output columns."""
        rank = col(RANK, TOP)
        kept = exp.and_(
            exp.GT(this=rank, expression=exp.Literal.number(low)),
            exp.LTE(this=rank.copy(), expression=exp.Literal.number(high)),
        )
        items = [exp.alias_(col(n, TOP), ident(n)) for n in self.names]
        return exp.select(*items).from_(parenthesized(numbered, TOP)).where(kept, copy=False)

    def state(self, ctx: Context, version: Version) -> exp.Query:
        with states_unfiltered():
            terms = self.input.state_terms(ctx, version)
        assert len(terms) == 1, "isolate_windows gives the numbering one derived table"
        return self._ranks(self._numbered(terms[0]), self.skip, self.last)

    def _order(self, alias: str | None) -> list[exp.Expr]:
        """The order's keys over the relation ``alias`` (of the input's columns)."""
        return [_on(o, alias) for o in self.order]

    def _over(self, alias: str) -> list[exp.Expr]:
        """The output columns, as the items compute them from ``alias``."""
        return [_on(i, alias) for i in self.items]

    def delta(self, ctx: Context) -> exp.Query:
        ctx.counter += 1
        parts = _Parts(ctx, ctx.counter)
        cols = self.columns_read
        guard = changed_flag(ctx, [self.input])
        last = exp.Literal.number(self.last)

        def plain(alias: str | None = None) -> list[exp.Expr]:
            return [col(c, alias) for c in cols]

        # T, in the input's columns, one row per row, numbered in the order (_ivm_k)
        if self.kept_rows is not None:
            by_name = {item.this.name: item.alias for item in reversed(self.items)}
            old = exp.select(*(exp.alias_(col(by_name[c], "_ivm_v"), ident(c)) for c in cols))
            old = old.from_(parenthesized(self.kept_rows.copy(), "_ivm_v")).where(guard)
            number = exp.Window(this=exp.RowNumber(), order=self._order_expr(None))
            numbered_old = exp.select(*plain(), exp.alias_(number, "_ivm_k")).from_(
                parenthesized(old, "_ivm_o")
            )
        else:
            with states_unfiltered():
                (term,) = self.input.state_terms(ctx, Version.OLD)
            numbered = term.select(
                *(exp.alias_(col(c, INPUT), ident(c)) for c in cols),
                exp.alias_(exp.Window(this=exp.RowNumber(), order=self._order_expr(INPUT)), RANK),
            )
            numbered_old = (
                exp.select(*plain(TOP), exp.alias_(col(RANK, TOP), "_ivm_k"))
                .from_(parenthesized(numbered, TOP))
                .where(exp.and_(guard, _in_ranks(col(RANK, TOP), 0, self.last)), copy=False)
            )
        grouped = self._grouped_input()
        touched = None
        if grouped is not None:
            # over groups: the touched groups' keys, made first where temporary tables are
            # (then DuckDB knows how few they are, see the module docstring)
            aggregate, outputs, keys = grouped
            touched = parts.place("touched", aggregate.touched(ctx))
        kept = parts.place("kept", numbered_old)
        # C: T and the input's changes, netted by content, the rows left with a count
        one = exp.cast(exp.Literal.number(1), exp.DataType.build("bigint"))
        kept_once = exp.select(*plain(), exp.alias_(one, "_ivm_n")).from_(
            kept.copy().as_("_ivm_kept")
        )
        if grouped is not None:
            # the kept rows of the groups the changes leave untouched, and the touched groups
            # as they are now (their old rows matter only where T holds them)
            assert touched is not None
            if parts.steps is not None:  # a table of known size: key filters into the states
                now = aggregate.regrouped_at(ctx, touched, Version.NEW)
            else:
                with states_unfiltered():
                    now = aggregate.regrouped_at(ctx, touched, Version.NEW)
            regrouped = exp.select(
                *(exp.alias_(col(outputs[c], "_ivm_a"), ident(c)) for c in cols),
                exp.alias_(col(MULT, "_ivm_a"), "_ivm_n"),
            ).from_(parenthesized(now, "_ivm_a"))
            any_touched = parts.any_row("touched", touched)
            if any_touched is not None:
                regrouped = regrouped.where(any_touched, copy=False)
            changes = [regrouped]
            match = null_safe_match(
                [col(f"_ivm_g{i}", "_ivm_t") for i in keys.values()],
                [col(c, "_ivm_kept") for c in keys],
            )
            untouched = exp.not_(
                exp.Exists(this=exp.select("1").from_(touched.copy().as_("_ivm_t")).where(match))
            )
            kept_once = kept_once.where(untouched, copy=False)
        else:
            with states_unfiltered():
                terms = self.input.delta_terms(ctx)
            changes = [
                t.select(
                    *(exp.alias_(col(c, INPUT), ident(c)) for c in cols),
                    exp.alias_(t.multiplicity(), "_ivm_n"),
                )
                for t in terms
            ]
        both = union_all([kept_once, *changes])
        count = exp.Sum(this=col("_ivm_n"))
        candidates = (
            exp.select(
                *plain(), exp.alias_(exp.cast(count, exp.DataType.build("bigint")), "_ivm_n")
            )
            .from_(parenthesized(both, "_ivm_u"))
            .group_by(*plain(), copy=False)
            .having(exp.GT(this=count.copy(), expression=exp.Literal.number(0)), copy=False)
        )
        # t_K beside C, after the rows equal to it: the running count there is how many rows
        # of C come at or before it
        zero = exp.cast(exp.Literal.number(0), exp.DataType.build("bigint"))
        boundary = (
            exp.select(
                *plain(), exp.alias_(zero, "_ivm_n"), exp.alias_(exp.Literal.number(1), "_ivm_last")
            )
            .from_(kept.copy())
            .where(_in_ranks(col("_ivm_k"), self.last - 1, self.last), copy=False)
        )
        beside = union_all(
            [
                exp.select(
                    *plain(), "_ivm_n", exp.alias_(exp.Literal.number(0), "_ivm_last")
                ).from_(parenthesized(candidates, "_ivm_s")),
                boundary,
            ]
        )
        running = exp.Window(
            this=exp.Sum(this=col("_ivm_n")),
            order=exp.Order(
                expressions=[
                    *self._order(None),
                    exp.Ordered(this=col("_ivm_last"), nulls_first=False),
                ]
            ),
            spec=exp.WindowSpec(
                kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"
            ),
        )
        ranked = parts.place(
            "ranked",
            exp.select(*plain(), "_ivm_n", "_ivm_last", exp.alias_(running, "_ivm_upto")).from_(
                parenthesized(beside, "_ivm_r")
            ),
        )
        # decided: T was all of R (no K-th row), or C vouches for K rows
        vouched = exp.func("COALESCE", exp.Max(this=col("_ivm_upto")), last.copy())
        decided, undecided = parts.decision(
            exp.select(exp.alias_(exp.GTE(this=vouched, expression=last.copy()), "_ivm_decided"))
            .from_(ranked.copy())
            .where(exp.EQ(this=col("_ivm_last"), expression=exp.Literal.number(1)))
        )
        # the new ranks (m, K] of C, each row's count cut to the part of it inside them
        upto, own = col("_ivm_upto", "_ivm_c"), col("_ivm_n", "_ivm_c")
        before = exp.Sub(this=upto, expression=own)
        inside = exp.Sub(
            this=exp.Least(this=upto.copy(), expressions=[last.copy()], ignore_nulls=True),
            expression=exp.Greatest(
                this=before.copy(), expressions=[exp.Literal.number(self.skip)], ignore_nulls=True
            ),
        )
        derived = (
            exp.select(*self._over("_ivm_c"), exp.alias_(inside, MULT))
            .from_(ranked.copy().as_("_ivm_c"))
            .where(
                exp.and_(
                    exp.EQ(this=col("_ivm_last", "_ivm_c"), expression=exp.Literal.number(0)),
                    exp.LT(this=before.copy(), expression=last.copy()),
                    exp.GT(this=upto.copy(), expression=exp.Literal.number(self.skip)),
                    decided,
                ),
                copy=False,
            )
        )
        # the refill: the new ranks of the input at the end snapshot, read only when undecided
        with gated_states(undecided):
            refilled = self.state(ctx, Version.NEW)
        refill = (
            exp.select(*(col(c, "_ivm_f") for c in self.names), exp.alias_(one.copy(), MULT))
            .from_(parenthesized(refilled, "_ivm_f"))
            .where(exp.and_(guard.copy(), undecided.copy()), copy=False)
        )
        # minus the old ranks (m, K]: the rows of T after the first m
        minus = exp.cast(exp.Literal.number(-1), exp.DataType.build("bigint"))
        gone = exp.select(*self._over("_ivm_o"), exp.alias_(minus, MULT)).from_(
            kept.copy().as_("_ivm_o")
        )
        if self.skip:
            gone = gone.where(
                exp.GT(this=col("_ivm_k", "_ivm_o"), expression=exp.Literal.number(self.skip)),
                copy=False,
            )
        return parts.around(union_all([derived, refill, gone]))

    def _grouped_input(self) -> tuple[Aggregate, dict[str, str], dict[str, int]] | None:
        """When the input is an aggregate's rows renamed (derived tables of plain columns,
        as the normalizer wraps it), whose groups are all among the input's columns: the
        aggregate, the aggregate's output column of each input column, and the group's
        position of each input column that is one; else ``None``."""
        outputs = {c: c for c in self.columns_read}
        block = self.input
        while True:
            leaf = _single_derived(block)
            if leaf is None:
                return None
            relation = leaf.query
            if isinstance(relation, Aggregate):
                groups = relation.group_columns()
                if groups is None:
                    return None
                keys = {c: groups[o] for c, o in outputs.items() if o in groups}
                if set(keys.values()) != set(groups.values()):
                    return None
                return relation, outputs, keys
            inner = _single_derived(relation.input) if isinstance(relation, Project) else None
            if not isinstance(relation, Project) or inner is None:
                return None
            renamed = {}
            for item, name in zip(relation.items, relation.names, strict=True):
                column = item.unalias()
                if isinstance(column, exp.Column) and column.table == inner.name:
                    renamed[name] = column.name
            if not all(o in renamed for o in outputs.values()):
                return None
            outputs = {c: renamed[o] for c, o in outputs.items()}
            block = relation.input

    def _order_expr(self, alias: str | None) -> exp.Order:
        return exp.Order(expressions=self._order(alias))


class _Parts:
    """Where the parts of one top-k delta go: each a temporary table that a step makes before
    the delta's statement, where the sink collects such steps (:attr:`Context.steps_first`),
    the decision a run-time value then; else CTEs of that statement, the decision a one-row
    CTE."""

    def __init__(self, ctx: Context, n: int) -> None:
        self.ctx, self.n = ctx, n
        self.steps = ctx.steps_first
        self.ctes: list[tuple[str, exp.Query]] = []

    def place(self, part: str, query: exp.Query) -> exp.Table:
        """``query`` made available as the returned table (copy it for each read)."""
        if self.steps is None:
            name = f"_ivm_{part}_{self.n}"
            self.ctes.append((name, query))
            return exp.to_table(name)
        engine = self.ctx.engine
        table = engine.temp_table(f"_ivm_{engine.slug()}_{part}_{self.n}")
        self.steps.append(engine.create_temp(table, query))
        return table

    def decision(self, query: exp.Select) -> tuple[exp.Expr, exp.Expr]:
        """The tests that the one boolean ``_ivm_decided`` of ``query``'s one row is true, and
        that it is false. A run-time value is a constant of the delta's statement: DuckDB
        1.5.5 then plans the branch it rules out as no rows, its scans gone; an ``EXISTS``
        over a CTE does not spare the builds of the hash joins it does not stand beside
        (TPC-H Q10 with its LIMIT read lineitem whole for a refill it did not run)."""
        if self.steps is None:
            decided = self.place("decided", query)
            test = col("_ivm_decided")

            def where(condition: exp.Expr) -> exp.Expr:
                return exp.Exists(this=exp.select("1").from_(decided.copy()).where(condition))

            return where(test), where(exp.not_(test.copy()))
        engine = self.ctx.engine
        name = f"decided_{self.n}"
        self.steps.append(engine.set_runtime_value(name, query))
        value = engine.runtime_value(name)
        return value, exp.not_(value.copy())

    def any_row(self, part: str, table: exp.Table) -> exp.Expr | None:
        """Where the parts are steps: a run-time value, whether ``table`` (the part
        ``part``) has a row. A constant of the statements after it: DuckDB 1.5.5 plans a
        relation under a false one as no rows, its scans gone (an append that touches no
        group of TPC-H Q18 with its LIMIT still began the scans of the touched groups'
        recomputation, ~45 ms of CPU)."""
        if self.steps is None:
            return None
        engine = self.ctx.engine
        name = f"{part}_{self.n}_any"
        has = exp.select(exp.Exists(this=exp.select("1").from_(table.copy())))
        self.steps.append(engine.set_runtime_value(name, has))
        return engine.runtime_value(name)

    def around(self, query: exp.Query) -> exp.Query:
        """``query`` with the parts placed as CTEs, in the order they were placed."""
        for name, body in self.ctes:
            query = query.with_(name, as_=body, copy=False)  # type: ignore[attr-defined]
        return query


def _single_derived(block: Block) -> Derived | None:
    """The derived table ``block`` reads, when it is a FROM of that one table and nothing
    else (no join, no filter, the alias without a column list)."""
    if not (isinstance(block, Join) and len(block.leaves) == 1 and not block.joins):
        return None
    leaf = block.leaves[0]
    if type(leaf) is not Derived or leaf.alias_node.columns:
        return None  # a shared CTE's reads go through its tables
    return leaf


def _on(node: exp.Expr, alias: str | None) -> exp.Expr:
    """``node`` with its columns of ``_ivm_wi`` read from ``alias`` (unqualified: None)."""

    def move(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table == INPUT:
            return col(n.name, alias)
        return n

    return node.copy().transform(move)


def _in_ranks(rank: exp.Expr, low: int, high: int) -> exp.Expr:
    """``low < rank <= high``, as a range: DuckDB 1.5.5 turns ``ROW_NUMBER() ... = 1`` and
    ``<= 1`` into an aggregate that gives a row of NULLs over no rows
    (:mod:`~duckstream.normalize.rewrite_top_k`)."""
    return exp.and_(
        exp.GT(this=rank, expression=exp.Literal.number(low)),
        exp.LTE(this=rank.copy(), expression=exp.Literal.number(high)),
    )
