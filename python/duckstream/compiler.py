"""compile_ivm: from a view's SELECT to the SQL that creates and maintains it.

parse -> normalize (one rewrite per module) -> operator tree -> sink -> statements.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Tokenizer

from duckstream.clock import at_clock, clock_kind
from duckstream.engines import engine_for
from duckstream.engines.base import Engine, Source, Target, Version
from duckstream.errors import UnsupportedSQLError, ViewSQLError
from duckstream.expressions import aliased, conjuncts
from duckstream.normalize import normalize_forms
from duckstream.normalize.pin_clock import is_temporal_filter
from duckstream.plan import (
    PROTOCOL,
    Applied,
    Begin,
    Commit,
    IVMPlan,
    Naming,
    PlanSource,
    Sql,
    Step,
    with_cleanup,
)
from duckstream.recursion import restore
from duckstream.scans import source_reads
from duckstream.sinks.bag import BagSink
from duckstream.sinks.base import Sink
from duckstream.sinks.grouped import GroupedSink
from duckstream.tree.base import Context
from duckstream.tree.build import SelectParts, build_top_k, split_select
from duckstream.tree.columns import table_key, used_columns
from duckstream.tree.constant import reads_no_table
from duckstream.tree.derived import Derived
from duckstream.tree.join import Join
from duckstream.tree.key_filters import key_semijoins
from duckstream.tree.recursive import read_old_from
from duckstream.tree.shared_cte import (
    Shares,
    choose,
    count_reads,
    guard,
    read_by_difference,
    shared_ctes,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_name(what: str, name: str) -> None:
    """Table, catalog and schema names duckstream writes must be plain identifiers."""
    if not _NAME.match(name) or name.upper() in _KEYWORDS:
        raise UnsupportedSQLError(
            "name",
            f"{what} {name!r} must be a plain identifier (letters, digits, _), not a keyword",
        )


_KEYWORDS = {k.upper() for k in Tokenizer.KEYWORDS if k.replace("_", "").isalpha()}


def parse_view(view_sql: str, dialect: str) -> exp.Expr:
    """Parse exactly one statement, turning parser errors into :class:`ViewSQLError`."""
    try:
        statements = [s for s in sqlglot.parse(view_sql, dialect=dialect) if s is not None]
    except (ParseError, TokenError) as error:
        raise ViewSQLError(f"cannot parse the view SQL: {error}") from None
    if len(statements) != 1:
        raise ViewSQLError(f"the view must be exactly one SELECT statement, got {len(statements)}")
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        raise ViewSQLError(f"the view must be a SELECT, got {statement.key.upper()}")
    return statement


def compile_ivm(
    view_sql: str,
    *,
    mv_name: str = "mv",
    mv_catalog: str = "dl",
    mv_schema: str = "main",
    dialect: str = "duckdb",
    naming: Naming | None = None,
    sources: dict[str, dict] | None = None,
    schema: dict | None = None,
    max_recursion_depth: int = 1000,
) -> IVMPlan:
    """Compile ``view_sql`` into an :class:`IVMPlan` for a view named ``mv_name``.

    Unqualified tables resolve to ``mv_catalog.mv_schema``; ``sources`` maps a table name to
    ``{"catalog": ..., "schema": ...}`` to override that. ``schema`` (optional, sqlglot's
    ``{table: {column: type}}`` or nested by catalog and schema) lets ``SELECT *`` and
    ``NATURAL JOIN`` expand. Raises :class:`UnsupportedSQLError` for what cannot be maintained
    and :class:`ViewSQLError` for SQL that cannot be read.
    """
    if naming is None:
        naming = Naming(mv_name=mv_name)
    elif mv_name != "mv" and naming.mv_table() != mv_name:
        naming = Naming(mv_name=mv_name, cursors_name=naming.cursors_table())
    for what, name in (
        ("mv_name", naming.mv_table()),
        ("mv_catalog", mv_catalog),
        ("mv_schema", mv_schema),
    ):
        _check_name(what, name)
    engine = engine_for(dialect)
    with key_semijoins(engine.key_semijoins):
        return _compile(
            view_sql, engine, naming, mv_catalog, mv_schema, dialect, sources, schema,
            max_recursion_depth,
        )  # fmt: skip


def _compile(
    view_sql: str,
    engine: Engine,
    naming: Naming,
    mv_catalog: str,
    mv_schema: str,
    dialect: str,
    sources: dict[str, dict] | None,
    schema: dict | None,
    max_recursion_depth: int = 1000,
) -> IVMPlan:
    tree = build_tree(
        view_sql, engine, naming, mv_catalog, mv_schema, dialect, sources, schema,
        max_recursion_depth,
    )  # fmt: skip
    select, found, ctx, target, sink = tree.select, tree.found, tree.ctx, tree.target, tree.sink
    recomputed, references = tree.recomputed, tree.references
    view = _fill_view(engine, found, select, recomputed, grouped=isinstance(sink, GroupedSink))
    inserts = sink.populate(view)
    view_name = (target.catalog, target.schema, target.name)
    initialize: list[Step] = [
        Begin(),
        *engine.pin_for_initialize(),
        *engine.populate(inserts),
        *engine.record_cursors(),
        Commit(view_name),
    ]
    by_name = {s.fqn: s for s in found.values()}
    shared, applied = _maintain_sharing_ctes(ctx, sink, lambda n: engine.changed(by_name[n]))
    maintain: list[Step] = [
        Begin(),
        *engine.pin_window(),
        *engine.prepare_changes(),
        *shared,
        *applied,
        Applied(),
        *engine.advance_cursors(),
        Commit(view_name),
    ]
    steps: dict[str, list[Step]] = {
        "create_cursors_table": [Sql(engine.create_cursors_table())],
        "create_mv": [engine.statement(sink.create_mv())],
        "initialize_cursors": [
            *engine.before_fill(),
            *with_cleanup(initialize, engine.drop),
            *engine.after_fill(inserts),
        ],
        "maintain": with_cleanup(maintain, engine.drop),
        "query_mv": [engine.statement(sink.query_mv())],
    }
    rendered = {name: [t for s in steps[name] for t in engine.render(s)] for name in PROTOCOL}
    sources_read = list(found.values())
    return IVMPlan(
        view_sql=engine.sql(
            restore(at_clock(select, lambda kind: engine.clock(Version.NEW, kind)))
        ),
        create_cursors_table=rendered["create_cursors_table"][0],
        create_mv=rendered["create_mv"][0],
        initialize_cursors=rendered["initialize_cursors"],
        maintain=rendered["maintain"],
        query_mv=rendered["query_mv"][0],
        steps=steps,
        sources=list(references),
        features=ctx.features,
        mv_table=target.fqn,
        cursors_table=target.cursors_fqn,
        output_columns=sink.visible_columns(),
        dialect=dialect,
        maintain_reads=source_reads(maintain, sources_read, lambda n: engine.changed(by_name[n])),
        rebuild_reads=source_reads(inserts, sources_read, lambda _: None),
    )


def _maintain_sharing_ctes(
    ctx: Context, sink: Sink, changed: Callable[[str], exp.Expr]
) -> tuple[list[Step], list[Step]]:
    """The sink's ``maintain`` steps, and before them the steps that make the tables of the
    CTEs read more than once (:mod:`duckstream.tree.shared_cte`) where they pay: a first
    pass reads every part of them from its table, to count the reads; the second makes the
    tables :func:`~duckstream.tree.shared_cte.choose` picks and inlines the rest."""
    if not ctx.shared_ctes:
        return [], sink.maintain()
    engine = ctx.engine
    parts = [f"{key}_{p}" for key in ctx.shared_ctes.values() for p in ("delta", "old", "new")]
    flags = {changed(s.fqn): s.fqn for s in engine.sources}
    counting = Shares(engine)
    ctx.shares = counting
    try:
        first = sink.maintain()
        ctx.shares = None
        tables = {part: counting.temp(part).name for part in parts}
        counted = count_reads(first, tables, engine.dialect, flags)
        chosen = choose(counted)
        counted = read_by_difference(counted, chosen)
        shares = Shares(engine, chosen, {p: guard(counted[p], changed) for p in chosen})
        ctx.shares = shares
        applied = sink.maintain()
    finally:
        ctx.shares = None
    return shares.steps(), applied


@dataclass
class Tree:
    """A view compiled up to its operator tree and sink, before any SQL is made (what
    ``python -m duckstream explain`` walks): the normalized SELECT (and the recomputation's
    form, when it differs), its sources, the tree's context and the sink over the tree."""

    select: exp.Select
    recomputed: exp.Query | None
    found: dict[str, Source]
    references: dict[PlanSource, None]
    ctx: Context
    target: Target
    sink: Sink


