"""Qualify tables (catalog.schema.table AS alias) and, as far as possible, columns.

Uses sqlglot's own ``qualify``: unqualified tables resolve to the view's catalog and schema
(``sources`` overrides per table), ``USING`` becomes ``ON``, ``GROUP BY 1`` and alias
references become expressions and, when the source columns are known, ``*`` expands.
Columns of multi-table views stay unqualified when no schema is given: the generated SQL keeps
the view's FROM clause and aliases, so the engine resolves them exactly as in the view.

A bare name that is both an input column and a select-list alias is the column, as on DuckDB
and Spark (in HAVING: inside an aggregate or when grouped). sqlglot resolves it so wherever it
knows the sources' columns (the schema, a derived table's select list); for a table whose
columns are unknown, :func:`_resolve_names` takes what the view itself proves and refuses the
rest, as it does a bare name in a subquery outside FROM that may be an enclosing query's.

Identifiers resolve case-insensitively (sqlglot lower-cases them to match), but two
spellings are kept as written: table, schema and catalog names (a catalog may store
``Orders``; Spark's Iceberg catalogs are case-sensitive), and the names of the view's output
columns (``SELECT MyKey`` gives a column ``MyKey``, quoted where needed to keep its case).

>>> from sqlglot import parse_one
>>> qualify_view(parse_one("SELECT a FROM t"), dialect="duckdb", catalog="dl", schema="main").sql()
'SELECT t.a AS a FROM dl.main.t AS t'
>>> qualify_view(parse_one("SELECT DISTINCT CAST(k AS BIGINT) AS k, k AS x FROM t2"),
...     dialect="duckdb", catalog="dl", schema="main").sql()
'SELECT DISTINCT CAST(t2.k AS BIGINT) AS k, t2.k AS x FROM dl.main.t2 AS t2'
>>> view = parse_one("SELECT id, false AS flag FROM t WHERE flag")
>>> qualify_view(view, dialect="duckdb", catalog="dl", schema="main",
...     columns={"t": {"id": "INT", "flag": "BOOLEAN"}}).sql()
'SELECT t.id AS id, FALSE AS flag FROM dl.main.t AS t WHERE t.flag'
>>> qualify_view(view, dialect="duckdb", catalog="dl", schema="main")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
duckstream.errors.UnsupportedSQLError: unresolved_column: `flag` in WHERE names ... schema= ...
>>> qualify_view(parse_one('SELECT MyKey, "Größe" AS G FROM Orders'),
...     dialect="duckdb", catalog="dl", schema="main").sql()
'SELECT orders.mykey AS "MyKey", orders."größe" AS "G" FROM dl.main.Orders AS orders'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import ident
from duckstream.normalize.eliminate_qualify import FROM_QUALIFY


def qualify_view(
    expression: exp.Expr,
    *,
    dialect: str,
    catalog: str,
    schema: str,
    sources: dict[str, dict] | None = None,
    columns: dict | None = None,
) -> exp.Expr:
    expression = expression.copy()
    overrides = {name.lower(): where for name, where in (sources or {}).items()}
    for table in expression.find_all(exp.Table):
        override = overrides.get(table.name.lower())
        if override and not table.args.get("db"):
            table.set("db", exp.to_identifier(override.get("schema", schema)))
            table.set("catalog", exp.to_identifier(override.get("catalog", catalog)))
        _keep_spelling(table)
    names = _output_spellings(expression, columns)
    _qualify_bare_columns(expression, known_schema=columns is not None)
    try:
        qualified = qualify(
            expression,
            dialect=dialect,
            catalog=catalog,
            db=schema,
            schema=columns,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
            # Stars over derived tables expand from their select lists; over a table only
            # with schema= (else one is left, and validate asks for schema=).
            expand_stars=True,
        )
    except OptimizeError as error:
        raise UnsupportedSQLError(
            "unresolved_column",
            f"{error}; qualify the column with its table or pass schema= to compile_ivm",
        ) from error
    _restore_output_names(qualified, names)
    return _qualify_single_source_columns(qualified, known_schema=columns is not None)


def _keep_spelling(table: exp.Table) -> None:
    """Keep the table's name (and schema, catalog) as written through sqlglot's lower-casing;
    its alias (given one here if it has none) is lower-cased like the columns that use it."""
    if not isinstance(table.this, exp.Identifier):
        return
    if table.args.get("alias") is None:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
    for part in ("this", "db", "catalog"):
        identifier = table.args.get(part)
        if isinstance(identifier, exp.Identifier):
            identifier.meta["case_sensitive"] = True


def _output_spellings(expression: exp.Expr, columns: dict | None) -> dict[str, str]:
    """Lower-cased output name -> the name as the engine spells it: an alias or a column as
    written in the view's select list; for a column expanded from ``*``, as ``schema=`` or
    the derived table it comes from spells it."""
    spellings: dict[str, str] = {}
    for item in _top_items(expression):
        if isinstance(item, exp.Alias):
            spellings[item.alias.lower()] = item.alias
        elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            spellings.setdefault(item.name.lower(), item.name)
    for name in _schema_columns(columns):
        spellings.setdefault(name.lower(), name)
    for node in expression.find_all(exp.Alias, exp.Column):
        name = node.alias if isinstance(node, exp.Alias) else node.name
        if name:
            spellings.setdefault(name.lower(), name)
    return spellings


def _schema_columns(columns: dict | None) -> list[str]:
    """Every column name of a sqlglot schema mapping (nested by catalog and schema or not)."""
    if not columns:
        return []
    found = []
    for key, value in columns.items():
        if isinstance(value, dict):
            found += _schema_columns(value)
        else:
            found.append(key)
    return found


def _top_items(expression: exp.Expr) -> list[exp.Expr]:
    """The select list naming the view's columns: the view's, or its first branch's."""
    while isinstance(expression, exp.SetOperation | exp.Subquery):
        expression = expression.this
    return expression.expressions if isinstance(expression, exp.Select) else []


