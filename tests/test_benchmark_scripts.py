"""The helpers the scripts in benchmarks/ share (benchmarks/lsp_latency.py)."""

from __future__ import annotations

import pytest
from benchmark_scripts import script


def test_a_server_started_for_a_with_block_ends_with_it_even_when_the_block_fails(model_dir):
    """soak.py, ghost_text.py and document_size.py each closed their client and killed
    their server in a `finally` of their own; `stdio_server` is that one ending."""
    lsp_latency = script("lsp_latency")
    with pytest.raises(RuntimeError), lsp_latency.stdio_server(
            {"model": str(model_dir), "device": "cpu"}) as (proc, client):
        assert proc.poll() is None  # initialized: the server answered
        raise RuntimeError("the measurement failed")
    assert proc.poll() is not None  # ended and waited for: no server outlives the script