def build_tree(
    view_sql: str,
    engine: Engine,
    naming: Naming,
    mv_catalog: str,
    mv_schema: str,
    dialect: str,
    sources: dict[str, dict] | None,
    schema: dict | None,
    max_recursion_depth: int = 1000,
) -> Tree:
    """Parse, normalize and build the operator tree and sink of ``view_sql``."""
    parsed = parse_view(view_sql, dialect)
    select, recompute = normalize_forms(
        parsed,
        dialect=dialect,
        catalog=mv_catalog,
        schema=mv_schema,
        sources=sources,
        columns=schema,
        grand_total_over_no_rows=engine.grand_total_over_no_rows,
    )
    recomputed = recompute if recompute != select else None  # the tree's form is the view's
    select = engine.pin_types(select, schema)
    engine.check_view(parsed, select, schema)
    if reads_no_table(select):
        raise UnsupportedSQLError(
            "no_source",
            "the view reads no table nor the clock, so nothing can change it: there is nothing"
            " to maintain (materialize it as a table)",
        )
    target = Target(mv_catalog, mv_schema, naming.mv_table(), naming.cursors_table())
    engine.bind(target, [])  # the clock's run-time values are the view's
    select, recomputed = _read_clock(engine, select, recomputed)
    found: dict[str, Source] = {}
    references: dict[PlanSource, None] = {}

    columns = used_columns(select)

    def resolve(table: exp.Table) -> Source:
        key = table_key(table)
        if key not in found:
            found[key] = Source(table.catalog, table.db, table.name, len(found), columns[key])
        alias = table.alias if table.alias and table.alias != table.name else None
        references[PlanSource(table.catalog, table.db, table.name, alias)] = None
        return found[key]

    ctx = Context(engine=engine, max_recursion_depth=max_recursion_depth)
    if engine.shares_ctes:
        ctx.shared_ctes = shared_ctes(select)
    # a top-k at the view's top: its operator reads the rows it kept from the view's table
    top_k = build_top_k(select, ctx, resolve)
    parts = split_select(select, ctx, resolve) if top_k is None else None
    engine.bind(target, list(found.values()))
    if any(s.fqn == target.fqn for s in found.values()):
        raise UnsupportedSQLError("self_reference", f"the view reads its own table {target.fqn}")
    sink: Sink
    if top_k is not None:
        ctx.features.add("project")
        top_k.keep_from(target.table())
        sink = BagSink(ctx, top_k)
    else:
        assert parts is not None
        sink = _sink(ctx, parts, target)
    return Tree(select, recomputed, found, references, ctx, target, sink)


