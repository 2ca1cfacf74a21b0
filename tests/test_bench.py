"""The benchmark command: fixed task samples and a table per strategy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dlm_lsp.bench.humaneval import SPLITS, load_tasks
from dlm_lsp.bench.strategies import run_strategy
from dlm_lsp.config import STRATEGIES, ServerConfig
from dlm_lsp.engine import Engine


@pytest.mark.parametrize("split", list(SPLITS))
def test_every_split_loads_with_prefix_suffix_and_middle(split):
    tasks = load_tasks(split)
    assert len(tasks) > 100
    assert all(t.prefix and t.middle and "def check" in t.test for t in tasks[:20])


def test_a_limited_sample_is_fixed_and_evenly_spread():
    full, sample = load_tasks("single-line"), load_tasks("single-line", limit=10)
    assert [t.task_id for t in sample] == [t.task_id for t in load_tasks("single-line", 10)]
    assert len(sample) == 10 and sample[0] == full[0] and sample[-1] != full[-1]
    assert len({t.task_id.split("/")[2] for t in sample}) > 5  # many different problems


def test_a_perfect_model_would_score_full_exact_match(model_dir, monkeypatch):
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", max_span_tokens=512))
    tasks = load_tasks("single-line", limit=3)
    answers = iter([t.middle for t in tasks])
    real = engine.infill

    def oracle(req):  # the engine's own result, with the canonical middle as its fill
        result = real(req)
        result.candidates[0].text = next(answers)
        return result
    monkeypatch.setattr(engine, "infill", oracle)
    row = run_strategy(engine, tasks, "confidence", steps=2)
    assert row.exact_match == 100.0 and row.empty == 0.0 and row.tasks == 3


def test_bench_command_prints_a_row_per_strategy_and_writes_json(model_dir, tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "dlm_lsp", "bench", "strategies", "--model",
                           str(model_dir), "--device", "cpu", "--limit", "2", "--steps", "2",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["strategy"] for r in rows] == list(STRATEGIES)
    ltr = rows[-1]
    assert ltr["mean_steps"] > rows[0]["mean_steps"] == 2.0  # one pass per token vs. budget
    for strategy in STRATEGIES:
        assert f"| {strategy} |" in done.stdout
