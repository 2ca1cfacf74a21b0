"""The helpers the scripts in benchmarks/ share (benchmarks/lsp_latency.py), and the
result files they and the bench commands write."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from benchmark_scripts import BENCHMARKS, script

from dlm_lsp.bench.output import write_json

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def test_a_server_started_for_a_with_block_ends_with_it_even_when_the_block_fails(model_dir):
    """soak.py, ghost_text.py and document_size.py each closed their client and killed
    their server in a `finally` of their own; `stdio_server` is that one ending."""
    lsp_latency = script("lsp_latency")
    with pytest.raises(RuntimeError), lsp_latency.stdio_server(
            {"model": str(model_dir), "device": "cpu"}) as (proc, client):
        assert proc.poll() is None  # initialized: the server answered
        raise RuntimeError("the measurement failed")
    assert proc.poll() is not None  # ended and waited for: no server outlives the script


def test_lsp_latency_names_no_more_requests_at_once_than_it_sent(model_dir, monkeypatch,
                                                                 capsys):
    """`lsp_latency.py --fills 3` (its concurrency 8 by default) printed "8 at once: 3
    fills": a measurement of 8 concurrent requests that never ran."""
    import sys

    lsp_latency = script("lsp_latency")
    monkeypatch.setattr(sys, "argv", ["lsp_latency.py", "--fills", "2", "--concurrent", "8",
                                      "--model", str(model_dir),
                                      "--settings", '{"device": "cpu", "steps": 1}'])
    lsp_latency.main()
    said = capsys.readouterr().out
    assert "2 at once: 2 fills" in said, said


@pytest.mark.parametrize("name", ["lsp_latency", "ghost_text", "typing_cost", "soak",
                                  "pathological_documents", "remote_throughput"])
def test_a_setting_the_server_would_refuse_is_a_usage_error_before_any_server(
        name, monkeypatch, capsys):
    """The server warned of it in a message the scripts' client never shows: the run's
    numbers were of the default, its header naming the setting as if applied.
    (`remote_throughput.py` passed its JSON to the settings' constructor as it was: a
    camelCase or misspelt name was a TypeError's traceback, after Ray had started.)"""
    import sys

    module = script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--settings", '{"contextcache": false}'])
    monkeypatch.setattr(module, "Engine", None, raising=False)  # nothing may start
    with pytest.raises(SystemExit) as ended:
        module.main()
    assert ended.value.code == 2
    assert capsys.readouterr().err.endswith(
        "--settings: unknown setting 'contextcache' (did you mean 'contextCache'?)\n")


@pytest.mark.parametrize(("name", "argv", "told"), [
    ("fill_stages", ["--fills-out", "/nonexistent/x.json"], "--fills-out /nonexistent/x.json"),
    ("fill_overhead", ["--fills-out", "/"], "--fills-out /"),
    ("holes_cost", ["--fills-out", "/nonexistent/x.json"], "--fills-out"),
    ("settings_edges", ["--json", "/nonexistent/x.json"], "--json /nonexistent/x.json"),
    ("padded_fills", ["--json", "/nonexistent/x.json"], "--json /nonexistent/x.json"),
    ("typing_cost", ["--profile", "/nonexistent/x.prof"], "--profile /nonexistent/x.prof"),
    ("engine_latency", ["--repeats", "0"], "--repeats: 0 is not a positive number"),
    ("engine_latency", ["--device", "tpu"], "should be one of auto, cpu, cuda"),
    ("context_cache", ["--limit", "0"], "--limit: 0 is not a positive number"),
    ("lsp_latency", ["--fills", "0"], "--fills: 0 is not a positive number"),
    ("ghost_text", ["--requests", "-1"], "--requests: -1 is not a positive number"),
    ("validation_large", ["--mb", "0"], "--mb: a number above 0, got '0'"),
    ("fill_stages", ["--batch-rows", "-1"], "batchRows is an integer from 0 to 256"),
    ("pathological_documents", ["--table", "/nonexistent/x.json"],
     "--table /nonexistent/x.json: No such file or directory"),
    ("pathological_documents", ["--table", "README.md"],
     "--table README.md: not a run this script wrote with --json"),
])
def test_a_script_refuses_what_it_could_not_use_before_it_runs(name, argv, told, monkeypatch,
                                                               capsys):
    """A report path that cannot be written failed after the whole run (the README says
    such paths are refused first, by these scripts too); a count of 0 loaded the model and
    ended in a StatisticsError or ZeroDivisionError traceback."""
    import sys

    module = script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    for started in ("Engine", "stdio_server"):  # nothing may start
        monkeypatch.setattr(module, started, None, raising=False)
    with pytest.raises(SystemExit) as ended:
        module.main()
    assert ended.value.code == 2
    assert told in capsys.readouterr().err


