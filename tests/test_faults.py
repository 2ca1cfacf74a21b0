"""Faults: a broken model, running out of memory, a client that vanishes, SIGTERM.

Each test shows the clear error (or the clean exit) and that the server survives
where it should.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import threading
import time
from dataclasses import replace

import pytest
import torch
from rpc import ServerProcess, error_code

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest, OutOfMemory
from dlm_lsp.models import ModelLoadError, load_model

URI = "file:///work/faults.py"
TEXT = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    \n"
CURSOR = {"start": {"line": 4, "character": 4}, "end": {"line": 4, "character": 4}}


def infill_params(**options) -> dict:
    return {"textDocument": {"uri": URI}, "range": CURSOR, "options": {"length": 3, **options}}


def slow_infill(client, token: str = "slow") -> int:
    """A fill of many steps that reports progress, so a test can act while it runs."""
    return client.request("dlm/infill", {**infill_params(length=400, steps=400),
                                         "workDoneToken": token})


def progress_seen(client, token: str = "slow") -> None:
    client.wait(lambda ms: sum(m.get("method") == "$/progress"
                               and m["params"]["token"] == token for m in ms) >= 3)


# -- a broken model -------------------------------------------------------------------------

def _truncate(directory):
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def _corrupt_config(directory):
    (directory / "config.json").write_text('{"model_type": "dlm-tiny", "d_model": ')


def _config_not_an_object(directory):
    (directory / "config.json").write_text("[]")


def _junk_weights(directory):
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{junk!!}")


def _no_tokenizer(directory):
    (directory / "tokenizer.json").unlink()


@pytest.mark.parametrize("damage, reason", [
    (_truncate, "header"), (_corrupt_config, "config.json"), (_junk_weights, "header"),
    (_no_tokenizer, "no tokenizer.json"),
    (_config_not_an_object, "config.json is not a JSON object")])
def test_a_damaged_model_fails_to_load_with_a_clear_error(model_dir, tmp_path, damage, reason):
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    damage(broken)
    with pytest.raises(ModelLoadError) as err:
        load_model(str(broken), "cpu")
    assert str(broken) in str(err.value) and reason in str(err.value)


def test_a_partial_copy_of_a_sharded_model_names_every_file_it_lacks(tmp_path):
    """A copy of the shipped model without its tokenizer and a shard said "no
    tokenizer.json" alone, and without the shard alone "No such file or directory"."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    partial = tmp_path / "partial"
    shutil.copytree(DEFAULT_MODEL_DIR, partial)
    (partial / "tokenizer.json").unlink()
    shards = sorted(partial.glob("model-*.safetensors"))
    shards[1].unlink()
    with pytest.raises(ModelLoadError) as err:
        load_model(str(partial), "cpu")
    assert str(err.value).endswith(
        f": no tokenizer.json, no {shards[1].name} (1 of the {len(shards)} shards the index "
        "lists)")


@pytest.mark.parametrize(("change", "says"), [
    ({"n_heads": 7}, "should split into n_heads 7 heads of an even width"),
    ({"n_heads": 32}, "should split into n_heads 32 heads of an even width"),  # of width 3
    ({"n_layers": 0}, "n_layers should be a positive whole number, not 0"),
    ({"d_model": "96"}, "d_model should be a positive whole number, not '96'")])
def test_a_config_whose_shape_cannot_run_fails_to_load(model_dir, tmp_path, change, says):
    """`n_heads` 7 beside a `d_model` it does not divide loaded (the weights' shapes do
    not show the heads): `models check` said ok, and every fill was a RuntimeError."""
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        load_model(str(broken), "cpu")


def test_a_missing_model_fails_to_load_with_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(str(tmp_path / "absent"), "cpu")


def test_a_damaged_model_is_a_clear_error_and_the_server_reloads_once_it_is_fixed(
        model_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    _truncate(broken)
    server = ServerProcess()
    try:
        client = server.client
        client.initialize({"model": str(broken)})
        client.open(URI, TEXT)
        reply = client.call("dlm/infill", infill_params())
        assert error_code(reply) == -32001
        assert str(broken) in reply["error"]["message"]
        status = client.call("dlm/status", {})["result"]  # still serving, and says why not
        assert status["loaded"] is False and str(broken) in status["loadError"]
        assert status["loadRetryS"] is not None  # and when it is tried again
        again = client.call("dlm/infill", infill_params())  # within the wait: the same error
        assert again["error"] == reply["error"]
        client.notify("workspace/didChangeConfiguration",
                      {"settings": {"dlm": {"model": str(model_dir)}}})
        status = client.call("dlm/status", {})["result"]
        assert status["loadError"] is None and status["loadRetryS"] is None  # a new model
        assert "result" in client.call("dlm/infill", infill_params())
        assert client.call("dlm/status", {})["result"]["loaded"] is True
    finally:
        server.close()


# -- out of memory ------------------------------------------------------------------------------

def engine_with_faults(monkeypatch, model_dir, faults: str) -> Engine:
    monkeypatch.setenv("DLM_LSP_FAULTS", faults)
    return Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0,
                               fallback=False))


