"""The benchmark commands: fixed task samples, a table per strategy, sandboxed pass@1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench_runs import SMALLEST
from signals import SIGNALS, signal_on_call, signal_while_writing

from dlm_lsp.bench import pass_at_1
from dlm_lsp.bench.filling import FillSettings, fill_task
from dlm_lsp.bench.humaneval import SPLITS, load_tasks
from dlm_lsp.bench.pass_at_1 import program_for
from dlm_lsp.bench.sandbox import REASONS, run_programs
from dlm_lsp.bench.scoring import edit_similarity, exact_match, levenshtein
from dlm_lsp.bench.strategies import run_strategy
from dlm_lsp.bench.syntax_rate import fixture_tasks
from dlm_lsp.cli import main
from dlm_lsp.cli import main as cli_main
from dlm_lsp.config import STRATEGIES, ServerConfig, snake
from dlm_lsp.engine import Engine

HANDFUL = load_tasks("single-line", limit=4) + load_tasks("multi-line", limit=2)


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


def test_a_limit_above_the_split_runs_it_all_and_says_so(capsys):
    """`bench humaneval --split random-span-light --limit 100000` ran the 164 tasks with
    no word (only the header's count told it)."""
    tasks = load_tasks("random-span-light", limit=100_000)
    assert len(tasks) == len(load_tasks("random-span-light"))
    assert capsys.readouterr().err == (f"note: a limit of 100000 is more than the "
                                       f"random-span-light split's {len(tasks)} tasks: all "
                                       f"{len(tasks)} run\n")
    load_tasks("random-span-light", limit=len(tasks))
    assert capsys.readouterr().err == ""  # exactly the split: nothing to say


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
    total = 2 * len(STRATEGIES)  # progress: on stderr, the last line at the end
    assert done.stderr.splitlines()[-1].startswith(f"strategies: {total}/{total} fills, ")
    assert "fills, " not in done.stdout


def test_the_program_is_the_filled_solution_then_its_tests_then_the_check_call():
    task = HANDFUL[0]
    program = program_for(task, "FILL")
    assert program.startswith(task.prefix + "FILL" + task.suffix)
    assert task.test in program and program.endswith(f"check({task.entry_point})\n")


def test_canonical_middles_pass_their_tests():
    outcomes = run_programs([program_for(t, t.middle) for t in HANDFUL])
    assert [o.reason for o in outcomes] == ["passed"] * len(HANDFUL), [o.detail for o in outcomes]


def test_the_empty_fill_fails_the_same_tasks():
    outcomes = run_programs([program_for(t, "") for t in HANDFUL])
    assert not any(o.passed for o in outcomes)


def test_exact_match_ignores_surrounding_and_trailing_blanks_but_not_inner_indentation():
    assert exact_match("\n    return x  \n\n", "    return x\n")
    assert exact_match("return x", "    return x\n")  # the edge: the prefix may hold it
    assert exact_match("if a:\t\n    b = 2\n", "if a:\n    b = 2")
    assert not exact_match("if a:\nb = 2\n", "if a:\n    b = 2\n")
    assert not exact_match("    return y\n", "    return x\n")


def test_edit_similarity_is_one_minus_edit_distance_over_the_longer_normalised_text():
    assert levenshtein("kitten", "sitting") == 3 and levenshtein("", "abc") == 3
    assert edit_similarity("x = 1  \n", "    x = 1") == 1.0  # whitespace exact match ignores
    assert edit_similarity("", "return x") == 0.0
    assert edit_similarity("return y", "return x") == 1 - 1 / 8
    assert edit_similarity("return", "return x") > edit_similarity("re", "return x") > 0
    assert edit_similarity("", "") == 1.0


def test_oracle_length_is_the_middles_token_count_and_policy_leaves_it_to_the_server(
        model_dir, monkeypatch):
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    seen, real = [], engine.infill
    monkeypatch.setattr(engine, "infill", lambda req: seen.append(req) or real(req))
    task = HANDFUL[0]
    fill_task(engine, task, FillSettings(length="oracle", steps=2))
    fill_task(engine, task, FillSettings(length="policy", steps=2))
    oracle, policy = (req.options.length for req in seen)
    assert oracle == len(engine.model.tokenizer.encode(task.middle)) and policy is None
    assert seen[0].text == task.prefix + task.suffix and seen[0].start == len(task.prefix)


def test_self_check_passes_and_writes_json_and_markdown(tmp_path):
    out, summary = tmp_path / "self.json", tmp_path / "self.md"
    assert main(["bench", "humaneval", "--self-check", "--limit", "3", "--json", str(out),
                 "--markdown", str(summary)]) == 0
    report = json.loads(out.read_text())
    assert report["pass_at_1"] == 100.0 and report["tasks"] == 3 and report["model"] is None
    assert report["edit_similarity"] == 100.0
    assert [r["similarity"] for r in report["results"]] == [1.0] * 3
    assert "| canonical middle (self-check) | 3 | 100.0 | 100.0 | 100.0 |" in summary.read_text()


def test_a_broken_harness_fails_the_self_check(monkeypatch, capsys):
    monkeypatch.setattr(pass_at_1, "program_for", lambda task, fill: "assert False\n")
    assert main(["bench", "humaneval", "--self-check", "--limit", "2"]) == 1
    assert "self-check failed" in capsys.readouterr().err


def test_humaneval_command_with_a_model_writes_json_naming_the_machine(model_dir, tmp_path,
                                                                      capsys):
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "3", "--steps", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    machine = report["machine"]
    assert machine["cpu"] and machine["torch"] and machine["date"] and machine["device"] == "cpu"
    assert report["tasks"] == len(report["results"]) == 3 and report["model"] == str(model_dir)
    assert all(r["reason"] in REASONS for r in report["results"])
    assert 0 <= report["pass_at_1"] <= 100 and report["mean_steps"] > 0
    assert "server default strategy, oracle length, 2 steps | 3 |" in printed


def test_humaneval_runs_the_engine_with_extra_server_settings(model_dir, tmp_path, capsys,
                                                             bench_engines):
    seen = bench_engines
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "2", "--steps", "2", "--json", str(out),
                 "--settings", '{"precision": "bf16", "contextCache": true}']) == 0
    assert seen and seen[0].precision == "bf16" and seen[0].context_cache
    report = json.loads(out.read_text())
    assert report["config"]["engine"] == {"precision": "bf16", "context_cache": True}
    assert report["precision"] == "bf16"  # what the model ran in, recorded
    assert "2 steps, contextCache True, precision bf16 | 2 |" in capsys.readouterr().out


