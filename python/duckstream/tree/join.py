"""Inner join of the leaves of one FROM clause (comma joins, JOIN ... ON, USING, CROSS).

Delta rule, for leaves R1 .. Rn in FROM order, with signed multiplicities:

    Δ(R1 ⋈ … ⋈ Rn) = Σ_i  R1_new ⋈ … ⋈ R(i-1)_new ⋈ ΔRi ⋈ R(i+1)_old ⋈ … ⋈ Rn_old

``_old`` is the leaf at the cursor, ``_new`` at the refresh's end snapshot. Unlike the
two-term rule over post-update states, this stays right when partners on both sides change
in the same window (delete r and its only partner s: the term ΔR ⋈ S_old still sees s).
Term i keeps the rows' multiplicity of ΔRi and is guarded by "a source under Ri changed", so
at run time only the terms of changed sources do any work.

>>> from sqlglot import parse_one
>>> q = parse_one("SELECT * FROM r JOIN s ON r.k = s.k")
>>> len(q.args["joins"])
1
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.base import Block, Context, Leaf, Term


@dataclass
class Join(Block):
    """The FROM clause as a template: each leaf replaced by a placeholder ``:i``."""

    from_: exp.Expr
    joins: tuple[exp.Join, ...]
    leaves: list[Leaf]

    def sources(self) -> list[Source]:
        return [s for leaf in self.leaves for s in leaf.sources()]

    def _term(self, relations: list[exp.Expr], **kwargs) -> Term:
        def fill(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Placeholder):
                return relations[int(node.name)].copy()
            return node

        from_ = self.from_.copy().transform(fill)
        joins = tuple(j.copy().transform(fill) for j in self.joins)
        return Term(from_, tuple(j for j in joins if isinstance(j, exp.Join)), **kwargs)

    def state_terms(self, ctx: Context, version: Version) -> list[Term]:
        return [self._term([leaf.state(ctx, version) for leaf in self.leaves])]

    def delta_terms(self, ctx: Context) -> list[Term]:
        terms = []
        for i, changed_leaf in enumerate(self.leaves):
            relations = []
            mult: exp.Expr | None = None
            for j, leaf in enumerate(self.leaves):
                if j < i:
                    relations.append(leaf.state(ctx, Version.NEW))
                elif j == i:
                    relation, mult = leaf.delta(ctx)
                    relations.append(relation)
                else:
                    relations.append(leaf.state(ctx, Version.OLD))
            guard = exp.or_(*(ctx.engine.changed(s) for s in changed_leaf.sources()))
            rows = changed_leaf.delta_rows(ctx)
            terms.append(
                self._term(
                    relations,
                    mult=mult,
                    guards=(exp.paren(guard),),
                    delta_alias=changed_leaf.name if rows is not None else None,
                    delta_rows=rows,
                )
            )
        return terms