def request() -> InfillRequest:
    return InfillRequest(TEXT, len(TEXT) - 1, len(TEXT) - 1, "python", URI,
                         InfillOptions(length=3, steps=2))


def test_out_of_memory_once_is_retried_with_a_smaller_batch_and_said(monkeypatch, model_dir):
    engine = engine_with_faults(monkeypatch, model_dir, "oom-first-try")
    result = engine.infill(request())
    assert result.candidates
    assert engine.batcher().config.max_rows == 8  # half of the default 16, from now on
    assert any("8 rows per forward pass" in notice for notice in engine.notices)


def test_out_of_memory_on_a_gpu_falls_back_to_the_cpu_and_says_so(monkeypatch, model_dir):
    engine = engine_with_faults(monkeypatch, model_dir, "oom-gpu")
    result = engine.infill(request())  # a smaller batch, then the CPU
    assert result.candidates and engine.model.device.type == "cpu"
    notices = list(engine.notices)
    assert len(notices) == 2 and "runs on the CPU" in notices[1]
    engine.reconfigure(ServerConfig(model=str(model_dir), device="auto"))
    assert engine.status()["loaded"] is False  # a new device setting tries again from scratch


@pytest.mark.parametrize("change", [{"device": "auto"}, {"precision": "bf16"}])
def test_after_a_fallback_to_the_cpu_any_change_of_a_model_setting_tries_the_gpu_again(
        monkeypatch, model_dir, cuda_machine, change):
    """"auto" is the same GPU as "cuda" here, and bf16 is what precision "auto" is on it: a
    settings change that only says so loads no other model, but after a fallback it is the
    user asking for the GPU again: the fallback ends with a load on it.  A change of a fill
    setting keeps the fallback.  The CPU computes bf16 natively, so that "bf16" is what the
    fallback runs in too: it ends even so."""
    from dlm_lsp.models import tiny

    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setenv("DLM_LSP_FAULTS", "oom-gpu")
    config = ServerConfig(model=str(model_dir), device="cuda", repair_rounds=0, fallback=False)
    engine = Engine(config)
    engine.model  # noqa: B018 - loaded on the GPU, which then runs out of memory
    engine.infill(request())
    assert cuda_machine == [("cuda", True), ("cpu", True)]
    assert not engine.reconfigure(replace(config, seed=1))
    assert engine.status()["loaded"] is True and engine.status()["device"] == "cpu"
    assert engine.reconfigure(replace(config, **change))
    engine.model  # noqa: B018
    assert cuda_machine[-1] == (change.get("device", "cuda"), True)


def test_after_a_fallback_to_the_cpu_a_device_setting_of_cpu_keeps_the_model(
        monkeypatch, model_dir, cuda_machine):
    """The user asks for the model where it runs: it was loaded on the CPU again (seconds
    to minutes for a big checkpoint), and the load shown.  Its fills go on there, and
    a later change tries the GPU again as after any fallback."""
    monkeypatch.setenv("DLM_LSP_FAULTS", "oom-gpu")
    config = ServerConfig(model=str(model_dir), device="cuda", repair_rounds=0, fallback=False)
    engine = Engine(config)
    engine.model  # noqa: B018 - loaded on the GPU, which then runs out of memory
    engine.infill(request())
    fell_back = engine.model
    on_the_cpu = replace(config, device="cpu")
    assert not engine.reconfigure(on_the_cpu)
    assert engine.model is fell_back and engine.infill(request()).candidates
    assert not engine.reconfigure(replace(on_the_cpu, cuda_graphs=False))  # none on a CPU
    assert engine.model is fell_back
    assert cuda_machine == [("cuda", True), ("cpu", True)]
    assert engine.reconfigure(config)
    engine.model  # noqa: B018
    assert cuda_machine[-1] == ("cuda", True)
    engine.close()