def _restore_output_names(expression: exp.Expr, spellings: dict[str, str]) -> None:
    for item in _top_items(expression):
        if isinstance(item, exp.Alias):
            name = spellings.get(item.alias.lower(), item.alias)
            item.set("alias", ident(name))


def is_predicate_subquery(select: exp.Expr) -> bool:
    """Whether ``select`` is (a branch of) a subquery outside FROM (``EXISTS (...)``,
    ``IN (...)``, a scalar subquery), where a bare name may be a column of an enclosing query.

    >>> from sqlglot import parse_one
    >>> view = parse_one("SELECT a FROM (SELECT a FROM t) AS d WHERE a > (SELECT max(b) FROM u)")
    >>> [is_predicate_subquery(s) for s in view.find_all(exp.Select)]
    [False, False, True]
    """
    node = select
    while isinstance(node.parent, exp.SetOperation | exp.Subquery) and not (
        isinstance(node.parent, exp.Subquery)
        and node.parent.arg_key in ("from_", "joins", "this")
        and isinstance(node.parent.parent, exp.From | exp.Join)
    ):
        node = node.parent
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.SetOperation):
            return not isinstance(node.parent, exp.From | exp.Join)
    return isinstance(node.parent, exp.Exists | exp.In)


def _qualify_bare_columns(expression: exp.Expr, known_schema: bool) -> None:
    """Without the schema, in each SELECT reading one table, tell the bare names that are its
    columns from the ones that are aliases of the select list, or refuse to guess.

    sqlglot resolves a bare name by the columns its sources are known to have: with the
    schema, or a derived table's select list, it does so as DuckDB and Spark do (an input
    column wins over a select-list alias in the select list, WHERE, GROUP BY and QUALIFY; in
    HAVING inside an aggregate or when grouped), so those SELECTs are left to it. A table
    whose columns are unknown leaves it guessing, and a guess is a wrong answer when the
    table turns out to have the column: :func:`_resolve_names` decides what the view itself
    proves and refuses the rest. Likewise a bare name in a subquery outside FROM may name an
    enclosing query's column (:func:`_check_outer_names`)."""
    if known_schema:
        return
    for select in list(expression.find_all(exp.Select)):
        from_ = select.args.get("from_")
        if not from_ or select.args.get("joins") or not from_.this.alias_or_name:
            continue
        source = from_.this
        columns = _columns_of(source)
        if is_predicate_subquery(select):
            _check_outer_names(select, source.alias_or_name, columns)
        if columns is None:
            _resolve_names(select, source.alias_or_name)


def _columns_of(source: exp.Expr) -> set[str] | None:
    """The lower-cased column names of a derived table with a select list of named items;
    None for a table (unknown without the schema) or a ``*``."""
    if not isinstance(source, exp.Subquery):
        return None
    query = source.this
    while isinstance(query, exp.SetOperation | exp.Subquery):
        query = query.this
    if not isinstance(query, exp.Select) or any(
        isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
        for i in query.expressions
    ):
        return None
    return {i.alias_or_name.lower() for i in query.expressions}


