"""One command for a GPU lent for a few minutes: build the corpus, train, export, verify.

On the project's GPU machine (one H200; Python 3.12 with torch, tokenizers,
safetensors and numpy, but not pygls, lsprotocol or tree-sitter, and this
package not installed) the run command starts in a copy of the repository root,
so the module runs from the source tree:

    PYTHONPATH=. python3 -m dlm_lsp.training.gpu_run --out "$OUT" --wall-seconds 480

(with the run tool's `timeout_s` at 575, which leaves time for importing torch,
loading the export back and the copy; the first run took 466.6 s of the call).
Nothing on this module's import path needs more than those four packages.  It
prints a line when each phase ends, a progress line every 15 seconds and, at the
end, the seconds each stage took ("gpu_run: seconds: reading ..., tokenizer ...,
tokenizing ..., training ..."), and writes into `--out`:

    config.json                      shape + "training": tokens seen, time (by stage
                                     of preparation in "prep"), hardware, losses,
                                     loss curve, sources and their licences
    tokenizer.json                   byte-level BPE, line breaks apart (8,192 ids)
    model.safetensors.index.json     which shard holds which tensor
    model-0000k-of-0000N.safetensors int8 weights (a scale per 32), each file under 15 MiB

At each held-out evaluation (before training, every minute, after it) the run also fills
100 lines of its held-out files and 100 HumanEval-Infilling single-line tasks
(`fill_probe`, `--probe N` to change the count, 0 for none) and prints their exact match
and edit similarity: config.json keeps them as "fill_curve", against the tokens the model
has seen over all its runs, and the log ends with them (`gpu_run: fill curve at ...`).
The returned export holds only the final weights (interim saves would not fit in what
comes back), so this is the curve of fill quality against training tokens that the
model card reports.  Its cost on the H200 is not measured yet: on the 2-core VM, 64
tasks of the shipped model took 31 s, 2.5 s of it the sampler's own steps, the rest
the forward passes, which an H200 runs in milliseconds; so expect a few seconds a probe
and about half a minute of the training budget for the run's nine or so.

That is what the machine sends back: at most 8 files of at most 16 MiB, 64 MiB
in all, and only what is under $OUT.  The run checks the expected export against
those limits before it trains, and loads its own output after saving.  Copy the
folder to dlm_lsp/weights/<name> (or point the `model` setting at it) to serve it.

Why this size (`full_config`): 64 MiB of fp16 holds at most ~33M parameters, and
the export also needs the tokenizer (0.5 MiB), but the shipped export also travels back
to the GPU machine with the rest of the repository for the next run, 64 MiB a call
(tests/test_device_transfer.py): 8 layers (29.4M parameters, 56 MiB) would have left
under 2 MiB for everything else.  d 512 x 6 layers x 8 heads with an 8,192-id tied
embedding is 23.1M parameters: 46.2 MB (44.0 MiB) of fp16 in 3 shards of 14.0 MiB and
one of 2.0 MiB, 7 files and ~45 MiB with the rest.  Measured on the H200, 2026-12-04
(the shipped model's first run, `--wall-seconds 480`): reading 24,253 files (388.8 MB)
took 20.8 s, the tokenizer 2.2 s, tokenizing (121M tokens) 23.7 s, and training ran
406.3 s at 1.16M tokens/s: 471.8M tokens, ~20 per parameter; evaluating, saving and
loading the export back 5.2 s, 466.6 s of the run tool's call in all.  The data is
what cannot grow: the standard library and the permissively licensed site-packages
there are those 121M tokens, so the run made ~3.9 passes over them.  Repetition costs
a masked-diffusion model little (it keeps improving for many more epochs than an
autoregressive one: Prabhudesai et al. 2025, "Diffusion Beats Autoregressive in
Data-Constrained Settings").  Pythia-70M, this shape (d 512, 6 layers), trained at
lr 1e-3, which is used here with 300 warmup steps and a cosine decay to 1e-4 over the
time budget.

Why int8 weights (`full_config().weights`, `tiny.stored_tensors`; the first run wrote
fp16): 8.5 bits a weight instead of 16, so the export is ~23 MiB rather than 44, less
to bring back, to keep in the repository's history and to install, at no measured cost.
The shipped model saved as int8 and benchmarked on the 2-core VM (2026-12-04, greedy,
seed 0, the server's defaults) against its fp16 self: held-out lines (200, oracle
length) exact 4.5% / 4.5%, edit similarity 25.1 / 24.7%, no new syntax error 88.0 /
87.0%, empty 9.5 / 9.5%; HumanEval-Infilling single-line (200, oracle length) pass@1
8.5% / 8.0%, exact 4.5 / 4.5%.  A continued run starts from the int8 values: each
weight is within half a step (1/254 of its group's largest) of its trained value, in
the shipped model a median of 2.6e-4 to 5.0e-4 by matrix (99th percentile up to 2.0e-3,
in the embedding), against the ~1e-3 that one AdamW step at the peak rate moves it.

Why not deeper, now that int8 leaves room for twice the parameters: a model continued
by a GPU run can be made deeper first without losing what it learnt (`--grow-layers`,
models/grow.py: new layers that start as the identity), but measured at small scale the
same time spent on the model as it is did better.  The 2-core VM, 2026-12-04: d 128,
2 layers, 1,024 ids, 160-token rows of 8 MB of the standard library, trained 4,000
steps (10.2M tokens, ~26 per non-embedding parameter, as the shipped model's 472M
tokens are for its 18.9M), then continued for two rounds of 420 s on one thread each,
side by side, either as it was or grown to 4 layers (1.9 times the time a token, as
12 layers would be against 6 here).  Held-out loss / held-out infill loss (256 fixed
rows) after the first round: 2.763 / 2.467 as it was (8.6M tokens), 2.829 / 2.502
grown (4.6M); after the second: 2.667 / 2.424 against 2.736 / 2.427.  The infilling
loss drew level, the general loss did not, so runs stay at 6 layers for now.

Rows: 64 x 512 tokens a step (14,399 steps in the first run), 30% of them infilling
rows.  An infilling row supervises only its middle and pads (about 50 positions, ~30 of
them masked, against ~256 masked positions in a plain row), and plain rows with
their whole context masked at random teach infilling too.  Measured here at
small scale (d 128, 2 layers, 128-token rows, 2,500 steps on 8 MB of the
standard library, one run each, 256 fixed held-out rows), the share of
infilling rows against held-out loss / held-out infill loss:

    0.6 throughout (the CPU default)   3.544 / 2.522
    0.3 rising to 0.7 (a curriculum)   3.493 / 2.522
    0.3 throughout                     3.434 / 2.508

so fewer infilling rows cost the infilling loss nothing and the general loss
improved.  The share is set through `TrainConfig.infill_schedule` (which also
allows a curriculum), so the held-out rows keep the RowConfig mix (0.6) and
held-out losses stay comparable between recipes.  Progress lines report plain
and infilling losses apart, and held-out losses every minute, so the next run
can rebalance.

Each run continues the shipped model when it can, so that every session on the GPU
improves the model the last one shipped (copy a run's output to
dlm_lsp/weights/default and the next run starts from it).  `--init-from auto`, the
default, decides by shape alone (`auto_start`): when the shipped model's config.json
has the shape this `--size` trains (width, layers, heads, context, and no more ids)
the run continues it, with its tokenizer; otherwise it trains a new model at this
size.  Its second line says which, and why: the 5.2M-parameter CPU bootstrap shipped
before, which would have left most of this budget unused, was not continued, so the
first GPU run (2026-12-04) trained a new 23.1M-parameter model, now shipped, and every
later one continues it.
`--init-from none` trains a new model whatever is shipped; `--init-from DIR`
continues a saved model in its own shape, and `--init-from default` the shipped one
in any shape, as in `dlm-lsp train` (`train.init_directory`; "./default", "./none"
and "./auto" are directories of those names).  A continued run keeps the corpus rules
(so the same files stay held out, a file an earlier run held out for want of any
below the held-out fraction among them, and, by their text, whatever the earlier runs
trained on or held out under other paths: this machine's Python 3.12 moved files the
shipped model trained on under 3.11.7's paths; see `lineage.SplitRecord`), draws rows
it has not drawn before and records the earlier runs in config.json beside its own
(`lineage.py`).  Its learning rate
warms up again to the recipe's peak and decays over its own budget: the optimizer's
moments are not saved, so it starts them afresh, and a model this far from converged
gained more from a full cycle than from a lower peak.  Measured here (d 128, 2
layers, 128-token rows, 1,000 steps of batch 16 on 8 MB of the standard library,
continued for 1,000 more, one run each, 128 fixed held-out rows): held-out loss /
infill loss 3.973 / 3.261 before the restart, 3.731 / 3.173 after it at peak 1e-3,
3.821 / 3.181 at peak 3e-4; drawing the first run's rows again instead of new ones
(the row seed unchanged) gave 3.735 / 3.202.  Warming up again costs held-out loss at
first, and skipping it costs more: with the tiny recipe on one thread (1,000 steps,
continued for 1,000 more from each of six seeds' models, 32 fixed held-out rows, the
2-core VM at load average 1-6, 2026-12-03), about 50 steps into the continued run the
held-out loss stood 0.19 above its start with no warmup, 0.15 with the recipe's 20
warmup steps and 0.06 with 100; all three ended below their start, at a mean of
2.790, 2.782 and 2.768, differences within the seeds' spread (standard deviation
0.12-0.14; one seed's choices differ by up to 0.12).  So the recipes keep their
warmup on a continued run; an interim save early in one can be worse than the model
it started from.

`--size tiny` runs the same path at the tiny preset's size, which the test
suite uses to prove this command end to end on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from dlm_lsp.arguments import parse_arguments
from dlm_lsp.models.tiny import (
    WEIGHT_DTYPES,
    TinyConfig,
    TinyDenoiser,
    TinyModel,
    plan_shards,
    stored_sizes,
)
from dlm_lsp.training.fill_probe import ProbeConfig, probe_summary
from dlm_lsp.training.rows import RowConfig
from dlm_lsp.training.train import (
    OutOfMemory,
    SaveFailed,
    TrainConfig,
    TrainingError,
    describe_shape,
    init_directory,
    init_folder,
    out_folder,
    saved_model_problem,
    source_folder,
    stopping_signal,
    tiny_preset,
    train,
    value_type,
)

MIB = 2**20
RETURN_FILES = 8  # what comes back from the GPU machine: files ...
RETURN_FILE_BYTES = 16 * MIB  # ... each at most this big ...
RETURN_TOTAL_BYTES = 64 * MIB  # ... and this much in all
SHARD_BYTES = 15 * MIB  # a shard's limit, a margin under RETURN_FILE_BYTES
# config.json + tokenizer.json + index of a new model, generously; a continued model's
# own are counted beside it (its config.json holds the split and near-copy record of
# every run before: the shipped one's and its tokenizer came to 1.05 MiB)
OTHER_FILES_BYTES = 1 * MIB


def full_config(out: Path) -> TrainConfig:
    """The GPU run's recipe (the module docstring says why each number)."""
    return TrainConfig(
        out_dir=out, seconds=3600.0, wall_seconds=420.0, export_reserve=25.0, device="auto",
        vocab_size=8192, split_lines=True, d_model=512, n_layers=6, n_heads=8,
        max_length=512, seq_len=512, batch_size=64, lr=1e-3, warmup_steps=300,
        warmup_fraction=0.05, rows=RowConfig(max_middle=128),
        infill_schedule=(0.3, 0.3), data_bytes=400_000_000, tokenizer_bytes=40_000_000,
        include_stdlib=True, include_site_packages=True, decontaminate=True,
        eval_rows=256, eval_every=60.0, log_every=15.0, save_every=120.0,
        max_shard_bytes=SHARD_BYTES, weights="int8", probe=ProbeConfig(lines=100, humaneval=100))