def _together(fill, count: int) -> list:
    """`fill()` from `count` threads at once; what each returned or raised."""
    out: list = [None] * count

    def one(i: int) -> None:
        try:
            out[i] = fill()
        except Exception as exc:  # noqa: BLE001 -- the test looks at it
            out[i] = exc
    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def test_fills_that_run_out_of_memory_in_one_shared_pass_halve_the_rows_once(model_dir):
    """Fills share a forward pass that runs out of memory: the rows a pass are halved once
    (16 to 8), and each fill is tried again.  Each fill halved them: four took 16 to 1,
    for as long as the model stayed loaded, and the user was told four times."""
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0,
                                 fallback=False, reuse_fills=False,
                                 context_cache=False))  # shared: a cached fill runs alone
    model, batcher, fills = engine.model, engine.batcher(), 4
    real_hidden, real_run = model.hidden, batcher.run
    arrived, failed = threading.Semaphore(0), threading.Event()

    def run(state, should_stop=None):
        arrived.release()
        return real_run(state, should_stop)

    def short_of_memory(ids):
        if not failed.is_set():
            if ids.shape[0] == 1:  # the first fill's first pass waits for the others
                for _ in range(fills):
                    arrived.acquire(timeout=10)
            else:  # the first pass they share
                failed.set()
                raise torch.OutOfMemoryError("CUDA out of memory (a test's)")
        return real_hidden(ids)
    model.hidden, batcher.run = short_of_memory, run
    try:
        results = _together(lambda: engine.infill(request()), fills)
        rows = engine.batcher().config.max_rows
    finally:
        del model.hidden
        engine.close()
    assert failed.is_set() and all(r.candidates for r in results), results
    assert rows == 8
    assert [n for n in engine.notices if "rows per forward pass" in n] == [
        "out of memory: now at most 8 rows per forward pass (setting batchRows)"]


def test_a_fill_out_of_memory_on_a_gpu_that_another_fill_left_is_tried_on_the_cpu(
        monkeypatch, model_dir):
    """Two fills run out of memory on the GPU together, twice: the first to come back moves
    the model to the CPU, and the other is tried again there too.  It was answered "out of
    memory" with the model already on the CPU."""
    engine = engine_with_faults(monkeypatch, model_dir, "oom-gpu")
    real, both = engine._infill, threading.Barrier(2, timeout=10)

    def on_a_small_gpu(req, began):
        if engine._fallback_device is None:  # both tries fail before either falls back
            both.wait()
            raise torch.OutOfMemoryError("CUDA out of memory (a test's)")
        return real(req, began)
    monkeypatch.setattr(engine, "_infill", on_a_small_gpu)
    results = _together(lambda: engine.infill(request()), 2)
    assert [type(r).__name__ for r in results] == ["InfillResult", "InfillResult"], results
    assert engine.model.device.type == "cpu"
    assert [n for n in engine.notices if "runs on the CPU" in n] != []


def test_out_of_memory_everywhere_is_a_clear_error_naming_what_was_tried(monkeypatch,
                                                                          model_dir):
    engine = engine_with_faults(monkeypatch, model_dir, "oom")
    with pytest.raises(OutOfMemory, match="out of memory.*tried again with a smaller batch"):
        engine.infill(request())


def test_running_out_of_memory_on_a_gpu_is_shown_to_the_user_and_the_fill_succeeds(
        model_dir):
    server = ServerProcess(env={"DLM_LSP_FAULTS": "oom-gpu"})
    try:
        client = server.client
        client.initialize({"model": str(model_dir)})
        client.open(URI, TEXT)
        assert "result" in client.call("dlm/infill", infill_params())
        assert any("runs on the CPU" in text for text in client.shown())
    finally:
        server.close()


# -- the client goes away, the process is told to stop ---------------------------------------

@pytest.fixture
def serving(model_dir):
    """A server with a document open, for tests that end it."""
    server = ServerProcess()
    server.client.initialize({"model": str(model_dir), "repairRounds": 0, "fallback": False})
    server.client.open(URI, TEXT)
    yield server
    server.close()


def test_a_client_that_disconnects_mid_fill_lets_the_server_exit_at_once(serving):
    slow_infill(serving.client)
    progress_seen(serving.client)
    began = time.monotonic()
    serving.hang_up()
    assert serving.wait(timeout=10) == 0
    assert time.monotonic() - began < 5


def test_sigterm_during_a_fill_answers_it_and_exits_with_code_0(serving):
    client = serving.client
    fill = slow_infill(client)
    progress_seen(client)
    serving.signal(signal.SIGTERM)
    reply = client.response(fill, timeout=10)
    assert error_code(reply) == -32800 and "terminating" in reply["error"]["message"]
    assert serving.wait(timeout=10) == 0


