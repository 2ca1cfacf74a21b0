"""The curve benchmarks (step-budget sweep, latency, throughput, sample sheet) and the
autoregressive baseline: smoke runs on a random tiny model, the pure pieces exactly."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator

import pytest
from bench_runs import CURVES, SMALLEST
from signals import SIGNALS, signal_on_call, signal_while_writing

from dlm_lsp.bench import autoregressive, pass_at_1
from dlm_lsp.bench.autoregressive import ARModel, continue_prefix, heal, missing
from dlm_lsp.bench.curves import collapse_point, mark_curve, saturation_point
from dlm_lsp.bench.output import quantile
from dlm_lsp.cli import main

NO_SMOLLM2 = missing("smollm2")


class CharCodec:
    """One token per character; 0 ends the text."""

    eos_ids = frozenset({0})

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def scripted(text: str, prompts: list[str] | None = None):
    """A 'model' that writes `text` whatever the prompt, then ends; records its prompts."""
    def greedy(ids: list[int]) -> Iterator[int]:
        if prompts is not None:
            prompts.append(CharCodec().decode(ids))
        yield from (ord(c) for c in text)
        while True:
            yield 0
    return greedy


# --- saturation and collapse -----------------------------------------------------------------

def test_saturation_is_the_first_budget_within_epsilon_of_the_best():
    budgets, quality = [1, 2, 4, 8, 16], [0.0, 10.0, 29.0, 30.0, 30.0]
    assert saturation_point(budgets, quality, epsilon=2.0) == 4
    assert saturation_point(budgets, quality, epsilon=0.0) == 8


def test_collapse_is_the_largest_budget_below_half_the_best():
    budgets, quality = [1, 2, 4, 8, 16], [0.0, 10.0, 29.0, 30.0, 30.0]
    assert collapse_point(budgets, quality, ratio=0.5) == 2
    assert collapse_point(budgets, [20.0, 25.0, 30.0, 30.0, 30.0], ratio=0.5) is None


def test_a_dip_above_the_saturation_point_is_not_a_collapse():
    budgets, quality = [1, 2, 4, 8, 16, 32], [0.0, 6.7, 6.7, 0.0, 0.0, 0.0]
    assert saturation_point(budgets, quality, epsilon=2.0) == 2
    assert collapse_point(budgets, quality, ratio=0.5, epsilon=2.0) == 1


def test_a_curve_at_zero_is_flat_saturates_at_once_and_cannot_collapse():
    marks = mark_curve([1, 2, 4], [0.0, 0.0, 0.0], "pass_at_1")
    assert marks.flat and marks.saturation == 1 and marks.collapse is None and marks.best == 0


def test_p95_is_the_nearest_rank_value():
    assert quantile(list(range(1, 21)), 0.95) == 19 and quantile([5.0], 0.95) == 5.0
    assert quantile(list(range(1, 11)), 0.5) == 5


# --- the autoregressive baseline's text handling ---------------------------------------------

def test_healing_drops_the_last_line_break_and_its_indentation_from_the_prompt():
    assert heal("def f(x):\n") == ("def f(x):", "\n")
    assert heal("    a = 1\n    ") == ("    a = 1", "\n    ")
    assert heal("x = f(") == ("x = f(", "")


def test_a_single_line_fill_is_the_line_the_model_wrote_after_the_healed_break():
    prompts: list[str] = []
    out = continue_prefix(CharCodec(), scripted("\n    return x\n    y = 2\n", prompts),
                          "def f(x):\n", lines=1)
    assert prompts == ["def f(x):"]  # the model sees no bare trailing line break
    assert out.text == "    return x\n"
    assert out.passes == out.tokens == len("\n    return x\n")


def test_a_multi_line_fill_stops_after_as_many_lines_as_the_gap_has():
    out = continue_prefix(CharCodec(), scripted("\n    a\n    b\n    c\n"), "if x:\n", lines=2)
    assert out.text == "    a\n    b\n"


def test_an_end_token_or_the_token_cap_ends_the_fill_early():
    assert continue_prefix(CharCodec(), scripted("\n    ret"), "f()\n").text == "    ret"
    assert continue_prefix(CharCodec(), scripted("\n    return x\n"), "f()\n",
                           max_tokens=5).text == "    "


def test_a_deeper_indentation_written_with_the_break_is_kept_relative_to_the_prefix():
    out = continue_prefix(CharCodec(), scripted("\n        b = 1\n"), "    a = 1\n    ")
    assert "    a = 1\n    " + out.text == "    a = 1\n        b = 1\n"


def test_the_baseline_fills_a_task_with_the_middles_line_count():
    task = pass_at_1.load_tasks("multi-line", limit=40)[-1]
    lines = task.middle.count("\n")
    model = ARModel("scripted", CharCodec(), scripted("\n" + "    pass\n" * (lines + 3)), "cpu")
    fill = model.fill(task)
    assert fill.text == "    pass\n" * lines and fill.path == "autoregressive"


def test_greedy_decoding_with_the_kv_cache_matches_recomputing_every_prefix():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = [3, 17, 5, 42]
    got = list(itertools.islice(autoregressive.greedy_decoder(model)(prompt), 6))
    seq, want = list(prompt), []
    with torch.no_grad():
        for _ in range(6):
            want.append(int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
            seq.append(want[-1])
    assert got == want


def test_a_missing_baseline_is_a_clear_error_not_a_download(monkeypatch, capsys):
    monkeypatch.setattr(autoregressive, "missing", lambda name: "not installed: pip install x")
    assert main(["bench", "humaneval", "--empty", "--limit", "1",
                 "--baseline-model", "smollm2"]) == 2
    assert "not installed: pip install x" in capsys.readouterr().err
    assert "unknown baseline" in missing("gpt-9")


def test_a_missing_baseline_is_said_before_the_model_s_tasks_run(monkeypatch, capsys):
    """`bench humaneval --limit 200 --baseline-model smollm2` ran the shipped model's 200
    tasks (minutes) and only then said the baseline was not installed, its report lost."""
    monkeypatch.setattr(autoregressive, "missing", lambda name: "not installed: pip install x")
    ran = []
    monkeypatch.setattr(pass_at_1, "run_benchmark", ran.append)
    assert main(["bench", "humaneval", "--limit", "1", "--baseline-model", "smollm2"]) == 2
    assert ran == [] and "not installed: pip install x" in capsys.readouterr().err


def test_humaneval_runs_the_baseline_model_beside_on_the_same_tasks(monkeypatch, tmp_path,
                                                                   capsys):
    fake = ARModel("fake AR", CharCodec(), scripted("\n    pass\n"), "cpu")
    monkeypatch.setattr(autoregressive, "missing", lambda name: None)  # installed
    monkeypatch.setattr(pass_at_1, "load_baseline", lambda name, device: fake)
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--self-check", "--limit", "2", "--baseline-model",
                 "smollm2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    beside = report["beside"][0]
    assert beside["model"] == "fake AR" and beside["tasks"] == report["tasks"] == 2
    assert [r["task_id"] for r in beside["results"]] == [r["task_id"] for r in report["results"]]
    assert all(r["fill"] == "    pass\n" and r["path"] == "autoregressive"
               for r in beside["results"])
    printed = capsys.readouterr().out
    assert "| canonical middle (self-check) | 2 |" in printed
    assert "| SmolLM2-135M-Instruct (Q4_1 GGUF, autoregressive), prefix only" in printed


@pytest.mark.parametrize(("where", "sig", "status"), [("loads", "SIGINT", 130),
                                                      ("fills", "SIGTERM", 143)])
def test_a_stop_while_the_baseline_model_runs_keeps_the_models_finished_report(
        where, sig, status, monkeypatch, tmp_path, capsys):
    """The model's report was finished, and the stop threw it away with the baseline's."""
    fake = ARModel("fake AR", CharCodec(), scripted("\n    pass\n"), "cpu")
    if where == "fills":
        monkeypatch.setattr(fake, "fill", signal_on_call(sig, 1))
    monkeypatch.setattr(autoregressive, "missing", lambda name: None)  # installed
    monkeypatch.setattr(pass_at_1, "load_baseline", signal_on_call(sig, 1) if where == "loads"
                        else lambda name, device: fake)
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--self-check", "--limit", "2", "--baseline-model",
                 "smollm2", "--json", str(out)]) == status
    report = json.loads(out.read_text())
    assert report["partial"] is None and report["tasks"] == 2 and report["pass_at_1"] == 100.0
    beside, = report["beside"]
    assert beside["partial"] == {"finished": 0, "planned": 2, "unit": "tasks", "signal": sig}
    assert beside["tasks"] == 0 and beside["results"] == []
    captured = capsys.readouterr()
    assert captured.out.startswith(f"partial: 0 of 2 tasks, stopped by {sig}; the numbers "
                                   "below cover only these (row SmolLM2")
    assert "| canonical middle (self-check) | 2 | 100.0 |" in captured.out
    assert "autoregressive), prefix only, healed boundary, greedy (partial: 0 of 2) | 0 | - |" \
        in captured.out
    assert captured.err.rstrip().endswith(
        "; the model's complete report and the baseline model's partial one (0 of 2 tasks) "
        f"written to {out}")


@pytest.mark.parametrize(("fill", "bar", "stored", "sig", "status", "verdict"), [
    ("--self-check", 99.0, 100.0, "SIGINT", 130, "pass@1 100.0% against 100.0% in the baseline"),
    ("--empty", 99.0, 100.0, "SIGTERM", 1, "regression: pass@1 "),
    ("--self-check", 100.5, None, "SIGTERM", 1, "self-check failed: canonical fills pass"),
])
def test_a_stop_while_the_baseline_model_runs_checks_the_models_report_as_a_whole_run_does(
        fill, bar, stored, sig, status, verdict, monkeypatch, tmp_path, capsys):
    """The model's report is complete: a regression in it (or a broken harness) exits 1,
    as in a whole run, not 130/143 as if nothing could be said; a bar met leaves the
    stop's status."""
    fake = ARModel("fake AR", CharCodec(), scripted("\n    pass\n"), "cpu")
    monkeypatch.setattr(fake, "fill", signal_on_call(sig, 1))
    monkeypatch.setattr(autoregressive, "missing", lambda name: None)  # installed
    monkeypatch.setattr(pass_at_1, "load_baseline", lambda name, device: fake)
    monkeypatch.setattr(pass_at_1, "SELF_CHECK_BAR", bar)
    out, baseline = tmp_path / "run.json", tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"pass_at_1": stored}))
    compare = [] if stored is None else ["--baseline", str(baseline)]
    assert main(["bench", "humaneval", fill, "--limit", "2", "--baseline-model", "smollm2",
                 "--json", str(out), *compare]) == status
    report = json.loads(out.read_text())
    assert report["partial"] is None and report["beside"][0]["partial"]["signal"] == sig
    err = capsys.readouterr().err
    assert verdict in err
    if verdict.startswith("regression"):
        assert report["pass_at_1"] < stored  # the empty fill fails some of its 2 tasks
    assert err.rstrip().endswith(
        "; the model's complete report and the baseline model's partial one (0 of 2 tasks) "
        f"written to {out}")


