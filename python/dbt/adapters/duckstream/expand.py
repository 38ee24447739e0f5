"""Inline the views a model reads, so the compiler sees base tables.

dbt ``view`` models are views in the catalog: a model that ``ref()``s one reads it by name.
The compiler maintains base tables only (a view has no change feed), so each view is replaced
by its definition as a derived table, recursively, under the name the model used for it.
Unqualified tables inside a view resolve in the view's own catalog and schema.

>>> views = {("lake", "main", "stg"): "CREATE VIEW stg AS SELECT id, amount FROM raw_orders"}
>>> expand_views("SELECT s.id FROM lake.main.stg AS s", views, catalog="lake", schema="main")
'SELECT s.id FROM (SELECT id, amount FROM lake.main.raw_orders) AS s'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import sqlglot
from sqlglot import exp

from duckstream.connection import Connection
from duckstream.engines.ducklake.schema import candidates

ViewKey = tuple[str, str, str]

MAX_DEPTH = 32


def expand_views(
    sql: str,
    views: Mapping[ViewKey, str],
    *,
    catalog: str,
    schema: str,
    dialect: str = "duckdb",
) -> str:
    """``sql`` with every view of ``views`` it reads replaced by the view's query.

    ``views`` maps lower-cased ``(catalog, schema, name)`` to the view's ``CREATE VIEW``
    statement (as ``duckdb_views()`` returns it). Returns ``sql`` unchanged when it reads no
    view. Tables written ``a.b`` resolve as schema ``a`` of ``catalog`` first, then as catalog
    ``a`` (schema ``main``), as DuckDB resolves them.
    """
    tree = sqlglot.parse_one(sql, dialect=dialect)
    if not _inline(tree, views, catalog, schema, dialect, depth=0):
        return sql
    return tree.sql(dialect=dialect)


VIEWS = "SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal"


def catalog_views(con: Connection) -> dict[ViewKey, str]:
    """Every user view the connection can see, keyed as :func:`expand_views` wants."""
    return views_by_key(con.execute(VIEWS).fetchall())


def views_by_key(rows: Iterable[Sequence[str]]) -> dict[ViewKey, str]:
    """Rows of :data:`VIEWS` (database, schema, view, its ``CREATE VIEW``) keyed as
    :func:`expand_views` wants."""
    return {(d.lower(), s.lower(), v.lower()): sql for d, s, v, sql in rows}


# a name as it may appear in SQL: quoted (doubled quotes inside) or a plain word
_NAME = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')


def views_named(sql: str, views: Mapping[ViewKey, str]) -> dict[ViewKey, str]:
    """The views of ``views`` that a name in ``sql`` may resolve to, and those a name in
    their definitions may, and so on: every view whose name occurs in ``sql`` as a word or a
    quoted name, through views that read views. A superset (a column or an alias named like
    a view counts too), found without parsing: only these views decide what ``sql`` reads,
    so a view created or redefined under any other name changes nothing for it.

    >>> views = views_by_key([("l", "m", "stg", "CREATE VIEW stg AS SELECT * FROM l.m.base"),
    ...                       ("l", "m", "base", "CREATE VIEW base AS SELECT 1 AS id"),
    ...                       ("l", "m", "other", "CREATE VIEW other AS SELECT 2 AS id")])
    >>> sorted(views_named('SELECT s.id FROM l.m."STG" AS s', views))
    [('l', 'm', 'base'), ('l', 'm', 'stg')]
    """
    by_name: dict[str, list[ViewKey]] = {}
    for key in views:
        by_name.setdefault(key[2], []).append(key)
    found: dict[ViewKey, str] = {}
    pending = [sql]
    while pending:
        for quoted, word in _NAME.findall(pending.pop()):
            name = (quoted.replace('""', '"') if quoted else word).lower()
            for key in by_name.get(name, ()):
                if key not in found:
                    found[key] = views[key]
                    pending.append(views[key])
    return found


def _inline(
    tree: exp.Expr,
    views: Mapping[ViewKey, str],
    catalog: str,
    schema: str,
    dialect: str,
    depth: int,
) -> bool:
    """Replace views read in ``tree`` in place; return whether any was replaced."""
    if depth > MAX_DEPTH:
        raise ValueError(f"views nest deeper than {MAX_DEPTH} levels (a cycle?)")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    replaced = False
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table function
        key = _resolve(table, views, catalog, schema, ctes)
        if key is None:
            continue
        query, columns = _view_query(views[key], dialect)
        _qualify(query, key[0], key[1])
        _inline(query, views, key[0], key[1], dialect, depth + 1)
        alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name))
        if columns:
            alias.set("columns", columns)
        table.replace(exp.Subquery(this=query, alias=alias))
        replaced = True
    return replaced


def _resolve(
    table: exp.Table,
    views: Mapping[ViewKey, str],
    catalog: str,
    schema: str,
    ctes: set[str],
) -> ViewKey | None:
    return next((c for c in candidates(table, catalog, schema, ctes) if c in views), None)


def _view_query(create_sql: str, dialect: str) -> tuple[exp.Query, list[exp.Identifier]]:
    """The query of a ``CREATE VIEW`` statement, and its column list if it has one."""
    statement = sqlglot.parse_one(create_sql, dialect=dialect)
    query = statement.expression if isinstance(statement, exp.Create) else statement
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this  # CREATE VIEW v AS (SELECT ...)
    if not isinstance(query, exp.Query):
        raise ValueError(f"cannot read the view definition: {create_sql}")
    target = statement.this if isinstance(statement, exp.Create) else None
    columns = []
    if isinstance(target, exp.Schema):
        columns = [exp.to_identifier(c.name) for c in target.expressions]
    return query, columns


def _qualify(query: exp.Expr, catalog: str, schema: str) -> None:
    """Give unqualified tables inside a view the view's catalog and schema."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.db or table.name.lower() in ctes:
            continue
        table.set("db", exp.to_identifier(schema))
        table.set("catalog", exp.to_identifier(catalog))


def name_outputs(sql: str, names: list[str]) -> str:
    """Alias the top-level select items that have no name of their own (``count(*)``,
    ``a + 1``) with the names the engine gives them (``names``, from ``DESCRIBE``), so the
    table's columns are named as a ``table`` materialization would name them.

    >>> name_outputs("SELECT a, count(*) FROM t GROUP BY a", ["a", "count_star()"])
    'SELECT a, COUNT(*) AS "count_star()" FROM t GROUP BY a'
    """
    tree = sqlglot.parse_one(sql, dialect="duckdb")
    if not isinstance(tree, exp.Select) or len(tree.expressions) != len(names):
        return sql
    if any(item.find(exp.Star) and not item.find(exp.AggFunc) for item in tree.expressions):
        return sql
    named = [
        item if isinstance(item, exp.Alias | exp.Column) else exp.alias_(item, name, quoted=True)
        for item, name in zip(tree.expressions, names, strict=True)
    ]
    tree.set("expressions", named)
    return tree.sql(dialect="duckdb")
