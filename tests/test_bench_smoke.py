"""The benchmark runs end to end at a tiny scale and every refreshed view is exact.

No timing assertions: this only guards the harness (``python -m bench``) against rot.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import fit_policy  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.cli import main  # noqa: E402
from bench.report import read_json  # noqa: E402
from duckstream.strategy import History, Policy, SourceEstimate, calibrate, decide  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def views_compiled_once():
    """Each TPC-H view compiled once for the module: the harness (``bench.run``), the replay
    (``bench.fit_policy``) and the tests below ask for the same plans, which nothing changes
    (the harness itself reuses a plan across workloads)."""
    plans = {}
    compile_views = bench_run.compile_views

    def compiled(queries):
        plans.update(compile_views([q for q in queries if q not in plans]))
        return {q: plans[q] for q in queries}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench_run, "compile_views", compiled)
        patch.setattr(fit_policy, "compile_views", compiled)
        yield


def test_bench_runs_and_views_equal_recomputation(tmp_path):
    out, results = tmp_path / "docs", tmp_path / "results"
    argv = ["--sf", "0.01", "--queries", "1", "3", "17", "--workloads", "append", "mixed"]
    argv += ["--reps", "1", "--out", str(out), "--cache", str(tmp_path / "cache")]
    argv += ["--results", str(results), "--quiet"]
    assert main(argv) == 0

    payload = json.loads((results / "latest.json").read_text())
    runs = payload["runs"]
    assert {(r["workload"], r["query"]) for r in runs} == {
        (w, q) for w in ("append", "mixed") for q in ("1", "3", "17")
    }
    assert all(r["equal"] for r in runs)
    assert all(r["auto_strategy"] in ("incremental", "full") for r in runs)
    text = (out / "benchmarks.md").read_text()
    assert "## SF 0.01, append" in text and "## SF 0.01, mixed" in text
    # each path's phases (RefreshReport.phases), and their table in the report
    for r in runs:
        for path in ("auto", "incremental", "full"):
            assert r["phases"][path] and all(len(p) == 3 for p in r["phases"][path]), r
    assert "## Where an incremental refresh's time goes" in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "benchmarks.png").stat().st_size > 0

    # bench.fit_policy replays auto's choice from the recorded estimates and measurements:
    # with auto's own constants it must choose what auto chose
    recorded, _ = read_json(results / "latest.json")
    plans = bench_run.compile_views(["1", "3", "17"])
    for run in recorded.runs:
        assert any(e["inserted"] for e in run.estimates.values())  # both windows append
        sources = {name: SourceEstimate(**e) for name, e in run.estimates.items()}
        plan = plans[run.query]
        model = decide(sources, Policy(), plan.maintain_reads, plan.rebuild_reads)
        assert run.measured is not None and run.measured["full"] is not None  # the fills
        replayed = calibrate(model, History.from_dict(run.measured), Policy())
        assert replayed.strategy == run.auto_strategy, run
    assert fit_policy.main([str(results / "latest.json")]) == 0


def test_every_benchmarked_query_compiles_with_its_scans():
    assert len(bench_run.SUPPORTED) >= 22  # TPC-H 1-20 and 22, and Q13 with an inner join
    for query, plan in bench_run.compile_views(bench_run.SUPPORTED).items():
        assert plan.maintain_reads is not None and plan.rebuild_reads, query


def _row(sf: float, workload: str, query: str, incremental_ms: float, recompute_ms: float):
    from bench.report import Row

    times = dict(estimate_ms=1.0, auto_ms=incremental_ms, incremental_ms=incremental_ms)
    times |= dict(full_ms=recompute_ms, recompute_ms=recompute_ms, floor_ms=1.0)
    cpu = {f"{k}_cpu_ms": 1.0 for k in ("auto", "incremental", "full", "recompute", "floor")}
    peaks = {f"{k}_peak_mib": 0.0 for k in ("incremental", "full", "recompute")}
    return Row(sf, workload, query, 1, "incremental", "", **times, **cpu, **peaks,
               mv_rows_written=0, equal=True)  # fmt: skip


def test_scaling_compares_the_same_change_against_sf1_on_both_sides():
    from bench.report import scaling_pairs, targets
    from bench.run import Config, plan_workloads

    planned = {(sf, w.key) for sf, w in plan_workloads(Config(sfs=[3, 0.1, 1]))}
    assert (0.1, "append@sf1") in planned and (3, "append@sf1") in planned
    assert not any(sf == 1 and "@" in key for sf, key in planned)

    rows = [
        _row(0.1, "append@sf1", "6", 50, 10),
        _row(1, "append", "6", 100, 100),
        _row(3, "append@sf1", "6", 500, 300),
        _row(3, "append", "6", 120, 300),
    ]
    pairs = scaling_pairs(rows)
    assert list(pairs) == ["append SF 0.1 -> 1", "append SF 1 -> 3"]
    assert [(s.sf, b.sf) for s, b in pairs["append SF 1 -> 3"]] == [(1, 3)]
    lines = targets(rows)
    # 0.1 -> 1 is the issue's target (growth 2x: met); 1 -> 3 is reported, not judged (5x).
    assert any("Scaling (append SF 0.1 -> 1" in t and ": met" in t for t in lines)
    assert any("beyond the targets (append SF 1 -> 3" in t and "worst 5.0x" in t for t in lines)
    assert any(t.startswith("- SF 3 append (beyond the targets)") for t in lines)


def test_targets_and_summary_follow_the_performance_issue():
    from bench.report import summary_table, targets

    rows = [_row(1, "append", q, 10, 100) for q in ("1", "3", "17")]  # 10x faster
    rows += [_row(1, "recent_update", "6", 50, 100), _row(1, "recent_delete", "6", 200, 100)]
    lines = targets(rows)
    # auto took 200 ms where recomputing took 100
    auto = next(t for t in lines if t.startswith("- **auto never more than 1.1x"))
    assert ": missed (4/5 within; worst SF 1 recent_delete Q6 2.00x" in auto
    assert any("SF 1 append, every view: auto >= 3x" in t and ": met" in t for t in lines)
    assert any("join-and-aggregate views: auto >= 5x" in t and "2 views" in t for t in lines)
    assert any("every refresh within 3x the floor**: missed" in t for t in lines)  # floor 1 ms
    recent = next(t for t in lines if "monthly appends" in t)
    assert ": missed" in recent and "auto 1.00x" in recent  # geo-mean of 2x and 0.5x
    table = summary_table(rows)
    # CPU times all 1 ms in these rows: every CPU speed-up is 1x
    assert table[2] == "| append | bulk | 1 | 10.00x | 10.00x | 1.00x | 1.00x | 1.00x | 1.00x | 3 |"
    assert table[3].startswith("| recent_update | monthly | 1 | 2.00x")
