"""Qualify tables (catalog.schema.table AS alias) and, as far as possible, columns.

Uses sqlglot's own ``qualify``: unqualified tables resolve to the view's catalog and schema
(``sources`` overrides per table), ``USING`` becomes ``ON``, ``GROUP BY 1`` and alias
references become expressions and, when the source columns are known, ``*`` expands.
Columns of multi-table views stay unqualified when no schema is given: the generated SQL keeps
the view's FROM clause and aliases, so the engine resolves them exactly as in the view.

In a SELECT reading one source, a bare name is that source's column unless it names an alias
of the select list visible there; when it names both (``SELECT CAST(k AS BIGINT) AS k, k AS
x``, the ``k`` inside the CAST shows ``k`` is a column), the column wins, as on DuckDB and
Spark. Such columns are qualified before sqlglot expands alias references, which without the
source's schema would give up on them.

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
>>> qualify_view(parse_one('SELECT MyKey, "Größe" AS G FROM Orders'),
...     dialect="duckdb", catalog="dl", schema="main").sql()
'SELECT orders.mykey AS "MyKey", orders."größe" AS "G" FROM dl.main.Orders AS orders'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from duckstream.errors import UnsupportedSQLError
from duckstream.tree.base import ident


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
    """In each SELECT reading one source, qualify the bare names that are its columns and
    expand the ones that are aliases of the select list. With the schema, sqlglot resolves
    the bare names of a subquery outside FROM (one may be an enclosing query's column);
    without it, a bare name there is the subquery's own source's column."""
    for select in list(expression.find_all(exp.Select)):
        if known_schema and is_predicate_subquery(select):
            continue
        from_ = select.args.get("from_")
        if from_ and not select.args.get("joins") and from_.this.alias_or_name:
            _resolve_names(select, from_.this.alias_or_name)


def _resolve_names(select: exp.Select, source: str) -> None:
    items = select.expressions
    aliases = [i.alias.lower() if isinstance(i, exp.Alias) else "" for i in items]
    # Each place's bare columns with the aliases visible there: the earlier items' in the
    # select list, all of them in WHERE, GROUP BY and HAVING.
    places: list[tuple[list[exp.Column], set[str], int | None]] = [
        (_bare_columns(select, item), set(aliases[:i]) - {""}, i) for i, item in enumerate(items)
    ]
    for key in ("where", "group", "having"):
        if node := select.args.get(key):
            places.append((_bare_columns(select, node), set(aliases) - {""}, None))
    # A name read where no alias of it is visible is a column; where both are, the column
    # wins (DuckDB, Spark).
    known = {c.name.lower() for cs, seen, _ in places for c in cs if c.name.lower() not in seen}
    defined: dict[str, exp.Expr] = {}
    for columns, visible, index in places:
        for column in columns:
            name = column.name.lower()
            if name not in visible or name in known:
                column.set("table", exp.to_identifier(source))
            elif name in defined and not (
                column.find_ancestor(exp.Group) and defined[name].find(exp.AggFunc)
            ):
                # Without the source's schema, a name only known as an alias is the alias
                # (sqlglot would give up on it): expanded, in parentheses (a literal would
                # read as a position in GROUP BY).
                column.replace(exp.paren(defined[name].copy()))
        if index is not None and aliases[index]:
            defined.setdefault(aliases[index], select.expressions[index].this)


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
    for key in ("expressions", "where", "group", "having"):
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value] if value else []:
            for column in node.find_all(exp.Column):
                if column.find_ancestor(exp.Select) is select and not isinstance(
                    column.this, exp.Star
                ):
                    found.append(column)
    return found
