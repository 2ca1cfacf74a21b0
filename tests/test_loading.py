"""The real server while its model loads (seconds to minutes for a published checkpoint):
it goes on answering, and the model it ends up with is the one the settings ask for.

The server runs as tests/gated_load.py: each model load waits until the test lets it go.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from rpc import ServerProcess

URI = "file:///work/loading.py"
TEXT = "def area(w, h):\n    return \n"


@pytest.fixture
def gated(tmp_path: Path):
    """(server, gate, load log): touch `gate` to let the loads run; the log has a
    'begin SPEC DEVICE (PRECISION, GRAPHS)' and an 'end ...' line per load."""
    gate, log = tmp_path / "gate", tmp_path / "loads.log"
    server = ServerProcess(command=[sys.executable, str(Path(__file__).with_name("gated_load.py"))],
                           env={"DLM_TEST_LOAD_GATE": str(gate), "DLM_TEST_LOAD_LOG": str(log)})
    try:
        yield server, gate, log
    finally:
        gate.touch()
        server.close()


def load_log(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_a_settings_change_during_the_load_is_answered_at_once_and_loads_the_new_model(
        gated, model_dir):
    """A didChangeConfiguration that arrived during the load waited for it on the event
    loop, so nothing (dlm/status included) was answered until the load ended."""
    server, gate, log = gated
    client = server.client
    client.initialize({"model": str(model_dir), "device": "cpu"})
    wait_until(lambda: load_log(log))  # the first load has begun, and waits
    client.notify("workspace/didChangeConfiguration", {"settings": {"dlm": {"precision": "fp32"}}})
    status = client.call("dlm/status", {}, timeout=5)["result"]
    assert status["loaded"] is False and status["loadError"] is None
    client.open(URI, TEXT)
    fill = client.request("dlm/infill", {"textDocument": {"uri": URI},
                                         "range": {"start": {"line": 1, "character": 11},
                                                   "end": {"line": 1, "character": 11}},
                                         "options": {"length": 2, "steps": 2}})
    gate.touch()
    assert "result" in client.response(fill)
    assert client.call("dlm/status", {})["result"]["loaded"] is True
    # the load begun with the old settings was done again with the new ones, never two at once
    loads = load_log(log)
    assert [line.split()[0] for line in loads] == ["begin", "end", "begin", "end"], loads
    assert "'auto'" in loads[0] and all("'fp32'" in line for line in loads[2:]), loads
