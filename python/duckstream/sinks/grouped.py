"""Grouped sink: the view's top operator is GROUP BY (or a global aggregate, or DISTINCT).

The table holds one row per group that is in the view: the visible columns, the group keys
(a visible column when the view selects the key as is, else ``_ivm_g<i>``), the group's row
count ``_ivm_count`` and each aggregate's hidden state (``duckstream.sinks.aggregates``).

A refresh: (1) aggregate the delta rows per group (netted by content first when MIN/MAX need
it); (2) merge with the groups' old rows; (3) rescan from the sources only the groups whose
merge cannot be trusted (an extreme deleted, a holistic aggregate, a group HAVING kept out of
the table); (4) delete the affected groups and insert their new rows where the group still
has rows and passes HAVING. A global aggregate always has exactly one row.
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Version
from duckstream.expressions import map_children, parenthesized
from duckstream.plan import Step
from duckstream.sinks.aggregates import AggregateSpec
from duckstream.sinks.base import Sink
from duckstream.tree.aggregate import grouped, null_safe_match, restrict_to
from duckstream.tree.base import Block, Context, Term, col, union_all

COUNT = "_ivm_count"


class GroupedSink(Sink):
    # how the view's table is kept, in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "one row per group with hidden state: Δ aggregated per group and merged with the old row;"
        " the groups it cannot merge rescanned, then the touched groups replaced"
    )

    def __init__(
        self,
        ctx: Context,
        block: Block,
        groups: list[exp.Expr],
        items: list[exp.Expr],
        names: list[str],
        having: exp.Expr | None,
    ) -> None:
        super().__init__(ctx)
        self.block = block
        self.groups = groups
        self.names = names
        self.having = having
        self.aggregates: list[AggregateSpec] = []
        self.key_columns = [self._key_column(i, g, items, names) for i, g in enumerate(groups)]
        self.visible = [
            self._rewrite(item.unalias() if isinstance(item, exp.Alias) else item) for item in items
        ]
        self.having_rewritten = self._rewrite(having) if having is not None else None

    # -- analysis --------------------------------------------------------------------------
    @staticmethod
    def _key_column(i: int, group: exp.Expr, items: list[exp.Expr], names: list[str]) -> str:
        for item, name in zip(items, names, strict=True):
            inner = item.unalias() if isinstance(item, exp.Alias) else item
            if inner == group and not name.startswith("_ivm_"):
                return name
        return f"_ivm_g{i}"

    def _aggregate(self, node: exp.Expr) -> AggregateSpec:
        for spec in self.aggregates:
            if spec.node == node:
                return spec
        spec = AggregateSpec(node.copy(), len(self.aggregates))
        self.aggregates.append(spec)
        return spec

    def _rewrite(self, node: exp.Expr) -> exp.Expr:
        """Replace aggregates and group expressions by placeholders ``:a<i>`` / ``:g<i>``."""
        for i, group in enumerate(self.groups):
            if node == group:
                return exp.Placeholder(this=f"g{i}")
        if isinstance(node, exp.AggFunc):
            return exp.Placeholder(this=f"a{self._aggregate(node).index}")
        return map_children(node.copy(), self._rewrite)

    def _fill(self, node: exp.Expr, row: str) -> exp.Expr:
        """Turn placeholders into values read from the hidden columns of ``row``."""

        def fill(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Placeholder):
                name = n.name
                if name.startswith("g"):
                    return col(self.key_columns[int(name[1:])], row)
                return self.aggregates[int(name[1:])].value(row, self.engine)
            return n

        return node.transform(fill)

    @property
    def is_global(self) -> bool:
        return not self.groups

    def hidden_columns(self) -> list[str]:
        keys = [k for k in self.key_columns if k.startswith("_ivm_g")]
        return keys + [COUNT] + [c for a in self.aggregates for c in a.hidden_columns()]

    def state_columns(self) -> list[str]:
        """Key columns, count and aggregate state: the columns rows are merged on."""
        return (
            list(dict.fromkeys(self.key_columns))
            + [COUNT]
            + [c for a in self.aggregates for c in a.hidden_columns()]
        )

    def visible_columns(self) -> list[str]:
        return list(self.names)

    def all_columns(self) -> list[str]:
        return self.visible_columns() + self.hidden_columns()

    # -- SQL pieces ------------------------------------------------------------------------
    def _grouped_state(self, term: Term) -> exp.Select:
        """Key columns, ``_ivm_count`` and aggregate state of every group of ``term``."""
        items = [exp.alias_(g, k) for g, k in zip(self.groups, self.key_columns, strict=True)]
        items = list({k: i for i, k in zip(items, self.key_columns, strict=True)}.values())
        items.append(
            exp.alias_(exp.cast(exp.Count(this=exp.Star()), exp.DataType.build("bigint")), COUNT)
        )
        items += [i for a in self.aggregates for i in a.state_items()]
        return grouped(term.select(*items), self.groups)

    def _finish(self, rows: exp.Query, *, keep_empty: bool, flag: str | None = None) -> exp.Select:
        """Visible and hidden columns from rows of state columns, dropping empty groups and
        groups HAVING rejects; with ``flag``, keeping every row and saying in the column
        ``flag`` whether it would be kept (true) or dropped (false)."""
        r = "_ivm_r"
        items = [
            exp.alias_(self._fill(v, r), n) for v, n in zip(self.visible, self.names, strict=True)
        ]
        items += [col(c, r) for c in self.hidden_columns()]
        query = exp.select(*items).from_(parenthesized(rows.copy(), r))
        conditions = []
        if not keep_empty:
            conditions.append(exp.GT(this=col(COUNT, r), expression=exp.Literal.number(0)))
        if self.having_rewritten is not None:
            conditions.append(self._fill(self.having_rewritten, r))
        if flag is not None:
            kept = exp.and_(*conditions) if conditions else exp.true()
            return query.select(
                exp.alias_(exp.Coalesce(this=exp.paren(kept), expressions=[exp.false()]), flag),
                copy=False,
            )
        if conditions:
            query = query.where(exp.and_(*conditions), copy=False)
        return query

    def _state_rows(self, version: Version) -> exp.Query:
        return union_all(
            [self._grouped_state(t) for t in self.block.state_terms(self.ctx, version)]
        )

    # -- protocol --------------------------------------------------------------------------
    def no_rows(self) -> exp.Select:
        terms = [t.filtered(exp.false()) for t in self.block.state_terms(self.ctx, Version.CURRENT)]
        rows = union_all([self._grouped_state(t) for t in terms])
        return self._finish(rows, keep_empty=True).limit(0)

    def populate(self, view: exp.Query | None = None) -> list[exp.Insert]:
        term = self._view_term(view)
        rows = self._state_rows(Version.NEW) if term is None else self._grouped_state(term)
        return [self._insert(self._finish(rows, keep_empty=self.is_global))]

    def _view_term(self, view: exp.Query | None) -> Term | None:
        """The FROM and WHERE of ``view`` (the view's query, its subqueries kept) as a term
        to compute the table's columns over, or ``None``: only where the group keys and the
        aggregates read the view's own relations (not a decorrelated subquery's, as TPC-H
        Q11's HAVING does), and ``view`` groups by the same keys. Its HAVING is left out:
        :meth:`_finish` applies the view's."""
        if not isinstance(view, exp.Select):
            return None
        tied = [*self.groups, *(a.node for a in self.aggregates), *self.visible]
        if self.having_rewritten is not None:
            tied.append(self.having_rewritten)
        if any(_reads_subquery(e) for e in tied):
            return None
        if view.args.get("distinct") is not None:
            keys = [i.unalias() for i in view.expressions]
        else:
            group = view.args.get("group")
            keys = list(group.expressions) if group is not None else []
        if keys != self.groups:
            return None
        where = view.args.get("where")
        return Term(
            from_=view.args["from_"].this,
            joins=tuple(view.args.get("joins") or ()),
            where=(where.this,) if where is not None else (),
        )

    def _delta_rows(self) -> exp.Select:
        """Per affected group: ``_ivm_g<i>``, ``_ivm_count`` and each aggregate's delta."""
        keys = [f"_ivm_g{i}" for i in range(len(self.groups))]
        xs = {a.index: f"_ivm_x{a.index}" for a in self.aggregates if a.argument() is not None}
        netted = any(a.needs_netting() for a in self.aggregates)
        # Netting by content drops rows that cancel out: the content must include every
        # column an aggregate reads, the holistic ones' too (they are rescanned, so they
        # need the group to show up, not a value).
        read = (
            list({c.sql(): c for a in self.aggregates for c in a.read_columns()}.values())
            if netted
            else []
        )
        hs = [f"_ivm_h{i}" for i in range(len(read))]
        rows = []
        for term in self.block.delta_terms(self.ctx):
            items = [exp.alias_(g, k) for g, k in zip(self.groups, keys, strict=True)]
            items += [
                exp.alias_(arg, xs[a.index])
                for a in self.aggregates
                if (arg := a.argument()) is not None
            ]  # type: ignore[arg-type]
            items += [exp.alias_(c, h) for c, h in zip(read, hs, strict=True)]
            items.append(exp.alias_(term.multiplicity(), MULT))
            rows.append(term.select(*items))
        source: exp.Query = union_all(rows)
        if netted:
            carried = [*keys, *xs.values(), *hs]
            source = (
                exp.select(*carried, exp.alias_(exp.Sum(this=col(MULT)), MULT))
                .from_(parenthesized(source, "_ivm_dv"))
                .group_by(*carried, copy=False)
                .having(
                    exp.NEQ(this=exp.Sum(this=col(MULT)), expression=exp.Literal.number(0)),
                    copy=False,
                )
            )
        m = col(MULT)
        items: list[exp.Expr] = [col(k) for k in keys]
        items.append(exp.alias_(exp.cast(exp.Sum(this=m), exp.DataType.build("bigint")), COUNT))
        for a in self.aggregates:
            x = col(xs[a.index]) if a.index in xs else exp.null()
            items += a.delta_items(x, m)
        query = exp.select(*items).from_(parenthesized(source, "_ivm_net"))
        if keys:
            return query.group_by(*(col(k) for k in keys), copy=False)
        return query.having(
            exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)), copy=False
        )

    def _rescan_condition(self) -> exp.Expr | None:
        conditions = [c for a in self.aggregates if (c := a.rescan_condition("o", "d")) is not None]
        if self.having is not None:
            conditions.append(exp.Is(this=col(COUNT, "o"), expression=exp.null()))
        if not conditions:
            return None
        return exp.or_(*conditions)

    def maintain(self) -> list[Step]:
        delta, new, rescan = self.temp("delta"), self.temp("new"), self.temp("rescan")
        keys = [f"_ivm_g{i}" for i in range(len(self.groups))]
        unique_keys = list(dict.fromkeys(self.key_columns))
        key_of = {k: keys[self.key_columns.index(k)] for k in unique_keys}

        # (2) merge the delta with the old rows of the affected groups
        merged = [exp.alias_(col(key_of[k], "d"), k) for k in unique_keys]
        merged.append(
            exp.alias_(
                exp.Add(
                    this=exp.Coalesce(this=col(COUNT, "o"), expressions=[exp.Literal.number(0)]),
                    expression=col(COUNT, "d"),
                ),
                COUNT,
            )
        )
        merged += [m for a in self.aggregates for m in a.merged("o", "d")]
        condition = self._rescan_condition()
        if condition is not None:
            merged.append(
                exp.alias_(
                    exp.Coalesce(this=exp.paren(condition), expressions=[exp.false()]),
                    "_ivm_rescan",
                )
            )
        join_on = null_safe_match(
            [col(k, "o") for k in unique_keys], [col(key_of[k], "d") for k in unique_keys]
        )
        merge = (
            exp.select(*merged)
            .from_(delta.as_("d"))
            .join(self.mv_table().as_("o"), on=join_on, join_type="left")
        )
        statements: list[Step] = [
            self.engine.create_temp(delta, self._delta_rows()),
            self.engine.create_temp(new, merge),
        ]
        state_cols = self.state_columns()
        trusted = exp.select(*(col(c) for c in state_cols)).from_(new.copy())
        rows: exp.Query = trusted
        if condition is not None:
            # (3) rescan the groups whose merged state cannot be trusted
            trusted = trusted.where("NOT _ivm_rescan")
            count = "rescans"
            statements.append(
                self.engine.set_runtime_value(
                    count,
                    exp.select(exp.Count(this=exp.Star())).from_(new.copy()).where("_ivm_rescan"),
                )
            )
            guard = exp.GT(this=self.engine.runtime_value(count), expression=exp.Literal.number(0))
            # The subquery's columns are all _ivm_ names, so the view's (maybe unqualified)
            # group expressions still resolve to the outer FROM.
            key_items = [exp.alias_(col(k), f"_ivm_k{i}") for i, k in enumerate(self.key_columns)]
            rescan_keys = (
                exp.select(*(key_items or [exp.alias_(exp.Literal.number(1), "_ivm_one")]))
                .from_(new.copy())
                .where("_ivm_rescan")
            )
            names = [f"_ivm_k{i}" for i in range(len(self.key_columns))]
            terms = [
                restricted
                for t in self.block.state_terms(self.ctx, Version.NEW)
                for restricted in restrict_to(
                    Term(from_=t.from_, joins=t.joins, where=t.where, guards=(guard.copy(),)),
                    rescan_keys,
                    self.groups,
                    names,
                )
            ]
            recomputed = (
                exp.select(*(col(c) for c in state_cols))
                .from_(parenthesized(union_all([self._grouped_state(t) for t in terms]), "_ivm_s"))
                .where(guard.copy(), copy=False)
            )
            statements.append(self.engine.create_temp(rescan, recomputed))
            rows = exp.union(
                trusted,
                exp.select(*(col(c) for c in state_cols)).from_(rescan.copy()),
                distinct=False,
            )
        # (4) replace the affected groups
        affected = exp.select(*([col(k) for k in unique_keys] or ["1"])).from_(new.copy())
        added = self._finish(rows, keep_empty=self.is_global)
        # One row per affected group (no rescan: rows is new's): kept or removed
        upsert = self._finish(rows, keep_empty=self.is_global, flag="_ivm_keep")
        statements += self.engine.replace_rows(
            unique_keys,
            affected,
            added,
            self.all_columns(),
            upsert=upsert if unique_keys and condition is None else None,
        )
        return statements


def _reads_subquery(expression: exp.Expr) -> bool:
    """Whether ``expression`` holds a subquery or reads a decorrelated subquery's columns
    (``_ivm_sq<n>``)."""
    if expression.find(exp.Query) is not None:
        return True
    return any(c.table.startswith("_ivm_sq") for c in expression.find_all(exp.Column))
