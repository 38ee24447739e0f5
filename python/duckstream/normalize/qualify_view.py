"""Qualify tables (catalog.schema.table AS alias) and, as far as possible, columns.

Uses sqlglot's own ``qualify``: unqualified tables resolve to the view's catalog and schema
(``sources`` overrides per table), ``USING`` becomes ``ON``, ``GROUP BY 1`` and alias
references become expressions and, when the source columns are known, ``*`` expands.
Columns of multi-table views stay unqualified when no schema is given: the generated SQL keeps
the view's FROM clause and aliases, so the engine resolves them exactly as in the view.

>>> from sqlglot import parse_one
>>> qualify_view(parse_one("SELECT a FROM t"), dialect="duckdb", catalog="dl", schema="main").sql()
'SELECT t.a AS a FROM dl.main.t AS t'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from duckstream.errors import UnsupportedSQLError


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
    sources = sources or {}
    for table in expression.find_all(exp.Table):
        override = sources.get(table.name)
        if override and not table.args.get("db"):
            table.set("db", exp.to_identifier(override.get("schema", schema)))
            table.set("catalog", exp.to_identifier(override.get("catalog", catalog)))
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
            expand_stars=columns is not None,
        )
    except OptimizeError as error:
        raise UnsupportedSQLError(
            "unresolved_column",
            f"{error}; qualify the column with its table or pass schema= to compile_ivm",
        ) from error
    return _qualify_single_source_columns(qualified)


def _qualify_single_source_columns(expression: exp.Expr) -> exp.Expr:
    """In a SELECT reading one table and nothing else, every bare column is that table's."""
    for select in expression.find_all(exp.Select):
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