def tiny_config(out: Path) -> TrainConfig:
    """The same run at the tiny preset's size: seconds on a CPU (tests)."""
    return replace(tiny_preset(), out_dir=out, wall_seconds=60.0, export_reserve=5.0,
                   include_site_packages=True, eval_every=2.0, save_every=0.0,
                   max_shard_bytes=SHARD_BYTES, weights=full_config(out).weights,
                   probe=ProbeConfig(lines=4, humaneval=4))


def _tensor_sizes(shape: TinyConfig, weights: str) -> dict[str, int]:
    """Bytes of each tensor a save of a model of this shape writes, stored as `weights`."""
    with torch.device("meta"):  # shapes only: no memory, no time
        return stored_sizes(TinyDenoiser(shape).state_dict(), WEIGHT_DTYPES[weights])


def export_plan(cfg: TrainConfig) -> tuple[int, int]:
    """(files, bytes) the run will write, from the shape it will train."""
    other = OTHER_FILES_BYTES
    if cfg.init_from is not None:
        data = json.loads((Path(cfg.init_from) / "config.json").read_text())
        shape = TinyConfig.from_dict(data)
        if cfg.grow_layers is not None:
            shape = replace(shape, n_layers=cfg.grow_layers)
        other += sum(path.stat().st_size for path in (Path(cfg.init_from) / name
                                                       for name in ("config.json",
                                                                    "tokenizer.json"))
                     if path.is_file())
    else:
        shape = cfg.new_model_shape()
    sizes = _tensor_sizes(shape, cfg.weights)
    shards = 1 if cfg.max_shard_bytes is None else len(plan_shards(sizes, cfg.max_shard_bytes))
    files = 3 if shards == 1 else shards + 3  # + config.json, tokenizer.json (and the index)
    return files, sum(sizes.values()) + other


