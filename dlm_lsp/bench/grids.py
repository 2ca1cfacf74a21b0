"""The fixed grids the curve benchmarks measure on.

Kept apart from the benchmarks (which import the engine, and so torch) so the
command line can offer them as defaults and choices without loading torch.
"""

from __future__ import annotations

from dlm_lsp.config import STRATEGIES

KINDS = ("single-line", "multi-line")  # HumanEval-Infilling task kinds of the sweep
BUDGETS = (1, 2, 4, 8, 16, 32)  # step budgets of the sweep
LEFT_TO_RIGHT = "left-to-right"
DIFFUSION_STRATEGIES = tuple(s for s in STRATEGIES if s != LEFT_TO_RIGHT)
LENGTHS = (8, 16, 32, 64, 128, 256)  # span lengths (tokens) of the latency bench
CONCURRENCY = (1, 2, 4, 8, 16)  # concurrent requests of the throughput bench
MODES = {"batched": 16, "alone": 0}  # throughput modes -> the engine's batch_rows
