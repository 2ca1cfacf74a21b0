"""Settings at the edges of their ranges, through the real server: the cases of
benchmarks/settings_edges.py that found bugs, and a few edges that interact, each
checked as the sweep checks it (no internal error, no traceback in the log, an answer
within timeoutMs, a refused value warned about by name, every edit in its range and
for its version, and an ordinary fill afterwards)."""

from __future__ import annotations

import pytest
from benchmark_scripts import script
from rpc import free_port

edges = script("settings_edges")
Case = edges.Case


@pytest.fixture(scope="module")
def sweep(model_dir):
    running = edges.Sweep(str(model_dir), 60)
    yield running
    if running.server is not None:
        running.server.close()


@pytest.mark.parametrize("case", [
    # a "\r" marker made every CRLF line end a hole, its edit ending past its line
    Case({"holeMarker": "\r"}, marker="<FILL>", crlf=True),
    Case({"holeMarker": "(?P<a>"}, marker="(?P<a>"),  # a regex that does not compile
    Case({"holeMarker": "😀"}, marker="😀"),  # two UTF-16 units
    Case({"singleLineTokens": 4096, "maxSpanTokens": 1}),
    Case({"seed": (1 << 63) - 1, "temperature": 5}),
    Case({"candidates": 16, "batchRows": 1}),
    Case({"remask": 1, "remaskBelow": 1, "threshold": 1e-9, "maxPerStep": 1}),
    Case({"contextCache": True, "cacheWindow": 0, "cacheRefresh": 1, "maxContextTokens": 0}),
    Case({"timeoutMs": 1}),
    Case({"remoteToken": "€"}),
    Case({"length": 4096, "kind": "single-line", "seed": -(1 << 63)}, as_options=True),
    Case({"steps": 4097, "latencyMs": 0}, as_options=True),
], ids=lambda case: case.label)
def test_an_edge_value_is_answered_kept_within_its_range_or_said_to_be_refused(sweep, case):
    assert sweep.run(case).problems == []


def test_an_unreachable_service_with_the_most_retries_says_why_within_the_timeout(sweep):
    """remoteRetries 10 pause 256 s in all: every fill ran into timeoutMs (-32003)
    instead of saying the service cannot be reached (-32005)."""
    case = Case({"model": sweep.model, "backend": "remote", "remoteRetries": 10,
                 "remoteUrl": f"http://127.0.0.1:{free_port()}", "timeoutMs": 1000})
    outcome = sweep.run(case)
    assert outcome.problems == []
    assert {outcome.answers[kind] for kind in ("infill-cursor", "rewrite")} == {"error -32005"}
