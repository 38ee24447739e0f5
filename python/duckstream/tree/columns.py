"""Which columns of each source table a normalized view reads.

A change read that names only these columns lets the engine skip the others (where deleted
rows are read back from the data files, that is most of the cost of reading deletions). The
answer is exact only where every column is qualified by its table's alias, as ``qualify``
leaves them when ``compile_ivm`` has the source schemas; otherwise a source gets ``None``
(every column).

>>> from sqlglot import parse_one
>>> view = parse_one("SELECT r.a, sum(s.b) FROM dl.main.r AS r JOIN dl.main.s AS s ON r.k = s.k GROUP BY r.a")
>>> sorted(used_columns(view)["dl.main.r"]), sorted(used_columns(view)["dl.main.s"])
(['a', 'k'], ['b', 'k'])
>>> used_columns(parse_one("SELECT a FROM dl.main.r AS r, dl.main.s AS s"))
{'dl.main.r': None, 'dl.main.s': None}
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope


def table_key(table: exp.Table) -> str:
    return f"{table.catalog}.{table.db}.{table.name}"


def used_columns(view: exp.Select) -> dict[str, frozenset[str] | None]:
    """Source key (``catalog.schema.table``) -> names of the columns the view reads from it,
    or ``None`` when that cannot be told from the SQL alone."""
    used: dict[str, frozenset[str] | None] = {}
    for scope in traverse_scope(view):
        tables = {
            a: t
            for a, t in scope.sources.items()
            if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier)
        }
        if not tables:
            continue
        select = scope.expression
        opaque = (
            any(isinstance(s.parent, (exp.Select, exp.Column)) for s in select.find_all(exp.Star))
            or any(c.table == "" for c in scope.columns)
            or any(j.args.get("using") or j.method for j in select.args.get("joins") or [])
        )
        for alias, table in tables.items():
            key = table_key(table)
            if opaque or used.get(key, frozenset()) is None:
                used[key] = None
                continue
            names = {c.name for c in scope.columns if c.table == alias}
            used[key] = (used.get(key) or frozenset()) | names
    return used