def _enclosing_selects(select: exp.Select) -> list[exp.Select]:
    """The SELECTs whose columns a bare name in the subquery ``select`` may name: the one
    holding it, and further out while that one is itself a subquery outside FROM."""
    found = []
    node: exp.Select = select
    while is_predicate_subquery(node):
        outer = node.parent.find_ancestor(exp.Select) if node.parent else None
        if outer is None:
            break
        found.append(outer)
        node = outer
    return found


def _check_outer_names(select: exp.Select, source: str, columns: set[str] | None) -> None:
    """A bare name in a subquery outside FROM is its source's column if the source has it,
    else an enclosing query's (TPC-H Q17's ``l_partkey = p_partkey``). Without the schema a
    table's columns are unknown: the name is the source's only if it is read qualified by the
    source somewhere in the subquery, or if no enclosing query may have it (each reads derived
    tables whose columns are known). Anything else is refused: binding it to the subquery's
    table would make SQL the engine rejects, and decorrelating needs to know."""
    qualified = {
        c.name.lower()
        for c in select.find_all(exp.Column)
        if c.table == source and c.find_ancestor(exp.Select) is select
    }
    outer_columns: set[str] | None = set()
    for outer in _enclosing_selects(select):
        for joined in [outer.args.get("from_"), *(outer.args.get("joins") or [])]:
            known = _columns_of(joined.this) if joined is not None else set()
            if known is None or outer_columns is None:
                outer_columns = None
            else:
                outer_columns |= known
    for column in _bare_columns(select, select):
        name = column.name.lower()
        if columns is not None and name in columns:
            continue
        if columns is None and (
            name in qualified or (outer_columns is not None and name not in outer_columns)
        ):
            continue
        if columns is None and name in _aliases(select):
            continue  # an alias of the select list: _resolve_names expanded or refused it
        raise UnsupportedSQLError(
            "unresolved_column",
            f"`{column.name}` in a subquery outside FROM may be a column of `{source}` or of"
            " an enclosing query, and without schema= duckstream cannot tell which: qualify"
            f" it with its table (`{source}.{column.name}` or the enclosing table's alias) or"
            " pass schema= to compile_ivm",
        )


def _aliases(select: exp.Select) -> set[str]:
    return {i.alias.lower() for i in select.expressions if isinstance(i, exp.Alias)}


def _resolve_names(select: exp.Select, source: str) -> None:
    """In a SELECT reading one table whose columns are unknown, qualify each bare name that is
    the table's column and expand each that is an alias of the select list (in parentheses: a
    literal would read as a position in GROUP BY), as the engine would, or refuse.

    A name is the table's column where no alias of it is visible (an earlier item's alias is
    visible in the select list, all of them in WHERE, GROUP BY, HAVING and QUALIFY), and
    then everywhere: ``CAST(k AS BIGINT) AS k, k AS x`` reads column ``k`` twice. Where both
    could be meant, the column wins if the table has it (DuckDB, Spark), so the alias is
    taken only where the view would not run if the name were a column: in GROUP BY when its
    expression reads a column outside aggregates that nothing else groups by
    (``date_trunc('month', ts) AS m ... GROUP BY m``), in HAVING outside aggregates when
    GROUP BY does not group by the name as a column (there the alias shadows an ungrouped
    column). It is the column where the alias could not stand: an aggregate or window in
    WHERE, GROUP BY or inside an aggregate. Anything else (``'x' AS c ... GROUP BY c``,
    ``false AS flag ... WHERE flag``) depends on the table's columns: refused with what to
    write instead."""
    items = select.expressions
    aliases = [i.alias.lower() if isinstance(i, exp.Alias) else "" for i in items]
    definitions = {a: items[i].this for i, a in reversed(list(enumerate(aliases))) if a}
    places: list[tuple[str, list[exp.Column], set[str]]] = [
        (
            "QUALIFY" if item.meta.get(FROM_QUALIFY) else "the select list",
            _bare_columns(select, item),
            set(aliases[:i]) - {""},
        )
        for i, item in enumerate(items)
    ]
    for key in ("where", "group", "having", "qualify"):
        if node := select.args.get(key):
            clause = {"group": "GROUP BY"}.get(key, key.upper())
            places.append((clause, _bare_columns(select, node), set(aliases) - {""}))
    known = {c.name.lower() for _, cs, seen in places for c in cs if c.name.lower() not in seen}
    group = select.args.get("group")
    grouped = {
        c.name.lower()
        for c in (group.expressions if group else [])
        if isinstance(c, exp.Column) and (c.table == source or c.name.lower() in known)
    }
    for clause, columns, visible in places:
        for column in columns:
            name = column.name.lower()
            if name not in visible:
                column.set("table", exp.to_identifier(source))
                continue
            meaning = _alias_or_column(column, clause, definitions[name], grouped, group)
            if name in known and meaning is None:
                meaning = "column"
            if meaning == "column":
                column.set("table", exp.to_identifier(source))
            elif meaning == "alias":
                column.replace(exp.paren(definitions[name].copy()))
            else:
                raise UnsupportedSQLError(
                    "unresolved_column",
                    f"`{column.name}` in {clause} names the select-list alias `{column.name}`"
                    f" and, if `{source}` has a column `{column.name}`, that column (which"
                    " wins); without schema= duckstream cannot tell which: write"
                    f" `{source}.{column.name}` for the column, repeat the alias's expression"
                    " for the alias, or pass schema= to compile_ivm",
                )