AUTO, NONE = "auto", "none"  # --init-from's two words; "./auto", "./none" are directories


@dataclass(frozen=True)
class Start:
    """Where a run starts: the saved model it continues (None: a new model), and why, in
    the words the run prints before anything else, so that a log says which it was."""

    init_from: Path | None
    why: str
    grow_layers: int | None = None  # deepen init_from's model to this many layers first


def auto_start(cfg: TrainConfig, size: str) -> Start:
    """`--init-from auto`: continue the shipped model when it has the shape this size
    trains (a vocabulary no larger: a small corpus may teach a tokenizer fewer ids),
    else train a new model.  Shape is the whole rule, as the config.json beside the
    weights shows it: once an earlier run's output is the shipped model, every later run
    continues it without a flag to remember, and the 5.2M-parameter CPU bootstrap, which
    would leave most of a GPU budget unused, is replaced by a new model of this size."""
    shipped = init_directory("default")
    try:
        data = json.loads((shipped / "config.json").read_text())
        have = TinyConfig.from_dict(data)
    except (OSError, ValueError, TypeError) as exc:
        return Start(None, f"no shipped model could be read in {shipped} ({exc}): "
                           "training a new model")
    want = cfg.new_model_shape()
    seen = (data.get("training") or {}).get("cumulative_tokens_seen")
    history = "" if seen is None else f", {seen:,} tokens seen in all"
    if replace(have, vocab_size=want.vocab_size) == want and have.vocab_size <= want.vocab_size:
        return Start(shipped, f"continuing the shipped model in {shipped} "
                              f"({describe_shape(have)}{history}): it has --size {size}'s "
                              f"shape (--init-from {NONE} trains a new model)")
    if replace(have, vocab_size=want.vocab_size, n_layers=want.n_layers) == want \
            and have.vocab_size <= want.vocab_size and have.n_layers < want.n_layers:
        return Start(shipped, f"growing the shipped model in {shipped} "
                              f"({describe_shape(have)}{history}) to this run's "
                              f"{want.n_layers} layers, the new ones starting as the identity "
                              f"(--init-from {NONE} trains a new model)", want.n_layers)
    return Start(None, f"the shipped model in {shipped} is {describe_shape(have)}, not --size "
                       f"{size}'s {describe_shape(want)}: training a new model "
                       "(--init-from default continues it anyway)")


