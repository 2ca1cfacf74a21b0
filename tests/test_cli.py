"""The command line: `dlm-lsp fill`, and serving LSP over TCP."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from cli_parsers import command_parsers
from rpc import frame, free_port
from tiny_model import write_random_model

from dlm_lsp.framing import MessageReader

FIXTURE = Path(__file__).parent.parent / "fixtures" / "hello.py"


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlm_lsp", *args], capture_output=True,
                          text=True, timeout=120, input=stdin)


def test_fill_prints_the_file_with_its_hole_filled_and_the_rest_unchanged(model_dir):
    out = run_cli("fill", str(FIXTURE), "--model", str(model_dir), "--steps", "4")
    assert out.returncode == 0, out.stderr
    before, after = FIXTURE.read_text().split("<FILL>")
    assert out.stdout.startswith(before) and out.stdout.endswith(after)
    assert "<FILL>" not in out.stdout
    assert "1 hole(s) filled" in out.stderr


@pytest.mark.parametrize("name", ["hello.js", "hello.ts", "hello.go", "hello.rs", "hello.cs",
                                  "hello.rb", "hello.php", "hello.sh", "hello.lua", "hello.kt",
                                  "hello.scala", "hello.swift"])
def test_fill_works_on_fixtures_in_other_languages_and_checks_their_syntax(model_dir, name):
    fixture = FIXTURE.parent / name
    out = run_cli("fill", str(fixture), "--model", str(model_dir), "--steps", "2")
    assert out.returncode == 0, out.stderr
    before, after = fixture.read_text().split("<FILL>")
    assert out.stdout.startswith(before) and out.stdout.endswith(after)
    assert "syntax valid" in out.stderr or "syntax INVALID" in out.stderr  # a grammar ran


def test_fill_says_which_holes_the_model_left_blank(tmp_path, model_dir, monkeypatch, capsys):
    """A fill of whitespace only said "syntax valid" and "1 hole(s) filled" like any other
    (`fill fixtures/hello.js`: the shipped model, which knows Python only, wrote a space):
    the user was not told nothing was written."""
    from dataclasses import replace

    from dlm_lsp.engine import Engine
    from dlm_lsp.fill import BLANK, fill_file

    infill = Engine.infill

    def blank_first(self, req):  # the first hole's best fill is blank, the second's is not
        result = infill(self, req)
        best = replace(result.candidates[0],
                       text=" " if "<FILL>" in req.text[req.end:] else "x = 1")
        return replace(result, candidates=[best])

    monkeypatch.setattr(Engine, "infill", blank_first)
    source = tmp_path / "two.py"
    source.write_text("a = 1\n<FILL>\nb = 2\n<FILL>\n")
    assert fill_file(str(source), model=str(model_dir), steps=2) == 0
    out = capsys.readouterr()
    assert out.out == "a = 1\n\nb = 2\nx = 1\n"  # the blank fill's space left out
    holes = [line for line in out.err.splitlines() if line.startswith("# hole at offset")]
    assert [line.endswith(BLANK) for line in holes] == [True, False]
    assert "# 2 hole(s) filled (1 blank) by" in out.err


def test_fill_without_holes_says_so(tmp_path, model_dir):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    out = run_cli("fill", str(plain), "--model", str(model_dir))
    assert out.returncode == 1 and "no <FILL> holes" in out.stderr


@pytest.mark.parametrize(("data", "says"), [
    ("x = <FILL>\n".encode("utf-16"), "it is UTF-16 (its byte-order mark says so); fill reads "
     "UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)"),
    ("# café\nx = <FILL>\n".encode("latin-1"), "it is not UTF-8 (byte 0xe9 on line 1); fill "
     "reads UTF-8: convert it first (iconv -f ENCODING -t UTF-8)"),
    (b"\x7fELF\x02\x01\x00\x00\xff", "it looks binary (it holds NUL bytes), not text"),
])
def test_fill_of_a_file_that_is_not_utf8_says_what_it_is(tmp_path, data, says):
    """It said "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte",
    which named neither the file's encoding nor what to do, at a byte's position."""
    source = tmp_path / "other.py"
    source.write_bytes(data)
    out = run_cli("fill", str(source))
    assert (out.returncode, out.stderr) == (2, f"dlm-lsp fill: cannot read {source}: {says}\n")


def test_fill_with_a_missing_model_names_the_directory(tmp_path):
    out = run_cli("fill", str(FIXTURE), "--model", str(tmp_path / "absent"))
    assert out.returncode == 2 and str(tmp_path / "absent") in out.stderr


def test_fill_reads_standard_input_as_the_file_it_names(model_dir):
    """`fill -` (a pipe, an editor's filter command) gives what the file gives, once told
    the language the file's extension would have told."""
    from_file = run_cli("fill", str(FIXTURE), "--model", str(model_dir), "--steps", "4")
    piped = run_cli("fill", "-", "--language", "python", "--model", str(model_dir),
                    "--steps", "4", stdin=FIXTURE.read_text())
    assert piped.returncode == from_file.returncode == 0, piped.stderr
    assert piped.stdout == from_file.stdout and "syntax unchecked" not in piped.stderr


def _one_hole(name: str, folder: Path, monkeypatch) -> str:
    """`name` ("-": standard input) holding one hole, as fill_file's path argument."""
    import io

    text = b"x = <FILL>\n"
    if name == "-":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
        return name
    (folder / name).write_bytes(text)
    return str(folder / name)


@pytest.mark.parametrize("terminal", [True, False])
def test_fill_from_a_terminal_says_it_reads_it_and_that_ctrl_d_ends_it(
        terminal, model_dir, monkeypatch, capsys):
    """`dlm-lsp fill -` typed in a terminal sat silent until Ctrl-D, as the server did
    before it said it waits for an editor; a pipe gets no such line."""
    import io

    from dlm_lsp.fill import fill_file

    class Stdin(io.TextIOWrapper):
        def isatty(self) -> bool:
            return terminal
    monkeypatch.setattr(sys, "stdin", Stdin(io.BytesIO(b"x = <FILL>\n")))
    assert fill_file("-", model=str(model_dir), steps=1, language="python") == 0
    said = "reading the text to fill from the terminal; Ctrl-D ends it"
    assert (said in capsys.readouterr().err) is terminal


@pytest.mark.parametrize(("name", "why"), [
    ("-", "standard input has no file extension to tell its language by"),
    ("notes.txt", ".txt (notes.txt) is not the extension of a language with a grammar here"),
    ("Makefile", "Makefile has no file extension to tell its language by"),
])
def test_a_fill_whose_language_is_not_told_says_why_its_syntax_goes_unchecked(
        name, why, model_dir, tmp_path, monkeypatch, capsys):
    """`fill -` without --language printed only "syntax unchecked" on each hole's line:
    the README says why, the command did not, nor which flag checks it."""
    from dlm_lsp.fill import fill_file

    name = _one_hole(name, tmp_path, monkeypatch)
    assert fill_file(name, model=str(model_dir), steps=1) == 0
    said = capsys.readouterr().err.splitlines()
    assert f"# syntax not checked: {why}; --language names the language " \
           "(python, typescript, go, ...)" in said


@pytest.mark.parametrize(("name", "language"), [("-", "python"), ("notes.txt", "python"),
                                                ("hole.py", None)])
def test_a_fill_whose_language_is_told_says_nothing_of_an_unchecked_syntax(
        name, language, model_dir, tmp_path, monkeypatch, capsys):
    from dlm_lsp.fill import fill_file

    name = _one_hole(name, tmp_path, monkeypatch)
    assert fill_file(name, model=str(model_dir), steps=1, language=language) == 0
    assert "not checked" not in capsys.readouterr().err


@pytest.mark.parametrize(("args", "says"), [
    (["--language", "cobol"], "unknown language 'cobol'; one of: bash, c, cpp, csharp, go"),
    (["--language", "cobol"], "javascriptreact"),  # the LSP ids it takes too
    (["--language", "cobol"], "shellscript"),
    (["--language", "cobol"], "typescriptreact"),
    (["--write"], "--write needs a file"),
])
def test_fill_from_standard_input_refuses_what_it_cannot_do(model_dir, args, says):
    out = run_cli("fill", "-", "--model", str(model_dir), *args, stdin=FIXTURE.read_text())
    assert out.returncode == 2 and says in out.stderr and out.stdout == ""


@pytest.mark.parametrize(("args", "says"), [
    (["--strategy", "fastest"], "invalid choice: 'fastest'"),
    (["--steps", "0"], "0 is not a positive number"),
    (["--steps", "4097"], "4097 is more than 4096 steps"),  # as the steps setting
])
def test_fill_refuses_a_bad_option_with_a_usage_error(args, says):
    out = run_cli("fill", str(FIXTURE), *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(("settings", "says"), [
    ('{"schedule": "bogus"}', "setting 'schedule' = \"bogus\" should be one of"),
    ('{"stepz": 3}', "unknown setting 'stepz'"),
    ('{"model": "x"}', "names model: give --model instead"),
    ('{"holeMarker": "@@"}', "names holeMarker: give --marker instead"),
    ('{"timeoutMs": 5}', "names timeoutMs, which only the language server reads"),
    ("[1]", "should be a JSON object of settings"),
    ("nope", "--settings is not JSON"),
])
def test_fill_refuses_settings_it_cannot_use_before_loading_the_model(settings, says, capsys):
    """Only --steps, --strategy and --seed of the denoising controls reached `fill`; the
    rest come as --settings, checked as strictly as a benchmark's: a misspelt one would
    be a fill made without it."""
    from dlm_lsp.cli import main

    assert main(["fill", str(FIXTURE), "--model", "/no/such/model", "--settings",
                 settings]) == 2
    said = capsys.readouterr()
    assert said.err.startswith("dlm-lsp fill: ") and says in said.err and said.out == ""


def test_fill_settings_reach_the_engine(model_dir):
    """`stepsMultiLine` 3 makes the fixture's multi-line hole a fill of 3 steps."""
    out = run_cli("fill", str(FIXTURE), "--model", str(model_dir), "--settings",
                  '{"stepsMultiLine": 3, "repairRounds": 0, "fallback": false, '
                  '"earlyStop": false, "stopWhenSettled": false}')
    assert out.returncode == 0, out.stderr
    assert "multi-line, " in out.stderr and ", 3 steps, " in out.stderr, out.stderr


def test_a_seed_in_the_settings_is_the_fill_s_seed(model_dir, capsys):
    """`--settings '{"seed": 5}'` was taken and beaten by `--seed`'s default 0: every
    seed filled as 0 did, without a word."""
    from dlm_lsp.cli import main

    def filled(*args: str) -> str:
        assert main(["fill", str(FIXTURE), "--model", str(model_dir), *args]) == 0
        return capsys.readouterr().out
    hot = '"temperature": 1.5, "repairRounds": 0, "fallback": false'
    by_settings = [filled("--settings", f'{{"seed": {seed}, {hot}}}') for seed in (1, 2, 3)]
    by_option = [filled("--seed", str(seed), "--settings", f"{{{hot}}}") for seed in (1, 2, 3)]
    assert by_settings == by_option
    assert len(set(by_option)) > 1, "the seed changes nothing here: the test says nothing"


@pytest.mark.parametrize("marker", ["", "<FILL\n>", "\r", "\t"])
def test_a_marker_the_settings_would_refuse_is_a_usage_error(marker, capsys):
    """An empty one found no holes in any file ("no  holes")."""
    said = usage_error(["fill", str(FIXTURE), "--marker", marker], capsys)
    assert "'holeMarker'" in said and "without a line break, not empty nor whitespace alone" in said


@pytest.mark.parametrize("command", [["fill", str(FIXTURE)], ["bench", "humaneval"],
                                     ["bench", "sweep"]])
def test_a_seed_the_settings_would_refuse_is_a_usage_error(command, capsys):
    said = usage_error([*command, "--seed", str(2**64)], capsys)
    assert "'seed'" in said and "2**63 - 1" in said


def test_a_latency_target_the_settings_would_refuse_is_a_usage_error(capsys):
    """`bench throughput --latency-ms` of 400 digits loaded the model, then failed every
    fill with an OverflowError; the setting stops at an hour."""
    said = usage_error(["bench", "throughput", "--latency-ms", "9" * 400], capsys)
    assert "'latencyMs'" in said and "at most 3600000 (an hour)" in said


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "soon"])
def test_serving_refuses_an_admission_time_that_is_not_a_positive_number(seconds):
    out = run_cli("--tcp", "127.0.0.1:0", "--admission-seconds", seconds)
    assert out.returncode == 2 and f"a positive number of seconds, got {seconds!r}" in out.stderr


