"""`python -m dlm_lsp` whose fills are the text a test plants, when the test lets them end:
the server as it is with a model that writes a known fill (several lines, say) and one
that takes its time (a large model on a CPU), without such a model.

Each fill runs the real engine (the tiny test model), then its best candidate's text is
replaced by the text in the file named by DLM_TEST_FILL (the model's own candidates are
dropped), a fill the model ended before its span did (`ended`), as a whole planted answer
is.  Where DLM_TEST_FILL_PLACES is set, each fill the server asks
the engine for appends its place to the file it names: the text of the cursor's line up
to the cursor, as a JSON string.  Where DLM_TEST_FILL_GATE is set, a fill first appends
"begin" to the file named by DLM_TEST_FILL_LOG and waits until the gate file exists
(checking every 50 ms), stopping as the engine does when the server stops it (an edit, a
cancel); it appends "end" once it has its result, or "stopped" when it was stopped,
waiting or in the engine.  Where DLM_TEST_LOAD_GATE is set, each model load waits until
the gate file exists (a big model's load, under way for as long as the test likes).
Usage: python tests/scripted_fills.py [dlm-lsp arguments]; tests/test_emacs.py and
editors/vscode/e2e/run.sh --completion run it as an editor's server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's dlm_lsp

import dlm_lsp.engine as engine  # noqa: E402
from dlm_lsp.cli import main  # noqa: E402

_real_infill = engine.Engine.infill
_real_load_model = engine.load_model


def _note(line: str) -> None:
    with open(os.environ["DLM_TEST_FILL_LOG"], "a") as log:
        log.write(line + "\n")


def scripted_infill(self, req):
    places = os.environ.get("DLM_TEST_FILL_PLACES")
    if places is not None:
        line = req.text[req.text.rfind("\n", 0, req.start) + 1:req.start]
        with open(places, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")
    gate = os.environ.get("DLM_TEST_FILL_GATE")
    if gate is not None:
        _note("begin")
        while not os.path.exists(gate):
            if req.should_stop is not None and req.should_stop():
                _note("stopped")
                raise engine.Cancelled()
            time.sleep(0.05)
    try:
        result = _real_infill(self, req)
    except engine.Cancelled:
        if gate is not None:
            _note("stopped")
        raise
    # as planted, line breaks too: a fill for a `\r\n` file is sent with `\r\n` breaks
    with open(os.environ["DLM_TEST_FILL"], encoding="utf-8", newline="") as planted:
        text = planted.read()
    best = dataclasses.replace(result.candidates[0], text=text, valid=None, ended=True)
    if gate is not None:
        _note("end")
    return dataclasses.replace(result, candidates=[best])


def gated_load_model(*args, **kwargs):
    while not os.path.exists(os.environ["DLM_TEST_LOAD_GATE"]):
        time.sleep(0.05)
    return _real_load_model(*args, **kwargs)


if __name__ == "__main__":
    engine.Engine.infill = scripted_infill
    if os.environ.get("DLM_TEST_LOAD_GATE") is not None:
        engine.load_model = gated_load_model
    sys.exit(main(sys.argv[1:]))
