"""The benchmark runs end to end at a tiny scale and every refreshed view is exact.

No timing assertions: this only guards the harness (``python -m bench``) against rot.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cli import main  # noqa: E402


def test_bench_runs_and_views_equal_recomputation(tmp_path):
    out, results = tmp_path / "docs", tmp_path / "results"
    argv = ["--sf", "0.01", "--queries", "1", "3", "--workloads", "append", "mixed"]
    argv += ["--reps", "1", "--out", str(out), "--cache", str(tmp_path / "cache")]
    argv += ["--results", str(results), "--quiet"]
    assert main(argv) == 0

    payload = json.loads((results / "latest.json").read_text())
    runs = payload["runs"]
    assert {(r["workload"], r["query"]) for r in runs} == {
        (w, q) for w in ("append", "mixed") for q in (1, 3)
    }
    assert all(r["equal"] for r in runs)
    assert all(r["auto_strategy"] in ("incremental", "full") for r in runs)
    text = (out / "benchmarks.md").read_text()
    assert "## SF 0.01, append" in text and "## SF 0.01, mixed" in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "benchmarks.png").stat().st_size > 0