def test_version_names_the_package_version():
    from dlm_lsp import __version__

    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"dlm-lsp {__version__}"


T = TypeVar("T")


@contextlib.contextmanager
def _tcp_server(*options: str) -> Iterator[int]:
    """A server started with --tcp (and `options`) on a free port; yields the port, kills
    it after."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dlm_lsp", "--tcp", f"127.0.0.1:{port}",
                             *options])
    try:
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _once_listening(connect: Callable[[], T]) -> T:
    """connect(), retried while the server is still starting (up to 30 s)."""
    for _ in range(300):
        try:
            return connect()
        except OSError:
            time.sleep(0.1)
    return connect()


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(frame(message))


def _receive(sock: socket.socket) -> dict:
    """The next message (this test's server sends one at a time, nothing unasked)."""
    reader, bodies = MessageReader(), []
    while not bodies:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError("the server closed the connection")
        bodies = reader.feed(chunk)
    return json.loads(bodies[0])


def test_started_in_a_terminal_it_says_it_waits_for_an_editor_and_ctrl_d_ends_it():
    """`dlm-lsp` typed in a terminal sat silent, waiting for LSP messages: a user who
    tried the README's "stdio, no arguments" could not tell it from a hang."""
    import os
    import pty

    terminal, its_end = pty.openpty()
    server = subprocess.Popen([sys.executable, "-m", "dlm_lsp"], stdin=its_end,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(its_end)
    try:
        os.write(terminal, b"\x04")  # Ctrl-D on an empty line: the end of its input
        _, said = server.communicate(timeout=120)
    finally:
        os.close(terminal)
    assert server.returncode == 0
    assert "serving LSP over stdio" in said and "Ctrl-D" in said and "--help" in said


def test_started_by_an_editor_it_writes_nothing_but_lsp(tmp_path):
    """An editor's pipes get no greeting: stderr is its log, and nothing but messages."""
    out = run_cli(stdin="")
    assert out.returncode == 0 and out.stdout == "" and "serving" not in out.stderr


def test_tcp_mode_answers_initialize(model_dir):
    with _tcp_server() as port, _once_listening(
            lambda: socket.create_connection(("127.0.0.1", port), timeout=30)) as sock:
        _send(sock, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {},
            "initializationOptions": {"model": str(model_dir)}}})
        reply = _receive(sock)
        assert reply["id"] == 1
        assert "inlineCompletionProvider" in reply["result"]["capabilities"]
        _send(sock, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        assert _receive(sock)["id"] == 2


def test_status_asks_a_running_server(model_dir):
    from dlm_lsp.status import query_server

    with _tcp_server() as port:
        status = _once_listening(lambda: query_server("127.0.0.1", port))
    assert status["model"] == "default" and status["queueDepth"] == 0
    assert status["fills"] == 0 and status["p50Ms"] is None
    # the query's own connection sends initialize, not initialized: it loads nothing
    assert (status["loaded"], status["loading"], status["loadError"]) == (False, False, None)
    assert set(status) >= {"device", "tokensPerSecond", "batchOccupancy", "paddedPasses",
                           "paddedFills", "cacheHitRate", "jobsInFlight", "openDocuments",
                           "progressTokens"}


def test_a_server_started_with_a_model_serves_it_to_every_client(model_dir):
    """`dlm-lsp --tcp ... --model M`: a team's GPU box serves M, not the model of the first
    editor to connect; `status --server` (a client with no settings) reads it too."""
    from dlm_lsp.status import query_server

    with _tcp_server("--model", str(model_dir), "--device", "cpu") as port:
        status = _once_listening(lambda: query_server("127.0.0.1", port))
    assert status["model"] == str(model_dir) and status["device"] == "cpu"


@pytest.mark.parametrize("option", [["--model", "x"], ["--tcp", "127.0.0.1:0"],
                                    ["--precision", "fp32"]])
def test_the_servers_model_options_before_a_command_are_refused(option, tmp_path):
    """`dlm-lsp --model M fill f.py` filled with the default model without a word: the
    option before the command is the language server's, and `fill` has its own."""
    out = run_cli(*option, "fill", str(tmp_path / "f.py"))
    assert out.returncode == 2
    assert f"{option[0]} before 'fill': the language server's option" in out.stderr


def test_a_server_model_it_could_never_load_is_a_usage_error():
    out = run_cli("--model", "")
    assert out.returncode == 2 and '--model "" should be a model name' in out.stderr


@pytest.mark.parametrize(("fields", "shown"), [
    ({}, "False (not loaded yet: it loads when an editor's client on the local backend "
         "initializes the server, or at its first fill)"),
    ({"loading": True}, "False (loading now)"),
    ({"loadError": "no such model"}, "False (the last load failed: loadError says why)"),
    ({"loaded": True}, "True"),
    ({"backend": "remote"}, "False"),  # a service's loaded: its own meaning
    ({"backend": "remote", "loadError": "cannot reach http://gpu-box:8000"},
     "False (the server cannot be reached: loadError says why)"),
])
def test_status_of_a_server_says_why_its_model_is_not_loaded(fields, shown, monkeypatch,
                                                             capsys):
    """A server no editor had used said `loaded  False`, which read as a failed load."""
    from dlm_lsp import status as status_module
    from dlm_lsp.cli import main

    answer = {"model": "default", "loaded": False, "loadError": None, "loading": False,
              **fields}
    monkeypatch.setattr(status_module, "query_server", lambda *args, **kwargs: answer)
    assert main(["status", "--server", "127.0.0.1:1"]) == 0
    rows = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
    assert ["loaded", shown] in [list(row) for row in rows]


def test_status_of_a_server_that_is_not_there_says_how_one_is_started(capsys):
    """`status --server` at a port where nothing listens printed `[Errno 111] Connection
    refused`: the user is told what --server wants, a server started with --tcp."""
    from dlm_lsp.cli import main

    port = free_port()
    assert main(["status", "--server", f"127.0.0.1:{port}"]) == 1
    said = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in said and "Errno" not in said
    assert f"dlm-lsp --tcp 127.0.0.1:{port}" in said


def test_status_of_a_service_without_its_metrics_board_says_the_replica_count_is_unknown(
        monkeypatch, capsys):
    """Without its metrics board a service answers /v1/metrics with the answering
    replica's counters alone and a null replica count; `status --remote` counted the rows
    and said "1 live" of a service that may run many."""
    from dlm_lsp.cli import main
    from dlm_lsp.remote.client import RemoteEngine

    one = {"replica": "a1", "pid": 4242, "device": "cuda:0", "inFlight": 3}
    monkeypatch.setattr(RemoteEngine, "service_metrics", lambda self: {
        "model": "m", "device": "cuda:0", "replicas": None, "queueDepth": 3,
        "replicaStats": [one]})
    assert main(["status", "--remote", "http://gpu-box:8000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if "live" in line]
    counts = [line for line in lines if line.startswith(("replicas ", "queueDepth "))]
    assert counts == ["replicas    unknown (the service's metrics board is gone: the "
                      "tables below hold the answering replica's row alone)",
                      "queueDepth  3 on the answering replica"]


# one replica of a busy service, as GET /v1/metrics tells it (remote/service.py `_stats`)
BUSY_REPLICA = {"replica": "k2j4h1x9", "pid": 1234567, "device": "cuda:0", "inFlight": 12,
                "queueDepth": 9, "fills": 123456, "cancelled": 23456, "failed": 12,
                "p50Ms": 1234.5, "p95Ms": 12345.6, "tokensPerSecond": 12345.6,
                "batchOccupancy": 0.87, "forwardPasses": 12345678, "paddedPasses": 1234567,
                "paddedFills": 123456, "loadFactor": 1.23}


def _status_remote_of(monkeypatch, capsys, replicas: list[dict]) -> list[str]:
    """What `status --remote` prints of a service whose live replicas are `replicas`."""
    from dlm_lsp.cli import main
    from dlm_lsp.remote.client import RemoteEngine

    monkeypatch.setattr(RemoteEngine, "service_metrics", lambda self: {
        "model": "m", "device": "cuda:0", "replicas": len(replicas), "queueDepth": 9,
        "replicaStats": replicas})
    assert main(["status", "--remote", "http://gpu-box:8000"]) == 0
    return capsys.readouterr().out.splitlines()


def test_status_of_a_service_shows_each_replica_s_forward_passes_and_load_factor(
        monkeypatch, capsys):
    """The replicas publish their passes, padded passes and the fills in them, and load
    factor (as `status --server` shows a server's), but the rows left them out."""
    lines = _status_remote_of(monkeypatch, capsys, [BUSY_REPLICA])
    at = next(i for i, line in enumerate(lines) if "forwardPasses" in line.split())
    shown = dict(zip(lines[at].split(), lines[at + 1].split(), strict=True))
    assert {name: shown[name] for name in ("forwardPasses", "paddedPasses", "paddedFills",
                                           "loadFactor")} == {
        "forwardPasses": "12345678", "paddedPasses": "1234567", "paddedFills": "123456",
        "loadFactor": "1.23"}


def test_status_of_a_service_shows_a_figure_a_replica_has_not_yet_as_a_dash(monkeypatch,
                                                                           capsys):
    """A replica that has made no fill has no latency: the row read `None`."""
    lines = _status_remote_of(monkeypatch, capsys, [{**BUSY_REPLICA, "fills": 0,
                                                     "p50Ms": None, "p95Ms": None}])
    at = next(i for i, line in enumerate(lines) if "p50Ms" in line.split())
    shown = dict(zip(lines[at].split(), lines[at + 1].split(), strict=True))
    assert (shown["fills"], shown["p50Ms"], shown["p95Ms"]) == ("0", "-", "-")
    assert "None" not in "\n".join(lines)


def test_status_of_a_service_fits_each_busy_replica_in_100_columns(monkeypatch, capsys):
    """One row of twelve counters took 124 columns: it wrapped in a terminal of 100."""
    lines = _status_remote_of(monkeypatch, capsys, [BUSY_REPLICA, {**BUSY_REPLICA,
                                                                   "replica": "p9q8r7s6"}])
    assert max(len(line) for line in lines) <= 100
    assert sum(line.startswith("p9q8r7s6 ") for line in lines) == 2  # a row in each table


@contextlib.contextmanager
def _service_answering(code: int, body: bytes = b"") -> Iterator[str]:
    """The URL of a service that answers every GET with HTTP `code` and `body`."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Answering(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass
    with ThreadingHTTPServer(("127.0.0.1", 0), Answering) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


def _status_remote_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from dlm_lsp.cli import main

    assert main(["status", *argv]) == 1
    said = capsys.readouterr().err
    assert "remoteUrl" not in said and "remoteToken" not in said and "remoteCaFile" not in said
    return said


@pytest.mark.parametrize("url, problem", [
    ("gpu-box:8000", "is not an http:// or https:// URL"),
    ("ftp://x", "is not an http:// or https:// URL"),
    ("http://x:99999", "has no port number 0-65535"),
])
def test_status_of_a_service_at_a_url_that_is_not_one_is_a_usage_error_naming_the_option(
        url, problem, capsys):
    """The command line has no setting `remoteUrl`: the error named the editor's setting
    where the user had typed `--remote`; and it came once the command ran, exit 1, as a
    service that is down does, where `--server nonsense` is a usage error (exit 2)."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["status", "--remote", url])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert said.splitlines()[-1].startswith(
        f"dlm-lsp status: error: argument --remote: {url!r} {problem}")
    assert "remoteUrl" not in said


def test_status_of_a_service_with_a_ca_file_it_cannot_read_names_the_ca_file_option(
        tmp_path, capsys):
    missing = tmp_path / "ca.pem"
    said = _status_remote_error(["--remote", "https://127.0.0.1:9", "--ca-file", str(missing)],
                                capsys)
    assert f"cannot use the CA file {str(missing)!r} (--ca-file)" in said


def test_status_of_a_service_that_refuses_the_token_names_the_token_option(capsys):
    with _service_answering(401) as url:
        said = _status_remote_error(["--remote", url, "--token", "wrong"], capsys)
    assert "refused the token (HTTP 401): set --token or DLM_LSP_REMOTE_TOKEN" in said


def test_status_with_a_token_no_http_header_can_carry_names_the_token_option(capsys):
    """No setting check saw `--token`: the error named the environment variable, which
    the user had not set."""
    with _service_answering(401) as url:
        said = _status_remote_error(["--remote", url, "--token", "two words"], capsys)
    assert "--token holds characters an HTTP header cannot carry" in said


def test_status_of_a_server_that_answers_a_bare_404_says_what_to_check(capsys):
    """A 404 without a body ended the line at its colon: `rejected GET /v1/metrics (HTTP
    404): `."""
    with _service_answering(404) as url:
        said = _status_remote_error(["--remote", url], capsys)
    assert said.rstrip().endswith("(HTTP 404): no text; is --remote a dlm-lsp serve-remote "
                                  "service?")


def test_status_of_a_server_that_is_no_dlm_lsp_service_names_the_remote_option(capsys):
    with _service_answering(200, b"<html>a web page</html>") as url:
        said = _status_remote_error(["--remote", url], capsys)
    assert "is --remote a dlm-lsp serve-remote service" in said


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\nBad Request",
    b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n",
], ids=["a-page-with-its-length", "a-page-then-closed"])
def test_status_of_an_http_service_asked_as_a_server_names_the_remote_option(answer, capsys):
    """`status --server` at a serve-remote service's port said "the connection broke:
    Expecting value: line 1 column 1 (char 0)", the JSON parser's words for its page (or
    that the server closed the connection), and nothing of --remote."""
    from dlm_lsp.cli import main

    with socket.create_server(("127.0.0.1", 0)) as listening:
        where = f"127.0.0.1:{listening.getsockname()[1]}"

        def serve() -> None:
            conn, _ = listening.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        assert main(["status", "--server", where]) == 1
        thread.join(5)
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp status: {where}: ") and "Expecting value" not in said
    assert said.endswith(": --server asks a `dlm-lsp --tcp` server (a serve-remote service "
                         "is asked with --remote URL)\n")


