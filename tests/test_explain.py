"""``python -m duckstream explain``: per operator of the compiled tree, how it is maintained,
what a refresh recomputes, the sources and columns read, on both engines."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil

import pytest

import duckstream.tree
from duckstream.cli import main
from duckstream.explain import explain
from duckstream.sinks.bag import BagSink
from duckstream.sinks.grouped import GroupedSink
from duckstream.tree.base import Block, Leaf, Relation

SCHEMA = {
    "t": {"k": "INTEGER", "v": "INTEGER", "w": "VARCHAR"},
    "s": {"k": "INTEGER", "x": "INTEGER"},
}
ENGINES = [("duckdb", "dl", "main"), ("spark", "lake", "db")]


def _explain(sql: str, engine: str, schema: dict | None = SCHEMA):
    _, catalog, namespace = next(e for e in ENGINES if e[0] == engine)
    return explain(sql, dialect=engine, mv_catalog=catalog, mv_schema=namespace, schema=schema)


@pytest.mark.parametrize("engine", [e[0] for e in ENGINES])
def test_a_grouped_join_is_explained_per_operator(engine):
    found = _explain(
        "SELECT t.k, sum(s.x) AS total, max(t.v) AS top FROM t JOIN s ON t.k = s.k"
        " WHERE t.w <> 'x' GROUP BY t.k",
        engine,
    )
    catalog = "dl.main" if engine == "duckdb" else "lake.db"
    # only the columns the view uses are read
    assert found.sources == {f"{catalog}.t": ["k", "v", "w"], f"{catalog}.s": ["k", "x"]}
    kinds = [(o.depth, o.operator) for o in found.operators]
    assert kinds == [
        (0, "grouped table"),
        (1, "aggregate"),
        (1, "aggregate"),
        (1, "filter"),
        (2, "join"),
        (3, "scan"),
        (3, "scan"),
    ]
    assert all(o.rule for o in found.operators)
    assert found.operators[4].detail == "t INNER JOIN s"
    assert "ΔRi" in found.operators[4].rule
    assert any("MAX(t.v): a group whose extreme may be deleted" in r for r in found.recomputed)
    assert "SUM(s.x)" in found.text() and "normalized SQL:" in found.text()
    assert found.whole_scans == []


@pytest.mark.parametrize("engine", [e[0] for e in ENGINES])
def test_what_a_refresh_recomputes(engine):
    windows = _explain(
        "SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) AS r FROM t", engine
    ).recomputed
    assert windows == ["window partitioned by t.k: the partitions the changes touch"]
    derived = _explain(
        "SELECT d.k, d.n FROM (SELECT k, count(*) AS n FROM t GROUP BY k) d LEFT JOIN s"
        " ON d.k = s.k",
        engine,
    ).recomputed
    assert "aggregate by t.k: the groups the changes touch" in derived
    assert any(r.startswith("LEFT JOIN: the NULL-extended rows") for r in derived)
    top = _explain("SELECT k, v FROM t ORDER BY v DESC LIMIT 3", engine)
    assert any(
        r.startswith("top-k (LIMIT 3): the rows it keeps read from the view's table")
        for r in top.recomputed
    )
    offset = _explain("SELECT k, v FROM t ORDER BY v DESC OFFSET 3", engine)
    assert "window without PARTITION BY: its whole input, when a change reaches it" in (
        offset.recomputed
    )
    assert "window_recomputes_whole_input" in offset.features
    assert any("recomputes that window's whole input" in r for r in offset.rebuilds)


def test_a_subquery_grouped_before_the_changes_is_a_whole_scan():
    found = _explain("SELECT k FROM t WHERE v > (SELECT avg(x) FROM s)", "duckdb")
    assert any(w.startswith("dl.main.s (grouped before") for w in found.whole_scans)


def test_engines_differ_in_when_they_rebuild():
    duck = _explain("SELECT k FROM t", "duckdb").rebuilds[0]
    spark = _explain("SELECT k FROM t", "spark").rebuilds[0]
    assert "expired" in duck and "delete files" in spark


@pytest.mark.parametrize("engine", [e[0] for e in ENGINES])
def test_the_clock_outside_a_temporal_filter_is_a_reason_to_rebuild(engine):
    def clock_line(sql: str) -> list[str]:
        return [r for r in _explain(sql, engine).rebuilds if "clock" in r]

    assert clock_line("SELECT k, current_date AS today FROM t")
    assert not clock_line("SELECT k FROM t WHERE v > 0")


def test_every_operator_and_sink_states_its_delta_rule():
    """An operator added to ``tree/`` gets its line in ``explain`` (its ``rule``)."""
    classes = [BagSink, GroupedSink]
    for module in pkgutil.iter_modules(duckstream.tree.__path__):
        found = importlib.import_module(f"duckstream.tree.{module.name}")
        classes += [
            c
            for _, c in inspect.getmembers(found, inspect.isclass)
            if c.__module__ == found.__name__
            and issubclass(c, Relation | Block | Leaf)
            and not inspect.isabstract(c)
        ]
    assert len(classes) >= 12
    missing = [c.__name__ for c in classes if not getattr(c, "rule", "")]
    assert missing == []


def test_the_command_line(tmp_path, capsys):
    sql = "SELECT * FROM t WHERE v > 0"
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    assert main(["explain", sql, "--schema", str(schema_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("view dl.main.mv (duckdb)") and "dl.main.t: k, v, w" in out
    assert main(["explain", sql, "--schema", json.dumps(SCHEMA), "--engine", "spark"]) == 0
    assert capsys.readouterr().out.startswith("view lake.db.mv (spark)")
    assert main(["explain", "SELECT k, count(*) AS n FROM t GROUP BY k", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sources"] == {"dl.main.t": ["k"]} and printed["operators"][0]["depth"] == 0
    # what cannot be maintained is named, as compile names it
    assert main(["explain", sql]) == 2  # SELECT * over a table needs the schema
    assert "star" in capsys.readouterr().err
    assert main(["explain", "SELECT random() AS r FROM t"]) == 2
    assert "duckstream:" in capsys.readouterr().err
    assert main(["explain", sql, "--schema", "{not json"]) == 2