def test_ctrl_c_of_an_idle_server_is_one_plain_line_not_a_logged_warning(serving):
    """A normal stop printed "WARNING:dlm_lsp.transport:signal: stopping 0 fills and
    exiting", Python's raw logging format at warning level."""
    serving.signal(signal.SIGINT)
    assert serving.wait(timeout=10) == 0
    assert serving.log().splitlines() == ["dlm-lsp: stopped by SIGINT, exiting"]


def test_a_second_signal_while_the_first_winds_down_is_the_same_stop_said_once(serving):
    """`timeout -s INT` delivers its signal twice: the line came twice."""
    assert "result" in serving.client.call("dlm/status", {})  # serving, the signals heeded
    serving.signal(signal.SIGINT)
    time.sleep(0.01)
    serving.signal(signal.SIGINT)
    assert serving.wait(timeout=10) == 0
    assert serving.log().splitlines() == ["dlm-lsp: stopped by SIGINT, exiting"]


def test_a_signal_during_a_fill_says_the_fill_is_answered_before_the_exit(serving):
    fill = slow_infill(serving.client)
    progress_seen(serving.client)
    serving.signal(signal.SIGTERM)
    serving.client.response(fill, timeout=10)
    assert serving.wait(timeout=10) == 0
    assert serving.log().splitlines() == [
        "dlm-lsp: stopped by SIGTERM; answering the 1 fill in flight, then exiting"]


def test_a_fill_dropped_for_an_edit_is_answered_without_a_traceback_in_the_log(serving):
    client = serving.client
    fill = slow_infill(client)
    progress_seen(client)
    client.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2},
                                             "contentChanges": [{"text": TEXT + "\n"}]})
    assert error_code(client.response(fill, timeout=10)) == -32801
    assert "result" in client.call("shutdown")
    client.notify("exit", None)
    assert serving.wait(timeout=10) == 0
    assert "Traceback" not in serving.log()  # editors drop most requests: no noise


def test_shutdown_during_a_fill_cancels_it_and_exit_ends_the_process(serving):
    """`shutdown` stops the fills in flight at their next step and pygls cancels their
    requests: each is answered -32800 saying why (pygls said "Request with id N is
    canceled"), not an internal error, and the `exit` that follows ends the process with
    code 0."""
    client = serving.client
    fill = slow_infill(client)
    progress_seen(client)
    assert "result" in client.call("shutdown")
    reply = client.response(fill, timeout=10)
    assert error_code(reply) == -32800
    assert reply["error"]["message"] == "fill stopped: the server is shutting down"
    client.notify("exit", None)
    assert serving.wait(timeout=10) == 0
    assert "Traceback" not in serving.log()


def test_a_fill_the_client_cancels_is_answered_that_the_client_cancelled_it(serving):
    """`$/cancelRequest` is answered -32800 saying who stopped the fill, as a cancel of its
    progress is (pygls said "Request with id N is canceled"), and not that the server is
    shutting down; the server serves on."""
    client = serving.client
    fill = slow_infill(client)
    progress_seen(client)
    client.notify("$/cancelRequest", {"id": fill})
    reply = client.response(fill, timeout=10)
    assert error_code(reply) == -32800
    assert reply["error"]["message"] == "fill stopped: cancelled by the client"
    assert "result" in client.call("dlm/infill", infill_params())


def test_a_fill_under_way_when_the_backend_switches_away_from_local_ends_with_its_fill(
        serving):
    """Switching `backend` closes the local engine (Engine.close); a fill it was running
    ends on its model and is answered with its fill.  Its batching worker was stopped,
    which cancelled the fill: the client got -32800 "fill stopped: " with no reason."""
    client = serving.client
    fill = client.request("dlm/infill", {**infill_params(length=40, steps=40),
                                         "workDoneToken": "switch"})
    progress_seen(client, "switch")
    client.notify("workspace/didChangeConfiguration", {"settings": {"dlm": {
        "backend": "remote", "remoteUrl": "http://127.0.0.1:9"}}})
    reply = client.response(fill, timeout=30)
    assert "result" in reply, reply
    assert reply["result"]["stats"]["steps"] > 3  # it went on past the switch
    assert "Traceback" not in serving.log()