@pytest.mark.parametrize(("argv", "told"), [
    (["--remote", "http://127.0.0.1:9", "--server", "127.0.0.1:9"],
     "argument --server: not allowed with argument --remote"),
    (["--remote", "http://127.0.0.1:9", "--model", "x"],
     "--model and --device are the model timed here: with --remote the status is of its own"),
    (["--server", "127.0.0.1:9", "--device", "cpu"],
     "--model and --device are the model timed here: with --server the status is of its own"),
])
def test_status_options_that_do_not_go_together_are_a_usage_error(argv, told, capsys):
    """`status --remote URL --server H:P` asked the service alone, and `--model X` with
    either was dropped without a word."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as refused:
        main(["status", *argv])
    assert refused.value.code == 2
    assert f"dlm-lsp status: error: {told}" in capsys.readouterr().err


def test_status_here_reports_the_model_and_its_step_cost(model_dir):
    out = subprocess.run([sys.executable, "-m", "dlm_lsp", "status", "--model", str(model_dir),
                          "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines())
    assert lines["device"] == "cpu" and float(lines["stepMsAt256Tokens"]) > 0
    assert int(lines["parameters"].replace(",", "")) > 0


def test_status_here_shows_its_per_kind_figures_as_words_not_python(model_dir, capsys):
    """`defaultSteps` printed `{'singleLine': 8, 'multiLine': 16, 'rewrite': 16}`."""
    from dlm_lsp.cli import main

    assert main(["status", "--model", str(model_dir), "--device", "cpu"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert lines["defaultSteps"] == "singleLine 8, multiLine 16, rewrite 16"
    assert lines["stepsWithin"].startswith("50ms ") and "{" not in lines["stepsWithin"]


def test_status_here_reports_step_costs_only_at_lengths_the_model_takes(tmp_path):
    """A model of 128 tokens was reported at 256 and 512 tokens, neither of which it can
    run; it is reported at its own length."""
    from dlm_lsp.status import local_status

    short = write_random_model(tmp_path / "short", max_length=128)
    status = local_status(str(short), "cpu")
    assert [key for key in status if key.startswith("stepMsAt")] == ["stepMsAt128Tokens"]


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What `dlm-lsp ARGV` prints when it refuses ARGV as a usage error (exit 2), run
    in this process: a traceback would fail the test instead of exiting."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["fill", str(FIXTURE)], ["status"], ["bench", "strategies"], ["bench", "humaneval"],
    ["bench", "heldout"], ["bench", "syntax"], ["bench", "sweep"], ["bench", "latency"],
    ["bench", "throughput"], ["bench", "samples"], ["models", "check", ".", "--load"],
])
def test_every_command_refuses_a_device_the_settings_would_refuse(command, capsys):
    """The devices are the `device` setting's (auto, cpu, cuda), not whatever torch
    parses later into a traceback."""
    said = usage_error([*command, "--device", "gpu"], capsys)
    assert "invalid choice: 'gpu'" in said and "cuda" in said


@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:2087", ("127.0.0.1", 2087)), (":2087", ("127.0.0.1", 2087)),
    ("[::1]:2087", ("::1", 2087)), ("0.0.0.0:0", ("0.0.0.0", 0)),
    ("localhost:65535", ("localhost", 65535)),
])
def test_an_address_is_host_and_port_with_ipv6_brackets_stripped(text, address):
    from dlm_lsp.cli import _address

    assert _address(text) == address


@pytest.mark.parametrize("option", [["--tcp"], ["status", "--server"]])
@pytest.mark.parametrize("text", ["foo", "127.0.0.1:99999", "127.0.0.1:-1", "host:", "[::1]"])
def test_an_address_without_a_port_from_0_to_65535_is_a_usage_error(option, text, capsys):
    assert f"HOST:PORT with a port from 0 to 65535, got {text!r}" in usage_error(
        [*option, text], capsys)


def test_serving_on_a_taken_port_says_so_in_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("--tcp", f"127.0.0.1:{port}")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"dlm-lsp: cannot listen on 127.0.0.1:{port}: " in out.stderr


@pytest.mark.parametrize("command", [
    ["status"], ["bench", "heldout", "--limit", "1"], ["bench", "humaneval", "--limit", "1"],
    ["bench", "strategies", "--limit", "1"], ["bench", "syntax", "--limit", "1"],
    ["bench", "samples", "--limit", "1"], ["bench", "sweep", "--limit", "1"],
    ["bench", "latency", "--lengths", "4"], ["bench", "throughput", "--concurrency", "1"],
])
def test_a_missing_model_is_named_in_one_line_as_fill_names_it(command, tmp_path, capsys):
    from dlm_lsp.cli import main

    absent = tmp_path / "absent"
    assert main([*command, "--model", str(absent), "--device", "cpu"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp {command[0]}") and str(absent) in said
    assert len(said.splitlines()) == 1


def test_status_help_names_the_option_that_asks_a_running_server(capsys):
    from dlm_lsp.cli import main

    for argv in (["--help"], ["status", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        said = " ".join(capsys.readouterr().out.split())
        assert "caches (--server)" in said and "caches (--tcp)" not in said


def test_every_option_of_every_command_says_in_its_help_what_it_is():
    """`dlm-lsp fill --help` listed `--model MODEL`, `--seed SEED` and `--marker MARKER`
    bare, and so did every `bench` command: a user could not tell what a model may be
    named, nor the marker's default, without the README."""
    bare = [f"{prog} {action.option_strings[0] if action.option_strings else action.dest}"
            for prog, parser in command_parsers().items() for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                                       argparse._SubParsersAction))
            and not (action.help or "").strip()]
    assert bare == []