def _alias_or_column(
    column: exp.Column,
    clause: str,
    definition: exp.Expr,
    grouped: set[str],
    group: exp.Group | None,
) -> str | None:
    """What a bare name that is an alias visible at ``column`` and maybe a column means:
    ``"alias"``, ``"column"``, or None when only the table's columns could tell."""
    in_aggregate = column.find_ancestor(exp.AggFunc, exp.Select)
    in_aggregate = isinstance(in_aggregate, exp.AggFunc)
    computed = definition.find(exp.AggFunc, exp.Window) is not None
    if clause in ("WHERE", "GROUP BY") and computed:
        return "column"
    if clause == "QUALIFY":
        # grouped, a column outside aggregates must be grouped (DuckDB: else the view fails)
        select = column.find_ancestor(exp.Select)
        if select is None or not _is_grouped(select):
            return None
        in_aggregate = any(
            isinstance(a, exp.AggFunc) and not _is_window_function(a)
            for a in _ancestors(column, select)
        )
    if clause in ("HAVING", "QUALIFY"):
        if in_aggregate:
            return "column" if definition.find(exp.AggFunc) else None
        return "column" if column.name.lower() in grouped else "alias"
    if clause == "GROUP BY":
        read_by_group = {c.name.lower() for c in group.find_all(exp.Column)} if group else set()
        ungrouped = [
            c
            for c in definition.find_all(exp.Column)
            if not isinstance(c.find_ancestor(exp.AggFunc, exp.Select), exp.AggFunc)
            and c.name.lower() not in read_by_group
        ]
        return "alias" if ungrouped else None
    return None


def _is_grouped(select: exp.Select) -> bool:
    """Whether ``select`` aggregates: a GROUP BY, or an aggregate outside windows."""
    return bool(select.args.get("group")) or any(
        not _is_window_function(a) and a.find_ancestor(exp.Select) is select
        for item in select.expressions
        for a in item.find_all(exp.AggFunc)
    )


def _is_window_function(call: exp.Expr) -> bool:
    """``sum(x)`` of ``sum(x) OVER (...)``, not an aggregate in its PARTITION BY."""
    return isinstance(call.parent, exp.Window) and call.arg_key == "this"


def _ancestors(node: exp.Expr, top: exp.Expr) -> list[exp.Expr]:
    found, parent = [], node.parent
    while parent is not None and parent is not top:
        found.append(parent)
        parent = parent.parent
    return found


def _bare_columns(select: exp.Select, node: exp.Expr) -> list[exp.Column]:
    return [
        c
        for c in node.find_all(exp.Column)
        if not c.table
        and not isinstance(c.this, exp.Star)
        and c.find_ancestor(exp.Select) is select
    ]


def _qualify_single_source_columns(expression: exp.Expr, known_schema: bool) -> exp.Expr:
    """In a SELECT reading one table and nothing else, every bare column is that table's
    (with the schema, sqlglot has already resolved what a subquery outside FROM names)."""
    for select in expression.find_all(exp.Select):
        if known_schema and is_predicate_subquery(select):
            continue
        from_ = select.args.get("from_")
        if not from_ or select.args.get("joins"):
            continue
        alias = from_.this.alias_or_name
        for column in _own_columns(select):
            if not column.table:
                column.set("table", exp.to_identifier(alias))
    return expression


def _own_columns(select: exp.Select) -> list[exp.Column]:
    """Columns of ``select`` itself, not of subqueries nested in it."""
    found = []
    for key in ("expressions", "where", "group", "having", "qualify"):
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value] if value else []:
            for column in node.find_all(exp.Column):
                if column.find_ancestor(exp.Select) is select and not isinstance(
                    column.this, exp.Star
                ):
                    found.append(column)
    return found