def choose_start(spec: str, cfg: TrainConfig, size: str, layers: int | None = None) -> Start:
    """What `--init-from` names: auto (`auto_start`), none (a new model), or a saved
    model's directory, "default" being the shipped one (`train.init_directory`).

    `layers` (`--layers`) with a directory: that model deepened to so many layers, or as
    it is where it has them; it cannot be made shallower.  It was ignored there, and the
    run trained the model at its own depth without a word."""
    if spec == AUTO:
        return auto_start(cfg, size)
    if spec == NONE:
        return Start(None, f"training a new model (--init-from {NONE})")
    init = init_folder(spec)  # as train refuses one: an empty value, a missing folder
    problem = saved_model_problem(init)
    if problem:  # said before any work: the export plan read its config.json in a traceback
        raise TrainingError(problem)
    why = f"continuing the model in {init} (--init-from {spec})"
    if layers is None:
        return Start(init, why)
    try:
        have = TinyConfig.from_dict(json.loads((init / "config.json").read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise TrainingError(f"--layers {layers}: the model in {init} could not be read "
                            f"({exc})") from exc
    if layers < have.n_layers:
        raise TrainingError(f"--layers {layers}: the model in {init} has {have.n_layers} "
                            "layers, and a run never removes layers")
    if layers == have.n_layers:
        return Start(init, why)
    return Start(init, f"{why}, grown from {have.n_layers} to {layers} layers, the new ones "
                       "starting as the identity", layers)


def check_export(cfg: TrainConfig) -> None:
    """Refuse, before any training, a run whose output could not come back whole."""
    files, size = export_plan(cfg)
    if files > RETURN_FILES or size > RETURN_TOTAL_BYTES:
        raise TrainingError(f"the export would be {files} files, {size / MIB:.1f} MiB; only "
                            f"{RETURN_FILES} files and {RETURN_TOTAL_BYTES // MIB} MiB come back")
    print(f"export: {files} files, {size / MIB:.1f} MiB at most", flush=True)


def verify(out: Path) -> list[tuple[str, int]]:
    """Load the saved model back and list what the folder holds (name, bytes)."""
    model = TinyModel.load(out, torch.device("cpu"))
    ids = torch.tensor([model.tokenizer.encode("def f(x):\n    return x\n")])
    if not torch.isfinite(model.logits(ids)).all():
        raise TrainingError(f"the model saved in {out} gives non-finite logits")
    listing = sorted((p.name, p.stat().st_size) for p in out.iterdir() if p.is_file())
    too_big = [name for name, size in listing if size > RETURN_FILE_BYTES]
    if too_big or len(listing) > RETURN_FILES:
        raise TrainingError(f"{out} holds files that cannot come back whole: {listing}")
    return listing


def describe_machine() -> str:
    """Python, torch and accelerator, for the log."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA"
    return (f"python {platform.python_version()}, torch {torch.__version__}, {gpu}, "
            f"{os.cpu_count()} CPUs")


def where_the_time_went(stats: dict, total: float) -> str:
    """The run's seconds by stage: preparation (`train._Laps`), training, and the rest
    (checks before, the last evaluation, saving and verifying).  Preparation comes out
    of the wall budget, so the one GPU run's log must say what it cost there."""
    stages = {**stats["prep"], "training": stats["seconds"]}
    parts = ", ".join(f"{stage} {seconds:.1f}s" for stage, seconds in stages.items())
    return (f"seconds: {parts}, the rest {total - sum(stages.values()):.1f}s; "
            f"{total:.0f}s in all")


def build_parser() -> argparse.ArgumentParser:
    """The few flags a GPU session may need; the recipe itself is `full_config`."""
    p = argparse.ArgumentParser(prog="python3 -m dlm_lsp.training.gpu_run",
                                description=__doc__.split("\n\n")[0])
    # an empty --out (`--out "$OUT"` with OUT unset) saved into the current folder, the
    # repository's on the GPU machine, whence nothing comes back; --extra-root "" read it
    p.add_argument("--out", type=out_folder, required=True, help="output folder ($OUT)")
    p.add_argument("--wall-seconds", type=value_type("wall_seconds"), default=None,
                   help="whole run, corpus build and export included (default 420)")
    p.add_argument("--size", choices=("full", "tiny"), default="full",
                   help="tiny: the same run at the tiny preset's size (tests); default: full")
    p.add_argument("--init-from", default=AUTO,
                   help="auto (the default): continue the shipped model if it has this "
                   "size's shape, else train a new one; none: a new model; default: the "
                   "shipped model; or a saved model's directory (its shape and tokenizer)")
    p.add_argument("--layers", type=value_type("n_layers"), default=None, metavar="N",
                   help="the size's depth, N layers (default 6 at full size): a shipped model "
                   "of the same shape but fewer layers is continued, deepened to N with "
                   "layers that start as the identity")
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument("--max-steps", type=value_type("max_steps"), default=None,
                   help="train this many steps: the learning rate decays over them, "
                   "not over the time budget, which then only stops the run")
    p.add_argument("--data-bytes", type=value_type("data_bytes"), default=None,
                   help="cap on source bytes read")
    p.add_argument("--no-stdlib", action="store_true",
                   help="leave out the standard library (read by default)")
    p.add_argument("--no-site-packages", action="store_true", help="leave out the installed "
                   "packages under permissive licences (read by default)")
    p.add_argument("--extra-root", type=source_folder, action="append", default=[],
                   help="another directory of .py files (repeatable)")
    p.add_argument("--shard-mib", type=value_type("shard_mib"), default=None,
                   help="shard limit (default 15)")
    p.add_argument("--probe", type=value_type("probe"), default=None, metavar="N",
                   help="fill N held-out lines and N HumanEval-Infilling single-line tasks "
                   "at each held-out evaluation (the fill curve; default 100, 0: none)")
    return p


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Start]:
    """The chosen size's recipe with the given flags applied, and where it starts."""
    cfg = (full_config if args.size == "full" else tiny_config)(args.out)
    if args.layers is not None:
        cfg = replace(cfg, n_layers=args.layers)
    start = choose_start(args.init_from, cfg, args.size, args.layers)
    changes: dict = {"init_from": start.init_from, "grow_layers": start.grow_layers,
                     "extra_roots": list(args.extra_root),
                     "include_stdlib": not args.no_stdlib,
                     "include_site_packages": not args.no_site_packages}
    for name in ("wall_seconds", "device", "max_steps", "data_bytes"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.shard_mib is not None:
        changes["max_shard_bytes"] = int(args.shard_mib * MIB)
    if args.probe is not None:
        changes["probe"] = replace(cfg.probe, lines=args.probe, humaneval=args.probe)
    return replace(cfg, **changes), start


def main(argv: list[str] | None = None) -> int:
    """Run, print a summary, and exit 0 only when the output loads and fits and the run
    was not stopped by a signal (SIGINT, SIGTERM, SIGHUP: it then saves what it has, exit
    128 + N)."""
    started, began = time.monotonic(), time.time()
    args = parse_arguments(build_parser(), argv)
    try:
        cfg, start = config_from_args(args)
    except TrainingError as exc:  # a flag that cannot be honoured: said before any work
        print(f"gpu_run: {exc}", file=sys.stderr)
        return 2
    print(f"gpu_run: {describe_machine()}", flush=True)
    print(f"gpu_run: {start.why}", flush=True)
    if args.size == "full" and cfg.device == "auto" and not torch.cuda.is_available():
        print("gpu_run: no CUDA device here; the full size is for a GPU (--device cpu to "
              "insist, --size tiny to test)", file=sys.stderr)
        return 2
    try:
        check_export(cfg)
        stats = train(cfg)
        listing = verify(cfg.out_dir)
    except Exception as exc:  # the one GPU run must say what went wrong, whatever it was
        if not isinstance(exc, (TrainingError, OutOfMemory, SaveFailed)):  # ours say it
            traceback.print_exc()
        # those say what they kept; a failure before any save (CUDA missing) has none,
        # nor has a reused --out's model of an earlier run
        saved_at = Path(cfg.out_dir) / "config.json"
        saved = saved_at.is_file() and saved_at.stat().st_mtime >= began
        kept = "" if isinstance(exc, (OutOfMemory, SaveFailed)) or not saved else \
            f"; an interim save is in {cfg.out_dir}"
        print(f"gpu_run: failed after {time.monotonic() - started:.0f}s: {exc}{kept}",
              file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt as exc:  # a second signal: train() did not save
        print(f"gpu_run: interrupted after {time.monotonic() - started:.0f}s: "
              f"{str(exc) or 'before training'}", file=sys.stderr, flush=True)
        return 128 + stopping_signal(exc)
    summary = {k: stats[k] for k in ("parameters", "tokens_seen", "steps", "seconds",
                                     "tokens_per_second", "final_train_loss", "heldout_loss",
                                     "heldout_infill_loss", "contaminated_files", "device")}
    print("gpu_run: " + json.dumps(summary), flush=True)
    for point in stats.get("fill_curve", []):  # the probe's numbers, also in config.json
        print(f"gpu_run: fill curve at {point['tokens']:,} tokens: {probe_summary(point)}",
              flush=True)
    print("gpu_run: " + where_the_time_went(stats, time.monotonic() - started), flush=True)
    for name, size in listing:
        print(f"gpu_run: {name} {size:,} bytes", flush=True)
    if stats["interrupted"] is not None:  # saved and verified, but not the whole budget
        print(f"gpu_run: stopped by {stats['interrupted']} after "
              f"{time.monotonic() - started:.0f}s; {cfg.out_dir} holds the model so far",
              flush=True)
        return 128 + signal.Signals[stats["interrupted"]]
    print(f"gpu_run: done in {time.monotonic() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