def test_every_command_s_own_help_says_what_it_does():
    """`dlm-lsp fill --help`, `models list --help` and every `bench` command's --help began
    at the usage line: what the command does was said only in its parent's list."""
    assert [prog for prog, parser in command_parsers().items()
            if not (parser.description or "").strip()] == []


def test_every_option_that_has_a_default_value_names_it_in_its_help():
    """`bench humaneval --help` said `--length {oracle,policy}`, `--timeout` "seconds per
    program" and `--workers` "programs run side by side", and `bench latency` its
    `--steps` and `--repeats`, with no word of what a run takes when they are left out
    (oracle, 5 s, 2, 16, 3): a user walking the README had to read the code.  An option
    whose default is nothing (None, off, empty) needs no such word."""
    unsaid = [f"{prog} {action.option_strings[0]} (default {action.default!r})"
              for prog, parser in command_parsers().items() for action in parser._actions
              if action.option_strings
              and not isinstance(action, (argparse._HelpAction, argparse._VersionAction))
              and action.default not in (None, False, [], "")
              and "default" not in (action.help or "")]
    assert unsaid == []


def test_a_word_where_a_number_goes_is_refused_without_naming_our_own_functions():
    """`fill --seed abc` said "invalid _seed value: 'abc'", and `bench ... --limit x`
    "invalid _positive value": argparse names the type function that raised ValueError,
    a name from the code, not the user's."""
    said = []
    for prog, parser in command_parsers().items():
        for action in parser._actions:
            if not (action.option_strings and callable(action.type)) or action.choices:
                continue
            try:
                parser._get_value(action, "abc")
            except argparse.ArgumentError as refused:
                said.append(f"{prog}: {refused}")
    assert said and [line for line in said if "invalid _" in line] == []


def test_train_help_says_the_threads_a_run_takes_unless_told():
    """`--tiny` runs on one thread and the shipped recipe on torch's own count, and
    `--threads` said only "torch CPU threads"."""
    from dlm_lsp.training.train import build_parser

    threads = next(a for a in build_parser()._actions if "--threads" in a.option_strings)
    assert "--tiny: 1" in threads.help and "torch's own" in threads.help


def test_a_precision_the_settings_would_refuse_is_a_usage_error_of_models_check(capsys):
    """`models check DIR --load --precision fp16` loaded nothing and reported a problem
    (exit 1), as if the checkpoint were broken; --device was already checked as typed."""
    from dlm_lsp.models.command import main

    with pytest.raises(SystemExit) as stop:
        main(["check", "nowhere", "--load", "--precision", "fp16"])
    assert stop.value.code == 2 and "invalid choice: 'fp16'" in capsys.readouterr().err


def test_a_log_level_is_one_of_logging_s_in_any_case():
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as ran:  # parsed before --version ends the run
        main(["--log-level", "debug", "--version"])
    assert ran.value.code == 0
    out = run_cli("--log-level", "foo", stdin="")  # a process: a level let through serves stdio
    assert out.returncode == 2 and "invalid choice: 'foo'" in out.stderr  # as typed


@pytest.mark.parametrize("command", [
    ["fill", "{file}", "--model", "{model}"],
    ["models", "check", "{model}", "--load"],
    ["bench", "strategies", "--model", "{model}", "--limit", "1", "--steps", "1"],
    ["status", "--model", "{model}"],
])
def test_device_cuda_without_a_gpu_names_the_command_s_device_flag(command, model_dir,
                                                                   tmp_path, monkeypatch, capsys):
    """It said "set device to 'auto' or 'cpu'", the server's setting, which no command has."""
    import torch

    from dlm_lsp.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    file = tmp_path / "f.py"
    file.write_text("def f(x):\n    return <FILL>\n")
    assert main([*(a.format(file=file, model=model_dir) for a in command),
                 "--device", "cuda"]) != 0
    err = capsys.readouterr().err
    assert ("--device cuda was given but CUDA is not available here; use --device auto or "
            "--device cpu") in err
    assert "set device" not in err


