"""Each normalizing rule alone, from its fixture file: ``tests/fixtures/normalize/<rule>.sql``
holds pairs of an input view and what the rule makes of it (as sqlglot's
``tests/fixtures/optimizer/``), so a failure points at one rule in milliseconds.

A pair is two statements, each ending with ``;`` at the end of a line, pairs apart by blank
lines; lines starting with ``--`` are comments. An expected ``ERROR: <feature>`` says the rule
refuses the input with :class:`UnsupportedSQLError` of that feature. Settings are
:data:`SETTINGS` for every rule (each takes those it names). The end-to-end order of the rules
is proven by every other test; here each rule's own rewrite.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import parse_one

from duckstream.errors import UnsupportedSQLError
from duckstream.normalize import RULES, Rule, normalize

FIXTURES = Path(__file__).parent / "fixtures" / "normalize"

SETTINGS = {
    "dialect": "duckdb",
    "catalog": "dl",
    "schema": "main",
    "columns": {
        "t": {
            "k": "INT",
            "g": "INT",
            "v": "INT",
            "id": "INT",
            "a": "INT",
            "b": "INT",
            "x": "INT",
            "y": "BOOLEAN",
            "ts": "TIMESTAMP",
            "d": "DATE",
        },
        "u": {"k": "INT", "b": "INT", "w": "INT"},
        "orders": {"mykey": "INT", "Größe": "INT"},
    },
}


def run_rule(rule: Rule, sql: str) -> str:
    """What ``rule`` alone makes of ``sql`` (DuckDB's SQL), or ``ERROR: <feature>``."""
    try:
        return normalize(parse_one(sql, read="duckdb"), rules=(rule,), **SETTINGS).sql("duckdb")
    except UnsupportedSQLError as error:
        return f"ERROR: {error.feature}"


def _pairs(path: Path) -> list[tuple[str, str]]:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("--"))
    pairs = []
    for block in (b.strip() for b in text.split("\n\n")):
        if block:
            statements = [s.strip() for s in block.split(";\n") if s.strip()]
            assert len(statements) == 2, f"{path.name}: not a pair: {block!r}"
            pairs.append((statements[0], statements[1].removesuffix(";")))
    return pairs


CASES = [
    pytest.param(rule, sql, expected, id=f"{rule.__name__}-{i}")
    for rule in RULES
    for i, (sql, expected) in enumerate(_pairs(FIXTURES / f"{rule.__name__}.sql"))
]


@pytest.mark.parametrize(("rule", "sql", "expected"), CASES)
def test_rule(rule: Rule, sql: str, expected: str) -> None:
    assert run_rule(rule, sql) == expected


def test_every_rule_has_its_fixture_file() -> None:
    names = {rule.__name__ for rule in RULES}
    assert {p.stem for p in FIXTURES.glob("*.sql")} == names
    assert all(len(_pairs(FIXTURES / f"{n}.sql")) >= 2 for n in names)