def test_exit_after_shutdown_ends_the_process_with_code_0_even_with_stdin_open(serving):
    client = serving.client
    assert "result" in client.call("shutdown")
    reply = client.call("dlm/status", {})  # after shutdown: refused, not ignored
    assert error_code(reply) == -32600 and "shutting down" in reply["error"]["message"]
    client.notify("exit", None)
    assert serving.wait(timeout=10) == 0



def test_before_initialize_requests_are_refused_and_notifications_dropped(model_dir):
    """LSP's order: a request before `initialize` is "server not initialized" (-32002),
    not an internal error with a traceback; a notification then is dropped."""
    server = ServerProcess()
    try:
        client = server.client
        reply = client.call("dlm/status", {})
        assert error_code(reply) == -32002 and "before initialize" in reply["error"]["message"]
        client.open(URI, TEXT)  # dropped: the document is not kept
        client.initialize({"model": str(model_dir)})
        status = client.call("dlm/status", {})["result"]
        assert status["openDocuments"] == 0
        assert "Traceback" not in server.log()
    finally:
        server.close()


def test_a_second_initialize_is_refused_and_changes_nothing(serving, model_dir):
    client = serving.client
    reply = client.call("initialize", {"capabilities": {}, "processId": None,
                                       "initializationOptions": {"model": "/nonexistent"}})
    assert error_code(reply) == -32600 and "already" in reply["error"]["message"]
    assert client.call("dlm/status", {})["result"]["model"] == str(model_dir)


def test_a_message_with_unreadable_params_is_logged_in_one_line(serving):
    """Not pygls' ERROR with a cattrs traceback of dozens of lines per message."""
    client = serving.client
    client.notify("$/cancelRequest", None)
    assert "result" in client.call("dlm/status", {})
    log = serving.log()
    assert "invalid params for $/cancelRequest" in log
    assert "Traceback" not in log and "Unable to deserialize" not in log


# -- an editor that refuses a command's edit, or never answers it -----------------------------

def _holes_server(model_dir, answer, command=None) -> ServerProcess:
    """A server with a document of one hole open, whose client answers each
    `workspace/applyEdit` with `answer(message)`: a reply's members, or None for none."""
    server = ServerProcess(**({"command": command} if command else {}))
    client = server.client

    def reply(message: dict) -> None:
        if message.get("method") == "workspace/applyEdit":
            members = answer(message)
            if members is not None:
                client.send({"jsonrpc": "2.0", "id": message["id"], **members})
    client._answer = reply
    client.initialize({"model": str(model_dir), "repairRounds": 0, "fallback": False})
    client.open(URI, "x = <FILL>\n")
    return server


def _fill_holes(server: ServerProcess) -> dict:
    """The result of dlm.fillHoles on the document of `_holes_server` (closed after), and
    the jobs in flight once it came (`jobs_after`)."""
    try:
        reply = server.client.call("workspace/executeCommand", {
            "command": "dlm.fillHoles", "arguments": [URI]}, timeout=60)
        status = server.client.call("dlm/status", {})["result"]
        return {**reply["result"], "jobs_after": status["jobsInFlight"]}
    finally:
        server.close()


def test_an_edit_the_editor_answers_with_an_error_is_said_to_be_refused(model_dir):
    """eglot answers an edit for a version its buffer has left with an error; the command
    said "whether it applied it is not known" of an edit that was refused."""
    result = _fill_holes(_holes_server(model_dir, lambda message: {"error": {
        "code": -32001, "message": "Edits on 'faults.py' require version 1, you have 2"}}))
    assert result["applied"] is False
    assert result["message"] == ("the editor refused the edit (Edits on 'faults.py' require "
                                 "version 1, you have 2)")


def test_an_edit_the_editor_never_answers_is_given_up_and_its_command_ends(model_dir):
    """eglot asks the user before it applies an edit, and its prompt goes unanswered with
    its own 10 s timeout: the command waited for good, a job in flight for as long as the
    server ran.  It waits EDIT_ANSWER_S (1 s here), then ends saying why."""
    import sys

    patched = [sys.executable, "-c", "import sys; import dlm_lsp.server as s; "
               "s.EDIT_ANSWER_S = 1.0; from dlm_lsp.cli import main; sys.exit(main([]))"]
    result = _fill_holes(_holes_server(model_dir, lambda message: None, command=patched))
    assert result["applied"] is False
    assert result["message"] == (
        "the editor did not answer the edit in 1 s (a prompt left open, or one the editor "
        "closed when it stopped waiting for the command, as eglot does at its 10 s); no "
        "longer waited for")
    assert result["jobs_after"] == 0  # the command's job ended with it