def test_the_forward_passes_are_timed_where_the_context_cache_runs_them(monkeypatch):
    """With the cache on (a CPU's default) no step calls the model's `hidden`: timed there
    alone, 98% of a fill's CPU was "outside the forward passes"."""
    from dlm_lsp.models.cache import ContextCache

    forward_passes = script("forward_passes")
    monkeypatch.setattr(ContextCache, "__call__", ContextCache.__call__)  # put back after
    timed = []
    model = type("Model", (), {"hidden": None, "head": None})()

    def time_one(owner, name, label):
        timed.append((owner, name, label))
        setattr(owner, name, lambda *args: None)  # a wrapper, as the scripts' are
    forward_passes.time_forward_passes(model, time_one)
    forward_passes.time_forward_passes(model, time_one)  # a second session's model
    assert [(name, label) for _, name, label in timed] == [
        ("hidden", "hidden"), ("head", "head"), ("__call__", "cached"),
        ("hidden", "hidden"), ("head", "head")]  # the cache's class wrapped once


def test_a_pass_inside_a_timed_pass_is_not_timed_again(monkeypatch):
    """The cache's step calls the model's `head`, handed the timed one: counted in both,
    the time outside the forward passes came out negative (-21.6 ms a fill)."""
    from collections import Counter

    from dlm_lsp.models.cache import ContextCache

    forward_passes = script("forward_passes")
    monkeypatch.setattr(ContextCache, "__call__", lambda self: self.output_head())

    class Model:
        def hidden(self) -> str:
            return "h"

        def head(self) -> str:
            return "x"
    model, counts = Model(), Counter()

    def time_one(owner, name, label):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counts[label] += 1
            return original(*args, **kwargs)
        setattr(owner, name, wrapper)
    forward_passes.time_forward_passes(model, time_one)
    cache = object.__new__(ContextCache)
    cache.output_head = model.head  # as passes.context_cache hands it over
    assert (cache(), cache(), model.head()) == ("x", "x", "x")
    assert counts == {"cached": 2, "head": 1}


def test_lsp_latency_through_a_remote_backend_reports_where_the_fills_went(model_dir,
                                                                           monkeypatch, capsys):
    """With `backend: remote` (the settings its own --settings takes for a serve-remote
    service) every fill ran and then the script ended in KeyError: 'batchOccupancy', as
    a remote backend's dlm/status has no batching of its own, and in KeyError: 'device'
    where the service was not reached.  Here the service is a port nothing listens on,
    and the fills fall back to the local engine."""
    import socket
    import sys

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}"
    lsp_latency = script("lsp_latency")
    settings = {"device": "cpu", "steps": 1, "backend": "remote", "remoteUrl": url,
                "remoteFallback": True, "remoteRetries": 0, "remoteConnectMs": 200}
    monkeypatch.setattr(sys, "argv", ["lsp_latency.py", "--fills", "2", "--concurrent", "2",
                                      "--model", str(model_dir),
                                      "--settings", json.dumps(settings)])
    lsp_latency.main()
    said = capsys.readouterr().out
    assert f"backend remote at {url}, fallbacks " in said, said


def test_typing_cost_types_into_the_same_site_in_the_middle_of_every_size():
    """typing_cost.py compares sizes of a file: the model must see the same context
    (its class and the fixed code around it) at every size, and the cursor must be in
    the class's empty method, not at the first `|` of the filler (as it once was)."""
    typing_cost = script("typing_cost")
    for site, _, filler in typing_cost.LANGUAGES.values():
        built = [typing_cost.build(site(), filler(), lines) for lines in (3000, 12000)]
        for (text, at), lines in zip(built, (3000, 12000), strict=True):
            assert text.count("\n") + 1 >= lines
            assert lines // 4 < text.count("\n", 0, at) < 3 * lines // 4
            assert text[text.rfind("\n", 0, at):at].strip() == ""  # its blank body line
            assert text[:at].rstrip().endswith(("def total(self, kind=None):", "total(kind) {"))
        (small, a), (big, b) = built
        assert small[a - 6000:a + 6000] == big[b - 6000:b + 6000]


