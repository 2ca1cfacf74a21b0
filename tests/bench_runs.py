"""Each `dlm-lsp bench` command that takes `--settings`, with the options of its smallest
run: a test of a refusal stays short if the refusal is missing and the run goes on."""

from __future__ import annotations

SMALLEST = {
    "humaneval": ["--limit", "1"],
    "heldout": ["--limit", "1"],
    "syntax": ["--limit", "1"],
    "strategies": ["--limit", "1"],
    "sweep": ["--limit", "1", "--kinds", "single", "--steps", "1", "--strategies",
              "confidence", "--no-ltr"],
    "latency": ["--lengths", "4", "--steps", "1", "--repeats", "1"],
    "throughput": ["--concurrency", "1", "--fills-per-thread", "1", "--steps", "1",
                   "--tokens", "4", "--modes", "alone"],
    "samples": ["--limit", "1", "--steps", "1"],
}
CURVES = ("sweep", "latency", "throughput", "samples")
