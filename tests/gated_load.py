"""`python -m dlm_lsp` whose model loads wait for a gate: the server as it is while a big
checkpoint loads (minutes for a 7B one), without a big checkpoint.

Each load appends "begin SPEC DEVICE" to the file named by DLM_TEST_LOAD_LOG, waits until
the file named by DLM_TEST_LOAD_GATE exists (checking every 50 ms), loads, and appends
"end SPEC DEVICE".  Usage: python tests/gated_load.py [dlm-lsp arguments].
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's dlm_lsp

import dlm_lsp.engine as engine  # noqa: E402
from dlm_lsp.cli import main  # noqa: E402

_real_load = engine.load_model


def _note(line: str) -> None:
    with open(os.environ["DLM_TEST_LOAD_LOG"], "a") as log:
        log.write(line + "\n")


def gated_load(spec: str, device: str = "auto", *args, **kwargs):
    _note(f"begin {spec} {device} {args}")
    while not os.path.exists(os.environ["DLM_TEST_LOAD_GATE"]):
        time.sleep(0.05)
    model = _real_load(spec, device, *args, **kwargs)
    _note(f"end {spec} {device} {args}")
    return model


if __name__ == "__main__":
    engine.load_model = gated_load
    sys.exit(main(sys.argv[1:]))
