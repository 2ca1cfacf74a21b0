"""Train a tiny denoiser for a wall-clock budget and save it where the server looks.

The budget is in seconds, not steps, because the same command has to produce a
usable model in twenty minutes on a laptop CPU and a much better one in an hour
on a GPU; the learning-rate schedule is therefore a function of elapsed time.
A run either starts from scratch (training a tokenizer first) or warm-starts
from a saved model directory, keeping its tokenizer and shape so ids stay valid.

Run as `python -m dlm_lsp.training.train --seconds 1200`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.tiny import TinyConfig, TinyDenoiser, TinyModel, save_tiny
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN, Tokenizer
from dlm_lsp.training.data import (
    Batch,
    Corpus,
    RowConfig,
    RowSampler,
    SourceConfig,
    collect_sources,
    encode_stream,
    line_start_flags,
    train_tokenizer,
)
from dlm_lsp.training.objective import autocast_for, evaluate, masked_diffusion_loss

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "weights" / "default"
EVAL_SEED = 1234  # held-out rows and masks are drawn from this seed in every run


class TrainingError(Exception):
    """A run cannot start as configured; the message says what to change."""


@dataclass
class TrainConfig:
    """Everything a training run needs; the defaults produce the shipped model."""

    out_dir: Path = DEFAULT_OUT
    init_from: Path | None = None  # saved model directory to keep training (warm restart)
    seconds: float = 1200.0  # wall-clock budget of the training loop
    device: str = "auto"  # "auto" picks cuda, then mps, then cpu
    # Model shape; on a warm restart the checkpoint's own shape is used instead.
    vocab_size: int = 8192
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    max_length: int = 512
    # Rows and optimisation.
    seq_len: int = 256
    batch_size: int = 32
    lr: float = 1e-3
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio at the end of the budget
    warmup_steps: int = 100  # warmup ends after this many steps ...
    warmup_fraction: float = 0.05  # ... or this fraction of the budget, whichever is first
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    seed: int = 0
    rows: RowConfig = field(default_factory=RowConfig)  # its seq_len is set from seq_len
    # Data and machine.
    data_bytes: int = 40_000_000
    include_stdlib: bool = True
    extra_roots: list[Path] = field(default_factory=list)
    threads: int | None = None  # torch CPU threads; None keeps torch's default
    cpu_bf16: bool = False  # bf16 autocast on CPU too (faster where avx512_bf16/AMX exist)
    eval_rows: int = 128
    log_every: float = 10.0  # seconds between progress lines
    save_every: float = 0.0  # seconds between interim saves; 0 saves only at the end


def resolve_device(name: str) -> torch.device:
    """The torch device for a config name, "auto" choosing the fastest available."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> str:
    """A human-readable device name for the saved training stats."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({torch.get_num_threads()} threads)"
    return device.type


def learning_rate(cfg: TrainConfig, step: int, progress: float) -> float:
    """Linear warmup, then cosine decay over the fraction of the time budget spent.

    Warmup is counted in steps but also capped at a fraction of the budget: on a
    busy CPU a short run may manage only a few hundred steps in all.
    """
    warmup = min(1.0, max((step + 1) / max(cfg.warmup_steps, 1),
                          progress / max(cfg.warmup_fraction, 1e-9)))
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))
    return cfg.lr * warmup * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)


def make_optimizer(module: TinyDenoiser, cfg: TrainConfig,
                   device: torch.device) -> torch.optim.AdamW:
    """AdamW with decay on matrices (embedding included) and none on norm gains."""
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas,
                             fused=device.type == "cuda")


def _model_and_tokenizer(cfg: TrainConfig, corpus: Corpus,
                         device: torch.device) -> tuple[TinyDenoiser, Tokenizer, dict]:
    """A fresh model with a newly trained tokenizer, or the warm-start checkpoint.

    Returns the module, its tokenizer and the checkpoint's previous training stats.
    """
    if cfg.init_from is not None:
        loaded = TinyModel.load(cfg.init_from, device)
        config = json.loads((Path(cfg.init_from) / "config.json").read_text())
        print(f"warm start from {cfg.init_from} (shape {loaded.module.cfg})", flush=True)
        return loaded.module, loaded.tokenizer, config.get("training", {})
    started = time.monotonic()
    tokenizer = train_tokenizer((f.text for f in corpus.train), cfg.vocab_size)
    print(f"tokenizer: {tokenizer.vocab_size} ids in {time.monotonic() - started:.1f}s",
          flush=True)
    shape = TinyConfig(vocab_size=tokenizer.vocab_size, d_model=cfg.d_model,
                       n_layers=cfg.n_layers, n_heads=cfg.n_heads, max_length=cfg.max_length)
    return TinyDenoiser(shape).to(device), tokenizer, {}


def _fixed_batches(stream: torch.Tensor, tokenizer: Tokenizer, rows: RowConfig,
                   count: int, batch_size: int) -> list[Batch]:
    """Held-out batches drawn from EVAL_SEED, identical in every run on the same data."""
    if len(stream) == 0 or count <= 0:
        return []
    sampler = RowSampler(stream, line_start_flags(stream, tokenizer),
                         tokenizer.token_id(MASK_TOKEN), tokenizer.token_id(PAD_TOKEN),
                         rows, seed=EVAL_SEED)
    sizes = [min(batch_size, count - lo) for lo in range(0, count, batch_size)]
    return [sampler.sample(n) for n in sizes]


def _save(module: TinyDenoiser, tokenizer: Tokenizer, out_dir: Path, stats: dict) -> None:
    """Write the model in fp16 (half the size, and the server runs it fine) with stats."""
    cpu_module = module if next(module.parameters()).device.type == "cpu" \
        else copy.deepcopy(module).to("cpu")
    save_tiny(cpu_module, tokenizer, out_dir, dtype=torch.float16, extra={"training": stats})


def _check(cfg: TrainConfig) -> None:
    if cfg.seconds <= 0:
        raise TrainingError("--seconds must be positive")
    if cfg.init_from is None and cfg.seq_len > cfg.max_length:
        raise TrainingError(f"seq_len {cfg.seq_len} exceeds max_length {cfg.max_length}")
    if cfg.init_from is None and cfg.d_model % cfg.n_heads:
        raise TrainingError(f"d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
    if cfg.init_from is not None and not Path(cfg.init_from).is_dir():
        raise TrainingError(f"--init-from {cfg.init_from} is not a directory")


LOSS_EMA_DECAY = 0.98  # the reported train loss averages roughly the last 50 steps


def _optimise(module: TinyDenoiser, sampler: RowSampler, cfg: TrainConfig,
              device: torch.device, amp_dtype: torch.dtype | None,
              interim_save: Callable[[dict], None]) -> dict:
    """The optimisation loop: runs until the time budget is spent, printing progress.

    Losses are accumulated on the device and read back only when a progress line
    is printed, so a GPU is not made to wait for the CPU every step.  The final
    train loss is an exponential moving average: the 1/t weight makes single
    steps too noisy to report.
    """
    module.train()
    optimizer = make_optimizer(module, cfg, device)
    step, tokens = 0, 0
    ema = torch.zeros((), device=device)
    window_loss = torch.zeros((), device=device)
    window_steps, window_tokens = 0, 0
    start = last_log = last_save = time.monotonic()
    while (elapsed := time.monotonic() - start) < cfg.seconds:
        lr = learning_rate(cfg, step, elapsed / cfg.seconds)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = sampler.sample(cfg.batch_size).to(device)
        with autocast_for(device, amp_dtype):
            loss = masked_diffusion_loss(module, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.grad_clip)
        optimizer.step()
        step += 1
        tokens += batch.inputs.numel()
        ema.mul_(LOSS_EMA_DECAY).add_(loss.detach(), alpha=1 - LOSS_EMA_DECAY)
        window_loss += loss.detach()
        window_steps += 1
        window_tokens += batch.inputs.numel()

        now = time.monotonic()
        if now - last_log >= cfg.log_every:
            mean = float(window_loss) / window_steps  # syncs with the device
            if not math.isfinite(mean):
                raise FloatingPointError(f"training loss became {mean} at step {step}; "
                                         "try a lower --lr")
            rate = window_tokens / max(now - last_log, 1e-9)
            print(f"step {step:6d}  loss {mean:.4f}  lr {lr:.2e}  "
                  f"{rate:,.0f} tok/s  {now - start:.0f}/{cfg.seconds:.0f}s", flush=True)
            window_loss.zero_()
            window_steps, window_tokens, last_log = 0, 0, now
        if cfg.save_every > 0 and now - last_save >= cfg.save_every:
            interim_save({"steps": step, "tokens_seen": tokens})
            last_save = now
    final = float(ema) / (1 - LOSS_EMA_DECAY ** step) if step else float("nan")
    return {"steps": step, "tokens_seen": tokens, "seconds": time.monotonic() - start,
            "final_train_loss": final}


def train(cfg: TrainConfig) -> dict:
    """Train for `cfg.seconds` of wall-clock time, evaluate, save, and return the stats.

    Data preparation (reading files, training the tokenizer, tokenizing) happens
    before the clock starts; only the optimisation loop is budgeted.
    """
    _check(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    use_bf16 = device.type == "cuda" or (device.type == "cpu" and cfg.cpu_bf16)
    amp_dtype = torch.bfloat16 if use_bf16 else None
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    corpus = collect_sources(SourceConfig(include_stdlib=cfg.include_stdlib,
                                          extra_roots=list(cfg.extra_roots),
                                          max_bytes=cfg.data_bytes))
    module, tokenizer, previous = _model_and_tokenizer(cfg, corpus, device)
    if cfg.seq_len > module.cfg.max_length:
        raise TrainingError(f"seq_len {cfg.seq_len} exceeds the model's max_length "
                            f"{module.cfg.max_length}")
    mask_id, pad_id = tokenizer.token_id(MASK_TOKEN), tokenizer.token_id(PAD_TOKEN)
    if mask_id is None or pad_id is None:
        raise TrainingError(f"tokenizer lacks {MASK_TOKEN} or {PAD_TOKEN}")

    started = time.monotonic()
    train_stream = encode_stream(tokenizer, corpus.train)
    heldout_stream = encode_stream(tokenizer, corpus.heldout)
    print(f"data: {len(corpus.train)} train files ({len(train_stream):,} tokens), "
          f"{len(corpus.heldout)} held-out ({len(heldout_stream):,} tokens), "
          f"tokenized in {time.monotonic() - started:.1f}s", flush=True)

    rows = replace(cfg.rows, seq_len=cfg.seq_len)
    sampler = RowSampler(train_stream, line_start_flags(train_stream, tokenizer),
                         mask_id, pad_id, rows, seed=cfg.seed)
    eval_batches = _fixed_batches(heldout_stream, tokenizer, rows, cfg.eval_rows,
                                  cfg.batch_size)
    infill_rows = replace(rows, infill_fraction=1.0, full_mask_fraction=1.0)
    infill_batches = _fixed_batches(heldout_stream, tokenizer, infill_rows, cfg.eval_rows,
                                    cfg.batch_size)

    print(f"training {module.num_parameters():,} parameters on {describe_device(device)} "
          f"for {cfg.seconds:.0f}s, batch {cfg.batch_size} x {cfg.seq_len}", flush=True)
    run = _optimise(module, sampler, cfg, device, amp_dtype,
                    interim_save=lambda progress: _save(module, tokenizer, cfg.out_dir,
                                                        {**progress, "interim": True}))

    # Evaluated in float32 whatever the training precision, so runs compare.
    heldout_loss = evaluate(module, eval_batches, device) if eval_batches else None
    heldout_infill = evaluate(module, infill_batches, device) if infill_batches else None
    stats = {
        "tokens_seen": run["tokens_seen"],
        "steps": run["steps"],
        "seconds": round(run["seconds"], 1),
        "tokens_per_second": round(run["tokens_seen"] / max(run["seconds"], 1e-9), 1),
        "final_train_loss": round(run["final_train_loss"], 4),
        "heldout_loss": None if heldout_loss is None else round(heldout_loss, 4),
        "heldout_infill_loss": None if heldout_infill is None else round(heldout_infill, 4),
        "device": describe_device(device),
        "precision": "bf16 autocast" if amp_dtype is not None else "float32",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "parameters": module.num_parameters(),
        "batch_size": cfg.batch_size,
        "seq_len": cfg.seq_len,
        "lr": cfg.lr,
        "seed": cfg.seed,
        "train_files": len(corpus.train),
        "train_tokens": len(train_stream),
        "heldout_tokens": len(heldout_stream),
        "init_from": None if cfg.init_from is None else str(cfg.init_from),
        "cumulative_tokens_seen": run["tokens_seen"] + int(
            previous.get("cumulative_tokens_seen", previous.get("tokens_seen", 0))),
        "torch": torch.__version__,
    }
    _save(module, tokenizer, cfg.out_dir, stats)
    print(f"saved to {cfg.out_dir}: held-out loss {stats['heldout_loss']}, "
          f"held-out infill loss {stats['heldout_infill_loss']}", flush=True)
    return stats


def build_parser() -> argparse.ArgumentParser:
    """Flags for the main TrainConfig fields; the rest keep their defaults."""
    d = TrainConfig()
    p = argparse.ArgumentParser(prog="dlm-lsp train", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=d.seconds,
                   help="wall-clock budget of the training loop (default %(default)s)")
    p.add_argument("--out", type=Path, default=d.out_dir, help="output model directory")
    p.add_argument("--init-from", type=Path, default=None,
                   help="saved model directory to keep training (keeps its tokenizer)")
    p.add_argument("--device", default=d.device, help="auto, cpu, cuda, cuda:1, mps ...")
    p.add_argument("--data-bytes", type=int, default=d.data_bytes,
                   help="cap on source bytes read (default %(default)s)")
    p.add_argument("--extra-root", type=Path, action="append", default=[],
                   help="another directory of .py files to train on (repeatable)")
    p.add_argument("--no-stdlib", action="store_true", help="do not train on the stdlib")
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--d-model", type=int, default=d.d_model)
    p.add_argument("--layers", type=int, default=d.n_layers)
    p.add_argument("--heads", type=int, default=d.n_heads)
    p.add_argument("--max-length", type=int, default=d.max_length)
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--cpu-bf16", action="store_true",
                   help="bf16 autocast on CPU (faster on CPUs with avx512_bf16 or AMX)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    args = build_parser().parse_args(argv)
    cfg = TrainConfig(
        out_dir=args.out, init_from=args.init_from, seconds=args.seconds, device=args.device,
        vocab_size=args.vocab_size, d_model=args.d_model, n_layers=args.layers,
        n_heads=args.heads, max_length=args.max_length, seq_len=args.seq_len,
        batch_size=args.batch_size, lr=args.lr, seed=args.seed, data_bytes=args.data_bytes,
        include_stdlib=not args.no_stdlib, extra_roots=args.extra_root, threads=args.threads,
        cpu_bf16=args.cpu_bf16,
    )
    try:
        stats = train(cfg)
    except (TrainingError, ModelLoadError, FileNotFoundError) as exc:
        print(f"dlm-lsp train: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
