"""`python -m dlm_lsp` whose model loads and step-cost calibrations wait for a gate: the
server as it is while a big checkpoint loads (minutes for a 7B one) or is timed (16 forward
passes: seconds to minutes), without a big checkpoint.

Each load appends "begin SPEC DEVICE (PRECISION, GRAPHS)" to the file named by
DLM_TEST_LOAD_LOG, waits until the file named by DLM_TEST_LOAD_GATE exists (checking every
50 ms), loads, and appends "end ..." likewise.  Each calibration appends "calibrate begin",
waits for DLM_TEST_CALIBRATION_GATE where that is set, and appends "calibrate end".
Usage: python tests/gated_load.py [dlm-lsp arguments].
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's dlm_lsp

import dlm_lsp.engine as engine  # noqa: E402
from dlm_lsp.cli import main  # noqa: E402

_real_load, _real_calibrate = engine.load_model, engine.calibrate


def _note(line: str) -> None:
    with open(os.environ["DLM_TEST_LOAD_LOG"], "a") as log:
        log.write(line + "\n")


def _wait_for(gate: str | None) -> None:
    while gate is not None and not os.path.exists(gate):
        time.sleep(0.05)


def gated_load(spec: str, device: str = "auto", *args, **kwargs):
    _note(f"begin {spec} {device} {args}")
    _wait_for(os.environ["DLM_TEST_LOAD_GATE"])
    model = _real_load(spec, device, *args, **kwargs)
    _note(f"end {spec} {device} {args}")
    return model


def gated_calibrate(*args, **kwargs):
    _note("calibrate begin")
    _wait_for(os.environ.get("DLM_TEST_CALIBRATION_GATE"))
    cost = _real_calibrate(*args, **kwargs)
    _note("calibrate end")
    return cost


if __name__ == "__main__":
    engine.load_model, engine.calibrate = gated_load, gated_calibrate
    sys.exit(main(sys.argv[1:]))
