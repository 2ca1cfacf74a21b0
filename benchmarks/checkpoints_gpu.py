"""Per-step latency of each published family's network, at its published size, on a GPU.

A denoising step is one call of the adapter's `logits` (dlm_lsp/models/hf.py): the
framed sequence through the transformers network with bidirectional attention,
the shift undone, the rows cast to float32.  This times that step for every
family with random bf16 weights of the published shape (Dream, Dream-Coder,
DreamOn and DiffuCoder share Qwen2.5-7B's; LLaDA is 8B; Open-dCoder is only
published at 0.5B) at 512 and 1024 tokens, batch 1 and 8, and the network's
forward alone beside it, so the cost of the float32 logits shows.  Each family
is also probed for bidirectional attention on the device, since a transformers
version that ignored `is_causal` would time the wrong model.

    PYTHONPATH=. python benchmarks/checkpoints_gpu.py --json checkpoints-h200.json

from the repository root: it needs torch, transformers, tokenizers and
safetensors, not the server's LSP or tree-sitter packages.  About a minute on
an H200 (five ~7B networks built in turn, 52 timed steps each).  Without CUDA it
skips (exit 0); `--tiny` runs the same code on tiny shapes, on the CPU when
there is no GPU, to check the script in seconds.  `--cpu` times the published
shapes on the CPU in the precision the server picks there (bf16 where the CPU has
native bf16, else float32): what a user without a GPU would wait.  A 7B network
needs ~15 GB of memory in bf16, ~30 GB in float32.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from dlm_lsp.arguments import positive
from dlm_lsp.bench.output import write_json
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.models.cache import CacheConfig
from dlm_lsp.models.checkpoint import Checkpoint
from dlm_lsp.models.hf import HFDiffusionModel, arch_config, attends_both_ways, instantiate
from dlm_lsp.models.hf_cache import HFContextCache
from dlm_lsp.models.registry import FAMILIES, Conventions
from dlm_lsp.models.tiny import resolve_precision

QWEN25_7B = {"model_type": "Dream", "hidden_size": 3584, "intermediate_size": 18944,
             "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
             "vocab_size": 152064, "rope_theta": 1e6, "rms_norm_eps": 1e-6,
             "max_position_embeddings": 131072, "tie_word_embeddings": False}
SHAPES = {  # config.json as published (the keys the loader reads)
    "dream": QWEN25_7B, "dreamon": QWEN25_7B, "diffucoder": QWEN25_7B,
    "open-dcoder": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
                    "num_hidden_layers": 24, "num_attention_heads": 14,
                    "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1e6,
                    "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
                    "tie_word_embeddings": True},
    "llada": {"model_type": "llada", "d_model": 4096, "n_heads": 32, "n_kv_heads": 32,
              "n_layers": 32, "mlp_hidden_size": 12288, "vocab_size": 126464,
              "embedding_size": 126464, "rope_theta": 5e5, "rms_norm_eps": 1e-5,
              "max_sequence_length": 4096, "weight_tying": False},
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
        "d_model": 64, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 128,
        "embedding_size": 1024}
# the published special ids: (mask, span end, before, after, expand)
TOKENS = {"dream": (151666, 151643, [151665], [], []),
          "dreamon": (151666, 151643, [151665], [151643], [151667]),
          "diffucoder": (151666, 151667, [], [], []),
          "open-dcoder": (151665, 151643, [], [], []),
          "llada": (126336, 126081, [126080], [], [])}


def build(family_name: str, tiny: bool, device: torch.device, dtype: torch.dtype):
    """The family's adapter over a random network of the published (or tiny) shape."""
    family = FAMILIES[family_name]
    shape = dict(SHAPES[family_name])
    if tiny:
        shape.update({k: v for k, v in TINY.items() if k in shape})
    config = arch_config(family, Checkpoint(Path(f"<{family_name}>"), shape))
    torch.manual_seed(0)
    module = instantiate(config, dtype, device, empty=False)
    vocab = config.vocab_size
    mask, end, before, after, expand = TOKENS[family_name]
    conv = Conventions(family, mask % vocab, end % vocab, before=[i % vocab for i in before],
                       after=[i % vocab for i in after],
                       expand_id=expand[0] % vocab if expand else None)
    precision = "bf16" if dtype == torch.bfloat16 else "fp32"
    return HFDiffusionModel(module, None, conv, family_name, device, precision, 4096, vocab)


def _timed(fn, device: torch.device, warmup: int, repeats: int) -> list[float]:
    """Milliseconds of each of `repeats` calls of fn, after `warmup` untimed ones."""
    times = []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(1000 * (time.perf_counter() - start))
    return times