@pytest.mark.parametrize(("settings", "says"), [
    ('{"precisoin": "bf16"}', "--settings: unknown setting 'precisoin'"),
    ('{"precision": "fp64"}', '--settings: setting \'precision\' = "fp64" should be one of'),
    ("{precision: bf16}", "--settings is not JSON"),
    ('["precision"]', "--settings should be a JSON object of settings ('{\"steps\": 8}'), "
                      "got an array"),
])
@pytest.mark.parametrize("bench", list(SMALLEST))
def test_a_setting_the_engine_would_not_use_is_a_usage_error(bench, settings, says, capsys):
    """A misspelt setting would be a run measured without it: refused (exit 2, as for
    any bad option), and not said to be "ignored" or to keep a default."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings", settings]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench {bench}: ") and says in said
    assert "ignored" not in said and "kept" not in said


@pytest.mark.parametrize(("settings", "where"), [
    ('{"timeoutMs": 1000, "drafts": true}', "benchmarks/lsp_latency.py fills through the "
     "language server, with its own --settings"),
    ('{"backend": "remote", "remoteUrl": "http://gpu-box:8000"}', "benchmarks/"
     "remote_throughput.py fills through a serve-remote service, with its own --settings"),
    ('{"suggestInvalid": true, "remoteRetries": 0}', "benchmarks/remote_throughput.py fills "
     "through a serve-remote service and benchmarks/lsp_latency.py fills through the "
     "language server, each with its own --settings"),
])
@pytest.mark.parametrize("bench", list(SMALLEST))
def test_a_setting_only_the_language_server_reads_is_refused_naming_what_measures_it(
        bench, settings, where, capsys, bench_engines):
    """`--settings '{"timeoutMs": 1000}'` (a deadline, draft notifications, the backend
    ...) was taken and labelled every row, though a benchmark fills on an engine of its
    own, which never reads them: refused before the model loads, naming the script that
    fills through a server instead."""
    from dlm_lsp.config import camel

    named = ", ".join(map(camel, map(snake, json.loads(settings))))
    assert main(["bench", bench, *SMALLEST[bench], "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names {named}, which only the language server "
        f"reads, not the engine this benchmark fills on: {where}\n")
    assert bench_engines == []


def test_the_settings_only_the_language_server_reads_are_those_the_engine_never_reads():
    """`SERVER_ONLY` is what a benchmark refuses as read by no fill: no module of the
    engine's side reads one (as `config.timeout_ms`), and every other setting of the
    server's own is named there (a new setting only the server reads is added to it, or
    a benchmark's rows would be labelled with it again)."""
    import re
    from dataclasses import fields
    from pathlib import Path

    import dlm_lsp
    from dlm_lsp.config import SERVER_ONLY, InfillOptions, ServerConfig

    root = Path(dlm_lsp.__file__).parent
    server_side = ("server.py", "backends.py", "status.py", "cli.py", "config.py", "pinned.py")
    engine_side = "\n".join(
        path.read_text(encoding="utf-8") for path in root.rglob("*.py")
        if path.name not in server_side and not {"remote", "bench"} & set(path.parts))
    names = "|".join(sorted(SERVER_ONLY))
    assert re.findall(rf"\b(?:cfg|config)\.(?:{names})\b", engine_side) == []
    per_request = {f.name for f in fields(InfillOptions)}  # the sampler reads them by name
    unread = [f.name for f in fields(ServerConfig) if f.name not in per_request
              and not re.search(rf"\.{f.name}\b|\"{f.name}\"", engine_side)]
    assert set(unread) <= SERVER_ONLY and unread


