"""The sampler's configuration from the server's settings and a request's options.

Apart from the engine because training measures fills too (`training.fill_probe`): the
GPU machine that trains has torch but no tree-sitter, which the engine's checks import,
and a probe built with its own idea of the server's defaults would drift from them.
"""

from __future__ import annotations

from dataclasses import fields, replace

from dlm_lsp.config import InfillOptions, SamplingControls, ServerConfig, setting
from dlm_lsp.sampler import SamplerConfig

CANDIDATE_TEMPERATURE = 0.8  # extra candidates sample at least this hot, or they would all agree


def sampler_config(cfg: ServerConfig, opt: InfillOptions, steps: int,
                   strategy: str, single_line: bool = False) -> SamplerConfig:
    """Merge request options over server settings into the sampler's configuration."""
    n_cand = opt.candidates or cfg.candidates
    temp = setting(opt, cfg, "temperature")
    temps = (temp,) + (max(temp, CANDIDATE_TEMPERATURE),) * (n_cand - 1)
    sampler_fields = {f.name for f in fields(SamplerConfig)}
    controls = {f.name: setting(opt, cfg, f.name) for f in fields(SamplingControls)
                if f.name in sampler_fields}
    if strategy == "left-to-right" and opt.early_stop is None:
        # the autoregressive baseline spends one step per token: the server's early stop
        # (on by default) is for the parallel strategies; a request may still ask for it
        controls["early_stop"] = False
    # a length the client gave is the fill's (`exact_length`); the policy's is room only
    end_early = opt.length is None or not setting(opt, cfg, "exact_length")
    sampler = SamplerConfig(steps=steps, strategy=strategy,
                            schedule=setting(opt, cfg, "schedule"), temperatures=temps,
                            max_tokens=cfg.max_span_tokens, single_line=single_line,
                            end_early=end_early,
                            **{k: v for k, v in controls.items() if v is not None})
    return strictly_left_to_right(sampler, steps) if strategy == "left-to-right" else sampler


def strictly_left_to_right(sampler: SamplerConfig, steps: int) -> SamplerConfig:
    """`sampler` run left to right, one token a step over a budget of a step per token: the
    baseline and the retry.  The controls that commit several positions in a step (the
    schedule's curve, a threshold) or take commits back (re-masking) are the parallel
    strategies'; on this run they would break its order and its budget."""
    return replace(sampler, strategy="left-to-right", steps=steps, schedule="linear",
                   threshold=None, remask=0.0)