def test_pathological_documents_ask_where_each_case_says():
    """pathological_documents.py's cursors: inside the innermost brackets, in the middle of
    a minified line, on the blank line below a generated table; and its editor reads a
    position as the server does (UTF-16, an emoji two units)."""
    bench = script("pathological_documents")
    cases = bench.cases()
    nested = cases["nested-brackets-5000"]()
    inner = nested.cursors[1][1]
    assert nested.text[inner - 1:inner + 1] == "[]"
    bundle = cases["minified-1mb"]()
    assert bundle.text.count("\n") == 0 and bundle.text[:bundle.cursors[0][1]].endswith("return")
    table = cases["long-line"]()
    at = table.cursors[0][1]
    line_start = table.text.rfind("\n", 0, at) + 1
    assert table.text[line_start:at].strip() == "" and at - line_start == 4
    above = table.text[:line_start].split("\n")[-6:]
    assert max(map(len, above)) > 500_000  # the table, a few lines up
    holes = cases["holes-200"]()
    assert holes.text.count("\n") == 2_056 and holes.text.count("<FILL>") == 200
    assert all(line.endswith(("return <FILL>", " = <FILL>", "= <FILL>"))
               for line in holes.text.split("\n") if "<FILL>" in line)
    text = "x = '😀'\nyé = 1\n"
    for offset in range(len(text) + 1):
        line, character = bench.line_of(text, offset)
        client = object.__new__(bench.Client)
        client.texts = {"u": text}
        assert client.offset("u", {"line": line, "character": character}) == offset


def test_the_settings_sweep_has_the_cases_the_readme_counts(tmp_path):
    """The README counts the cases `settings_edges.py` runs (every set, and those a TCP
    server asks); a setting added since is two or more cases the README's "all pass"
    does not cover, as `batchPadding` was."""
    import re
    from pathlib import Path

    from dlm_lsp.config import InfillOptions, ServerConfig

    edges = script("settings_edges")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    said = re.search(r"The script has (\d+) and (\d+) cases", " ".join(readme.split()))
    assert said, "the README no longer counts the sweep's cases"
    cases = (edges.setting_cases(ServerConfig) + edges.odd_cases()
             + edges.setting_cases(InfillOptions) + edges.load_cases("tiny", tmp_path))
    over_tcp = [c for c in cases if c.as_options or not edges.LOADS & c.values.keys()]
    assert (len(cases), len(over_tcp)) == (int(said.group(1)), int(said.group(2)))


def test_validation_large_times_checks_of_fills_the_document_has_not_judged(monkeypatch):
    """validation_large.py timed the same two fills five times each, the best of five: a
    document version keeps the verdict of each fill it checked, so it timed a dictionary
    lookup and printed 0.00 ms, which the README quoted as a check's cost."""
    from dlm_lsp.validation import ParsedDocument

    bench = script("validation_large")
    documents, checked, validate = [], [], ParsedDocument.validate

    def recording(self, start, end, fill):
        documents.append(self)  # kept alive: each document's id stays its own
        checked.append((id(self), fill))
        return validate(self, start, end, fill)
    monkeypatch.setattr(ParsedDocument, "validate", recording)
    monkeypatch.setattr("sys.argv", ["validation_large.py", "--mb", "0.05"])
    bench.main()
    timed = checked[:-2]  # the last two check again the fills whose verdicts it prints
    assert len(set(timed)) == len(timed) >= 10


def test_reparse_edits_types_at_the_places_it_names():
    """reparse_edits.py reports reparse costs by where the keystroke lands; a place
    off by a character (the newline instead of the blank line after it) times another
    case of tree-sitter's reuse, so each is checked against the text around it."""
    bench = script("reparse_edits")
    text = bench.generated(0.02)
    for fraction in bench.FRACTIONS:
        at = bench.places(text, fraction)
        line_of = {name: text[text.rfind("\n", 0, offset) + 1:text.find("\n", offset)]
                   for name, offset in at.items() if name != "end of the document"}
        assert "value = request" in line_of["inside a line"]
        assert text[at["end of the last line"]] == "\n"
        assert line_of["end of the last line"].startswith("    return ")
        assert line_of["blank line after it"] == ""
        assert text[at["blank line after it"] - 1] == "\n"
        assert text[text.rfind("\n", 0, at["indentation of the last line"]) + 1:
                    at["indentation of the last line"]] == "  "
        assert line_of["indentation of the last line"] == line_of["end of the last line"]
        assert text.startswith("def handler_", at["start of the next def"])
        assert at["end of the document"] == len(text)
        assert at["end of the last line"] < at["start of the next def"]


