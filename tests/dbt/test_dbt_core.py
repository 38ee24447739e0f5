"""The engine-independent dbt core (dbt_duckstream), without dbt: a backend that records calls."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pytest

from dbt_duckstream import (
    Compiled,
    Found,
    ModelError,
    ModelRequest,
    Outcome,
    Refreshed,
    State,
    decide,
    materialize,
    plan_hash,
)
from dbt_duckstream.equivalence import equivalence_sql
from dbt_duckstream.outcome import log_line
from duckstream.errors import UnsupportedSQLError

SQL = "SELECT customer, count(*) AS n FROM lake.main.orders GROUP BY customer"


def request(sql: str = SQL, **kwargs) -> ModelRequest:
    return ModelRequest("totals", "lake", "main", "totals", sql, **kwargs)


def state(sql: str = SQL, plan: str = "h1", version: str = "1", **kwargs) -> State:
    fields = {"mode": "ivm", "view_sql": sql, "columns": ["customer", "n"]} | kwargs
    return State(fields["mode"], plan, sql, fields["view_sql"], fields["columns"], version)


def compiled(plan: str = "h1", sql: str = SQL, columns: list[str] | None = None) -> Compiled:
    return Compiled(plan, columns or ["customer", "n"], sql)


# -- the decision and its reason -----------------------------------------------------------
@pytest.mark.parametrize(
    ("found", "req", "expected"),
    [
        (Found(False), request(), ("build", "first run", True)),
        (Found(True, state()), request(full_refresh=True), ("build", "full refresh", True)),
        (Found(True, None), request(), ("build", "table not built by incremental_ivm", True)),
        (
            Found(True, state(mode="recompute")),
            request(),
            ("build", "was recomputed, now maintainable", True),
        ),
        (Found(True, state()), request(), ("maintain", "", False)),
        (Found(True, state()), request(strategy="full"), ("maintain", "", False)),
    ],
)
def test_decision_and_reason(found: Found, req: ModelRequest, expected: tuple) -> None:
    decision = decide(req, found, compiled(), "1")
    assert (decision.action, decision.reason, decision.replace) == expected


def test_a_changed_plan_rebuilds_in_place_when_the_layout_allows() -> None:
    edited = request(SQL.replace("GROUP BY", "WHERE n > 1 GROUP BY"))
    found = Found(True, state())
    in_place = decide(edited, found, compiled("h2", edited.sql), "1", lambda: True)
    assert (in_place.reason, in_place.replace) == ("model SQL changed", False)
    replaced = decide(edited, found, compiled("h2", edited.sql), "1", lambda: False)
    assert replaced.replace
    view = decide(request(), found, compiled("h2", "SELECT inlined"), "1")
    assert view.reason == "a view the model reads was redefined"
    upgrade = decide(request(), Found(True, state(version="0")), compiled("h2"), "1")
    assert upgrade.reason == "duckstream 0 -> 1 compiles the model differently"
    columns = decide(request(), found, compiled("h2"), "1")
    assert columns.reason == "the columns of a table it reads changed"


def test_on_schema_change_fail_stops_only_when_columns_change() -> None:
    strict = request(on_schema_change="fail")
    with pytest.raises(ModelError, match="on_schema_change is 'fail'"):
        decide(strict, Found(True, state()), compiled("h2", columns=["customer", "m"]), "1")
    assert decide(strict, Found(True, state()), compiled("h2"), "1").action == "build"


# -- plan hash, state record, log line -----------------------------------------------------
@dataclass
class Plan:
    create_mv: str = "CREATE TABLE t AS SELECT 1"
    initialize_cursors: list[str] = field(default_factory=lambda: ["BEGIN", "COMMIT"])
    maintain: list[str] = field(default_factory=lambda: ["BEGIN", "COMMIT"])
    query_mv: str = "SELECT * FROM t"


def test_plan_hash_is_one_sha256_for_both_engines() -> None:
    assert len(plan_hash(Plan())) == 64
    assert plan_hash(Plan()) == plan_hash(Plan())
    assert plan_hash(Plan()) != plan_hash(Plan(query_mv="SELECT a FROM t"))


def test_state_record_round_trips() -> None:
    built = state()
    assert State.from_record(built.record()) == built
    assert State.from_record({"mode": "ivm"}) is None


def test_log_lines() -> None:
    assert log_line('"lake"."main"."t"', Outcome("built", rows=2, elapsed_ms=4)) == (
        '"lake"."main"."t" built: 2 rows, 4 ms'
    )
    spark = Outcome("incremental", reason="auto: x", sources_changed=2, rows=5, elapsed_ms=9)
    assert spark.message() == "incremental (auto: x): from 2 sources, 5 rows, 9 ms"
    duck = Outcome("incremental", inserted=1, deleted=0, sources_changed=1, snapshots=1)
    assert duck.message() == "incremental: +1 -0 rows from 1 source, 1 snapshot, 0 ms"
    assert Outcome("recomputed", reason="limit at line 2 of m.sql is not maintainable", rows=3)


def test_script_is_the_sql_in_order() -> None:
    outcome = Outcome("built", rows=1, sql=["BEGIN TRANSACTION", "SELECT 1;", "COMMIT"])
    script = outcome.script("totals")
    assert script.splitlines() == [
        "-- duckstream: totals: built: 1 rows, 0 ms",
        "BEGIN TRANSACTION;",
        "SELECT 1;",
        "COMMIT;",
    ]


# -- equivalence SQL -----------------------------------------------------------------------
def test_equivalence_sql_runs_and_reports_both_sides() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, 0.1::DOUBLE + 0.2::DOUBLE), (2, 1.0::DOUBLE))"
        " v(k, x)"
    )
    model = "SELECT * FROM (VALUES (1, 0.3::DOUBLE), (3, 1.0::DOUBLE)) v(k, x)"
    built = State("ivm", "h", model, model, ["k", "x"], "1")
    query = equivalence_sql('"t"', built, {"k": "INTEGER", "x": "DOUBLE"}, dialect="duckdb")
    assert sorted(con.execute(query).fetchall()) == [("missing", 3, 1.0), ("unexpected", 2, 1.0)]
    exact = equivalence_sql('"t"', built, {"x": "DOUBLE"}, dialect="duckdb", float_digits=None)
    assert len(con.execute(exact).fetchall()) == 4  # 0.1 + 0.2 <> 0.3 exactly
    assert (
        "no duckstream state"
        in con.execute(equivalence_sql('"t"', None, {}, dialect="duckdb")).fetchone()[0]
    )
    spark = equivalence_sql("`t`", built, {"x": "double"}, dialect="spark")
    assert "format_string('%.11e', CAST(`x` AS DOUBLE))" in spark


# -- materialize over a backend ------------------------------------------------------------
class FakeBackend:
    """Records what the core asks of a backend; ``refreshed``: what a refresh does."""

    dialect = "duckdb"
    version = "1"

    def __init__(self, found: Found, refreshed: Refreshed | None = None, error=None) -> None:
        self.found = found
        self.refreshed = refreshed
        self.error = error
        self.calls: list[tuple] = []
        self.executed: list[str] = []
        self.layout = True

    def look(self, request):
        return self.found

    def compile(self, request):
        if self.error:
            raise self.error
        return "plan", Compiled("h1", ["customer", "n"], request.sql)

    def same_layout(self, request, plan):
        return self.layout

    def build(self, request, plan, state, *, replace, reason):
        self.calls.append(("build", replace, state.plan_hash))
        self.executed.append("CREATE TABLE ...")

    def refresh(self, request, plan, state):
        self.calls.append(("refresh", request.strategy))
        self.executed.append("INSERT INTO ...")
        return self.refreshed

    def recompute(self, request, state_of):
        self.calls.append(("recompute", state_of(["customer"]).mode))

    def count(self, request):
        return 7


def test_materialize_builds_then_refreshes() -> None:
    first = FakeBackend(Found(False))
    built = materialize(first, request())
    assert first.calls == [("build", True, "h1")]
    assert built.message().startswith("built: 7 rows") and built.sql == ["CREATE TABLE ..."]
    quiet = FakeBackend(Found(True, state()), Refreshed("none", sources=1))
    assert materialize(quiet, request()).action == "up to date"
    full = FakeBackend(Found(True, state()), Refreshed("full", "ivm_strategy full"))
    outcome = materialize(full, request(strategy="full"))
    assert (outcome.action, outcome.reason, outcome.replaced) == (
        "rebuilt",
        "ivm_strategy full",
        False,
    )
    assert full.calls == [("refresh", "full")]
    incremental = FakeBackend(
        Found(True, state()), Refreshed("incremental", "", 2, 1, inserted=3, deleted=1)
    )
    assert (
        materialize(incremental, request())
        .message()
        .startswith("incremental: +3 -1 rows from 1 source, ")
    )


def test_materialize_unsupported_fails_with_line_or_recomputes() -> None:
    sql = "select\n  id,\n  n\nfrom lake.main.orders, unnest([1, 2, 3]) as r(n)"
    error = UnsupportedSQLError(
        "table_function", "only tables and subqueries in FROM: `UNNEST([1, 2, 3]) AS r(n)`"
    )
    with pytest.raises(ModelError, match="table_function at line 4 of models/m.sql"):
        materialize(FakeBackend(Found(False), error=error), request(sql, path="models/m.sql"))
    backend = FakeBackend(Found(False), error=error)
    outcome = materialize(backend, request(sql, on_unsupported="full_refresh"))
    assert backend.calls == [("recompute", "recompute")]
    assert outcome.message().startswith("recomputed (table_function at line 4 of the model")
    assert outcome.replaced and outcome.warnings
    with pytest.raises(ModelError, match="ivm_strategy must be one of"):
        materialize(FakeBackend(Found(False)), request(strategy="sometimes"))


# -- on_configuration_change and --empty ---------------------------------------------------
EDITED = SQL.replace("GROUP BY", "WHERE n > 1 GROUP BY")


class EditedBackend(FakeBackend):
    """Compiles the SQL the table was built from (``SQL``) to plan h1, any other SQL to h2."""

    def compile(self, request):
        self.calls.append(("compile", "as built" if request.sql == SQL else "edited"))
        plan = "h1" if request.sql == SQL else "h2"
        return "plan", Compiled(plan, ["customer", "n"], request.sql)


def test_on_configuration_change_fail_continue_apply() -> None:
    with pytest.raises(
        ModelError,
        match="duckstream: model totals: model SQL changed since lake.main.totals was built,"
        " and on_configuration_change is 'fail'",
    ):
        materialize(EditedBackend(Found(True, state())), edited_request("fail"))
    refreshed = Refreshed("incremental", "", 1, 1, inserted=1, deleted=0)
    backend = EditedBackend(Found(True, state()), refreshed)
    kept = materialize(backend, edited_request("continue"))
    # maintained by the SQL it was built with
    assert backend.calls == [("compile", "edited"), ("compile", "as built"), ("refresh", "auto")]
    assert kept.message().startswith(
        "incremental (model SQL changed, not applied: on_configuration_change is 'continue'):"
        " +1 -0 rows"
    )
    assert "maintained by the SQL it was built with" in kept.warnings[0]
    # the SQL as built no longer compiles to the table's plan (here: built as h0): left as is
    stale = EditedBackend(Found(True, state(plan="h0")))
    left = materialize(stale, edited_request("continue"))
    assert left.action == "unchanged" and "NOT refreshed" in left.warnings[0]
    assert not any(call[0] in ("build", "refresh") for call in stale.calls)
    applied = EditedBackend(Found(True, state()))
    assert materialize(applied, request(EDITED)).message().startswith("rebuilt (model SQL changed)")
    # not the user's change (a source's columns): rebuilt whatever on_configuration_change says
    columns = EditedBackend(Found(True, state(plan="h0")))
    outcome = materialize(columns, request(on_configuration_change="fail"))
    assert outcome.reason == "the columns of a table it reads changed"
    with pytest.raises(ModelError, match="on_configuration_change must be one of"):
        materialize(FakeBackend(Found(False)), edited_request("sometimes"))


def edited_request(on_configuration_change: str) -> ModelRequest:
    return request(EDITED, on_configuration_change=on_configuration_change)


def test_empty_builds_a_missing_table_keeps_a_built_one_and_the_next_run_fills_it() -> None:
    missing = FakeBackend(Found(False))
    built_empty = materialize(missing, request(empty=True))
    assert missing.calls == [("recompute", "empty")]
    assert built_empty.message().startswith("built (--empty): 7 rows") and built_empty.replaced
    existing = FakeBackend(Found(True, state()))
    kept = materialize(existing, request(empty=True))
    assert existing.calls == [] and kept.action == "unchanged"
    after = FakeBackend(Found(True, state(mode="empty")))
    filled = materialize(after, request())
    assert after.calls == [("build", True, "h1")]
    assert filled.message().startswith("rebuilt (built empty by --empty): 7 rows")


def test_on_configuration_change_holds_back_an_edit_that_cannot_be_maintained() -> None:
    """Edited SQL that does not compile: 'continue' keeps maintaining the table as built;
    'fail' fails rather than let ivm_on_unsupported='full_refresh' replace the table."""
    error = UnsupportedSQLError("table_function", "only tables and subqueries in FROM")

    class Unsupported(EditedBackend):
        def compile(self, request):
            if request.sql != SQL:
                raise error
            return super().compile(request)

    refreshed = Refreshed("incremental", "", 1, 1, inserted=2, deleted=1)
    kept = Unsupported(Found(True, state()), refreshed)
    outcome = materialize(kept, edited_request("continue"))
    assert kept.calls == [("compile", "as built"), ("refresh", "auto")]
    assert outcome.message().startswith("incremental (model SQL changed, not applied: ")
    guarded = Unsupported(Found(True, state()))
    recompute = request(EDITED, on_configuration_change="fail", on_unsupported="full_refresh")
    with pytest.raises(ModelError, match="on_configuration_change is 'fail'"):
        materialize(guarded, recompute)
    assert guarded.calls == []  # nothing recomputed
    with pytest.raises(ModelError, match="table_function"):  # the construct, as without
        materialize(Unsupported(Found(True, state())), edited_request("fail"))
    applied = Unsupported(Found(True, state()))
    materialize(applied, request(EDITED, on_unsupported="full_refresh"))
    assert applied.calls == [("recompute", "recompute")]