def _sink(ctx: Context, parts: SelectParts, target: Target) -> Sink:
    """The sink of a view split into ``parts``: grouped at an aggregate or DISTINCT top,
    else a bag of its rows."""
    sink: Sink
    if parts.aggregated or parts.distinct:
        if parts.aggregated and parts.distinct:
            raise UnsupportedSQLError("distinct_aggregate", "SELECT DISTINCT over GROUP BY")
        groups = parts.groups
        if parts.distinct:
            ctx.features.add("distinct")
            groups = [i.unalias() for i in parts.items]
        else:
            ctx.features.add("aggregate")
            if not groups:
                ctx.features.add("global_aggregate")
        if parts.having is not None:
            ctx.features.add("having")
        sink = GroupedSink(ctx, parts.block, groups, parts.items, parts.names, parts.having)
        for spec in sink.aggregates:
            ctx.features.add(spec.kind if spec.kind != "count_star" else "count")
    else:
        ctx.features.add("project")
        from duckstream.tree.project import Project

        sink = BagSink(ctx, Project(parts.block, parts.items, parts.names))
        _read_recursion_from_view(parts, target)
    return sink


def _read_recursion_from_view(parts: SelectParts, target: Target) -> None:
    """A view that is a recursive CTE's rows as they are (``SELECT <its columns> FROM r``,
    no filter, join or expression) holds that CTE's old state in its table: the CTE reads it
    there instead of recomputing its recursion at the cursor (``tree.recursive``)."""
    block = parts.block
    if not isinstance(block, Join) or len(block.leaves) != 1:
        return
    leaf = block.leaves[0]
    if not isinstance(leaf, Derived):
        return
    columns = [i.unalias() for i in parts.items]
    plain = [c.name for c in columns if isinstance(c, exp.Column) and c.table == leaf.name]
    if len(plain) == len(parts.items) and plain == parts.names:
        read_old_from(leaf.query, target.table(), plain)