@pytest.mark.skipif(NO_SMOLLM2 is not None, reason=NO_SMOLLM2 or "")
def test_smollm2_loads_offline_and_fills_a_line_it_knows(tmp_path):
    task = next(t for t in pass_at_1.load_tasks("single-line")
                if t.task_id == "SingleLineInfilling/HumanEval/118/L7")
    model = autoregressive.load_baseline("smollm2", "cpu")
    fill = model.fill(task)
    assert fill.text == task.middle and fill.steps < 20


# --- the curve benchmarks, end to end on a tiny model ----------------------------------------

def test_sweep_writes_every_point_its_marks_and_the_left_to_right_baseline(model_dir, tmp_path,
                                                                         capsys):
    out, md = tmp_path / "sweep.json", tmp_path / "sweep.md"
    assert main(["bench", "sweep", "--model", str(model_dir), "--device", "cpu", "--limit", "2",
                 "--steps", "1", "2", "--strategies", "confidence", "random",
                 "--json", str(out), "--markdown", str(md)]) == 0
    report = json.loads(out.read_text())
    assert report["machine"]["cpu"] and "load_average" in report["machine"]
    curves = report["curves"]
    assert [(c["kind"], c["strategy"]) for c in curves] == [
        ("single-line", "confidence"), ("single-line", "random"),
        ("multi-line", "confidence"), ("multi-line", "random")]
    for curve in curves:
        assert [p["budget"] for p in curve["points"]] == [1, 2]
        assert all(p["mean_steps"] <= p["budget"] for p in curve["points"])
        assert set(curve["marks"]) == {"pass_at_1", "exact_match"}
        assert curve["marks"]["pass_at_1"]["saturation"] in (1, 2)
        assert isinstance(curve["above_floor"], bool)
    ltr = report["left_to_right"]
    assert [p["kind"] for p in ltr] == ["single-line", "multi-line"]
    assert all(p["mean_steps"] > 2 for p in ltr)  # one pass per token
    assert set(report["floors"]) == {"single-line", "multi-line"}
    assert report["fills"] == 2 * 2 * (2 * 2 + 1)
    assert "| confidence |" in md.read_text() and "Left-to-right" in md.read_text()
    assert report["partial"] is None
    progress = capsys.readouterr().err.splitlines()[-1]  # on stderr, the last line at the end
    assert progress.startswith("sweep: 10/10 points, multi-line left-to-right per token: ")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_sweep_reports_the_points_it_finished_marked_partial(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    """A stopped sweep lost every point; now it keeps those whose programs ran."""
    from dlm_lsp.bench import sweep
    from dlm_lsp.bench.filling import Fill

    # one task a kind, 3 budgets and left to right: the 2nd fill is single-line at budget 2
    monkeypatch.setattr(sweep, "fill_task", signal_on_call(
        sig, 2, then=lambda engine, task, settings: Fill(task.middle, True, 1, 1.0)))
    out, md = tmp_path / "sweep.json", tmp_path / "sweep.md"
    assert main(["bench", "sweep", "--model", str(model_dir), "--device", "cpu", "--limit", "1",
                 "--steps", "1", "2", "4", "--strategies", "confidence", "--json", str(out),
                 "--markdown", str(md)]) == status
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 1, "planned": 8, "unit": "points", "signal": sig}
    curve, = report["curves"]
    assert (curve["kind"], curve["strategy"]) == ("single-line", "confidence")
    assert [(p["budget"], p["pass_at_1"]) for p in curve["points"]] == [(1, 100.0)]
    assert list(report["floors"]) == ["single-line"] and report["left_to_right"] == []
    captured = capsys.readouterr()
    assert captured.out == md.read_text()
    assert captured.out.startswith(f"partial: 1 of 8 points, stopped by {sig}; the numbers "
                                   "below cover only these\n")
    assert "| confidence (partial: 1 of 3 budgets) | 100.0 (1 ms, 1) | - | - |" in captured.out
    assert "multi-line" not in captured.out.split("\n", 2)[2]  # not begun: not shown
    assert captured.err.rstrip().endswith(
        f"; partial report of 1 of 8 points written to {out} and {md}")