@pytest.mark.parametrize(("settings", "why"), [
    ('{"contextCache": false, "cacheRefresh": 3}', "they tune the context cache, which "
     "contextCache false turns off"),
    ('{"contextCache": false, "cacheWindow": 4}', "they tune the context cache, which "
     "contextCache false turns off"),
    ('{"remaskBelow": 0.3}', "it bounds re-masking, which only remask above 0 turns on, "
     "and not left to right"),
    ('{"earlyStop": false, "earlyStopLogprob": -0.5}', "it is the early stop's bar, and no "
     "fill stops early, with earlyStop false or left to right"),
    ('{"batchRows": 0, "batchPadding": true}', "it lets fills of different lengths share a "
     "pass, and batchRows 0 shares none"),
])
def test_a_setting_that_matters_only_beside_another_is_refused_without_it(
        settings, why, capsys, bench_engines):
    """`cacheRefresh` with `contextCache` false (and each such pair in config.py) was taken
    silently and labelled every row, though no fill read it: refused as a setting no
    fill reads is, saying which setting turns it on."""
    named = next(key for key in json.loads(settings) if key not in (
        "contextCache", "earlyStop", "batchRows"))
    assert main(["bench", "humaneval", "--limit", "1", "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench humaneval: --settings names {named}, which no fill of this "
        f"benchmark reads ({why})\n")
    assert bench_engines == []


@pytest.mark.parametrize("settings", [
    '{"contextCache": true, "cacheRefresh": 2, "cacheWindow": 4}',
    '{"cacheRefresh": 4}',  # the server's contextCache is "auto": on for our own on a CPU
    '{"remask": 0.2, "remaskBelow": 0.3}',
    '{"earlyStopLogprob": -0.5}',  # the server's early stop is on
    '{"batchPadding": true}',  # the server's batchRows is 16
])
def test_a_setting_that_matters_only_beside_another_is_taken_with_it(settings):
    from dlm_lsp.bench.filling import FILL_FLAGS, planned_options
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings(settings, requests=(planned_options(FillSettings()),),
                           flags=FILL_FLAGS) == {snake(k): v for k, v in
                                                 json.loads(settings).items()}


def test_the_early_stop_s_bar_is_refused_where_every_fill_runs_left_to_right():
    """A left-to-right fill stops early only where its request asks
    (`engine.sampler_config`); one that asks reads the bar."""
    from dlm_lsp.bench.pass_at_1 import UsageError, engine_settings
    from dlm_lsp.config import InfillOptions

    left_to_right = InfillOptions(strategy="left-to-right")
    with pytest.raises(UsageError, match="earlyStopLogprob, which no fill"):
        engine_settings('{"earlyStopLogprob": -0.5}', requests=(left_to_right,))
    assert engine_settings('{"earlyStopLogprob": -0.5}', requests=(
        InfillOptions(strategy="left-to-right", early_stop=True),)) == {
        "early_stop_logprob": -0.5}


@pytest.mark.parametrize("settings", ['{"schedule": "cosine"}', '{"threshold": 0.9}',
                                      '{"remask": 0.2}', '{"remask": 0.2, "remaskBelow": 0.3}'])
def test_a_parallel_strategy_s_control_is_refused_where_every_fill_runs_left_to_right(
        settings, capsys, bench_engines):
    """A left-to-right fill commits one token a step in order: the schedule, threshold and
    re-masking are set aside for it (`engine.strictly_left_to_right`), and named every row
    of `bench humaneval --strategy left-to-right`."""
    assert main(["bench", "humaneval", "--limit", "1", "--strategy", "left-to-right",
                 "--settings", settings]) == 2
    said = capsys.readouterr().err
    assert said.startswith("dlm-lsp bench humaneval: --settings names ")
    assert "which no fill of this benchmark reads" in said and "left to right" in said
    assert bench_engines == []


def test_a_parallel_strategy_s_control_is_taken_where_some_fill_runs_in_parallel():
    """`bench strategies` and a sweep fill with every strategy: a threshold changes the
    parallel ones' rows."""
    from dlm_lsp.bench import strategies
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings('{"threshold": 0.9}', requests=strategies.planned(4),
                           flags=strategies.FLAGS) == {"threshold": 0.9}


def test_a_nucleus_is_taken_where_a_fill_s_later_candidates_sample(bench_engines):
    """A greedy fill's candidates after the first sample (`engine.sampler_config`), from
    the nucleus `topP` keeps: `{"topP": 0.9, "candidates": 4}` was refused as read by no
    fill."""
    from dlm_lsp.bench.filling import FILL_FLAGS, planned_options
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings('{"topP": 0.9, "candidates": 4}',
                           requests=(planned_options(FillSettings()),), flags=FILL_FLAGS) == {
        "top_p": 0.9, "candidates": 4}


def test_syntax_runs_both_settings_with_extra_server_settings_and_names_them(
        model_dir, tmp_path, capsys, monkeypatch):
    """`bench syntax` took no --settings: its fp32 fixtures row could not be measured
    again on a CPU whose default is bf16.  Both rows run with them, and say so."""
    from dlm_lsp.bench import syntax_rate

    seen = []

    class Recording(syntax_rate.Engine):
        def __init__(self, config):
            seen.append(config)
            super().__init__(config)
    monkeypatch.setattr(syntax_rate, "Engine", Recording)
    monkeypatch.setattr(syntax_rate, "fixture_tasks", lambda: fixture_tasks()[:1])
    out = tmp_path / "syntax.json"
    assert main(["bench", "syntax", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "1", "--json", str(out),
                 "--settings", '{"precision": "fp32", "maxContextTokens": 240}']) == 0
    assert [(c.precision, c.max_context_tokens, c.validate) for c in seen] == [
        ("fp32", 240, False), ("fp32", 240, True)] * 2
    rows = json.loads(out.read_text())
    assert [r["setting"] for r in rows[:2]] == [
        "model only (validation off), maxContextTokens 240, precision fp32",
        "validation + repair + fallback, maxContextTokens 240, precision fp32"]
    assert all(r["engine"] == {"precision": "fp32", "max_context_tokens": 240} for r in rows)
    assert all(r["machine"]["device"] == "cpu" and r["machine"]["date"] for r in rows)
    assert len({r["revision"] for r in rows}) == 1  # None outside a checkout
    printed = capsys.readouterr().out.splitlines()
    assert all("maxContextTokens 240, precision fp32" in line for line in printed)


def test_strategies_runs_the_engine_with_extra_server_settings_and_names_them(
        model_dir, tmp_path, capsys, monkeypatch, bench_engines):
    """`bench strategies` took no --settings: its table could not be measured again in
    another precision than the machine's default."""
    from dlm_lsp.bench import strategies
    from dlm_lsp.bench.filling import Fill

    seen = bench_engines
    monkeypatch.setattr(strategies, "fill_task",
                        lambda engine, task, settings: Fill(task.middle, True, 1, 1.0))
    out = tmp_path / "strategies.json"
    assert main(["bench", "strategies", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "1", "--json", str(out),
                 "--settings", '{"precision": "fp32", "contextCache": true}']) == 0
    assert [(c.precision, c.context_cache) for c in seen] == [("fp32", True)]
    assert json.loads(out.read_text())["engine"] == {"precision": "fp32",
                                                     "context_cache": True}
    assert "revision" in json.loads(out.read_text())
    assert ("8 steps (left-to-right: one per token), contextCache True, precision fp32; "
            in capsys.readouterr().out)


@pytest.mark.parametrize(("bench", "settings", "named"), [
    ("syntax", '{"validate": false}', "validate"),
    ("strategies", '{"strategy": "margin"}', "strategy"),
])
def test_a_setting_the_benchmark_sets_on_each_row_is_a_usage_error(bench, settings, named,
                                                                   capsys):
    """`bench syntax` runs a row with validation off and one with it on; `bench
    strategies` a row per strategy.  Given in --settings, the setting would have named
    every row, though the benchmark's own value replaced it on some: refused."""
    assert main(["bench", bench, "--limit", "1", "--settings", settings]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench {bench}: --settings names {named}, ")


@pytest.mark.parametrize(("bench", "options", "settings", "named"), [
    ("humaneval", [], '{"seed": 3}', "seed"),
    ("humaneval", ["--steps", "2"], '{"steps": 4}', "steps"),
    ("heldout", [], '{"temperature": 0.5}', "temperature"),
    ("heldout", ["--no-repair"], '{"fallback": true}', "fallback"),
    ("syntax", [], '{"seed": 3}', "seed"),
    ("strategies", [], '{"steps": 4}', "steps"),
    ("strategies", [], '{"repairRounds": 1}', "repairRounds"),
])
def test_a_setting_every_fill_of_the_benchmark_sets_itself_is_a_usage_error(
        bench, options, settings, named, capsys, bench_engines):
    """A fill's own option replaces the server's setting of the same name: `bench
    humaneval --settings '{"seed": 3}'` ran seed 0 (its --seed) and `bench strategies
    --settings '{"steps": 4}'` its --steps 8, each labelled with the setting.  Refused
    before any engine is made, as the curve benchmarks refuse theirs."""
    assert main(["bench", bench, *SMALLEST[bench], *options, "--settings", settings]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench {bench}: --settings names {named}, ")
    assert bench_engines == []


def test_a_setting_every_fill_sets_itself_is_refused_naming_each_option_that_sets_it(
        capsys, bench_engines):
    """`bench heldout --steps 2 --settings '{"steps": 3, "seed": 1}'` was refused with
    no word of which options set them: each is named beside its setting."""
    assert main(["bench", "heldout", "--limit", "1", "--steps", "2", "--settings",
                 '{"steps": 3, "seed": 1}']) == 2
    assert capsys.readouterr().err == (
        "dlm-lsp bench heldout: --settings names steps, seed, which this benchmark sets "
        "itself on each row: give --steps for steps and --seed for seed instead\n")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "options", "settings"), [
    ("humaneval", [], '{"seed": 3}'), ("humaneval", ["--strategy", "margin"],
                                       '{"strategy": "entropy"}'),
    ("strategies", [], '{"steps": 4}'),
])
def test_a_setting_a_humaneval_heldout_or_strategies_fill_sets_names_the_option(
        bench, options, settings, capsys, bench_engines):
    """The option that sets the setting is the one of the same name (`bench strategies`
    has only --steps of them)."""
    named = next(iter(json.loads(settings)))
    assert main(["bench", bench, "--limit", "1", *options, "--settings", settings]) == 2
    assert capsys.readouterr().err.endswith(
        f"--settings names {named}, which this benchmark sets itself on each row: "
        f"give --{named} instead\n")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "options", "settings", "named"), [
    ("syntax", [], '{"seed": 3}', "seed"),
    ("strategies", [], '{"seed": 3}', "seed"),
    ("humaneval", ["--no-repair"], '{"fallback": true}', "fallback"),
])
def test_a_setting_a_fill_sets_with_no_option_to_give_it_is_refused_naming_none(
        bench, options, settings, named, capsys, bench_engines):
    """`bench syntax` and `bench strategies` fill with seed 0 and take no --seed;
    --no-repair turns the fallback off and can turn nothing on: no option is named."""
    assert main(["bench", bench, "--limit", "1", *options, "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names {named}, which this benchmark sets "
        "itself on each row\n")
    assert bench_engines == []


@pytest.mark.parametrize(("bench", "settings", "named", "option"), [
    ("humaneval", '{"singleLineTokens": 4}', "singleLineTokens", "--length policy"),
    ("heldout", '{"multiLineTokens": 8, "singleLineTokens": 4}',
     "singleLineTokens, multiLineTokens", "--length policy"),
    ("strategies", '{"singleLineTokens": 4}', "singleLineTokens", None),
])
def test_a_length_setting_is_refused_where_every_fill_has_the_oracle_length(
        bench, settings, named, option, capsys, bench_engines):
    """With the oracle length each fill asks for the canonical middle's token count,
    which the span plan takes over `singleLineTokens` and `multiLineTokens`: `bench
    humaneval --settings '{"singleLineTokens": 4}'` was labelled with it and ran as
    without it.  Refused, saying why, and where the command has one, the option under
    which fills do read it."""
    assert main(["bench", bench, "--limit", "1", "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench {bench}: --settings names {named}, which no fill of this benchmark "
        "reads (each fill has its own length, which replaces the length settings)"
        f"{f': give {option} instead' if option else ''}\n")
    assert bench_engines == []


def test_a_length_setting_is_taken_where_the_fills_leave_the_length_to_the_policy():
    """`--length policy` fills are sized by the server's length settings."""
    from dlm_lsp.bench.filling import FILL_FLAGS, planned_options
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings('{"singleLineTokens": 4}',
                           requests=(planned_options(FillSettings(length="policy")),),
                           flags=FILL_FLAGS) == {"single_line_tokens": 4}


@pytest.mark.parametrize("settings", ['{"stepsRewrite": 4}', '{"strength": 0.5}'])
def test_a_rewrite_setting_is_refused_where_every_fill_has_the_oracle_s_kind(
        settings, capsys, bench_engines):
    """With the oracle length a fill is asked as the kind of its canonical middle, one
    line or several: the rewrite's budget and `strength` named every row and changed
    none.  No option makes these fills rewrites, so none is named."""
    named = next(iter(json.loads(settings)))
    assert main(["bench", "humaneval", "--limit", "1", "--settings", settings]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp bench humaneval: --settings names {named}, which no fill of this "
        "benchmark reads (each fill is one line or several, never a rewrite, and only "
        "rewrites read them)\n")
    assert bench_engines == []


def test_a_rewrite_setting_is_taken_where_the_fills_leave_the_kind_to_the_policy():
    """A fill whose kind the request leaves open is planned as its span says: the
    benchmark does not presume which, so the setting is the user's call."""
    from dlm_lsp.bench.filling import planned_options
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings('{"stepsRewrite": 4}',
                           requests=(planned_options(FillSettings(length="policy")),)) == {
        "steps_rewrite": 4}


def test_a_nucleus_is_refused_where_every_fill_is_greedy(capsys, bench_engines):
    """A benchmark's fills ask for temperature 0, and a greedy fill takes the most
    likely token whatever `topP` keeps: it named every row and changed none."""
    assert main(["bench", "humaneval", "--limit", "1", "--settings", '{"topP": 0.5}']) == 2
    assert capsys.readouterr().err == (
        "dlm-lsp bench humaneval: --settings names topP, which no fill of this benchmark "
        "reads (its fills are greedy, at temperature 0 with one candidate, and only "
        "sampling keeps a nucleus)\n")
    assert bench_engines == []


def test_the_fallback_s_span_bound_is_refused_where_no_fill_falls_back(capsys, bench_engines):
    """--no-repair turns the left-to-right fallback off, and with it what
    `fallbackMaxTokens` bounds."""
    assert main(["bench", "heldout", "--limit", "1", "--no-repair", "--settings",
                 '{"fallbackMaxTokens": 4}']) == 2
    assert capsys.readouterr().err == (
        "dlm-lsp bench heldout: --settings names fallbackMaxTokens, which no fill of this "
        "benchmark reads (it bounds the left-to-right fallback, which its fills turn "
        "off)\n")
    assert bench_engines == []


def test_the_fallback_s_span_bound_is_taken_where_fills_fall_back():
    """Without --no-repair a fill may fall back, within `fallbackMaxTokens`."""
    from dlm_lsp.bench.filling import planned_options
    from dlm_lsp.bench.pass_at_1 import engine_settings

    assert engine_settings('{"fallbackMaxTokens": 4}',
                           requests=(planned_options(FillSettings()),)) == {
        "fallback_max_tokens": 4}


def test_a_setting_a_fill_leaves_to_the_server_is_taken():
    """Without --steps, --strategy or --no-repair a humaneval or heldout fill asks for
    none of them: `--settings '{"steps": 4, "fallback": false}'` is what they run with
    (the README's early-stop and retry runs give such settings)."""
    from dlm_lsp.bench.filling import fill_options
    from dlm_lsp.bench.pass_at_1 import engine_settings, set_by_requests

    taken = engine_settings('{"steps": 4, "strategy": "margin", "fallback": false}',
                            set_by_requests(fill_options(FillSettings())))
    assert taken == {"steps": 4, "strategy": "margin", "fallback": False}


def test_a_budget_setting_is_taken_where_the_fills_leave_the_budget_to_the_server():
    """Without --steps a humaneval or heldout fill gives no budget of its own: the
    per-kind steps and the latency targets in --settings are what it runs with."""
    from dlm_lsp.bench.filling import fill_options
    from dlm_lsp.bench.pass_at_1 import engine_settings, set_by_requests

    taken = engine_settings('{"stepsSingleLine": 4, "latencyMs": 300}',
                            set_by_requests(fill_options(FillSettings())))
    assert taken == {"steps_single_line": 4, "latency_ms": 300}


@pytest.mark.parametrize("bench", list(SMALLEST))
def test_a_model_or_device_in_settings_is_a_usage_error_naming_the_option(bench, capsys):
    """`--settings '{"model": ...}'` ended in a TypeError's traceback (model given twice
    to the engine): the model and device have options of their own."""
    assert main(["bench", bench, *SMALLEST[bench], "--settings",
                 '{"model": "default", "device": "cpu"}']) == 2
    assert capsys.readouterr().err == (f"dlm-lsp bench {bench}: --settings names model, "
                                       "device: give --model and --device instead\n")


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read --baseline"), ("{", "is not a report written by `bench humaneval "
                                            "--json`: not JSON (Expecting"),
    ("[]", "is not a report"), ('{"pass_at_1": "high"}', "is not a report"),
])
def test_a_baseline_that_cannot_be_compared_to_is_refused_before_any_task_runs(
        tmp_path, monkeypatch, capsys, content, says):
    """Found only after the run, it cost the run and exited 1: "pass@1 fell"."""
    import dlm_lsp.bench.pass_at_1 as pass_at_1

    stored = tmp_path / "baseline.json"
    if content is not None:
        stored.write_text(content)
    monkeypatch.setattr(pass_at_1, "run_benchmark",
                        lambda config: pytest.fail("ran the tasks before reading the baseline"))
    assert main(["bench", "humaneval", "--empty", "--baseline", str(stored)]) == 2
    said = capsys.readouterr().err
    assert said.startswith("dlm-lsp bench humaneval: ") and says in said and str(stored) in said


def test_a_margin_without_a_baseline_is_refused(monkeypatch, capsys):
    """It was taken, and compared nothing: the run exited 0 as if it had passed a bar."""
    import dlm_lsp.bench.pass_at_1 as pass_at_1

    monkeypatch.setattr(pass_at_1, "run_benchmark",
                        lambda config: pytest.fail("ran the tasks with a margin of nothing"))
    assert main(["bench", "humaneval", "--empty", "--margin", "5"]) == 2
    assert capsys.readouterr().err == ("dlm-lsp bench humaneval: --margin is the drop allowed "
                                       "against --baseline FILE; give one\n")


def test_programs_the_sandbox_could_not_run_fail_the_run_and_are_named(monkeypatch, capsys):
    """A sandbox that could not start programs (user namespaces used up, /tmp full) gave a
    pass@1 of its failures, exit 0: a broken machine read as a weak model."""
    from dlm_lsp.bench.sandbox import Outcome

    def broken(sources, config):
        return [Outcome(False, "sandbox", "the sandbox failed: OSError: no space", 0.0)
                for _ in sources]
    monkeypatch.setattr(pass_at_1, "run_programs", broken)
    assert main(["bench", "humaneval", "--empty", "--limit", "2"]) == 1
    captured = capsys.readouterr()
    assert "Outcomes: sandbox 2" in captured.out
    assert "sandbox failed: 2 of 2 programs never ran" in captured.err
    assert "OSError: no space" in captured.err


def test_the_report_says_which_isolation_the_run_used_and_why_it_fell_back(
        monkeypatch, tmp_path, capsys):
    """The probe's reason for a weaker isolation went to stderr only: a stored report of
    programs run with less isolation did not say why."""
    from dlm_lsp.bench import sandbox

    def ran(sources, config):
        return [sandbox.Outcome(True, "passed", "", 0.0, "", sandbox.NETWORK) for _ in sources]
    monkeypatch.setattr(pass_at_1, "run_programs", ran)
    monkeypatch.setattr(sandbox, "probe_isolation",
                        lambda: sandbox.Isolation(sandbox.NETWORK, "'namespaces': the reason"))
    monkeypatch.setattr(sandbox.cgroup, "find", lambda name="pids": (
        None, f"no {name} controller mounted"))
    monkeypatch.setattr(sandbox, "probe_seccomp", lambda: sandbox.Seccomp(
        None, "no system call table for mips (32-bit Python)"))
    monkeypatch.setattr(sandbox, "probe_landlock", lambda: sandbox.Landlock(
        0, "", "the kernel has no Landlock (why)"))
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--empty", "--limit", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["isolation"] == "network"
    assert report["isolation_fallback"] == "'namespaces': the reason"
    assert (report["pids_cgroup"], report["pids_cgroup_note"]) == (
        False, "no pids controller mounted; no memory cgroup (no memory controller mounted)")
    assert (report["seccomp"], report["seccomp_note"]) == (
        False, "no system call table for mips (32-bit Python)")
    assert ("sandbox isolation: network and IPC namespaces only (fell back: 'namespaces': the "
            "reason); no pids cgroup (no pids controller mounted; no memory cgroup (no "
            "memory controller mounted)); no seccomp filter (no "
            "system call table for mips (32-bit Python)); no Landlock layer (the kernel has no "
            "Landlock (why)).") in capsys.readouterr().out
    assert (report["landlock"], report["landlock_note"]) == (
        False, "the kernel has no Landlock (why)")


def test_the_report_says_each_program_ran_in_a_pids_cgroup_and_behind_seccomp_and_where(
        monkeypatch, tmp_path, capsys):
    from dlm_lsp.bench import sandbox

    def ran(sources, config):
        return [sandbox.Outcome(True, "passed", "", 0.0, "", sandbox.NAMESPACES, True, True,
                                True) for _ in sources]
    monkeypatch.setattr(pass_at_1, "run_programs", ran)
    monkeypatch.setattr(sandbox, "probe_isolation", lambda: sandbox.Isolation(sandbox.NAMESPACES))
    found = {"pids": sandbox.cgroup.Controller("/sys/fs/cgroup/pids", 1),
             "memory": sandbox.cgroup.Controller("/sys/fs/cgroup/memory", 1)}
    monkeypatch.setattr(sandbox.cgroup, "find", lambda name="pids": (found[name], ""))
    capped = ("the memory of each program's processes capped at 1280 MiB together (cgroup "
              "v1 below /sys/fs/cgroup/memory)")
    monkeypatch.setattr(sandbox, "probe_seccomp",
                        lambda: sandbox.Seccomp(b"filter", "x86_64: what it refuses"))
    monkeypatch.setattr(sandbox, "probe_landlock",
                        lambda: sandbox.Landlock(7, "{}", "Landlock ABI 7: what it holds"))
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--empty", "--limit", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["pids_cgroup"], report["pids_cgroup_note"]) == (
        True, f"cgroup v1 below /sys/fs/cgroup/pids; {capped}")
    assert (report["seccomp"], report["seccomp_note"]) == (True, "x86_64: what it refuses")
    assert (report["landlock"], report["landlock_note"]) == (True, "Landlock ABI 7: what it holds")
    assert (f"; each program in a pids cgroup of its own (cgroup v1 below /sys/fs/cgroup/pids; "
            f"{capped}); each behind a seccomp filter (x86_64: what it refuses); each behind "
            "a Landlock layer (Landlock ABI 7: what it holds)." in capsys.readouterr().out)


@pytest.mark.parametrize(("bench", "runs"), [("humaneval", "pass_at_1.run_benchmark"),
                                             ("sweep", "sweep.run_sweep"),
                                             ("samples", "samples.make_sheet")])
def test_require_isolation_refuses_to_run_any_program_without_the_namespaces(
        monkeypatch, capsys, bench, runs):
    """Without namespaces the benchmarks ran model-written code with the limits alone,
    and there was no way to say no: `--require-isolation` exits 2 before any task."""
    import importlib

    from dlm_lsp.bench import sandbox

    module, name = runs.split(".")
    monkeypatch.setattr(importlib.import_module(f"dlm_lsp.bench.{module}"), name,
                        lambda config: pytest.fail("ran the tasks without the namespaces"))
    monkeypatch.setattr(sandbox, "probe_isolation", lambda: sandbox.Isolation(
        sandbox.NONE, "'namespaces' and 'network': no `unshare` command"))
    assert main(["bench", bench, "--limit", "1", "--require-isolation"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench {bench}: sandbox isolation 'namespaces' is "
                           "required, but only 'none' works here"), said
    assert "no `unshare` command" in said


def test_the_curves_warn_of_programs_the_sandbox_could_not_run(monkeypatch, capsys):
    """`bench sweep` and `samples` keep only pass or fail: a broken sandbox was a curve of
    failures with no word of it."""
    from dlm_lsp.bench.sandbox import Outcome

    def broken(sources, config):
        return [Outcome(False, "sandbox", "the sandbox failed: OSError: no space", 0.0)
                for _ in sources]
    monkeypatch.setattr(pass_at_1, "run_programs", broken)
    verdicts = pass_at_1.passes_by_fill(HANDFUL[:2], [["", "x"]], pass_at_1.SandboxConfig())
    assert not any(verdicts.values())
    assert capsys.readouterr().err == ("warning: the sandbox could not run 2 of 2 programs, "
                                       "counted as failures (the sandbox failed: OSError: no "
                                       "space)\n")


@pytest.mark.parametrize(("mode", "baseline", "margin", "status"), [
    ("--self-check", 100.0, 0.0, 0),  # no drop
    ("--empty", 100.0, 5.0, 1),  # a 100-point drop
    ("--empty", 50.0, 60.0, 0),  # a 50-point drop, within the margin
])
def test_regression_mode_fails_only_when_pass_at_1_drops_by_more_than_the_margin(
        tmp_path, mode, baseline, margin, status):
    stored = tmp_path / "baseline.json"
    stored.write_text(json.dumps({"pass_at_1": baseline}))
    assert main(["bench", "humaneval", mode, "--limit", "3", "--baseline", str(stored),
                 "--margin", str(margin)]) == status


def test_syntax_bench_counts_valid_fills_with_and_without_repair(model_dir, tmp_path,
                                                                 capsys) -> None:
    out = tmp_path / "syntax.json"
    assert cli_main(["bench", "syntax", "--model", str(model_dir), "--device", "cpu",
                     "--limit", "2", "--json", str(out)]) == 0
    total = 2 * (2 + len(fixture_tasks()))  # progress: on stderr, the last line at the end
    said = capsys.readouterr()
    assert said.err.splitlines()[-1].startswith(f"syntax: {total}/{total} fills")
    assert "paths {" not in said.out and " ms/fill, paths " in said.out  # words, not Python
    rows = json.loads(out.read_text())
    assert all(r["partial"] is None for r in rows)
    assert {r["model"] for r in rows} == {Engine(ServerConfig(model=str(model_dir),
                                                              device="cpu")).model.name}
    assert all(r["tasks"] == r["planned"] for r in rows)
    assert {r["setting"] for r in rows} == {"model only (validation off)",
                                            "validation + repair + fallback"}
    fixtures = [r for r in rows if r["set"].startswith("fixtures")]
    for r in rows:
        assert 0 <= r["valid"] <= r["tasks"] and r["rate"] == r["valid"] / r["tasks"]
    assert sum(r["tasks"] for r in fixtures) == 2 * len(fixture_tasks())
    checked = [r for r in rows if r["setting"].startswith("validation")]
    assert all(sum(r["paths"].values()) == r["tasks"] for r in checked)


def _heldout_names(count: int) -> list[str]:
    """File names that training's rule holds out (the hash of the path under 2%)."""
    from dlm_lsp.training.data import SourceConfig, unit_hash

    names = (f"m{i}.py" for i in range(100_000))
    return [n for n in names if unit_hash("heldout:" + n) < SourceConfig().heldout_fraction
            ][:count]


HELDOUT_SOURCE = (
    '"""A module docstring\nwhose lines are prose, not code."""\n'
    "import os\n\n\n"
    "def area(width, height):\n"
    "    # a comment line is not a task\n"
    "    result = width * height\n"
    "    return result\n")


def test_heldout_tasks_are_code_lines_of_held_out_files_only(tmp_path):
    from dlm_lsp.bench.heldout import heldout_files
    from dlm_lsp.bench.lines import line_tasks

    held, = _heldout_names(1)
    (tmp_path / held).write_text(HELDOUT_SOURCE)
    (tmp_path / "m0.py").write_text(HELDOUT_SOURCE)  # trained on: its hash is over 2%
    files = heldout_files(tmp_path)
    assert [rel for rel, _ in files] == [held]
    tasks = line_tasks(files, None)
    assert [t.middle for t in tasks] == ["import os", "def area(width, height):",
                                         "result = width * height", "return result"]
    for task in tasks:
        assert task.prefix + task.middle + task.suffix == HELDOUT_SOURCE
        assert task.prefix.endswith("\n") or task.prefix.endswith("    ")  # after indentation
    assert [t.task_id for t in line_tasks(files, 2)] == [f"{held}:3", f"{held}:8"]


def test_heldout_bench_reports_exact_match_validity_and_empty_fills(model_dir, tmp_path,
                                                                    monkeypatch):
    from dlm_lsp.bench import heldout
    from dlm_lsp.bench.filling import Fill

    for name in _heldout_names(2):
        (tmp_path / name).write_text(HELDOUT_SOURCE)
    answers = {"result = width * height": "result = width * height",  # exact
               "return result": "return (result"}  # a syntax error

    def scripted(engine, task, settings):
        text = answers.get(task.middle, "")
        return Fill(text, "(" not in text, 3, 1.0)
    monkeypatch.setattr(heldout, "fill_task", scripted)
    report = heldout.run(str(model_dir), "cpu", None, stdlib=tmp_path)
    assert (report.files, report.tasks) == (2, 8)
    assert (report.exact_match, report.syntax_valid, report.empty) == (25.0, 75.0, 50.0)
    # two exact (1.0), two one character off in 14 (13/14), four empty (0.0)
    assert report.edit_similarity == round(100 * (2 + 2 * 13 / 14) / 8, 1) == 48.2
    assert report.mean_steps == 3 and report.machine["device"] == "cpu"
    assert "| server default strategy, oracle length | 2 | 8 | 25.0 | 48.2 | 75.0 | 50.0 |" in (
        heldout.to_markdown(report))
    assert "standard library lacks test/, idlelib/" in heldout.to_markdown(report)


def test_heldout_bench_says_what_a_distribution_s_standard_library_lacks(tmp_path):
    """Debian's python3.11 ships test/, idlelib/, tkinter/ and turtledemo/ apart: the bench
    drew its lines from 10 of the 34 held-out files, said only in the files column."""
    from dlm_lsp.bench import heldout

    full = tmp_path / "full"
    for marker in heldout.SHIPPED_APART.values():
        (full / marker).parent.mkdir(parents=True, exist_ok=True)
        (full / marker).write_text("")
    assert heldout.stdlib_lacks(full) == []
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "support.py").write_text("")  # what Debian keeps of test/
    (tmp_path / "tkinter").mkdir()
    (tmp_path / "tkinter" / "__init__.py").write_text("")
    assert heldout.stdlib_lacks(tmp_path)[:3] == ["test/", "idlelib/", "turtledemo/"]
    (tmp_path / "ensurepip").mkdir()  # Debian's python3.X-venv is not installed
    for marker in heldout.SHIPPED_APART.values():
        if not marker.startswith(("ensurepip/", "tkinter/")):
            (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / marker).write_text("")
    assert heldout.stdlib_lacks(tmp_path) == ["ensurepip/"]
    (tmp_path / "idlelib" / "__init__.py").unlink()
    said = heldout.lacking(heldout.stdlib_lacks(tmp_path))
    assert said.startswith("this Python's standard library lacks idlelib/, ensurepip/ (")
    assert "not comparable to the README's or the model card's numbers" in said


def test_heldout_bench_leaves_out_files_the_model_records_it_trained_on(model_dir, tmp_path,
                                                                        monkeypatch):
    """Held out by path, trained on under another: a model trained on Python 3.12's
    library trained on 3.11's held-out ctypes/test/test_stringptr.py as
    test/test_ctypes/test_stringptr.py, and the bench measured it there."""
    import shutil

    from dlm_lsp.bench import heldout
    from dlm_lsp.bench.filling import Fill
    from dlm_lsp.training.data import Corpus, SourceFile
    from dlm_lsp.training.lineage import SplitRecord

    library = tmp_path / "lib"
    library.mkdir()
    seen, trained = _heldout_names(2)
    (library / seen).write_text(HELDOUT_SOURCE)
    (library / trained).write_text(HELDOUT_SOURCE + "x = 1\n")
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    config = json.loads((model / "config.json").read_text())
    corpus = Corpus(train=[SourceFile("elsewhere/moved.py", HELDOUT_SOURCE + "x = 1\n")],
                    heldout=[])
    config["training"] = SplitRecord().stats(corpus)
    (model / "config.json").write_text(json.dumps(config))
    filled = []
    monkeypatch.setattr(heldout, "fill_task", lambda engine, task, settings: filled.append(
        task.task_id) or Fill("", True, 1, 1.0))
    report = heldout.run(str(model), "cpu", None, stdlib=library)
    assert (report.files, report.trained_skipped, report.tasks) == (2, 1, 4)
    assert {task.partition(":")[0] for task in filled} == {seen}
    assert ("the lines of 1 of these 2 held-out file(s) left out, the model trained on their "
            "text") in heldout.to_markdown(report)


def test_heldout_bench_leaves_out_files_the_model_trained_on_a_near_copy_of(
        model_dir, tmp_path, monkeypatch):
    """Held out by path, trained on edited under another: a model trained on Python
    3.12's library trained on test/test_ttk/test_widgets.py, 3.11's held-out
    tkinter/test/test_ttk/test_widgets.py edited (Jaccard of shingles 0.99)."""
    import shutil

    from dlm_lsp.bench import heldout
    from dlm_lsp.bench.filling import Fill
    from dlm_lsp.training.data import Corpus, SourceFile
    from dlm_lsp.training.lineage import SplitRecord
    from dlm_lsp.training.nearcopy import sketch
    from tests.test_nearcopy import edited, module

    library = tmp_path / "lib"
    library.mkdir()
    seen, trained = _heldout_names(2)
    (library / seen).write_text(module("seen"))
    (library / trained).write_text(module("learned"))
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    config = json.loads((model / "config.json").read_text())
    moved = edited(module("learned"))
    corpus = Corpus(train=[SourceFile("moved.py", moved)], heldout=[],
                    sketches={"moved.py": sketch(moved)})
    config["training"] = SplitRecord().stats(corpus)
    (model / "config.json").write_text(json.dumps(config))
    filled = []
    monkeypatch.setattr(heldout, "fill_task", lambda engine, task, settings: filled.append(
        task.task_id) or Fill("", True, 1, 1.0))
    every = heldout.line_tasks(heldout.heldout_files(library), None)
    report = heldout.run(str(model), "cpu", None, stdlib=library)
    assert (report.files, report.trained_skipped) == (2, 1)
    assert filled == [task.task_id for task in every if task.task_id.startswith(seen + ":")]
    assert "held-out file(s) left out, the model trained on their text or a " \
        "near-copy of it" in heldout.to_markdown(report)


def test_heldout_command_fills_lines_with_the_model(model_dir, tmp_path, capsys):
    out = tmp_path / "heldout.json"
    assert main(["bench", "heldout", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "3", "--steps", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["tasks"] == len(report["results"]) == 3 and report["files"] >= 1
    assert all(r["steps"] >= 1 and isinstance(r["valid"], bool) for r in report["results"])
    assert "oracle length, 2 steps |" in capsys.readouterr().out


# --- progress on stderr, and the report of a stopped run ------------------------------


def test_progress_prints_at_most_every_few_seconds_and_always_at_the_end(capsys):
    from dlm_lsp.bench.progress import Progress

    now = [100.0]
    progress = Progress("humaneval", 200, "tasks", every_s=5.0, clock=lambda: now[0])
    for done, at in ((10, 101.0), (20, 104.9), (37, 141.0), (40, 142.0), (50, 146.5)):
        now[0] = at
        progress.update(done, f"{done // 3} passed")
    now[0] = 150.2
    progress.finish(200, "66 passed")
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is the report's
    assert captured.err.splitlines() == ["humaneval: 37/200 tasks, 12 passed, 41 s",
                                         "humaneval: 50/200 tasks, 16 passed, 46 s",
                                         "humaneval: 200/200 tasks, 66 passed, 50 s"]


def test_progress_does_not_repeat_its_last_line_at_the_end(capsys):
    from dlm_lsp.bench.progress import Progress

    now = [0.0]
    progress = Progress("heldout", 2, "lines", every_s=5.0, clock=lambda: now[0])
    now[0] = 6.0
    progress.update(2, "0 exact")  # the last task, 5 s after the start
    progress.finish(2, "0 exact")
    assert capsys.readouterr().err.splitlines() == ["heldout: 2/2 lines, 0 exact, 6 s"]
    # nor where only its details differ (`strategies` named the last strategy, then none)
    strategies = Progress("strategies", 10, "fills", every_s=5.0, clock=lambda: now[0])
    now[0] = 12.0
    strategies.update(10, "left-to-right")
    strategies.finish(10)
    assert capsys.readouterr().err.splitlines() == ["strategies: 10/10 fills, left-to-right, 6 s"]


def test_a_stoppable_loop_keeps_what_it_finished_and_lets_a_stop_before_anything_go_on(
        capsys):
    """The one place every benchmark decides what a stop keeps (`progress.Stoppable`)."""
    from dlm_lsp.bench.progress import Partial, Progress, Stoppable

    done: list[int] = []
    with Stoppable(Progress("bench", 3, "tasks", every_s=1e9), lambda: len(done),
                   lambda: f"{sum(done)} passed") as loop:
        done += [1, 1, 0]
    assert loop.partial is None
    assert capsys.readouterr().err.startswith("bench: 3/3 tasks, 2 passed, ")

    kept: list[str] = []
    with Stoppable(Progress("bench", 5, "fills"), lambda: len(kept),
                   on_stop=lambda: kept.append("the one under way")) as loop:
        kept.append("a whole one")
        raise KeyboardInterrupt("SIGTERM")
    assert loop.partial == Partial(2, 5, "fills", "SIGTERM") and kept[-1] == "the one under way"
    assert capsys.readouterr().err == ""  # a stopped run prints no last progress line

    with pytest.raises(KeyboardInterrupt), Stoppable(Progress("bench", 5, "fills"), lambda: 0):
        raise KeyboardInterrupt  # nothing finished: no report
    with pytest.raises(ValueError), Stoppable(Progress("bench", 5, "fills"), lambda: 1):
        raise ValueError("not a stop")


def test_humaneval_shows_progress_on_stderr_and_keeps_stdout_the_report(capsys):
    assert main(["bench", "humaneval", "--self-check", "--limit", "3"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1].startswith(
        "humaneval (self-check): 3/3 tasks, 3 passed, ")
    assert captured.out.startswith("HumanEval-Infilling single-line, 3 tasks")
    assert "partial" not in captured.out and "tasks, 3 passed" not in captured.out


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_humaneval_run_reports_the_tasks_it_finished_marked_partial(
        sig, status, tmp_path, monkeypatch, capsys):
    """Ctrl-C or SIGTERM threw away every task measured; the partial report must not
    read as a complete one: not in the text, the table row, the JSON or the exit status."""
    monkeypatch.setattr(pass_at_1, "CHUNK_TASKS", 2)
    monkeypatch.setattr(pass_at_1, "run_programs",
                        signal_on_call(sig, 2, then=pass_at_1.run_programs))
    out, summary = tmp_path / "run.json", tmp_path / "run.md"
    assert main(["bench", "humaneval", "--self-check", "--limit", "5", "--json", str(out),
                 "--markdown", str(summary)]) == status
    captured = capsys.readouterr()
    first = f"partial: 2 of 5 tasks, stopped by {sig}; the numbers below cover only these"
    assert captured.out.splitlines()[0] == first
    assert "| canonical middle (self-check) (partial: 2 of 5) | 2 | 100.0 |" in captured.out
    assert summary.read_text() == captured.out
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 2, "planned": 5, "unit": "tasks", "signal": sig}
    assert report["tasks"] == len(report["results"]) == 2 and report["pass_at_1"] == 100.0
    said = captured.err.splitlines()[-1]
    assert said.startswith(f"dlm-lsp bench humaneval: stopped by {sig} after ")
    assert said.endswith(f"; partial report of 2 of 5 tasks written to {out} and {summary}")
    assert "self-check failed" not in captured.err


def test_a_complete_humaneval_report_says_it_is_not_partial(tmp_path):
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--empty", "--limit", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["partial"] is None


def test_a_partial_report_is_refused_as_a_baseline(tmp_path, capsys):
    stored = tmp_path / "baseline.json"
    stored.write_text(json.dumps({"pass_at_1": 100.0, "partial": {
        "finished": 2, "planned": 5, "unit": "tasks", "signal": "SIGINT"}}))
    assert main(["bench", "humaneval", "--self-check", "--limit", "1",
                 "--baseline", str(stored)]) == 2
    assert "is the partial report of a stopped run" in capsys.readouterr().err


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_heldout_run_reports_the_lines_it_filled_marked_partial(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import heldout
    from dlm_lsp.bench.filling import Fill

    monkeypatch.setattr(heldout, "fill_task", signal_on_call(
        sig, 3, then=lambda engine, task, settings: Fill(task.middle, True, 1, 1.0)))
    out = tmp_path / "heldout.json"
    assert main(["bench", "heldout", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "5", "--json", str(out)]) == status
    captured = capsys.readouterr()
    assert captured.out.startswith(f"partial: 2 of 5 lines, stopped by {sig}; ")
    assert "oracle length (partial: 2 of 5) | " in captured.out
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 2, "planned": 5, "unit": "lines", "signal": sig}
    assert report["tasks"] == len(report["results"]) == 2 and report["exact_match"] == 100.0
    assert captured.err.rstrip().endswith(f"; partial report of 2 of 5 lines written to {out}")


def test_heldout_shows_progress_on_stderr(model_dir, monkeypatch, capsys):
    from dlm_lsp.bench import heldout
    from dlm_lsp.bench.filling import Fill

    monkeypatch.setattr(heldout, "fill_task",
                        lambda engine, task, settings: Fill(task.middle, True, 1, 1.0))
    assert main(["bench", "heldout", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "3"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1].startswith("heldout: 3/3 lines, 3 exact, ")
    assert "heldout:" not in captured.out


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_strategies_run_keeps_the_rows_done_and_the_one_under_way_marked(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import strategies
    from dlm_lsp.bench.filling import Fill

    # 3 tasks a strategy: the 5th fill is the second of the second strategy
    monkeypatch.setattr(strategies, "fill_task", signal_on_call(
        sig, 5, then=lambda engine, task, settings: Fill(task.middle, True, 1, 1.0)))
    out = tmp_path / "strategies.json"
    assert main(["bench", "strategies", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "3", "--steps", "2", "--json", str(out)]) == status
    captured = capsys.readouterr()
    total = 3 * len(STRATEGIES)
    assert captured.out.startswith(f"partial: 4 of {total} fills, stopped by {sig}; ")
    assert f"| {STRATEGIES[0]} | 100.0 |" in captured.out
    assert f"| {STRATEGIES[1]} (partial: 1 of 3 tasks) | 100.0 |" in captured.out
    assert f"| {STRATEGIES[2]} " not in captured.out
    report = json.loads(out.read_text())
    assert report["partial"] == {"finished": 4, "planned": total, "unit": "fills",
                                 "signal": sig}
    assert [(r["strategy"], r["tasks"]) for r in report["rows"]] == [
        (STRATEGIES[0], 3), (STRATEGIES[1], 1)]
    assert captured.err.rstrip().endswith(
        f"; partial report of 4 of {total} fills written to {out}")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_stopped_syntax_run_writes_its_rows_each_marked_partial(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.bench import syntax_rate

    class Signalling(syntax_rate.Engine):  # the 4th fill: the second fixture, model only
        infill = signal_on_call(sig, 4, then=syntax_rate.Engine.infill)
    monkeypatch.setattr(syntax_rate, "Engine", Signalling)
    monkeypatch.setattr(syntax_rate, "fixture_tasks", lambda: fixture_tasks()[:2])
    out = tmp_path / "syntax.json"
    assert cli_main(["bench", "syntax", "--model", str(model_dir), "--device", "cpu",
                     "--limit", "1", "--json", str(out)]) == status
    captured = capsys.readouterr()
    rows = json.loads(out.read_text())
    partial = {"finished": 3, "planned": 6, "unit": "fills", "signal": sig}
    assert [(r["set"].split()[0], r["tasks"], r["planned"], r["partial"]) for r in rows] == [
        ("HumanEval", 1, 1, partial), ("HumanEval", 1, 1, partial),
        ("fixtures", 1, 2, partial)]  # the row cut short
    printed = captured.out.splitlines()
    assert printed[2].endswith(" (partial: 1 of 2 fills)")
    assert printed[-1] == (f"partial: 3 of 6 fills, stopped by {sig}; the rows above cover "
                           "only these")
    assert captured.err.rstrip().endswith(f"; partial report of 3 of 6 fills written to {out}")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_syntax_run_signalled_while_writing_its_json_writes_it_whole(
        sig, status, model_dir, tmp_path, monkeypatch, capsys):
    """`bench syntax` wrote its file without holding the signals, as the other benchmarks
    do (output.write_text): a signal then left no file, or a file cut short."""
    from dlm_lsp.bench import syntax_rate

    monkeypatch.setattr(syntax_rate, "fixture_tasks", lambda: fixture_tasks()[:1])
    out = tmp_path / "syntax.json"
    signal_while_writing(monkeypatch, sig, out)
    assert cli_main(["bench", "syntax", "--model", str(model_dir), "--device", "cpu",
                     "--limit", "1", "--json", str(out)]) == status
    assert [row["partial"] for row in json.loads(out.read_text())] == [None] * 4
    assert capsys.readouterr().err.rstrip().endswith(f"; report written to {out}")


def test_a_strategies_run_signalled_while_writing_its_json_writes_it_whole(
        model_dir, tmp_path, monkeypatch, capsys):
    """`bench strategies` wrote its --json with open() and no signal held: a Ctrl-C
    meanwhile left the file cut short."""
    from dlm_lsp.bench import strategies
    from dlm_lsp.bench.filling import Fill

    monkeypatch.setattr(strategies, "fill_task",
                        lambda engine, task, settings: Fill(task.middle, True, 1, 1.0))
    out = tmp_path / "strategies.json"
    signal_while_writing(monkeypatch, "SIGINT", out)
    assert main(["bench", "strategies", "--model", str(model_dir), "--device", "cpu",
                 "--limit", "1", "--steps", "2", "--json", str(out)]) == 130
    assert len(json.loads(out.read_text())["rows"]) == len(STRATEGIES)
    assert capsys.readouterr().err.rstrip().endswith(f"; report written to {out}")


@pytest.mark.parametrize("command", [["strategies", "--steps", "2"], ["syntax"]],
                         ids=["strategies", "syntax"])
def test_a_bench_json_is_written_as_every_other_report(command, model_dir, tmp_path,
                                                      monkeypatch):
    """`bench strategies --json` wrote indent 2 and no final line break, and `bench
    syntax --json` indent 2, where every other report (output.write_json) writes indent 1
    and ends its last line."""
    from dlm_lsp.bench import strategies, syntax_rate
    from dlm_lsp.bench.filling import Fill

    monkeypatch.setattr(strategies, "fill_task",
                        lambda engine, task, settings: Fill(task.middle, True, 1, 1.0))
    monkeypatch.setattr(syntax_rate, "fixture_tasks", lambda: fixture_tasks()[:1])
    out = tmp_path / "report.json"
    assert main(["bench", *command, "--model", str(model_dir), "--device", "cpu",
                 "--limit", "1", "--json", str(out)]) == 0
    text = out.read_text()
    assert text == json.dumps(json.loads(text), indent=1) + "\n"


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_partial_run_signalled_again_while_writing_says_its_report_is_partial(
        sig, status, tmp_path, monkeypatch, capsys):
    """A second Ctrl-C while the partial report was written ended on "report written
    to run.json", as if the run were complete; the files say partial, so must the line."""
    monkeypatch.setattr(pass_at_1, "CHUNK_TASKS", 2)
    monkeypatch.setattr(pass_at_1, "run_programs",
                        signal_on_call(sig, 2, then=pass_at_1.run_programs))
    out, summary = tmp_path / "run.json", tmp_path / "run.md"
    signal_while_writing(monkeypatch, sig, out)
    assert main(["bench", "humaneval", "--self-check", "--limit", "5", "--json", str(out),
                 "--markdown", str(summary)]) == status
    captured = capsys.readouterr()
    assert json.loads(out.read_text())["partial"]["finished"] == 2
    assert summary.read_text() == captured.out
    assert captured.err.splitlines()[-1].endswith(
        f"; partial report of 2 of 5 tasks written to {out} and {summary}")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_second_signal_while_the_partial_report_is_tallied_waits_for_it(
        sig, status, tmp_path, monkeypatch, capsys):
    """A second Ctrl-C 20 ms after the first came while the report was tallied (the
    machine described), before its files were held: "no report written", every finished
    task thrown away."""
    monkeypatch.setattr(pass_at_1, "CHUNK_TASKS", 2)
    monkeypatch.setattr(pass_at_1, "run_programs",
                        signal_on_call(sig, 2, then=pass_at_1.run_programs))
    monkeypatch.setattr(pass_at_1, "describe_machine",
                        signal_on_call(sig, 1, then=pass_at_1.describe_machine, waits=False))
    out = tmp_path / "run.json"
    assert main(["bench", "humaneval", "--self-check", "--limit", "5", "--json",
                 str(out)]) == status
    assert json.loads(out.read_text())["partial"]["finished"] == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"; partial report of 2 of 5 tasks written to {out}")


@pytest.mark.parametrize("sig", [sig for sig, _ in SIGNALS])
def test_a_signal_while_a_complete_humaneval_report_is_written_still_fails_a_bar_with_1(
        sig, tmp_path, monkeypatch, capsys):
    """The stop came before the bars were checked: 130/143, which a CI job reads as
    cancelled, for a run whose every task had run and whose self-check failed.  The report
    is whole and complete, so its bars are checked as in a whole run, and a failed one is
    the status (as when the stop comes while --baseline-model runs); a bar met leaves the
    signal's 128 + N (tests/test_cli.py)."""
    monkeypatch.setattr(pass_at_1, "SELF_CHECK_BAR", 100.5)  # canonical fills pass 100%
    out = tmp_path / "run.json"
    signal_while_writing(monkeypatch, sig, out)
    assert main(["bench", "humaneval", "--self-check", "--limit", "2", "--json",
                 str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("self-check failed: canonical fills pass 100.0%")
    assert err[-1].startswith(f"dlm-lsp bench humaneval: stopped by {sig} after ")
    assert err[-1].endswith(f"; report written to {out}")
    assert json.loads(out.read_text())["tasks"] == 2


def test_the_machine_line_counts_threads_in_english():
    """Reports of one-thread runs said "(1 threads)"."""
    from dlm_lsp.bench.machine import machine_line

    machine = {"cpu": "AMD EPYC", "cores": 2, "arch": "x86_64", "torch": "2.13.0+cpu",
               "torch_threads": 1, "device": "cpu", "load_average": None}
    assert "torch 2.13.0+cpu (1 thread), cpu" in machine_line(machine)
    assert "(2 threads)" in machine_line({**machine, "torch_threads": 2})


def test_a_heldout_row_names_the_extra_settings_as_settings_spells_them():
    """`--settings '{"maxContextTokens": 240}'` labelled a heldout row
    `max_context_tokens 240`, and a humaneval row `maxContextTokens 240`: the two
    tables of one comparison named the same setting two ways, one not a setting's name."""
    from dlm_lsp.bench.filling import FillSettings
    from dlm_lsp.bench.heldout import HeldoutReport, table_row

    report = HeldoutReport("default", "cpu", "bf16", 34, 200, 0.0, 10.0, 50.0, 28.0, 12.72,
                           890.3, FillSettings(), {"max_context_tokens": 240,
                                                   "context_cache": True}, {}, None)
    assert table_row(report).startswith("| server default strategy, oracle length, "
                                         "contextCache True, maxContextTokens 240 |")


@pytest.mark.parametrize("spec", ["~/model", "dlm-tiny:~/model"])
def test_heldout_bench_reads_the_record_of_a_model_named_from_the_home_folder(
        spec, tmp_path, monkeypatch):
    """The loader expands `~` (a spec from an editor's settings, or `--model=~/m`, which
    no shell expands): the bench filled that model's lines, but read its record at the
    literal path, found none and left in the files the model had trained on."""
    from dlm_lsp.bench import heldout
    from dlm_lsp.training.data import Corpus, SourceFile, text_digest
    from dlm_lsp.training.lineage import SplitRecord

    (tmp_path / "model").mkdir()
    corpus = Corpus(train=[SourceFile("moved.py", HELDOUT_SOURCE)], heldout=[])
    (tmp_path / "model" / "config.json").write_text(json.dumps(
        {"model_type": "dlm-tiny", "training": SplitRecord().stats(corpus)}))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert heldout.trained_record(spec).trained == {text_digest(HELDOUT_SOURCE)}


def test_a_checkout_without_symbolic_links_finds_the_fixtures_its_link_names(tmp_path,
                                                                          monkeypatch):
    """Git without symlinks (Windows' default) writes the link as a file that names its
    target: `bench syntax` ended in a traceback, its fixtures "not a directory"."""
    from dlm_lsp.bench import syntax_rate

    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "a.py").write_text("x = <FILL>\n")
    (tmp_path / "data").mkdir()
    link = tmp_path / "data" / "fixtures"
    link.write_text("../fixtures")
    monkeypatch.setattr(syntax_rate, "FIXTURES", link)
    assert [t.name for t in syntax_rate.fixture_tasks()] == ["a.py#0"]
    link.write_text("../nowhere")
    with pytest.raises(syntax_rate.UsageError, match="a checkout made without symbolic links"):
        syntax_rate.fixture_tasks()