def measure(model: HFDiffusionModel, contexts: list[int], batches: list[int], warmup: int,
            repeats: int, span: int = 32) -> list[dict]:
    """Step and forward-only latency at each (context, batch), context counting framing;
    and the engine's step for a `span`-token span without and with the context cache."""
    rows, extra = [], len(model.conventions.before) + len(model.conventions.after)
    for context in contexts:
        for batch in batches:
            ids = torch.randint(0, model.vocab_size, (batch, context - extra),
                                device=model.device)
            framed = model.frame(ids)
            with torch.no_grad():
                forward = _timed(lambda x=framed: model.module(input_ids=x, use_cache=False),
                                 model.device, warmup, repeats)
            step = _timed(lambda x=ids: model.logits(x), model.device, warmup, repeats)
            median = statistics.median(step)
            # the step the engine runs for a `span`-token span two thirds into the context:
            # the output head on the span's rows only, then with the context cache
            lo = (context - extra) * 2 // 3
            hi = lo + span
            heads = _timed(lambda x=ids, a=lo, b=hi: model.head(model.hidden(x)[:, a:b]),
                           model.device, warmup, repeats)
            cache = HFContextCache(model, lo, hi, CacheConfig(refresh=10**9, window=8))
            with torch.no_grad():
                cache(ids)  # the full pass that stores the context
            cached = _timed(lambda x=ids, c=cache: c(x), model.device, warmup, repeats)
            rows.append({"context": context, "batch": batch, "step_ms": round(median, 2),
                         "step_p90_ms": round(sorted(step)[int(0.9 * (len(step) - 1))], 2),
                         "forward_ms": round(statistics.median(forward), 2),
                         "tokens_per_s": round(batch * context / median * 1000),
                         "span": span, "span_head_ms": round(statistics.median(heads), 2),
                         "cached_ms": round(statistics.median(cached), 2),
                         "cache_speedup": round(statistics.median(heads)
                                                / statistics.median(cached), 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: checks the script")
    parser.add_argument("--cpu", action="store_true",
                        help="published shapes on the CPU, in the server's precision there")
    parser.add_argument("--families", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--contexts", nargs="+", type=positive, default=[512, 1024])
    parser.add_argument("--batches", nargs="+", type=positive, default=[1, 8])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=positive, default=10)
    parser.add_argument("--span", type=positive, default=32, help="span tokens of the cached step")
    parser.add_argument("--json", dest="json_out", metavar="OUT")
    args = parse_script_arguments(parser, argv)
    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.tiny and not args.cpu:
        print("checkpoints_gpu: no CUDA device here: skipped (--tiny checks the script on "
              "the CPU)")
        return 0
    device = torch.device("cuda" if cuda else "cpu")
    on_cpu_bf16 = args.cpu and resolve_precision("auto", device) == "bf16"
    dtype = torch.bfloat16 if cuda or on_cpu_bf16 else torch.float32
    import transformers

    machine = {"device": torch.cuda.get_device_name() if cuda else "cpu",
               "torch": torch.__version__, "transformers": transformers.__version__,
               "dtype": str(dtype).removeprefix("torch."), "tiny": args.tiny,
               "threads": torch.get_num_threads()}
    print(" ".join(f"{k}={v}" for k, v in machine.items()))
    print("| family | parameters | bidirectional | context | batch | step ms | p90 ms | "
          "forward ms | tokens/s | span step ms | cached ms | cache speedup |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    results, failed = [], False
    for name in args.families:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        model = build(name, args.tiny, device, dtype)
        both_ways = attends_both_ways(model.module, model.vocab_size, use_cache=False)
        failed |= not both_ways
        rows = measure(model, args.contexts, args.batches, args.warmup, args.repeats,
                       args.span)
        params = model.num_parameters()
        size = f"{params / 1e9:.2f}B" if params >= 1e8 else f"{params / 1e6:.2f}M"
        for row in rows:
            print(f"| {name} | {size} | {both_ways} | {row['context']} | "
                  f"{row['batch']} | {row['step_ms']} | {row['step_p90_ms']} | "
                  f"{row['forward_ms']} | {row['tokens_per_s']} | {row['span_head_ms']} | "
                  f"{row['cached_ms']} | {row['cache_speedup']}x |")
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        results.append({"family": name, "parameters": params, "bidirectional": both_ways,
                        "peak_gib": round(peak, 1) if peak else None, "rows": rows})
        del model
        if cuda:
            torch.cuda.empty_cache()
    if args.json_out:
        write_json(args.json_out, {"machine": machine, "families": results})
    if failed:
        print("attention stayed causal for some family: these timings are not of the "
              "diffusion model", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    run_script(main)