@pytest.mark.parametrize(("option", "names", "repeated"), [
    ("--kinds", ["single", "single-line"], "single-line"),
    ("--kinds", ["multi-line", "single", "multi-line"], "multi-line"),
    ("--strategies", ["confidence", "random", "confidence"], "confidence"),
])
def test_a_sweep_naming_a_kind_or_strategy_twice_is_refused_before_the_model_loads(
        option, names, repeated, monkeypatch, capsys):
    """Swept twice, a kind had one floor and its curves held both runs' points
    (budgets 1, 2, 1, 2) marked as one: a usage error names the repeat instead."""
    from dlm_lsp.bench import sweep

    monkeypatch.setattr(sweep, "bench_engine", lambda *a, **k: pytest.fail("model loaded"))
    assert main(["bench", "sweep", "--limit", "1", "--steps", "1", option, *names]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlm-lsp bench sweep: {option} names {repeated} more than once")


def test_a_repeated_budget_is_one_point_of_the_curve():
    from dlm_lsp.bench.sweep import SweepConfig

    assert SweepConfig(budgets=(4, 1, 4, 2)).budgets == (1, 2, 4)


def test_a_throughput_run_naming_a_mode_twice_is_refused_before_the_model_loads(monkeypatch,
                                                                                capsys):
    """One engine per mode: a mode named twice ran once and was counted twice in the
    planned fills (the progress line and a partial report were off)."""
    from dlm_lsp.bench import throughput

    monkeypatch.setattr(throughput, "bench_engine", lambda *a, **k: pytest.fail("model loaded"))
    assert main(["bench", "throughput", "--modes", "batched", "alone", "batched"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlm-lsp bench throughput: --modes names batched more than once")


def test_a_repeated_concurrency_or_span_length_is_one_point_in_the_order_given():
    from dlm_lsp.bench.latency import LatencyConfig
    from dlm_lsp.bench.throughput import ThroughputConfig

    assert ThroughputConfig(concurrency=(4, 1, 4, 8, 1)).concurrency == (4, 1, 8)
    assert LatencyConfig(lengths=(16, 8, 16)).lengths == (16, 8)


def test_sweep_plots_one_png_per_kind(model_dir, tmp_path):
    pytest.importorskip("matplotlib")
    assert main(["bench", "sweep", "--model", str(model_dir), "--device", "cpu", "--limit", "1",
                 "--steps", "1", "2", "--strategies", "confidence", "--kinds", "single",
                 "--plots", str(tmp_path)]) == 0
    png = tmp_path / "sweep-single-line.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size < 200_000


def test_plots_without_matplotlib_fail_before_the_run_with_the_fix(monkeypatch, capsys,
                                                                  tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert main(["bench", "sweep", "--limit", "1", "--plots", str(tmp_path)]) == 2
    assert "dlm-lsp[bench]" in capsys.readouterr().err


def test_latency_grows_with_the_span_for_left_to_right_not_for_a_fixed_budget(model_dir,
                                                                              tmp_path, capsys):
    out = tmp_path / "latency.json"
    args = ["bench", "latency", "--model", str(model_dir), "--device", "cpu", "--lengths", "8",
            "32", "--steps", "4", "--repeats", "1", "--json", str(out)]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(tmp_path / "latency.png")]
    except ImportError:
        pass
    assert main(args) == 0
    report = json.loads(out.read_text())
    passes = {(p["method"], p["tokens"]): p["steps"] for p in report["points"]}
    diffusion, ltr = report["methods"]
    assert passes[diffusion, 8] <= 4 and passes[diffusion, 32] <= 4
    assert passes[ltr, 32] > passes[ltr, 8] and passes[ltr, 32] > 8
    assert set(report["growth"]) == {diffusion, ltr}
    assert report["partial"] is None and {p["fills"] for p in report["points"]} == {1}
    progress = capsys.readouterr().err.splitlines()[-1]  # on stderr, the last line at the end
    assert progress.startswith(f"latency: 4/4 fills, 32 tokens, {ltr}: ")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_while_the_json_is_written_waits_for_the_markdown_and_the_plot_too(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    """The signals were held one file at a time: one that came while --json was written
    stopped the run there, and --markdown and --plot were never written."""
    from dlm_lsp.bench import latency, plots

    def draw(report, path):  # a stand-in for matplotlib (the bench extra)
        with open(path, "wb") as png:
            png.write(b"\x89PNG")
        return path
    monkeypatch.setattr(plots, "require_matplotlib", lambda: None)
    monkeypatch.setattr(plots, "plot_latency", draw)
    monkeypatch.setattr(latency, "_infill_ms", lambda engine, tokens, strategy, steps, seed: (
        1.0, steps))
    out, md, png = tmp_path / "latency.json", tmp_path / "latency.md", tmp_path / "latency.png"
    signal_while_writing(monkeypatch, sig, out)
    assert main(["bench", "latency", "--model", str(model_dir), "--device", "cpu", "--lengths",
                 "8", "--steps", "2", "--repeats", "1", "--json", str(out), "--markdown",
                 str(md), "--plot", str(png)]) == status
    captured = capsys.readouterr()
    assert json.loads(out.read_text())["partial"] is None
    assert md.read_text() == captured.out and png.read_bytes() == b"\x89PNG"
    said = captured.err.splitlines()[-1]
    assert said.startswith(f"dlm-lsp bench latency: stopped by {sig} after ")
    assert said.endswith(f"; report written to {out}, {md} and {png}")


def test_latency_refuses_spans_the_model_cannot_hold(model_dir, tmp_path, capsys):
    """`--lengths 100000` (the shipped model holds 512 positions) ran for minutes without a
    line, and no point it could measure."""
    out = tmp_path / "latency.json"
    assert main(["bench", "latency", "--model", str(model_dir), "--device", "cpu",
                 "--lengths", "8", "1024", "100000", "--steps", "1", "--repeats", "1",
                 "--json", str(out)]) == 2
    assert capsys.readouterr().err == (  # the test model's 1,024 positions
        "dlm-lsp bench latency: --lengths 1024 100000: the model holds 1024 positions, the "
        "span and the document around it; give lengths below 1024\n")
    assert not out.exists()


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_latency_run_reports_the_fills_it_timed_marked_partial(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import latency

    def timed(engine, tokens, strategy, steps, seed):  # ms: the span's tokens
        return float(tokens), tokens if strategy == "left-to-right" else steps
    # 2 warm-ups, then 2 repeats a point: the 8th call is the second at 16 tokens, diffusion
    monkeypatch.setattr(latency, "_infill_ms", signal_on_call(sig, 8, then=timed))
    out = tmp_path / "latency.json"
    assert main(["bench", "latency", "--model", str(model_dir), "--device", "cpu", "--lengths",
                 "8", "16", "--steps", "2", "--repeats", "2", "--json", str(out)]) == status
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 5, "planned": 8, "unit": "fills", "signal": sig}
    diffusion, ltr = report["methods"]
    assert [(p["method"], p["tokens"], p["fills"]) for p in report["points"]] == [
        (diffusion, 8, 2), (ltr, 8, 2), (diffusion, 16, 1)]
    captured = capsys.readouterr()
    assert captured.out.startswith(f"partial: 5 of 8 fills, stopped by {sig}; ")
    assert "| 8 | 8 (2) | 8 (8) |\n| 16 | 16 (2) (partial: 1 of 2 fills) | - |\n" in captured.out
    assert f"x2.0 for {diffusion} (8 to 16 tokens), x1.0 for {ltr} (8 to 8 tokens)." in (
        captured.out)
    assert captured.err.rstrip().endswith(f"; partial report of 5 of 8 fills written to {out}")


def test_a_latency_run_stopped_while_the_baseline_model_runs_keeps_the_models_points(
        model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import latency

    fake = ARModel("fake AR", CharCodec(), scripted(""), "cpu", short="fake")
    monkeypatch.setattr(fake, "time_tokens", signal_on_call(  # the 1st: its warm-up
        "SIGINT", 2, then=lambda prefix, tokens: (1.0, tokens)))
    monkeypatch.setattr(latency, "load_baseline", lambda name, device: fake)
    monkeypatch.setattr(latency, "_infill_ms", lambda engine, tokens, strategy, steps, seed:
                        (1.0, steps))
    out = tmp_path / "latency.json"
    assert main(["bench", "latency", "--model", str(model_dir), "--device", "cpu", "--lengths",
                 "8", "--steps", "2", "--repeats", "1", "--baseline-model", "smollm2",
                 "--json", str(out)]) == 130
    report = json.loads(out.read_text())
    assert report["partial"]["finished"] == 2 and report["partial"]["planned"] == 3
    assert [p["method"] for p in report["points"]] == [
        "diffusion, confidence, 2 steps", "left-to-right (same model)"]
    assert capsys.readouterr().out.startswith("partial: 2 of 3 fills, stopped by SIGINT; ")


def test_throughput_reports_rows_per_pass_batched_and_none_alone(model_dir, tmp_path, capsys):
    import threading

    workers_before = set(threading.enumerate())
    out = tmp_path / "throughput.json"
    assert main(["bench", "throughput", "--model", str(model_dir), "--device", "cpu",
                 "--concurrency", "1", "3", "--fills-per-thread", "1", "--steps", "2",
                 "--tokens", "4", "--json", str(out)]) == 0
    points = json.loads(out.read_text())["points"]
    assert [(p["mode"], p["concurrency"], p["fills"]) for p in points] == [
        ("batched", 1, 1), ("batched", 3, 3), ("alone", 1, 1), ("alone", 3, 3)]
    batched = [p for p in points if p["mode"] == "batched"]
    assert batched[0]["occupancy"] == 1.0 and 1.0 <= batched[1]["occupancy"] <= 3.0
    assert all(p["occupancy"] is None for p in points if p["mode"] == "alone")
    assert all(p["fills_per_s"] > 0 and p["p95_ms"] >= p["p50_ms"] > 0 for p in points)
    progress = capsys.readouterr().err.splitlines()[-1]  # on stderr, the last line at the end
    assert progress.startswith("throughput: 8/8 fills, alone x3: ")
    assert not [t for t in threading.enumerate()  # the batching worker was closed, joined
                if t.name == "dlm-batcher" and t not in workers_before]


def test_throughput_beside_long_fills_with_a_target_reports_short_and_long_p50(
        model_dir, tmp_path, capsys, monkeypatch):
    from dlm_lsp.bench import throughput

    documents = []
    real = throughput._fill

    def fill(engine, config, seed, should_stop=None, long=False):
        documents.append(long)
        return real(engine, config, seed, should_stop, long)
    monkeypatch.setattr(throughput, "_fill", fill)
    out = tmp_path / "throughput.json"
    assert main(["bench", "throughput", "--model", str(model_dir), "--device", "cpu",
                 "--concurrency", "2", "--fills-per-thread", "1",
                 "--tokens", "4", "--modes", "batched", "--beside-long", "--latency-ms",
                 "5000", "--json", str(out)]) == 0
    [point] = json.loads(out.read_text())["points"]
    assert point["p50_short_ms"] > 0 and point["p50_long_ms"] > 0
    assert sorted(documents[1:]) == [False, True]  # after the warm-up: one fill each
    printed = capsys.readouterr().out
    assert "| short p50 ms | long p50 ms |" in printed
    assert "steps from a 5000 ms latency target" in printed
    assert len(throughput.LONG_DOCUMENT) > 9 * len(throughput.DOCUMENT)
    assert throughput.LONG_DOCUMENT[throughput.LONG_CURSOR:] == (
        throughput.DOCUMENT[throughput.CURSOR:])


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_throughput_run_reports_the_fills_finished_before_the_signal(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    """The fill under way when the signal came is stopped, and the command ends after it
    (the callers ran on after the command had printed that it stopped), not counted."""
    import os
    import signal
    import time

    from dlm_lsp.bench import throughput
    from dlm_lsp.sampler import Cancelled

    calls, stopped = [], []

    def fill(engine, config, seed, should_stop=None, long=False):
        calls.append(seed)  # 2 warm-ups, then 2 fills a point, one thread: the 6th is the
        if len(calls) == 6:  # second alone
            os.kill(os.getpid(), signal.Signals[sig])
            waited = time.monotonic()
            while not should_stop() and time.monotonic() - waited < 5:
                time.sleep(0.01)
            time.sleep(0.5)  # the forward pass under way ends a while after the stop
            stopped.append(should_stop())
            raise Cancelled()
        return config.steps
    monkeypatch.setattr(throughput, "_fill", fill)
    out = tmp_path / "throughput.json"
    assert main(["bench", "throughput", "--model", str(model_dir), "--device", "cpu",
                 "--concurrency", "1", "--fills-per-thread", "2", "--steps", "2",
                 "--json", str(out)]) == status
    assert stopped == [True], "the fill under way was not stopped, or not waited for"
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 3, "planned": 4, "unit": "fills", "signal": sig}
    assert [(p["mode"], p["fills"]) for p in report["points"]] == [("batched", 2), ("alone", 1)]
    captured = capsys.readouterr()
    assert captured.out.startswith(f"partial: 3 of 4 fills, stopped by {sig}; ")
    assert "| alone (partial: 1 of 2 fills) | 1 | " in captured.out
    assert "| batched | 1 | " in captured.out
    assert captured.err.rstrip().endswith(f"; partial report of 3 of 4 fills written to {out}")


def test_the_sample_sheet_shows_each_task_with_reference_and_left_to_right(model_dir,
                                                                           tmp_path, capsys):
    sheet, report = tmp_path / "samples.md", tmp_path / "samples.json"
    assert main(["bench", "samples", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "2", "--steps", "2", "--out", str(sheet), "--json",
                 str(report)]) == 0
    text = sheet.read_text()
    assert json.loads(report.read_text())
    for task in pass_at_1.load_tasks("single-line", limit=2):
        assert f"## {task.task_id}" in text and task.middle.strip() in text
    assert "| reference | 2/2 | 2/2 |" in text and "left-to-right (same model)" in text
    *_, progress, wrote = capsys.readouterr().err.splitlines()  # on stderr
    assert progress.startswith("samples: 2/2 tasks, ") and " diffusion fills pass, " in progress
    assert wrote == f"wrote {sheet} and {report}"


@pytest.mark.parametrize("bench", CURVES)
def test_a_curve_benchmark_runs_the_engine_with_extra_server_settings_and_names_them(
        bench, model_dir, tmp_path, capsys, bench_engines):
    """`bench sweep`, `latency`, `throughput` and `samples` took no --settings: a curve
    measured where the CPU's default is bf16 could not be measured again in fp32, nor
    with the context cache.  Their engines run with them, the JSON keeps them, and the
    summary names them."""
    out = tmp_path / "report.json"
    assert main(["bench", bench, *SMALLEST[bench], "--model", str(model_dir), "--device",
                 "cpu", "--json", str(out),
                 "--settings", '{"precision": "fp32", "contextCache": true}']) == 0
    assert bench_engines and {(c.precision, c.context_cache) for c in bench_engines} == {
        ("fp32", True)}
    assert json.loads(out.read_text())["config"]["engine"] == {"precision": "fp32",
                                                               "context_cache": True}
    assert ", contextCache True, precision fp32" in capsys.readouterr().out


@pytest.mark.parametrize(("bench", "settings", "named"), [
    ("sweep", '{"steps": 4}', "steps"), ("sweep", '{"strategy": "margin"}', "strategy"),
    ("sweep", '{"repairRounds": 1}', "repairRounds"),
    ("latency", '{"steps": 4}', "steps"), ("latency", '{"maxSpanTokens": 64}', "maxSpanTokens"),
    ("latency", '{"stopWhenSettled": true}', "stopWhenSettled"),
    ("throughput", '{"batchRows": 2}', "batchRows"), ("throughput", '{"seed": 3}', "seed"),
    ("samples", '{"strategy": "margin"}', "strategy"),
    ("samples", '{"temperature": 0.5}', "temperature"),
])
def test_a_setting_a_curve_benchmark_sets_itself_is_a_usage_error_before_the_model_loads(
        bench, settings, named, capsys, bench_engines):
    """Each fill's own options replace the server's setting of the same name (a sweep
    point's steps and strategy, a latency fill's repair and settled stop, every seed),
    and latency's span cap and throughput's batching are set per run: given in
    --settings, such a setting would have named every row and changed none (the span
    cap and the batching ended in a TypeError).  Refused, before any engine is made."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings", settings]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench {bench}: --settings names {named}, which this "
                           "benchmark sets itself")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "settings", "named", "own", "options"), [
    ("sweep", '{"latencyMs": 300}', "latencyMs", "steps", "--steps"),
    ("latency", '{"stepsSingleLine": 4}', "stepsSingleLine", "steps", "--steps"),
    ("throughput", '{"latencyMsSingleLine": 300}', "latencyMsSingleLine", "steps",
     "--steps or --latency-ms"),
    ("samples", '{"stepsMultiLine": 4, "latencyMs": 300}', "latencyMs, stepsMultiLine",
     "steps", "--steps"),
])
def test_a_budget_setting_that_a_curve_benchmark_s_own_steps_replace_is_a_usage_error(
        bench, settings, named, own, options, capsys, bench_engines):
    """A fill's own `steps` win over every budget setting (README, Step budget): `bench
    throughput --settings '{"latencyMs": 300}'` named the target in its heading and ran
    every fill at 8 steps.  Refused, before any engine is made, saying what replaces it
    and which of the command's options gives the budget instead."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names {named}, which the {own} this benchmark "
        "gives each fill replace (a fill's own budget wins over every budget setting): "
        f"give {options} instead\n")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "settings", "named", "option"), [
    ("sweep", '{"steps": 4}', "steps", "--steps"),
    ("sweep", '{"strategy": "margin"}', "strategy", "--strategies"),
    ("latency", '{"strategy": "margin"}', "strategy", "--strategy"),
    ("throughput", '{"batchRows": 2}', "batchRows", "--modes"),
    ("throughput", '{"seed": 3}', "seed", "--seed"),
    ("samples", '{"seed": 3}', "seed", "--seed"),
])
def test_a_setting_a_curve_benchmark_sets_itself_is_refused_naming_the_option_that_sets_it(
        bench, settings, named, option, capsys, bench_engines):
    """The refusal said only that the benchmark sets the setting: a user had to read
    --help to learn that a sweep's strategies are `--strategies` and throughput's batching
    `--modes`.  It names the command's own option for it."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names {named}, which this benchmark sets "
        f"itself on each row: give {option} instead\n")
    assert bench_engines == []


def test_a_setting_a_curve_benchmark_sets_with_no_option_of_its_own_is_refused_as_before(
        capsys, bench_engines):
    """`bench latency` sets its span cap from its longest length: no option gives the
    cap, so the refusal names none."""
    assert main(["bench", "latency", *SMALLEST["latency"], "--settings",
                 '{"maxSpanTokens": 64}']) == 2
    assert capsys.readouterr().err == (
        "dlm-lsp bench latency: --settings names maxSpanTokens, which this benchmark sets "
        "itself on each row\n")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "option"), [("latency", "--lengths"),
                                               ("throughput", "--tokens")])
def test_a_length_setting_is_refused_where_a_curve_benchmark_gives_each_fill_its_length(
        bench, option, capsys, bench_engines):
    """`bench latency` and `bench throughput` fill spans of the lengths their options
    give, which the span plan takes over the length settings: refused, naming that
    option."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings",
                 '{"multiLineTokens": 8}']) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names multiLineTokens, which no fill of this "
        "benchmark reads (each fill has its own length, which replaces the length "
        f"settings): give {option} instead\n")
    assert bench_engines == []


@pytest.mark.parametrize("bench", ["latency", "throughput"])
def test_a_rewrite_setting_is_refused_where_every_timed_fill_is_at_a_cursor(
        bench, capsys, bench_engines):
    """`bench latency` and `bench throughput` fill at a cursor with no selection, which
    the policy never plans as a rewrite, though their requests name no kind: `strength`
    was taken and labelled every row (the rewrite budgets are refused as budgets)."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings", '{"strength": 0.5}']) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names strength, which no fill of this "
        "benchmark reads (each fill is one line or several, never a rewrite, and only "
        "rewrites read them)\n")
    assert bench_engines == []


def test_a_nucleus_is_taken_where_the_fills_leave_the_temperature_to_the_server():
    """`bench throughput`'s fills ask for no temperature: with `{"temperature": 0.5}`
    they sample, and `topP` bounds what they sample from."""
    from dlm_lsp.bench.throughput import FLAGS, ThroughputConfig, _options

    assert pass_at_1.engine_settings(
        '{"temperature": 0.5, "topP": 0.9}', requests=(_options(ThroughputConfig(), 0),),
        flags=FLAGS) == {"temperature": 0.5, "top_p": 0.9}


@pytest.mark.parametrize(("settings", "steps", "kinds", "heading"), [
    ({}, None, {"single-line"}, "server budget"),
    ({}, 2, {"single-line"}, "2 steps"),
    ({"steps": 4}, None, {"single-line", "multi-line"}, "4 steps"),
    ({"latency_ms": 300}, None, {"single-line"}, "300 ms target"),
    ({"steps_single_line": 4}, None, {"single-line", "multi-line"},
     "4 steps single-line, 16 steps multi-line"),
])
def test_the_sample_sheet_s_diffusion_column_names_the_budget_its_fills_ran_with(
        settings, steps, kinds, heading):
    """`bench samples --settings '{"steps": 4}'` named 4 steps in the sheet's first line
    and "server budget" in its diffusion column: the column says what ran, for each kind
    of task on the sheet where the kinds' budgets differ."""
    from dlm_lsp.bench.samples import SamplesConfig, _columns

    columns = list(_columns(SamplesConfig(steps=steps, engine=settings), None, kinds))
    assert columns[1] == f"diffusion (server strategy, {heading})"


def test_a_request_option_that_is_no_server_setting_refuses_nothing():
    """The span length and the task kind are a fill's own, with no server setting of
    that name to replace: only the options that have one are named (a latency target
    is a setting too, for every kind)."""
    from dlm_lsp.bench.pass_at_1 import set_by_requests
    from dlm_lsp.config import InfillOptions

    assert set_by_requests(InfillOptions(length=8, kind="single-line")) == ()
    assert set_by_requests(InfillOptions(length=8, latency_ms=100)) == ("latency_ms",)
    assert set_by_requests(InfillOptions(length=8, seed=0), InfillOptions(steps=2)) == (
        "steps", "seed")


def test_a_curve_plot_s_title_names_the_settings_it_ran_with():
    """The PNGs go into the README without their JSON: an fp32 curve and the default's
    looked the same."""
    from dlm_lsp.bench.latency import LatencyConfig, LatencyReport
    from dlm_lsp.bench.plots import _where

    report = LatencyReport(LatencyConfig(engine={"precision": "fp32"}),
                           {"device": "cpu", "torch_threads": 2}, None, "default", [], [])
    assert _where(report) == "default (cpu, 2 threads, precision fp32)"


@pytest.mark.parametrize("bench", [
    ["sweep", "--kinds", "single", "--steps", "1", "--strategies", "confidence", "--no-ltr"],
    ["samples", "--steps", "1"]])
def test_sweep_and_samples_reports_say_which_isolation_ran_the_programs_and_why(
        model_dir, tmp_path, monkeypatch, capsys, bench):
    """Their reports kept each program's verdict alone: a sweep run with no isolation
    (no `unshare` here, say) read as one run in the namespaces."""
    from dlm_lsp.bench import sandbox

    monkeypatch.setattr(sandbox, "probe_isolation", lambda: sandbox.Isolation(
        sandbox.NONE, "'namespaces' and 'network': the reason"))
    monkeypatch.setattr(sandbox.cgroup, "find", lambda name="pids": (
        None, f"no {name} controller mounted"))
    monkeypatch.setattr(sandbox, "probe_seccomp", lambda: sandbox.Seccomp(
        None, "no system call table for mips (32-bit Python)"))
    monkeypatch.setattr(sandbox, "probe_landlock", lambda: sandbox.Landlock(
        0, "", "the kernel has no Landlock (why)"))
    out = tmp_path / "report.json"
    assert main(["bench", *bench, "--model", str(model_dir), "--device", "cpu",
                 "--limit", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["isolation"] == "none"
    assert report["isolation_fallback"] == "'namespaces' and 'network': the reason"
    assert (report["pids_cgroup"], report["pids_cgroup_note"]) == (
        False, "no pids controller mounted; no memory cgroup (no memory controller mounted)")
    assert (report["seccomp"], report["seccomp_note"]) == (
        False, "no system call table for mips (32-bit Python)")
    assert ("sandbox isolation: none (the audit hook and the limits only) (fell back: "
            "'namespaces' and 'network': the reason); no pids cgroup (no pids controller "
            "mounted; no memory cgroup (no memory controller mounted)); no seccomp filter "
            "(no system call table for mips (32-bit Python)); no "
            "Landlock layer (the kernel has no Landlock (why)).") in capsys.readouterr().out
    assert (report["landlock"], report["landlock_note"]) == (
        False, "the kernel has no Landlock (why)")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_sample_sheet_stopped_while_the_baseline_model_fills_keeps_the_tasks_finished(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import samples
    from dlm_lsp.bench.filling import Fill

    fake = ARModel("fake AR", CharCodec(), scripted(""), "cpu")
    monkeypatch.setattr(fake, "fill", signal_on_call(  # the second task's
        sig, 2, then=lambda task: Fill("    pass\n", None, 1, 1.0, "autoregressive")))
    monkeypatch.setattr(samples, "load_baseline", lambda name, device: fake)
    monkeypatch.setattr(samples, "fill_task",
                        lambda engine, task, settings: Fill(task.middle, True, 1, 1.0))
    sheet, out = tmp_path / "samples.md", tmp_path / "samples.json"
    assert main(["bench", "samples", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "3", "--baseline-model", "smollm2", "--out", str(sheet),
                 "--json", str(out)]) == status
    first, second, _ = pass_at_1.load_tasks("single-line", limit=3)
    text = sheet.read_text()
    assert f"partial: 1 of 3 tasks, stopped by {sig}; the sheet below covers only these" in text
    assert f"## {first.task_id}" in text and f"## {second.task_id}" not in text
    assert "| reference (partial: 1 of 3) | 1/1 | 1/1 |" in text
    assert "| fake AR (partial: 1 of 3) | 0/1 | 0/1 |" in text
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 1, "planned": 3, "unit": "tasks", "signal": sig}
    assert [t["task_id"] for t in report["tasks"]] == [first.task_id]
    assert capsys.readouterr().err.rstrip().endswith(
        f"; partial report of 1 of 3 tasks written to {sheet} and {out}")


def test_ctrl_c_while_a_report_is_written_leaves_it_whole(tmp_path, monkeypatch):
    """Ctrl-C (a second one, after the partial report was begun, or one at the end of a
    run) while `--json` was written left the file cut short: JSON that did not parse."""
    import os
    import pathlib
    import signal

    from dlm_lsp.bench.output import writing_reports

    real = pathlib.Path.write_text

    def write_half_then_ctrl_c(self, text, encoding=None):
        real(self, text[:len(text) // 2], encoding=encoding)
        os.kill(os.getpid(), signal.SIGINT)
        return real(self, text, encoding=encoding)
    monkeypatch.setattr(pathlib.Path, "write_text", write_half_then_ctrl_c)
    report = tmp_path / "report.json"
    with pytest.raises(KeyboardInterrupt), writing_reports() as files:
        files.json(report, {"tasks": 64, "partial": {"finished": 64, "planned": 200}})
    assert json.loads(report.read_text())["tasks"] == 64