def test_dash_check_counts_each_posix_sh_script_once_and_its_links_apart(tmp_path):
    """The README's count of POSIX sh scripts that dash holds: a script reached by
    several names (`xzgrep`, `lzgrep`) is one script; bash's and Python's are not counted."""
    dash_check = script("dash_check")
    (tmp_path / "xzgrep").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "lzgrep").symlink_to(tmp_path / "xzgrep")
    (tmp_path / "tool").write_text("#! /usr/bin/env dash\nexit 0\n")
    (tmp_path / "bashy").write_text("#!/bin/bash\necho hi\n")
    (tmp_path / "py").write_text("#!/usr/bin/python3\nprint()\n")
    found, links = dash_check.posix_scripts((str(tmp_path),))
    assert [path.name for path in found] == ["tool", "xzgrep"] and links == 1


def test_every_result_json_is_in_the_format_the_bench_commands_write(tmp_path):
    """The bench commands write their JSON with `output.write_json` (indent 1, a final
    line break); files written by hand or by scripts that formatted their own
    (strategies-cpu, checkpoints-cpu, padded-fills-cpu, remote-throughput-cpu: indent
    2; ghost-text-cpu: no final line break) read as wholly changed in the diff of
    their next run.  Each one, read and written again by write_json, is unchanged."""
    files = sorted(RESULTS.glob("*.json"))
    assert files
    assert [path.name for path in files if not _as_write_json_writes(path, tmp_path)] == []


def _as_write_json_writes(path: Path, tmp_path: Path) -> bool:
    """Whether the JSON file at `path` is unchanged once read and written again by
    `output.write_json`."""
    again = tmp_path / f"again-{path.name}"
    write_json(again, json.loads(path.read_text(encoding="utf-8")))
    return again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_settings_edges_writes_its_json_as_the_bench_commands_do(tmp_path):
    """settings_edges.py wrote its --json by hand: non-ASCII characters as they are (a
    case's 😀 or € marker) and no final line break, unlike every other result."""
    edges = script("settings_edges")
    outcomes = [edges.Outcome(edges.Case({"holeMarker": "😀"}, marker="😀"),
                              answers={"infill": "ok"}),
                edges.Outcome(edges.Case({"remoteToken": "€"}), problems=["refused €"])]
    out = tmp_path / "settings-edges.json"
    edges.write_outcomes(str(out), outcomes)
    assert _as_write_json_writes(out, tmp_path)
    assert [o["case"] for o in json.loads(out.read_text(encoding="utf-8"))] == [
        'holeMarker="😀"', 'remoteToken="€"']


def test_fill_overhead_asks_single_line_fills_mid_line_and_multi_line_fills_at_the_gap():
    """fill_overhead.py's two kinds: a single-line fill is the rest of a line cut in the
    middle of its code (the line ends at the cursor), a multi-line fill the task's gap."""
    from dlm_lsp.bench.humaneval import load_tasks

    bench = script("fill_overhead")
    for req, task in zip(bench.requests("single", 5), load_tasks("single-line", 5), strict=True):
        line = req.text[req.text.rfind("\n", 0, req.start) + 1:req.text.find("\n", req.start)]
        assert req.start == req.end and req.text.startswith(task.prefix)
        assert req.text[req.start] == "\n" and line.strip() and line.strip() in task.middle
        assert req.text.endswith(task.suffix)
    for req, task in zip(bench.requests("multi", 5), load_tasks("multi-line", 5), strict=True):
        assert (req.text[:req.start], req.text[req.end:]) == (task.prefix, task.suffix)


# gpu_serving.sh's `run` with stand-ins: python3 ends every part at once (the command
# line names the part), and `timeout` passes each part through unless told otherwise.
PART_ENDS_WELL = "exit 0"