def _read_clock(
    engine: Engine, select: exp.Select, recompute: exp.Query | None
) -> tuple[exp.Select, exp.Query | None]:
    """The view's clock (:mod:`duckstream.normalize.pin_clock`) as the engine reads it: the
    marks of the temporal filters (WHERE conjuncts, :func:`~duckstream.normalize.pin_clock.
    is_temporal_filter`) stay, for their operator (:mod:`duckstream.tree.temporal_filter`)
    to read at either clock; every other is
    the refresh's clock, and the refresh rebuilds the view when that value moved
    (:meth:`Engine.read_clock`). The recomputation reads the refresh's clock throughout."""
    kept: set[int] = set()
    for query in select.find_all(exp.Select):
        where = query.args.get("where")
        for condition in conjuncts(where.this if where is not None else None):
            if is_temporal_filter(condition):
                kept.update(id(n) for n in condition.find_all(exp.Anonymous))
    filters, rebuilds = set(), set()
    for node in list(select.find_all(exp.Anonymous)):
        kind = clock_kind(node)
        if kind is None:
            continue
        if id(node) in kept:
            filters.add(kind)
        else:
            rebuilds.add(kind)
            node.replace(engine.clock(Version.NEW, kind))
    engine.read_clock(frozenset(filters), frozenset(rebuilds))
    if recompute is not None and (filters or rebuilds):
        recomputed = at_clock(recompute, lambda kind: engine.clock(Version.NEW, kind))
        assert isinstance(recomputed, exp.Query)
        recompute = recomputed
    return select, recompute


def _fill_view(
    engine: Engine,
    found: dict[str, Source],
    select: exp.Select,
    recompute: exp.Query | None,
    *,
    grouped: bool,
) -> exp.Query | None:
    """The view's query as a recomputation runs it (:func:`~duckstream.normalize.
    normalize_forms`), its sources read at the fill's snapshot, for the sink to fill the
    table from where it can (``Sink.populate``); ``None`` where the tree's form is the same
    query, or the engine fills from the tree (``Engine.fill_from_view``). A grouped sink
    computes its hidden columns over the view's own FROM and WHERE: only where they hold
    the same relations, under the same aliases, as the tree's (the decorrelated subqueries'
    joins aside, which keep the outer rows' multiplicities)."""
    if recompute is None or not engine.fill_from_view:
        return None
    if grouped:
        if not isinstance(recompute, exp.Select):
            return None
        decorrelated = [a for a in _leaf_aliases(select) if not a.startswith("_ivm_sq")]
        if _leaf_aliases(recompute) != decorrelated:
            return None

    def pin(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return node  # not a table: a series (a constant relation) reads none
        source = found.get(table_key(node))
        if source is None:
            raise KeyError(table_key(node))
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        return aliased(engine.state(source, Version.NEW), alias)

    try:
        pinned = recompute.transform(pin)
    except KeyError:  # a table the tree does not read: not the same query
        return None
    return pinned if isinstance(pinned, exp.Query) else None


def _leaf_aliases(select: exp.Select) -> list[str]:
    """The aliases of the relations in ``select``'s FROM clause, in order."""
    from_ = select.args.get("from_")
    leaves = [from_.this] if from_ is not None else []
    leaves += [j.this for j in select.args.get("joins") or []]
    return [leaf.alias_or_name for leaf in leaves]
