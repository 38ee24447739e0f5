"""Bag sink: the view has no aggregate and no DISTINCT at its top, so rows may repeat.

The table holds the view's rows as they are, duplicates included, plus one hidden column
``_ivm_row`` that numbers every row uniquely. A refresh nets the view's delta by content
(sum of signed multiplicities per distinct row), deletes ``-n`` rows of each content whose
net count is negative (picked by ``_ivm_row``) and inserts ``n`` copies of each content whose
net count is positive, under fresh ``_ivm_row`` numbers.

When the view's relation only grows on appends (scans, filters, projections, inner joins,
UNION ALL: :meth:`~duckstream.tree.base.Relation.only_grows`), a window in which every
changed source has appends only removes nothing: the insert alone applies it (an engine
that knows its window may run it, :meth:`~duckstream.engines.base.Engine.replace_rows`).
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Version
from duckstream.expressions import RaiseError, parenthesized
from duckstream.plan import Step
from duckstream.sinks.base import Sink
from duckstream.tree.aggregate import null_safe_match
from duckstream.tree.base import Context, Relation, col

ROW = "_ivm_row"
# The error an append-only INSERT raises on a change that would remove a row (a runner then
# applies the change with the general statement).
APPENDS_REMOVE = "duckstream: a window of appends removes rows from "


class BagSink(Sink):
    # how the view's table is kept, in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "rows kept with their duplicates, each numbered by _ivm_row;"
        " the delta netted by content, then that many copies deleted or inserted"
    )

    def __init__(self, ctx: Context, relation: Relation) -> None:
        super().__init__(ctx)
        self.relation = relation

    def visible_columns(self) -> list[str]:
        return self.relation.columns()

    def _numbered(self, query: exp.Query) -> exp.Select:
        """``query``'s rows with fresh ``_ivm_row`` numbers."""
        number = exp.Add(
            this=self.engine.fresh_row_ids_base(),
            expression=exp.Window(this=exp.RowNumber()),
        )
        cols = [col(c, "_ivm_v") for c in self.visible_columns()]
        return exp.select(*cols, exp.alias_(number, ROW)).from_(exp.paren(query).as_("_ivm_v"))

    def no_rows(self) -> exp.Select:
        state = self.relation.state(self.ctx, Version.CURRENT)
        return (
            exp.select(
                *(col(c, "_ivm_v") for c in self.visible_columns()),
                exp.alias_(exp.cast(exp.Literal.number(0), exp.DataType.build("bigint")), ROW),
            )
            .from_(exp.paren(state).as_("_ivm_v"))
            .where(exp.false())
            .limit(0)
        )

    def all_columns(self) -> list[str]:
        return [*self.visible_columns(), ROW]

    def populate(self, view: exp.Query | None = None) -> list[exp.Insert]:
        if view is not None and view.named_selects == self.visible_columns():
            return [self._insert(self._numbered(view))]
        return [self._insert(self._numbered(self.relation.state(self.ctx, Version.NEW)))]

    def maintain(self) -> list[Step]:
        cols = self.visible_columns()
        delta = self.temp("delta")
        # the steps the delta asks to run before it (where temporary tables are made once)
        first: list[Step] = []
        self.ctx.steps_first = first if self.engine.shares_ctes else None
        try:
            changed = self.relation.delta(self.ctx)
        finally:
            self.ctx.steps_first = None
        net = (
            exp.select(
                *(col(c) for c in cols),
                exp.alias_(exp.cast(exp.Sum(this=col(MULT)), exp.DataType.build("bigint")), MULT),
            )
            .from_(parenthesized(changed, "_ivm_d"))
            .group_by(*(col(c) for c in cols), copy=False)
            .having(
                exp.NEQ(this=exp.Sum(this=col(MULT)), expression=exp.Literal.number(0)),
                copy=False,
            )
        )
        numbered_net = exp.select(
            "*", exp.alias_(exp.Window(this=exp.RowNumber()), "_ivm_id")
        ).from_(parenthesized(net, "_ivm_n"))
        match = null_safe_match([col(c, "m") for c in cols], [col(c, "d") for c in cols])
        # the -n oldest rows (by _ivm_row) of each content whose net count n is negative
        number = exp.Window(
            this=exp.RowNumber(),
            partition_by=[col("_ivm_id", "d")],
            order=exp.Order(expressions=[exp.Ordered(this=col(ROW, "m"))]),
        )
        paired = (
            exp.select(
                col(ROW, "m"),
                exp.alias_(exp.Neg(this=col(MULT, "d")), "_ivm_k"),
                exp.alias_(number, "_ivm_rn"),
            )
            .from_(self.mv_table().as_("m"))
            .join(delta.as_("d"), on=match)
            .where(exp.LT(this=col(MULT, "d"), expression=exp.Literal.number(0)))
        )
        doomed = (
            exp.select(col(ROW))
            .from_(parenthesized(paired, "_ivm_x"))
            .where(exp.LTE(this=col("_ivm_rn"), expression=col("_ivm_k")), copy=False)
        )
        copies = (
            exp.select(
                *(col(c, "d") for c in cols),
                exp.alias_(self.engine.copies(col(MULT, "d")), "_ivm_c"),
            )
            .from_(delta.as_("d"))
            .where(exp.GT(this=col(MULT, "d"), expression=exp.Literal.number(0)))
        )
        # the delete removes rows only for contents whose net count is negative: an append
        # to a view like this one has none, and the delete's scan of the view's table is spared
        negative = (
            exp.select("1")
            .from_(delta.copy().as_("d"))
            .where(exp.LT(this=col(MULT, "d"), expression=exp.Literal.number(0)))
        )
        replace = self.engine.replace_rows(
            [ROW],
            doomed,
            self._numbered(copies),
            self.all_columns(),
            removes=negative,
            appends=self._appends() if self.relation.only_grows() else None,
        )
        return [*first, self.engine.create_temp(delta, numbered_net), *replace]

    def _appends(self) -> exp.Select:
        """The rows to insert when the view only grows (every changed source appended, and
        its relation monotone): the delta's rows as they come, not netted (every row counts
        +n, and no row cancels another), numbered; failing on a row of negative count,
        which the monotone operators never give (if one did, inserting alone would leave a
        row in place that must go: fail instead, writing nothing)."""
        cols = self.visible_columns()
        negative = exp.LT(this=col(MULT, "d"), expression=exp.Literal.number(0))
        message = f"{APPENDS_REMOVE}{self.engine.tgt.fqn}"
        checked = exp.Case(
            ifs=[exp.If(this=negative, true=RaiseError(this=exp.Literal.string(message)))],
            default=exp.GT(this=col(MULT, "d"), expression=exp.Literal.number(0)),
        )
        copies = (
            exp.select(
                *(col(c, "d") for c in cols),
                exp.alias_(self.engine.copies(col(MULT, "d")), "_ivm_c"),
            )
            .from_(exp.paren(self.relation.delta(self.ctx)).as_("d"))
            .where(checked)
        )
        return self._numbered(copies)