def test_bench_strategies_takes_the_splits_bench_humaneval_takes(capsys):
    said = usage_error(["bench", "strategies", "--split", "foo"], capsys)
    assert "invalid choice: 'foo'" in said and "random-span" in said and "multi" in said


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_benchmark_says_so_in_one_line_and_writes_no_report(
        sig, status, tmp_path, monkeypatch, capsys):
    """Ctrl-C was a traceback; SIGTERM killed the benchmark where it stood, leaving its
    sandboxed programs running (sandbox.run_programs ends them when interrupted)."""
    import os
    import signal

    from dlm_lsp.bench import pass_at_1
    from dlm_lsp.cli import main

    def interrupted(sources, config):
        number = signal.Signals[sig]
        if signal.getsignal(number) is signal.SIG_DFL:
            pytest.fail(f"{sig} would kill the benchmark where it stands")
        os.kill(os.getpid(), number)
        time.sleep(5)  # the handler raises first
        pytest.fail(f"{sig} was not taken as an interruption")
    monkeypatch.setattr(pass_at_1, "run_programs", interrupted)
    report = tmp_path / "report.json"
    try:
        ran = main(["bench", "humaneval", "--self-check", "--limit", "2", "--json", str(report)])
    except KeyboardInterrupt:
        pytest.fail("the interruption escaped as a traceback")
    assert ran == status
    said = capsys.readouterr().err
    assert said.startswith(f"dlm-lsp bench humaneval: stopped by {sig} after ")
    assert said.rstrip().endswith("no report written") and len(said.splitlines()) == 1
    assert not report.exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler is put back"


def test_a_benchmarks_stop_line_counts_its_seconds_from_the_commands_start(
        monkeypatch, capsys):
    """Ctrl-C 3 s into `dlm-lsp bench humaneval` said "stopped by SIGINT after 1s": the
    benchmark's clock started after torch's import (seconds on a busy machine), while
    every other command's line counts from the command's start."""
    import re

    from dlm_lsp import held_signals
    from dlm_lsp.bench import pass_at_1
    from dlm_lsp.cli import main

    real, importing = time.monotonic, [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: real() + importing[0])

    def slow_import():
        importing[0] += 5.0  # torch's import on a loaded 2-core machine

    def interrupted(sources, config):
        raise KeyboardInterrupt
    monkeypatch.setattr(held_signals, "import_torch", slow_import)
    monkeypatch.setattr(pass_at_1, "run_programs", interrupted)
    assert main(["bench", "humaneval", "--self-check", "--limit", "2"]) == 130
    said = capsys.readouterr().err.splitlines()[-1]
    seconds = re.match(r"dlm-lsp bench humaneval: stopped by SIGINT after (\d+)s", said)
    assert seconds and int(seconds[1]) >= 5, said


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_benchmark_stopped_while_writing_its_report_names_the_file_it_wrote(
        sig, status, tmp_path, monkeypatch, capsys):
    """The signal waits for the report's write (output.write_text), so the file is whole:
    the last line said "no report written" of it."""
    import json

    from signals import signal_while_writing

    from dlm_lsp.cli import main

    report = tmp_path / "report.json"
    signal_while_writing(monkeypatch, sig, report)
    ran = main(["bench", "humaneval", "--self-check", "--limit", "2", "--json", str(report)])
    assert ran == status
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.startswith(f"dlm-lsp bench humaneval: stopped by {sig} after ")
    assert said.endswith(f"; report written to {report}")
    assert json.loads(report.read_text())["tasks"] == 2, "the whole report"


@pytest.mark.parametrize(("argv", "where"), [
    (["fill", "FILE", "--model", "MODEL"], "dlm_lsp.engine.Engine.infill"),
    (["status", "--model", "MODEL"], "dlm_lsp.engine.Engine.step_cost"),
    (["models", "check", "MODEL", "--load"], "dlm_lsp.models.command.time_forward"),
    (["serve-remote", "--model", "MODEL", "--port", "PORT"], "dlm_lsp.remote.service.deploy"),
])
def test_ctrl_c_in_a_long_command_says_so_in_one_line_and_exits_130(
        argv, where, model_dir, tmp_path, monkeypatch, capsys):
    """Ctrl-C while `fill` filled, `status` timed a step, `models check --load` loaded
    a model or `serve-remote` started its replicas was a traceback from wherever the
    work stood."""
    from dlm_lsp.cli import main

    if argv[0] == "serve-remote":
        pytest.importorskip("ray")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what Python's SIGINT handler raises
    monkeypatch.setattr(where, interrupted)
    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    # a free port: the default 8000 may be held by another program on the machine
    argv = [{"FILE": str(holes), "MODEL": str(model_dir), "PORT": str(free_port())}.get(a, a)
            for a in argv]
    try:
        status = main(argv)
    except KeyboardInterrupt:
        pytest.fail("the interruption escaped as a traceback")
    said = capsys.readouterr()
    assert status == 130 and said.out == ""
    assert said.err.startswith(f"dlm-lsp {argv[0]}: stopped by SIGINT after ")
    assert len(said.err.splitlines()) == 1
    assert holes.read_text() == "def f(x):\n    return <FILL>\n"
    # where the command writes, the line says that nothing was
    assert said.err.rstrip().endswith("s; the file left as it was") == ("--write" in argv)


def test_a_benchmark_stopped_while_torch_loads_says_no_report_was_written(monkeypatch, capsys):
    """A signal in the first seconds of `bench`, while torch and the benchmark's modules
    import, stopped it before `_bench` took signals itself: its line lacked the "no
    report written" a benchmark stopped a moment later says."""
    import dlm_lsp.held_signals as held
    from dlm_lsp.cli import main

    def interrupted():
        raise KeyboardInterrupt("SIGTERM")  # as the command line's SIGTERM handler raises
    monkeypatch.setattr(held, "import_torch", interrupted)
    assert main(["bench", "humaneval", "--limit", "1"]) == 143
    said = capsys.readouterr().err
    assert re.fullmatch(r"dlm-lsp bench humaneval: stopped by SIGTERM after \d+s; no report "
                        r"written\n", said)


@pytest.mark.parametrize(("argv", "where"), [
    (["fill", "FILE", "--write", "--model", "MODEL"], "dlm_lsp.engine.Engine.infill"),
    (["status", "--model", "MODEL"], "dlm_lsp.engine.Engine.step_cost"),
    (["models", "check", "MODEL", "--load"], "dlm_lsp.models.command.time_forward"),
])
def test_sigterm_in_a_long_command_says_so_in_one_line_and_exits_143(
        argv, where, model_dir, tmp_path, monkeypatch, capsys):
    """SIGTERM (`timeout`, `kill`) while `fill` filled, `status` timed a step or `models
    check --load` loaded a model killed the command with no word: the benchmarks'
    line and 128 + 15 (bench handles SIGTERM so already)."""
    import os
    import signal

    from dlm_lsp.cli import main

    def terminated(*args, **kwargs):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            pytest.fail("SIGTERM would kill the command where it stands")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises first
        pytest.fail("SIGTERM was not taken as an interruption")
    monkeypatch.setattr(where, terminated)
    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    argv = [{"FILE": str(holes), "MODEL": str(model_dir)}.get(a, a) for a in argv]
    status = main(argv)
    said = capsys.readouterr()
    assert status == 143 and said.out == ""
    assert said.err.startswith(f"dlm-lsp {argv[0]}: stopped by SIGTERM after ")
    assert len(said.err.splitlines()) == 1
    assert holes.read_text() == "def f(x):\n    return <FILL>\n"
    assert said.err.rstrip().endswith("s; the file left as it was") == ("--write" in argv)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler is put back"


@pytest.mark.parametrize(("argv", "module", "sig"), [
    (["train", "--tiny"], "dlm_lsp.training.train", "SIGINT"),
    (["status"], "dlm_lsp.status", "SIGINT"),
    (["models", "check", "DIR"], "dlm_lsp.models.command", "SIGTERM"),
    (["bench", "humaneval", "--limit", "1"], "dlm_lsp.bench.pass_at_1", "SIGINT"),
    (["serve-remote"], "dlm_lsp.remote.command", "SIGTERM"),
])
def test_a_signal_while_a_command_imports_its_modules_says_so_in_one_line(
        argv, module, sig, monkeypatch, capsys):
    """The first second or two of a command import torch and the rest, before the
    command's own handler: Ctrl-C there was a KeyboardInterrupt traceback from inside
    some library, and SIGTERM killed it with no word."""
    import os
    import signal
    import sys

    from dlm_lsp.cli import main

    class SignalOnImport:
        def find_spec(self, name, path=None, target=None):
            if name == module:
                if signal.getsignal(signal.Signals[sig]) is signal.SIG_DFL:
                    pytest.fail(f"{sig} would kill the command with no word")
                os.kill(os.getpid(), signal.Signals[sig])  # Ctrl-C's own handler raises
                time.sleep(5)
            return None
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(sys, "meta_path", [SignalOnImport(), *sys.meta_path])
    try:
        status = main(argv)
    except KeyboardInterrupt:
        pytest.fail("the interruption escaped as a traceback")
    said = capsys.readouterr().err
    command = " ".join(argv[:2] if argv[0] == "bench" else argv[:1])
    assert status == 128 + signal.Signals[sig]
    assert said.startswith(f"dlm-lsp {command}: stopped by {sig} after ")
    assert len(said.splitlines()) == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler is put back"