def _gpu_serving_run(tmp_path, python3: str, timeout: str = 'shift; exec "$@"', **env: str):
    """benchmarks/gpu_serving.sh run, its python3 and timeout replaced by these shell
    bodies and `env` added to its environment; returns the finished process."""
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir(exist_ok=True)
    for name, body in (("python3", python3), ("timeout", timeout)):
        (stand_ins / name).write_text(f"#!/bin/sh\n{body}\n")
        (stand_ins / name).chmod(0o755)
    wheels = tmp_path / "wheels"  # a wheel of the `wheels` step (the stand-in installs)
    wheels.mkdir(exist_ok=True)
    (wheels / "pygls-2.1.1-py3-none-any.whl").write_bytes(b"")
    env = {**os.environ, "PATH": f"{stand_ins}:/usr/bin:/bin", "OUT": str(tmp_path / "out"),
           "DEVICE_WHEELS": str(wheels), **env}
    return subprocess.run(["bash", str(BENCHMARKS / "gpu_serving.sh"), "run"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_gpu_serving_names_a_part_stopped_at_its_time_limit_and_exits_1(tmp_path):
    """A part that ran past its limit on the GPU machine left a missing or short file, and
    the script exited 0 without a word: the rare session's log could not tell a part that
    timed out from one that crashed or never ran."""
    done = _gpu_serving_run(tmp_path, PART_ENDS_WELL,
                            timeout='shift; case "$*" in *graph_step.py*) exit 124;; esac; '
                                    'exec "$@"')
    assert done.returncode == 1
    assert [line for line in done.stdout.splitlines() if line.startswith("gpu_serving:")] \
        == ["gpu_serving: benchmarks/graph_step.py stopped at its 60 s limit"]


def test_gpu_serving_names_a_part_that_failed_with_its_status_and_exits_1(tmp_path):
    done = _gpu_serving_run(tmp_path, 'case "$*" in *checkpoints_gpu.py*) exit 3;; esac')
    assert done.returncode == 1
    assert [line for line in done.stdout.splitlines() if line.startswith("gpu_serving:")] \
        == ["gpu_serving: benchmarks/checkpoints_gpu.py failed (exit 3)"]


def test_gpu_serving_run_before_its_wheels_says_to_fetch_them_and_makes_nothing(tmp_path):
    """pip said "No matching distribution found for pygls==2.1.1", not that the `wheels`
    step had not run (or its folder was not carried), and each try left a folder in /tmp
    and made gpu-out/."""
    done = _gpu_serving_run(tmp_path, PART_ENDS_WELL, DEVICE_WHEELS=str(tmp_path / "none"))
    assert done.returncode == 2
    assert "run 'bash benchmarks/gpu_serving.sh wheels' first" in done.stdout
    assert not (tmp_path / "out").exists()


def test_gpu_serving_exits_0_saying_nothing_more_when_every_part_ends_well(tmp_path):
    done = _gpu_serving_run(tmp_path, PART_ENDS_WELL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpu_serving:" not in done.stdout


# python3 as a stand-in that writes each command line it is given into $OUT/commands
RECORDS_COMMANDS = 'echo "$*" >> "$OUT/commands"'


def _commands(tmp_path, **env: str) -> list[str]:
    """The python3 command lines of a gpu_serving.sh run with `env` added."""
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / "commands").write_text("")
    done = _gpu_serving_run(tmp_path, RECORDS_COMMANDS, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    return (tmp_path / "out" / "commands").read_text().splitlines()


def test_gpu_serving_installs_only_the_grammar_of_the_language_its_parts_fill(tmp_path):
    """Every part fills Python or parses nothing, and the seven other grammars were 1.2 MB
    of the carried wheels, which travel to the GPU machine within 64 MiB with the tree
    (tests/test_device_transfer.py)."""
    install = next(c for c in _commands(tmp_path) if c.startswith("-m pip install"))
    names = install.split()[install.split().index("--target") + 2:]
    assert [n for n in names if n.startswith("tree-sitter-")] == ["tree-sitter-python"]


def test_gpu_serving_passes_repeats_to_graph_step_only_when_set(tmp_path):
    """graph_step.py's 4 rows of 5 + 50 steps did not end within its 60 s limit on a
    2-core CPU, so the CPU rehearsal always exited 1; REPEATS=5 lets it pass."""
    step = next(c for c in _commands(tmp_path, REPEATS="5") if "graph_step.py" in c)
    assert "--repeats 5" in step
    step = next(c for c in _commands(tmp_path) if "graph_step.py" in c)
    assert "--repeats" not in step


def test_holes_cost_writes_its_fills_as_the_bench_commands_write_json(tmp_path, monkeypatch):
    """holes_cost.py --fills-out wrote its fills compact, on one line with no final line
    break, where every other output is `output.write_json`'s: a diff of two runs' fills,
    the file's purpose, was one changed line whatever moved."""
    import sys
    from types import SimpleNamespace

    holes_cost = script("holes_cost")
    fills = [[["return x", True], ["return 0", False]], [["é", None]]]
    model = SimpleNamespace(hidden=lambda *a: None, head=lambda *a: None)
    monkeypatch.setattr(holes_cost, "Engine", lambda config: SimpleNamespace(model=model))
    monkeypatch.setattr(holes_cost, "forget_document", lambda uri: None)
    monkeypatch.setattr(holes_cost, "fill_holes", lambda engine, text, uri, count: fills)
    out = tmp_path / "fills.json"
    monkeypatch.setattr(sys, "argv", ["holes_cost.py", "--runs", "1", "--fills-out", str(out)])
    holes_cost.main()
    assert json.loads(out.read_text(encoding="utf-8")) == fills
    assert _as_write_json_writes(out, tmp_path)


def test_names_check_writes_a_line_back_and_says_what_each_check_found():
    """benchmarks/names_check.py counts false alarms: a line whose names the document
    defines must come back valid and unflagged, one reading an unknown name flagged,
    with the syntax verdict apart (both timed)."""
    names_check = script("names_check")
    prefix, suffix = "import os\n\n\ndef f(path):\n    ", "\n    return path\n"
    valid, names, syntax_ms, names_ms = names_check._checked(
        prefix, "path = os.path.join(path, 'x')", suffix)
    assert (valid, names) == (True, ()) and syntax_ms >= 0 and names_ms >= 0
    valid, names, _, _ = names_check._checked(prefix, "path = join(path, 'x')", suffix)
    assert (valid, names) == (True, ("join",))


def test_names_check_counts_where_the_code_below_asks_for_a_binding():
    """A cleared line whose name the code below reads is a binding hint asked for; the
    person's line written back asks for none unless it leaves the name unbound too."""
    names_check = script("names_check")
    prefix, suffix = "def f(xs):\n", "    out.append(xs)\n    return out\n"
    assert names_check._wanted(prefix, "    out = []\n", suffix) == (("out",), ())
    assert names_check._wanted(prefix, "    seen = []\n", suffix) == (("out",), ("out",))
    assert names_check._wanted("def f(xs, out):\n", "    pass\n", suffix) == ((), ())


def test_names_check_says_how_a_binding_hint_begins_the_line_and_if_it_was_so():
    """Before any fill: a statement's hint where the code below sits beside the line, a
    header's where it is indented deeper; each against the line as the person wrote it."""
    names_check = script("names_check")
    prefix, suffix = "def f(xs):\n", "    out.append(xs)\n    return out\n"
    assert names_check._begun(prefix, "    out = []\n", suffix) == ("statement", True)
    assert names_check._begun(prefix, "    res = []\n", suffix) == ("statement", False)
    prefix, suffix = "def f(xs):\n    n = 0\n", "        n += x\n    return n\n"
    assert names_check._begun(prefix, "    for x in xs:\n", suffix) == ("header", True)
    assert names_check._begun(prefix, "    while x:\n", suffix) == ("header", False)
    assert names_check._begun("def f(xs):\n", "    pass\n", "    return xs\n") is None


def test_line_starts_check_finds_a_person_s_line_barred_and_one_that_is_not():
    """benchmarks/line_starts_check.py counts a bar on the token a person's line begins
    with: ` y` one space in is barred in a body four in, `   ` then ` y` is not; a span
    after code on its line gets no bars."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR
    from dlm_lsp.models.tokenizer import Tokenizer

    check = script("line_starts_check")
    tok = Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")
    times: list[float] = []
    prefix, suffix = "def f(x):\n    y = 1\n", "    return y\n"
    assert check._barred(tok, prefix, "    y += 1\n", suffix, times) is False
    assert check._barred(tok, prefix, " y += 1\n", suffix, times) is True
    assert check._barred(tok, "x = 1; ", "y = 2\n", "", times) is None
    assert len(times) == 3


@pytest.mark.parametrize(("name", "argv", "says"), [
    ("settings_edges", ["--only", "contextcache"], "--only names no setting: contextcache"),
    ("settings_edges", ["--sets"], "--sets names no set"),
    ("settings_edges", ["--sets", "loads", "--tcp"], "no case to run: --sets loads --tcp"),
    ("shaping_round_trip", ["/no/such/folder"], "no such file or directory: /no/such/folder"),
    ("request_round_trip", ["fixtures", "--languages", "Pyton"], "no grammar for pyton"),
])
def test_a_run_that_would_sample_nothing_is_a_usage_error(name, argv, says, monkeypatch,
                                                          capsys):
    """Each printed an empty table (`0 cases, 0 failed`) and exited 0, which read as a
    run that found nothing wrong."""
    import sys

    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    with pytest.raises(SystemExit) as ended:
        main = script(name).main
        main(argv) if name != "settings_edges" else main()
    assert ended.value.code == 2 and says in capsys.readouterr().err


def test_round_trips_read_a_language_in_any_case(capsys):
    """The README's tables spell it `Python`; the script wanted `python`."""
    script("shaping_round_trip").main(["fixtures/hello.py", "--languages", "Python",
                                       "--per-language", "1"])
    assert "| python |" in capsys.readouterr().out


def test_every_script_ends_as_the_command_line_does():
    """A Ctrl-C was a KeyboardInterrupt traceback a page long, and SIGTERM killed a
    script without a word and without its `finally` blocks (its servers left running):
    every script with a `main` runs it through `run_script`."""
    scripts = [path for path in sorted(BENCHMARKS.glob("*.py"))
               if "\ndef main(" in path.read_text(encoding="utf-8")]
    assert len(scripts) > 30
    assert [path.name for path in scripts if not path.read_text(encoding="utf-8").endswith(
        '\nif __name__ == "__main__":\n    run_script(main)\n')] == []


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stopped_script_says_so_in_one_line_and_runs_its_finally(sig, status, tmp_path):
    import signal
    import sys
    import time

    cleaned = tmp_path / "cleaned"
    program = ("import pathlib, sys, time\n"
               "from dlm_lsp.bench.script import run_script\n"
               "def main():\n"
               "    try:\n"
               "        print('started', flush=True)\n"
               "        time.sleep(60)\n"
               "    finally:\n"
               f"        pathlib.Path({str(cleaned)!r}).write_text('yes')\n"
               "run_script(main)\n")
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "started\n"
    time.sleep(0.2)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status
    assert err.startswith(f"-c: stopped by {sig} after ") and err.count("\n") == 1, err
    assert cleaned.read_text() == "yes"


def test_a_script_whose_reader_goes_away_ends_quietly():
    """`python benchmarks/x.py | head -1` was a BrokenPipeError traceback."""
    import sys

    program = ("from dlm_lsp.bench.script import run_script\n"
               "def main():\n"
               "    for n in range(100000):\n"
               "        print('row', n)\n"
               "    return 0\n"
               "run_script(main)\n")
    ran = subprocess.run(f"{sys.executable} -c \"$PROGRAM\" | head -1", shell=True,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PROGRAM": program}, executable="/bin/bash")
    assert ran.stdout == "row 0\n"
    assert ran.stderr == ""


@pytest.mark.parametrize("script", ["ghost_text", "lsp_latency", "document_size",
                                    "edit_stream", "typing_cost", "checkpoints_gpu"])
def test_a_script_s_json_path_that_cannot_be_written_is_refused_before_it_runs(script,
                                                                                tmp_path):
    """`--json nope/x.json` was a FileNotFoundError traceback after the whole run (the
    numbers printed, the file lost), where the bench commands refuse it first."""
    import sys

    missing = tmp_path / "nope" / "x.json"
    done = subprocess.run([sys.executable, f"benchmarks/{script}.py", "--json", str(missing)],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": "."})
    assert done.returncode == 2, done.stderr
    assert done.stderr.rstrip().endswith(f"error: --json {missing}: no folder {missing.parent}")
    assert "Traceback" not in done.stderr
