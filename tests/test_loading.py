"""The real server while its model loads (seconds to minutes for a published checkpoint):
it goes on answering, and the model it ends up with is the one the settings ask for.

The server runs as tests/gated_load.py: each model load, and each timing of the model's
step cost, waits until the test lets it go.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from rpc import ServerProcess

URI = "file:///work/loading.py"
TEXT = "def area(w, h):\n    return \n"


@dataclass
class Gated:
    """The server, its gates (touch one to let the loads, or the calibrations, run) and its
    log: a 'begin SPEC DEVICE (PRECISION, GRAPHS)' and an 'end ...' line per load, a
    'calibrate begin' and a 'calibrate end' line per step-cost calibration."""

    server: ServerProcess
    load: Path
    calibration: Path
    log: Path

    def loads(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def gated(tmp_path: Path):
    load, calibration, log = (tmp_path / "load-gate", tmp_path / "calibration-gate",
                              tmp_path / "loads.log")
    server = ServerProcess(
        command=[sys.executable, str(Path(__file__).with_name("gated_load.py"))],
        env={"DLM_TEST_LOAD_GATE": str(load), "DLM_TEST_LOAD_LOG": str(log),
             "DLM_TEST_CALIBRATION_GATE": str(calibration)})
    gates = Gated(server, load, calibration, log)
    try:
        yield gates
    finally:
        gates.load.touch()
        gates.calibration.touch()
        gates.server.close()


def fill_params(**options) -> dict:
    return {"textDocument": {"uri": URI}, "options": options,
            "range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}}


def wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_a_settings_change_during_the_load_is_answered_at_once_and_loads_the_new_model(
        gated, model_dir):
    """A didChangeConfiguration that arrived during the load waited for it on the event
    loop, so nothing (dlm/status included) was answered until the load ended."""
    client = gated.server.client
    client.initialize({"model": str(model_dir), "device": "cpu", "precision": "fp32"})
    wait_until(gated.loads)  # the first load has begun, and waits
    client.notify("workspace/didChangeConfiguration", {"settings": {"dlm": {"precision": "bf16"}}})
    status = client.call("dlm/status", {}, timeout=5)["result"]
    assert status["loaded"] is False and status["loadError"] is None
    client.open(URI, TEXT)
    fill = client.request("dlm/infill", fill_params(length=2, steps=2))
    gated.load.touch()
    assert "result" in client.response(fill)
    assert client.call("dlm/status", {})["result"]["loaded"] is True
    # the load begun with the old settings was done again with the new ones, never two at once
    loads = gated.loads()
    assert [line.split()[0] for line in loads] == ["begin", "end", "begin", "end"], loads
    assert "'fp32'" in loads[0] and all("'bf16'" in line for line in loads[2:]), loads


def test_status_is_answered_while_the_step_cost_is_calibrated(gated, model_dir):
    """A latency target times the model's forward passes on first use (16 of them, minutes
    for a 7B model on a CPU); that held the lock dlm/status takes on the event loop."""
    gated.load.touch()
    client = gated.server.client
    client.initialize({"model": str(model_dir), "device": "cpu"})
    client.open(URI, TEXT)
    fill = client.request("dlm/infill", fill_params(length=2, latencyMs=60000))
    wait_until(lambda: "calibrate begin" in gated.loads())
    status = client.call("dlm/status", {}, timeout=5)["result"]
    assert status["loaded"] is True and status["stepMs"] is None  # not timed yet
    gated.calibration.touch()
    assert client.response(fill)["result"]["stats"]["predictedMs"] > 0
    assert client.call("dlm/status", {})["result"]["stepMs"] > 0


def test_a_load_asked_for_during_the_load_or_after_it_is_shown_once(gated, model_dir):
    """`dlm/retryLoad` during the first load showed a second progress bar for it (and a
    second "ready" line), and after it one for no load at all: it answers when the load
    under way ends, and with the model loaded, at once, showing nothing more."""
    client = gated.server.client
    client.call("initialize", {"processId": None, "rootUri": None,
                               "capabilities": {"window": {"workDoneProgress": True}},
                               "initializationOptions": {"model": str(model_dir)}})
    client.notify("initialized", {})
    wait_until(gated.loads)  # the first load has begun, and waits
    retry = client.request("dlm/retryLoad", {})
    time.sleep(0.5)
    assert not any(m.get("id") == retry for m in client.messages)  # not before the load ends
    gated.load.touch()
    assert client.response(retry)["result"]["loaded"] is True
    assert client.call("dlm/retryLoad", {})["result"]["loaded"] is True
    assert len([line for line in gated.loads() if line.startswith("begin")]) == 1

    def shown(method: str, kind: str | None = None) -> list[dict]:
        return [m for m in client.messages if m.get("method") == method
                and (kind is None or m["params"]["value"]["kind"] == kind)]
    assert len(shown("window/workDoneProgress/create")) == 1
    assert len(shown("$/progress", "begin")) == len(shown("$/progress", "end")) == 1
    assert len([m for m in shown("window/logMessage")
                if "ready on" in m["params"]["message"]]) == 1