@pytest.mark.parametrize("argv", [
    ["strategies", "--limit", "0"], ["strategies", "--steps", "-1"],
    ["humaneval", "--limit", "0"], ["humaneval", "--timeout", "0"],
    ["humaneval", "--workers", "0"], ["humaneval", "--margin", "-1"],
    ["heldout", "--limit", "-1"], ["syntax", "--limit", "0"], ["sweep", "--steps", "0"],
    ["sweep", "--limit", "0"], ["latency", "--lengths", "0"], ["latency", "--repeats", "0"],
    ["throughput", "--concurrency", "0"], ["throughput", "--fills-per-thread", "0"],
    ["throughput", "--tokens", "0"], ["samples", "--limit", "0"], ["samples", "--steps", "0"],
    ["sweep", "--epsilon", "-1"], ["sweep", "--epsilon", "nan"], ["sweep", "--ratio", "2"],
    ["sweep", "--ratio", "0"], ["sweep", "--ratio", "nan"],
])
def test_a_count_below_one_is_a_usage_error_not_a_traceback_or_an_empty_run(argv, capsys):
    """--limit 0 divided by zero, --repeats 0 took the median of nothing, --steps -1 and
    --concurrency 0 ran and printed tables of zeros, --timeout 0 failed every program,
    --margin -1 called an unchanged pass@1 a regression; sweep --epsilon -1 ran the whole
    sweep and ended in a traceback, --ratio 2 ran."""
    # a model that does not exist: refused while parsing, nothing is loaded or run
    said = usage_error(["bench", *argv, "--model", "/no/such/model"], capsys)
    assert f"argument {argv[1]}:" in said


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(option, tmp_path,
                                                                        capsys):
    """It was a traceback after every task had run."""
    from dlm_lsp.cli import main

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for path, says in ((tmp_path / "missing" / "r.json", "no folder"),
                       (a_file / "r.json", "no folder"), (tmp_path, "is a folder")):
        assert main(["bench", "humaneval", "--self-check", "--limit", "1",
                     option, str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith(f"dlm-lsp bench humaneval: {option} {path}")
        assert says in captured.err and captured.out == ""


@pytest.mark.parametrize(("harness", "given", "says"), [
    ("--self-check", ["--steps", "4", "--settings", '{"schedule": "cosine"}'],
     "--self-check fills with the canonical middle, no model: --steps, --settings would "
     "not be read"),
    ("--empty", ["--model", "/some/model", "--no-repair"],
     "--empty fills with nothing, no model: --model, --no-repair would not be read"),
])
def test_a_fill_with_no_model_refuses_the_options_of_a_model_s_fills(harness, given, says,
                                                                     capsys):
    """They were taken, and never read: the report read as one made with them."""
    from dlm_lsp.cli import main

    assert main(["bench", "humaneval", harness, "--limit", "1", *given]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"dlm-lsp bench humaneval: {says}\n" and captured.out == ""


def test_throughput_refuses_steps_beside_a_latency_target(capsys):
    """`--steps 4 --latency-ms 300` ran at the target's steps, the 4 dropped without a word
    (the other options that do not go together are refused)."""
    from dlm_lsp.cli import main

    assert main(["bench", "throughput", "--latency-ms", "300", "--steps", "4", "--model",
                 "/no/such/model"]) == 2
    assert capsys.readouterr().err == (
        "dlm-lsp bench throughput: --steps and --latency-ms: the latency target picks each "
        "fill's steps; give one of them\n")


@pytest.mark.parametrize(("paths", "says"), [
    ({"--json": ""}, "--json is empty: name a file"),  # ignored: no report, no word
    ({"--json": "r", "--markdown": "r"},  # the markdown was written over the JSON
     "--json and --markdown name the same file, {tmp}/r: the second would be written over "
     "the first; give each its own"),
])
def test_report_paths_that_cannot_all_be_written_are_refused_before_the_run(paths, says,
                                                                            tmp_path, capsys):
    from dlm_lsp.cli import main

    given = [part for option, path in paths.items()
             for part in (option, str(tmp_path / path) if path else path)]
    assert main(["bench", "humaneval", "--self-check", "--limit", "1", *given]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"dlm-lsp bench humaneval: {says.format(tmp=tmp_path)}\n"
    assert captured.out == "" and list(tmp_path.iterdir()) == []


def test_a_report_path_where_no_file_can_be_made_is_refused_before_the_run(capsys):
    """`/proc/x.md` passed the access check (root may write in /proc's folder) and failed
    after the run, a traceback."""
    from dlm_lsp.cli import main

    assert main(["bench", "humaneval", "--self-check", "--limit", "1",
                 "--markdown", "/proc/x.md"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("dlm-lsp bench humaneval: --markdown /proc/x.md: cannot "
                                   "write there (")
    assert captured.out == "" and not Path("/proc/x.md").exists()


def test_an_existing_report_file_that_cannot_be_written_is_refused_before_the_run(capsys):
    """`/proc/version` exists, and access() says root may write it: only the write after
    the run failed."""
    from dlm_lsp.cli import main

    before = Path("/proc/version").read_text()
    assert main(["bench", "humaneval", "--self-check", "--limit", "1",
                 "--json", "/proc/version"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("dlm-lsp bench humaneval: --json /proc/version: cannot "
                                   "write there (")
    assert Path("/proc/version").read_text() == before


def test_an_existing_report_file_in_a_read_only_folder_is_written_over(tmp_path, monkeypatch):
    """A report is written over in place, so the folder's own permission does not matter;
    a read-only folder refused a file the run could have written."""
    import os

    from dlm_lsp.bench.output import OutputError, check_writable

    report = tmp_path / "r.json"
    report.write_text("old")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if Path(path) == tmp_path else real_access(path, mode, **kw)))
    check_writable("--json", report)  # no OutputError
    assert report.read_text() == "old"
    with pytest.raises(OutputError, match="cannot write there"):
        check_writable("--json", tmp_path / "new.json")


def test_a_report_file_that_fails_after_the_run_is_one_line_and_the_others_are_written(
        tmp_path, monkeypatch, capsys):
    """A full disk, or a folder taken away meanwhile: a traceback after the run, and the
    files after the failed one never written."""
    from dlm_lsp.bench import output
    from dlm_lsp.cli import main

    real = output.write_text

    def full_disk(path, text):
        if str(path).endswith(".json"):
            raise OSError(28, "No space left on device")
        real(path, text)
    monkeypatch.setattr(output, "write_text", full_disk)
    report, summary = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["bench", "humaneval", "--self-check", "--limit", "1", "--json", str(report),
                 "--markdown", str(summary)]) == 1
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == (f"dlm-lsp bench humaneval: could not write {report} (No space left on "
                    f"device); the report written to {summary}; its numbers are printed above")
    assert not report.exists() and summary.read_text().strip()


def _disk_fills_after(monkeypatch, size: int) -> None:
    """Every write of text to a file takes `size` characters, then the disk is full."""
    import io

    real_write = io.TextIOWrapper.write

    def write(self, text):
        real_write(self, text[:size])
        self.flush()
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_text", lambda self, text, encoding=None: write(
        open(self, "w", encoding=encoding), text))
    import os
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        handle.write = lambda text: write(handle, text)
        return handle
    monkeypatch.setattr(os, "fdopen", fdopen)


def test_a_report_the_disk_cannot_take_leaves_no_file_and_an_old_one_whole(tmp_path,
                                                                           monkeypatch):
    """A new report file was left empty; an earlier one at that path (a --baseline named
    as the --json too) was emptied, as it was written in place."""
    from dlm_lsp.bench.output import write_text

    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text('{"pass_at_1": 30.5}\n')
    _disk_fills_after(monkeypatch, 4)
    for path in (new, old):
        with pytest.raises(OSError, match="No space left"):
            write_text(path, '{"pass_at_1": 31.0}\n')
    assert not new.exists()
    assert old.read_text() == '{"pass_at_1": 30.5}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]  # no temporary file left


def test_a_report_is_written_over_where_its_folder_is_read_only(tmp_path, monkeypatch):
    import os

    from dlm_lsp.bench.output import write_text

    report = tmp_path / "r.json"
    report.write_text("old")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if Path(path) == tmp_path else real_access(path, mode, **kw)))
    write_text(report, "new")
    assert report.read_text() == "new"


@pytest.mark.parametrize("argv", [["fill", "--write", "FILE"], ["models", "check", "MODEL"]])
def test_ctrl_c_while_torch_imports_numpy_stops_the_command(argv, tmp_path):
    """torch's C initialisation imports numpy and swallows what that raises: Ctrl-C
    there was lost and `fill` ran on to the end with status 0 (seen about once in seven
    signals sent half a second into `fill --write`), as did `models check` (SIGTERM
    0.3 s into `models check --load`)."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    probe = ("import os, signal, sys\n"
             "class SignalOnNumpy:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'numpy':\n"
             "            sys.meta_path.remove(self)\n"
             "            os.kill(os.getpid(), signal.SIGINT)\n"
             "sys.meta_path.insert(0, SignalOnNumpy())\n"
             "from dlm_lsp.cli import main\n"
             "raise SystemExit(main(sys.argv[1:]))\n")
    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    argv = [{"FILE": str(holes), "MODEL": str(DEFAULT_MODEL_DIR)}.get(a, a) for a in argv]
    out = subprocess.run([sys.executable, "-c", probe, *argv],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 130, out.stderr
    assert out.stderr.startswith(f"dlm-lsp {argv[0]}: stopped by SIGINT after ")
    assert len(out.stderr.splitlines()) == 1 and out.stdout == ""
    assert holes.read_text() == "def f(x):\n    return <FILL>\n"


def test_serve_remote_imports_numpy_only_with_the_signals_held():
    """torch's C initialisation swallows a Ctrl-C raised in numpy's import; the service's
    modules import torch (the engine's) unheld, with numpy loaded by Ray Serve just
    before: an import order away from a lost Ctrl-C.  The probe ends the process at
    numpy's import, before Ray starts."""
    probe = ("import os, signal, sys\n"
             "class AtNumpy:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'numpy':\n"
             "            live = signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
             "            print('live' if live else 'held', flush=True)\n"
             "            os._exit(0)\n"
             "sys.meta_path.insert(0, AtNumpy())\n"
             "from dlm_lsp.cli import main\n"
             "raise SystemExit(main(sys.argv[1:]))\n")
    out = subprocess.run([sys.executable, "-c", probe, "serve-remote", "--num-cpus", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout == "held\n", out.stderr


@pytest.mark.parametrize("missing", ["ray", "fastapi", "starlette", "uvicorn", "pydantic",
                                     "grpc"])
def test_serve_remote_without_ray_serve_says_so_before_importing_torch(missing):
    """It imported torch (a second or more) before finding Ray Serve missing; and of
    what `ray.serve` imports from Ray's serve extra it looked only for fastapi: a
    missing uvicorn (say) was found only by the service's import, after torch's."""
    probe = ("import sys\n"
             f"sys.modules[{missing!r}] = None  # as if not installed: no import, no spec\n"
             "from dlm_lsp.cli import main\nstatus = main(sys.argv[1:])\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
             "raise SystemExit(status)\n")
    out = subprocess.run([sys.executable, "-c", probe, "serve-remote"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == (f"dlm-lsp serve-remote needs Ray Serve ({missing} is missing): "
                          "pip install 'dlm-lsp[remote]'\n")
    assert out.stdout == "no torch\n"


@pytest.mark.parametrize("argv", [["models"], ["models", "list"]])
def test_listing_the_model_families_does_not_import_torch(argv):
    """`dlm-lsp models` prints a static list, and it imported torch (1.5 s) to do it."""
    probe = ("import sys\nfrom dlm_lsp.cli import main\nstatus = main(sys.argv[1:])\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
             "raise SystemExit(status)\n")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "dream:" in out.stdout and "llada:" in out.stdout  # the families are listed
    assert out.stdout.rstrip().endswith("no torch")


@pytest.mark.parametrize("lost", ["tokenizer.json", "model.safetensors"])
def test_models_check_fails_on_one_of_our_own_models_with_a_file_lost(lost, model_dir, tmp_path,
                                                                       capsys):
    """A directory of `dlm-lsp train` that lost its tokenizer or weights (a partial copy of
    a trained model) was said to be "ok: the server can load it", and the server could not."""
    import shutil

    from dlm_lsp.cli import main

    broken = tmp_path / "copy"
    shutil.copytree(model_dir, broken)
    (broken / lost).unlink()
    assert main(["models", "check", str(broken)]) == 1
    said = capsys.readouterr().err
    assert lost in said and "ok:" not in said
    assert main(["models", "check", str(model_dir)]) == 0  # the directory it was copied from
    assert "ok: the server can load it" in capsys.readouterr().err


@pytest.mark.parametrize("where, family", [("nowhere", None), ("nowhere", "dream"),
                                           ("model", "nosuch")])
def test_models_check_names_no_family_where_it_found_none(where, family, model_dir, capsys):
    """A directory that is no model printed `family   (detected)`, a blank where the family
    goes; a family named with --family that does not exist was `(detected)` too."""
    from dlm_lsp.cli import main

    directory = str(model_dir) if where == "model" else where
    assert main(["models", "check", directory, *(["--family", family] if family else [])]) == 1
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split() == ["directory", directory]
    assert [row for row in rows if row.startswith("family")] == []


def test_models_check_of_a_mistyped_path_says_it_is_no_directory(tmp_path, capsys):
    """It said "... has no config.json: not a model directory" of a path that is not there."""
    from dlm_lsp.cli import main

    assert main(["models", "check", str(tmp_path / "Dream-Codr")]) == 1
    assert f"problem: {tmp_path / 'Dream-Codr'} does not exist\n" in capsys.readouterr().err


def test_models_check_of_a_file_says_it_is_a_file_not_a_directory(tmp_path, capsys):
    """A missing path and a file were both "is not a directory"; a user given that for a
    file looked for what was wrong inside it."""
    from dlm_lsp.cli import main

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    assert main(["models", "check", str(weights)]) == 1
    assert f"problem: {weights} is a file, not a directory\n" in capsys.readouterr().err


def test_models_check_of_a_hub_id_checks_its_cached_snapshot_or_says_where_to_put_it(
        model_dir, tmp_path, monkeypatch, capsys):
    """The `model` setting takes a hub id; `models check` read one as a directory name and
    said "owner/name has no config.json", cached or not."""
    import shutil

    import huggingface_hub.constants

    from dlm_lsp.cli import main

    cache, commit = tmp_path / "hub", "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    assert main(["models", "check", "someone/tiny-dlm"]) == 1
    said = capsys.readouterr().err
    assert (f"{Path.cwd() / 'someone' / 'tiny-dlm'} does not exist, and someone/tiny-dlm "
            "is not a hub id in the local hub cache") in said
    assert "--local-dir ~/models/tiny-dlm" in said
    repo = cache / "models--someone--tiny-dlm"
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    assert main(["models", "check", "someone/tiny-dlm"]) == 0
    captured = capsys.readouterr()
    assert "ok: the server can load it" in captured.err
    assert f"directory                {repo / 'snapshots' / commit}" in captured.out


def test_fill_keeps_a_windows_file_s_line_endings(model_dir, tmp_path):
    """A file read in Python's text mode came back with every `\r\n` turned to `\n`:
    `fill --write` rewrote each line of a Windows file, and so did `fill FILE > out`."""
    crlf = FIXTURE.read_bytes().replace(b"\n", b"\r\n")
    holes = tmp_path / "hello.py"
    holes.write_bytes(crlf)
    printed = subprocess.run([sys.executable, "-m", "dlm_lsp", "fill", str(holes), "--model",
                              str(model_dir), "--steps", "4"], capture_output=True, timeout=120)
    piped = subprocess.run([sys.executable, "-m", "dlm_lsp", "fill", "-", "--language",
                            "python", "--model", str(model_dir), "--steps", "4"],
                           input=crlf, capture_output=True, timeout=120)
    written = run_cli("fill", str(holes), "--model", str(model_dir), "--steps", "4", "--write")
    assert printed.returncode == piped.returncode == written.returncode == 0, written.stderr
    before, after = crlf.split(b"<FILL>")
    for out in (printed.stdout, piped.stdout, holes.read_bytes()):
        assert out.startswith(before) and out.endswith(after)
        assert out.count(b"\n") == out.count(b"\r\n")  # no bare line feed, in the fill too


def test_fill_write_to_a_file_it_cannot_write_is_refused_before_the_model_loads(
        model_dir, tmp_path, monkeypatch, capsys):
    """It loaded the model and filled every hole, then ended in a PermissionError
    traceback (as root, a read-only file system is what os.access reports)."""
    from dlm_lsp import fill
    from dlm_lsp.cli import main

    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(fill, "Engine", lambda *args: pytest.fail("the model was loaded"))
    assert main(["fill", str(holes), "--model", str(model_dir), "--write"]) == 2
    assert capsys.readouterr().err == (f"dlm-lsp fill: cannot write {holes} (--write): the "
                                       "file is not writable\n")


def test_fill_write_of_a_file_it_cannot_write_is_refused_before_the_model_loads(
        model_dir, tmp_path, monkeypatch, capsys):
    """Every fill would be made for nothing: said before the model loads."""
    from dlm_lsp import fill
    from dlm_lsp.cli import main

    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: real_access(path, mode) and
                        Path(path) != holes)  # as root, every file is writable
    monkeypatch.setattr(fill, "Engine", lambda *args: pytest.fail("the model was loaded"))
    assert main(["fill", str(holes), "--model", str(model_dir), "--write"]) == 2
    assert capsys.readouterr().err == (
        f"dlm-lsp fill: cannot write {holes} (--write): the file is not writable\n")


def test_fill_write_in_a_folder_it_cannot_write_writes_the_file_in_place(
        model_dir, tmp_path, monkeypatch, capsys):
    """No temporary file can be made beside it: a writable file there was refused ("its
    folder is not writable"), where an editor writes it."""
    from dlm_lsp.cli import main

    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>\n")
    inode = holes.stat().st_ino
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: real_access(path, mode) and
                        Path(path) != tmp_path)  # as root, every folder is writable
    assert main(["fill", str(holes), "--model", str(model_dir), "--write"]) == 0
    assert "<FILL>" not in holes.read_text() and holes.stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == ["holes.py"]
    said = capsys.readouterr()  # the file named as written, last; nothing on stdout
    assert said.out == "" and said.err.endswith(f"\n# written to {holes}\n")


def _file_size_limit(size: int) -> Callable[[], None]:
    """A child's preexec_fn: writes past `size` bytes fail with EFBIG (a full disk's
    part-way failure), not the SIGXFSZ that would kill it."""
    import resource
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(
            resource.RLIMIT_FSIZE)[1]))
    return limit


def test_fill_write_that_fails_part_way_leaves_the_file_as_it_was_and_prints_the_fills(
        model_dir, tmp_path):
    """The file was truncated and then written: a write that failed part-way (a full
    disk) left the user's file cut short, the code after the cut lost (a traceback lost
    the fills too).  Now it is the old text, and the fills are on standard output."""
    holes = tmp_path / "holes.py"
    original = "# a long header\n" * 40 + "def f(x):\n    return <FILL>\n"
    holes.write_text(original)
    done = subprocess.run(
        [sys.executable, "-m", "dlm_lsp", "fill", str(holes), "--model", str(model_dir),
         "--steps", "2", "--write"], capture_output=True, text=True, timeout=120,
        preexec_fn=_file_size_limit(100))
    assert done.returncode == 1, done.stderr
    assert holes.read_text() == original
    assert done.stdout.startswith(original.split("<FILL>")[0]) and "<FILL>" not in done.stdout
    assert done.stderr.splitlines()[-1] == (
        f"dlm-lsp fill: cannot write {holes}: [Errno 27] File too large; it is as it was; the "
        "filled file is on standard output")
    assert [p.name for p in tmp_path.iterdir()] == ["holes.py"]  # no temporary file left


def _fill_hard_linked_file_with_failing_flushes(model_dir, tmp_path, monkeypatch, capsys,
                                                 failures: int) -> tuple[Path, int, str]:
    """`fill --write` of a hard-linked file (written in place), the first `failures`
    flushes to disk failing with EIO: (the file, the exit status, the last stderr line)."""
    from dlm_lsp.cli import main

    holes = tmp_path / "holes.py"
    holes.write_text("def f(x):\n    return <FILL>  # a comment after the hole\n")
    os.link(holes, tmp_path / "linked.py")
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) <= failures:
            raise OSError(5, "Input/output error")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    status = main(["fill", str(holes), "--model", str(model_dir), "--steps", "2", "--write"])
    return holes, status, capsys.readouterr().err.splitlines()[-1]


def test_fill_write_in_place_that_fails_part_way_leaves_the_file_as_it_was(
        model_dir, tmp_path, monkeypatch, capsys):
    """A file with other hard links is written in place: a write that failed there left
    it part-written (here: cut to the filled text, never flushed)."""
    holes, status, said = _fill_hard_linked_file_with_failing_flushes(
        model_dir, tmp_path, monkeypatch, capsys, failures=1)
    assert status == 1
    assert holes.read_text() == "def f(x):\n    return <FILL>  # a comment after the hole\n"
    assert said == (f"dlm-lsp fill: cannot write {holes}: [Errno 5] Input/output error; it is "
                    "as it was; the filled file is on standard output")


def test_fill_write_in_place_that_cannot_be_undone_says_the_file_is_part_written(
        model_dir, tmp_path, monkeypatch, capsys):
    holes, status, said = _fill_hard_linked_file_with_failing_flushes(
        model_dir, tmp_path, monkeypatch, capsys, failures=2)
    assert status == 1
    assert said == (f"dlm-lsp fill: cannot write {holes}: [Errno 5] Input/output error; "
                    "writing its old text back failed too ([Errno 5] Input/output error): "
                    f"{os.path.realpath(holes)} is left part-written; the filled file is on "
                    "standard output")


def test_a_reader_that_stops_early_ends_the_command_quietly():
    """`dlm-lsp models | head -1` printed a BrokenPipeError traceback (or Python's
    "Exception ignored" at exit, status 120)."""
    read, write = os.pipe()
    os.close(read)  # a reader that has gone: the first write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "dlm_lsp", "models"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")  # 141: what SIGPIPE's end gives


@pytest.mark.parametrize("argv", [
    ["fill", "--steps=--", str(FIXTURE)],
    ["bench", "humaneval", "--limit=--"],
    ["train", "--seconds=--"],
    ["models", "check", "--device=--", "x"],
    ["serve-remote", "--port=--"],
])
def test_an_option_given_the_separator_as_its_value_is_a_usage_error(
        argv: list[str], capsys: pytest.CaptureFixture) -> None:
    """Python 3.11's argparse drops a value that is exactly `--` and hands the option an
    empty list its type never checks: `serve-remote --port=--` ended in a TypeError
    traceback from the socket, `fill --steps=--` in one from a comparison."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    option = next(arg for arg in argv if arg.endswith("=--")).removesuffix("=--")
    assert f"error: argument {option}: expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize("argv, command", [
    (["fill", str(FIXTURE), "more.py"], "dlm-lsp fill"),
    (["status", "--bogus"], "dlm-lsp status"),
    (["bench", "humaneval", "--bogus"], "dlm-lsp bench humaneval"),
    (["--bogus"], "dlm-lsp"),
])
def test_an_argument_no_command_takes_is_refused_by_the_command_it_was_given_to(
        argv: list[str], command: str, capsys: pytest.CaptureFixture) -> None:
    """`fill a.py b.py` was refused as `dlm-lsp: error: unrecognized arguments: b.py`, under
    the top level's usage, which names no FILE; `train` said its own usage already."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"{command}: error: unrecognized arguments: {argv[-1]}"
    assert err.startswith(f"usage: {command} ")


def test_the_gpu_run_refuses_the_separator_as_a_value_too(
        capsys: pytest.CaptureFixture) -> None:
    from dlm_lsp.training.gpu_run import main

    with pytest.raises(SystemExit) as stopped:
        main(["--wall-seconds=--"])
    assert stopped.value.code == 2
    assert "argument --wall-seconds: expected one argument" in capsys.readouterr().err


def test_after_the_separator_a_dash_value_is_left_to_argparse() -> None:
    """What follows a bare `--` is positional, even a word like `--x=--`."""
    import argparse

    from dlm_lsp.arguments import parse_arguments

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("files", nargs="*")
    args = parse_arguments(parser, ["--port=8001", "--", "--x=--"])
    assert (args.port, args.files) == (8001, ["--x=--"])


@pytest.mark.parametrize("argv", [
    ["fill", "x.py", "--settings", '{"steps": 2}', "--settings", '{"schedule": "cosine"}'],
    ["bench", "heldout", "--settings", '{"steps": 2}', "--settings", "{}"],
])
def test_settings_given_twice_are_refused(argv: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The second replaced the first without a word: its steps were not used."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    assert "--settings given twice: give one JSON object" in capsys.readouterr().err


def test_empty_settings_are_no_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dlm_lsp.cli import main

    source = tmp_path / "a.py"
    source.write_text("x = <FILL>\n")
    assert main(["fill", str(source), "--settings", ""]) == 2
    assert "--settings is not JSON" in capsys.readouterr().err


def test_status_shows_the_parameter_count_with_separators(monkeypatch, capsys):
    """`parameters  23075328`, where every other count we print reads 23,075,328."""
    from dlm_lsp import status as status_module
    from dlm_lsp.cli import main

    answer = {"model": "default", "loaded": True, "parameters": 23075328}
    monkeypatch.setattr(status_module, "query_server", lambda *args, **kwargs: answer)
    assert main(["status", "--server", "127.0.0.1:1"]) == 0
    rows = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
    assert ["parameters", "23,075,328"] in rows


def test_a_token_given_to_the_server_as_an_option_points_to_its_variable(capsys):
    """`status --server` takes `--token`; the server took the token as its command,
    "invalid choice: 'abc'"."""
    from dlm_lsp.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["--tcp", "127.0.0.1:1", "--token", "abc"])
    assert ended.value.code == 2
    assert ("the server reads the token its clients must send from the environment: "
            "DLM_LSP_TCP_TOKEN=... dlm-lsp --tcp HOST:PORT") in capsys.readouterr().err


def test_the_command_line_takes_its_signals_before_importing_the_protocol_library():
    """A Ctrl-C before `main` runs is Python's own traceback.  `dlm_lsp.cli` imported
    lsprotocol (for one error code), 0.35-0.9 s of every command's start on the 2-core VMs,
    so `train --tiny` stopped half a second in ended in a traceback from lsprotocol's
    types; only the command's own imports, which `main` guards, may be heavy."""
    probe = "import sys\nimport dlm_lsp.cli\nprint(sorted(m for m in ('lsprotocol', 'torch', " \
            "'pygls', 'transformers') if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout == "[]\n", out.stderr


def test_not_initialized_is_lsp_s_own_code():
    from lsprotocol import types

    from dlm_lsp.admission import NOT_INITIALIZED
    assert NOT_INITIALIZED == types.ErrorCodes.ServerNotInitialized
