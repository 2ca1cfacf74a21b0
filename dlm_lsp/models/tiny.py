"""Our own small bidirectional transformer denoiser (the shipped model family).

A masked-diffusion model is an encoder: every position attends to every other,
so a masked span sees both the prefix and the suffix.  The architecture is the
plain pre-norm transformer (nanoGPT-shaped, minus the causal mask) with rotary
position embeddings, tied input/output embeddings, and no biases.  It is kept
deliberately small so that it trains in minutes and runs on two CPU cores.
"""

from __future__ import annotations

import fcntl
import functools
import json
import math
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from dlm_lsp.config import PRECISIONS
from dlm_lsp.models.checkpoint import (
    INDEX_FILE,
    MODEL_TYPE,
    WEIGHTS_FILE,
    check_not_lfs_pointers,
    read_weight_map,
)
from dlm_lsp.models.graphs import Capture, GraphConfig, ShapeGraphs, cuda_capture
from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN, Tokenizer


@dataclass
class TinyConfig:
    """Shape of a tiny denoiser; the defaults are the shipped model's shape."""

    vocab_size: int = 8192
    d_model: int = 256  # width of the residual stream
    n_layers: int = 4
    n_heads: int = 4
    max_length: int = 512  # longest sequence (prefix + span + suffix) in tokens
    mlp_ratio: int = 4
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        """A shape the model can run: a config.json edited by hand (`n_heads` 7 beside
        `d_model` 512) loaded, and `models check` said ok, where every fill then failed
        with a tensor shape's RuntimeError: the weights' shapes do not show the heads."""
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_length",
                     "mlp_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"config.json: {name} should be a positive whole number, "
                                 f"not {value!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"config.json: d_model {self.d_model} should split into "
                             f"n_heads {self.n_heads} heads of an even width")

    @classmethod
    def from_dict(cls, data: dict) -> TinyConfig:
        """Build from a config.json dict, ignoring keys that are not fields."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# (head size, base, device, dtype) -> (cos, sin) of positions 0..N-1, grown as needed:
# a step runs every layer's rotation twice, and computing the angles each time cost
# about a seventh of a cached step of the shipped model on a CPU.
_ROTATIONS: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
# Tables a longer sequence replaced, kept alive: a captured CUDA graph keeps the address
# of the table it read, not the tensor, so a table freed under it would be read as
# whatever the allocator put there next (`use_graphs` builds them for max_length first,
# but a span past it, maxSpanTokens raised, still grew them).  Each is at most half the
# size of the one after it.
_RETIRED: list[tuple[torch.Tensor, torch.Tensor]] = []


def _rotation(d: int, base: float, end: int, device: torch.device,
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (N, D/2), N >= end, of the angles of positions 0..N-1 (the same
    values, position by position, as computing them for a slice of positions)."""
    key = (d, base, str(device), dtype)
    table = _ROTATIONS.get(key)
    if table is None or table[0].shape[0] < end:
        size = max(end, 2 * table[0].shape[0] if table is not None else 1024)
        inv = base ** (-torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
        at = torch.arange(0, size, device=device, dtype=torch.float32)
        ang = at[:, None] * inv[None]  # (N, D/2)
        if table is not None:
            _RETIRED.append(table)
        table = _ROTATIONS[key] = (ang.cos().to(dtype), ang.sin().to(dtype))
    return table


def _rope(x: torch.Tensor, base: float, start: int = 0) -> torch.Tensor:
    """Rotate pairs of channels of x (B, H, T, D) by position-dependent angles; the
    T rows sit at positions start..start+T-1 (a context cache runs a window)."""
    _, _, t, d = x.shape
    cos, sin = _rotation(d, base, start + t, x.device, x.dtype)
    cos, sin = cos[start:start + t], sin[start:start + t]
    # each half copied out first: bf16 arithmetic on every other element of x ran
    # element by element, and the copies and four products on contiguous halves cost
    # ~55% of the products on the strided ones (~0.8 ms a pass of the shipped model on a
    # CPU; benchmarks/results/fill-overhead-cpu.md); the same products, the same bits
    x1, x2 = x[..., 0::2].contiguous(), x[..., 1::2].contiguous()
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Block(nn.Module):
    """Pre-norm attention (non-causal) followed by a GELU MLP."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.rope_base = cfg.rope_base
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=False)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        return self.run(x, keep=keep)[0]

    def run(self, x: torch.Tensor, start: int = 0, keys: torch.Tensor | None = None,
            values: torch.Tensor | None = None, keep: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The block over positions start..start+W-1 of x (B, W, C): new x, keys, values.

        With stored `keys`/`values` (B, H, T, D) of a whole sequence, the window's
        fresh ones replace theirs at its positions (in place) and the window
        attends to the whole sequence: how dlm_lsp/models/cache.py recomputes
        only the span.  Without, x is the whole sequence.  `keep`, True where a query
        may attend to a key, is (B, 1, 1, T) to mask a padded row's pad keys for every
        query, or (S, 1, T, T) to keep each query of the first S rows inside its own
        file (training rows over a seam); the rows after the first S are not masked.
        """
        b, w, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, w, self.n_heads, c // self.n_heads).transpose(1, 2) for z in (q, k, v))
        q, k = _rope(q, self.rope_base, start), _rope(k, self.rope_base, start)
        if keys is not None and values is not None:
            keys[:, :, start:start + w] = k
            values[:, :, start:start + w] = v
            k, v = keys, values
        if keep is not None and len(keep) < b:  # the other rows keep the unmasked kernels
            s = len(keep)
            att = torch.cat([F.scaled_dot_product_attention(q[:s], k[:s], v[:s], attn_mask=keep),
                             F.scaled_dot_product_attention(q[s:], k[s:], v[s:])])
        else:
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (B, H, W, D)
        x = x + self.proj(att.transpose(1, 2).reshape(b, w, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)))), k, v


class TinyDenoiser(nn.Module):
    """Token ids (B, T) -> logits (B, T, V) predicting the clean token at each position."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=False)
        self.apply(self._init)
        for block in self.blocks:  # scale residual projections as GPT-2 does
            for lin in (block.proj, block.down):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def hidden(self, ids: torch.Tensor, lengths: torch.Tensor | None = None,
               segments: torch.Tensor | None = None) -> torch.Tensor:
        """Final normed hidden states (B, T, C), before the output head.  With `lengths`
        (B,), row i holds lengths[i] tokens and pad after them: no position attends to
        the pad, so its first lengths[i] states are those of the row alone (the model
        is bidirectional: an unmasked pad key would change every query's state).

        With `segments` (S, T), S <= B, for training rows cut from files joined end to
        end, each position of the first S rows attends only to the positions of its own
        segment (its file), so every file's states are those it has alone, wherever in
        the row it starts (rotary positions are relative): the server never shows the
        model two files at once.  The rows after them hold one file and are not masked.
        Padded rows are the server's and seams the training's: never both at once.
        """
        keep = None
        if lengths is not None and segments is not None:
            raise ValueError("hidden: lengths (padded rows) or segments (files), not both")
        if lengths is not None:  # (B, 1, 1, T): the same keys for every head and query
            keep = (torch.arange(ids.shape[1], device=ids.device)[None, :]
                    < lengths.to(ids.device)[:, None])[:, None, None, :]
        if segments is not None:  # (S, 1, T, T): a query's keys are those of its file
            segments = segments.to(ids.device)
            keep = (segments[:, :, None] == segments[:, None, :])[:, None]
        x = self.embed(ids)  # (B, T, C)
        for block in self.blocks:
            x = block(x, keep)
        return self.ln_f(x)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.hidden(ids) @ self.embed.weight.T  # tied output head, (B, T, V)

    def num_parameters(self) -> int:
        """Parameter count (the tied head counted once)."""
        return sum(p.numel() for p in self.parameters())


SHARD_PATTERN = "model-{:05d}-of-{:05d}.safetensors"
HEADER_ALLOWANCE = 256  # bytes of safetensors header per tensor, counted into a shard's size


def plan_shards(sizes: dict[str, int], max_bytes: int) -> list[list[str]]:
    """Tensor names grouped, in order, into shards whose files stay within `max_bytes`.

    Each tensor is counted with a header allowance, so the file (header
    included) is what stays under the limit.  A tensor is never split.
    """
    shards: list[list[str]] = [[]]
    used = 8  # the header-length prefix of a safetensors file
    for name, size in sizes.items():
        need = size + HEADER_ALLOWANCE
        if need + 8 > max_bytes:
            raise ValueError(f"tensor {name} ({size:,} bytes) alone exceeds the shard "
                             f"limit of {max_bytes:,} bytes")
        if shards[-1] and used + need > max_bytes:
            shards.append([])
            used = 8
        shards[-1].append(name)
        used += need
    return shards


# How a save stores its weights: `save_tiny`'s dtype, by the name a config and a flag use.
WEIGHT_DTYPES = {"fp16": torch.float16, "int8": torch.int8}
SCALE_SUFFIX = ".int8_scale"  # beside an int8 matrix: its groups' scales (fp16)
INT8_GROUP = 32  # consecutive weights of a row that share one scale


def stored_tensors(state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The tensors a save of `state` writes, in `dtype`.

    int8 halves fp16's bytes, so a model of twice the parameters fits what one GPU run
    brings back (64 MiB) and what the package ships.  Each matrix (the embedding, which
    is also the output head, and every linear layer) is stored as int8 values with one
    fp16 scale for each INT8_GROUP consecutive weights of a row (the group's largest
    magnitude over 127, under the matrix's name + SCALE_SUFFIX, shape (rows, groups)):
    8.5 bits a weight, llama.cpp's Q8_0 layout.  Measured on the shipped model (500
    tokens of code, 30% of them masked, fp32 on a CPU), the logits at masked positions
    moved by 0.052 on average with a scale per whole row and 1.9% of their argmaxes
    changed; 0.028 and none changed with groups of 32.  Vectors (the layer norms) stay
    fp16: they are few bytes and scale every value that passes them.  Works on meta
    tensors, so a run can plan its export's size without building the model."""
    if dtype != torch.int8:
        return {k: v.detach().to(dtype).contiguous() for k, v in state.items()}
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        value = value.detach()
        if value.dim() != 2 or value.shape[1] % INT8_GROUP:
            out[name] = value.to(torch.float16).contiguous()
            continue
        rows, cols = value.shape
        groups = value.float().reshape(rows, cols // INT8_GROUP, INT8_GROUP)
        scale = (groups.abs().amax(dim=2) / 127).to(torch.float16)  # what the load multiplies by
        wide = scale.float()[:, :, None]
        steps = torch.where(wide > 0, groups / wide.clamp(min=torch.finfo(torch.float32).tiny),
                            torch.zeros((), device=value.device))
        out[name] = torch.round(steps).clamp(-127, 127).to(torch.int8).reshape(rows, cols)
        out[name + SCALE_SUFFIX] = scale.contiguous()
    return out


def stored_sizes(state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, int]:
    """Bytes of each tensor a save of `state` in `dtype` writes (`stored_tensors`)."""
    return {k: v.numel() * v.element_size() for k, v in stored_tensors(state, dtype).items()}


def _dequantized(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A loaded save's tensors with each int8 matrix and its scales turned back into one
    float32 matrix (`stored_tensors`); a save without int8 tensors as it is."""
    out = dict(state)
    for key in [k for k in state if k.endswith(SCALE_SUFFIX)]:
        name, scale = key[:-len(SCALE_SUFFIX)], out.pop(key)
        values = out.get(name)
        if values is None or values.dtype != torch.int8 or values.dim() != 2 \
                or scale.dim() != 2 or scale.shape[0] != values.shape[0] \
                or scale.shape[1] * INT8_GROUP != values.shape[1]:
            raise ValueError(f"{key} {tuple(scale.shape)} scales no int8 matrix of its shape "
                             f"(groups of {INT8_GROUP} weights)")
        rows, cols = values.shape
        out[name] = (values.float().reshape(rows, -1, INT8_GROUP)
                     * scale.float()[:, :, None]).reshape(rows, cols)
    unscaled = [k for k, v in out.items() if v.dtype == torch.int8]
    if unscaled:
        raise ValueError(f"int8 tensors without their {SCALE_SUFFIX}: {', '.join(unscaled)}")
    return out


def _weight_files(directory: Path) -> list[Path]:
    """The weights of a save in `directory`: one file, or the index and its shards."""
    return [p for p in [directory / WEIGHTS_FILE, directory / INDEX_FILE,
                        *sorted(directory.glob("model-*-of-*.safetensors"))] if p.is_file()]


def _save_weights(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """safetensors writes through a private temporary file (mode 0600) that it renames into
    place, so the weights of a saved model were unreadable to anyone else while config.json
    and tokenizer.json beside them followed the umask (0644 under the usual 022).  The file
    gets the mode a newly created file gets; the umask can only be read by setting it."""
    try:
        save_file(tensors, str(path))
    except SafetensorError as exc:  # its I/O errors are no OSError: a full disk was a bug's
        code = re.search(r"\(os error (\d+)\)", str(exc))  # traceback, not a line
        if code is None:
            raise
        number = int(code.group(1))
        raise OSError(number, os.strerror(number), str(path)) from exc
    umask = os.umask(0o022)
    os.umask(umask)
    path.chmod(0o666 & ~umask)


def save_tiny(model: TinyDenoiser, tokenizer: Tokenizer, directory: str | Path,
              dtype: torch.dtype = torch.float16, extra: dict | None = None,
              max_shard_bytes: int | None = None) -> list[Path]:
    """Write config.json, tokenizer.json and the weights into `directory`.

    The weights go into model.safetensors, or, when they exceed
    `max_shard_bytes`, into numbered shards listed by model.safetensors.index.json
    (`{"metadata": {"total_size": N}, "weight_map": {tensor: shard file}}`, the
    layout Hugging Face uses), because some channels carry only files up to a size.
    `dtype` torch.int8 stores the matrices as int8 with an fp16 scale per INT8_GROUP
    weights of a row (`stored_tensors`); config.json says which (`"weights_dtype"`).
    Returns the files written.

    Every file is written into a hidden folder inside `directory` first and moved into
    place only once all of them are whole, config.json last: a save that failed while
    writing (a full disk, memory running out, any error) left the new config.json beside
    no weights or some of the new shards, a folder that looked like a model and was none,
    with the model saved there before lost.  It now leaves the earlier save as it was.
    A save that is killed outright (SIGKILL, power lost) leaves its hidden folder behind
    (loaders read only the files they name, so the model still loads); the next save
    into the folder removes it (`_saving_into`; without flock, only from the same host).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with _saving_into(out):
        return _save_into(model, tokenizer, out, dtype, extra, max_shard_bytes)


STAGING_PREFIX = ".saving-"


@contextmanager
def _saving_into(out: Path) -> Iterator[None]:
    """Hold the folder `out` for one save, and remove the hidden folders that saves
    killed before they could clean up left there.

    Two saves into one folder can run at once (two `dlm-lsp train --out X` runs, nothing
    stops them), and a leftover folder cannot be told from a live save's by its look, so
    each save holds an exclusive lock on `out` (flock, which the system drops when its
    process dies, SIGKILL included) for its whole length: a second save waits for the
    first to finish, rather than mixing its files with the first's, and every hidden
    folder found while holding the lock is a dead save's.  Where the file system has no
    such locks (NFS, which emulates flock with byte-range locks that a folder cannot
    take), the save goes ahead unlocked, and a leftover there may be a live save's: it
    removes only those its name says a process of this host wrote that no longer runs
    (`_dead_writer`); before, it removed none, and every killed save's weights stayed.
    """
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            locked = True
        except OSError:  # no flock on this file system: unlocked
            locked = False
        for stale in out.glob(f"{STAGING_PREFIX}*"):
            if locked or _dead_writer(stale.name):
                shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        os.close(fd)  # drops the lock


def _host() -> str:
    """This machine's name as a save's hidden folder records it (a file name's characters)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "_"


def _staging_prefix() -> str:
    """The start of a save's hidden folder's name: the prefix, then the writer, pid@host
    (then `-` and mkdtemp's random letters, which hold no `-`)."""
    return f"{STAGING_PREFIX}{os.getpid()}@{_host()}-"


def _dead_writer(name: str) -> bool:
    """Whether the hidden folder `name` is a save's whose process is gone: its name says
    this host and a pid that no longer runs.  Another host's (a shared NFS folder), or one
    named before saves recorded their writer, cannot be told from a live save's: kept.  A
    pid reused since only keeps a leftover longer; a live save's pid always runs."""
    found = re.fullmatch(rf"{re.escape(STAGING_PREFIX)}(\d+)@([^@]*)-[^-]*", name)
    if found is None or found.group(2) != _host():
        return False
    pid = int(found.group(1))
    if not 0 < pid < 2**31:  # 0 would signal our own process group
        return False
    try:
        os.kill(pid, 0)  # signal 0: checks that the process exists, sends nothing
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: it runs, as another user
        return False
    return False


def _save_into(model: TinyDenoiser, tokenizer: Tokenizer, out: Path, dtype: torch.dtype,
               extra: dict | None, max_shard_bytes: int | None) -> list[Path]:
    """`save_tiny` once the folder is held: write into a hidden folder, then move."""
    staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(), dir=out))
    try:
        names = _write_save(model, tokenizer, staging, dtype, extra, max_shard_bytes)
        for stale in _weight_files(out):  # an earlier save's: one file and shards never mix
            if stale.name not in names:
                stale.unlink()
        for name in names:  # config.json last: it is what makes the folder a model
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / name for name in names]


def _write_save(model: TinyDenoiser, tokenizer: Tokenizer, out: Path, dtype: torch.dtype,
                extra: dict | None, max_shard_bytes: int | None) -> list[str]:
    """Write a whole save into the empty folder `out`; returns its file names, in the
    order they are to be moved into place (config.json last)."""
    state = stored_tensors(model.state_dict(), dtype)
    sizes = {k: v.numel() * v.element_size() for k, v in state.items()}
    shards = [list(sizes)] if max_shard_bytes is None else plan_shards(sizes, max_shard_bytes)
    tokenizer.backend.save(str(out / "tokenizer.json"))
    if len(shards) == 1:
        _save_weights(state, out / WEIGHTS_FILE)
        weights = [WEIGHTS_FILE]
    else:
        weights, weight_map = [], {}
        for i, names in enumerate(shards, start=1):
            name = SHARD_PATTERN.format(i, len(shards))
            _save_weights({k: state[k] for k in names}, out / name)
            weight_map.update(dict.fromkeys(names, name))
            weights.append(name)
        index = {"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map}
        (out / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
        weights.append(INDEX_FILE)
    stored = {v: k for k, v in WEIGHT_DTYPES.items()}.get(dtype,
                                                          str(dtype).removeprefix("torch."))
    config = {"model_type": MODEL_TYPE, **asdict(model.cfg), "weights_dtype": stored,
              **(extra or {})}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return ["tokenizer.json", *weights, "config.json"]


def missing_weights(path: Path) -> list[str]:
    """The weight files of a model directory that are not there: the shards its index
    lists and lacks (with how many of how many), or the weights file or index where it
    has neither; [] where nothing is missing or the index cannot be read (the load says
    why then)."""
    if (path / WEIGHTS_FILE).is_file():
        return []
    if not (path / INDEX_FILE).is_file():
        return [f"{WEIGHTS_FILE} nor {INDEX_FILE}"]
    try:
        shards = sorted(set(read_weight_map(path).values()))
    except ModelLoadError:
        return []
    gone = [name for name in shards if not (path / name).is_file()]
    if not gone:
        return []
    return [f"{', '.join(gone)} ({len(gone)} of the {len(shards)} shards the index lists)"]


def load_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a model directory: model.safetensors, or the shards its index lists,
    each matrix saved as int8 and its scales back in float32 (`stored_tensors`).

    A save holds one or the other (`save_tiny` removes the earlier save's), so a folder
    with both had files copied over another model's: the GPU run's shards copied beside
    the shipped bootstrap's model.safetensors were ignored, the old weights served (or,
    at the new shape, a size mismatch named no cause).  Which one is meant cannot be
    told, so the folder is refused, naming the files."""
    path = Path(directory)
    if (path / WEIGHTS_FILE).is_file() and (path / INDEX_FILE).is_file():
        raise ValueError(f"both {WEIGHTS_FILE} and {INDEX_FILE} are in {path}, the weights "
                         "of two saves (files copied over another model's?): remove the "
                         "one that is not this model's")
    if (path / WEIGHTS_FILE).is_file():
        return _dequantized(load_file(str(path / WEIGHTS_FILE)))
    if not (path / INDEX_FILE).is_file():
        raise FileNotFoundError(f"neither {WEIGHTS_FILE} nor {INDEX_FILE} in {path}")
    weight_map = read_weight_map(path)
    state: dict[str, torch.Tensor] = {}
    for name in sorted(set(weight_map.values())):
        if Path(name).name != name:
            raise ValueError(f"{INDEX_FILE} names a shard outside the directory: {name}")
        state.update(load_file(str(path / name)))
    missing = sorted(set(weight_map) - set(state))
    if missing:
        raise ValueError(f"shards lack tensors listed in {INDEX_FILE}: {', '.join(missing)}")
    return _dequantized(state)


class TinyModel:
    """Adapter exposing a TinyDenoiser through the DiffusionModel interface."""

    def __init__(self, module: TinyDenoiser, tokenizer: Tokenizer, name: str,
                 device: torch.device, precision: str = "auto"):
        self.precision = resolve_precision(precision, device)
        self.module = module.to(device).eval()
        self.tokenizer = tokenizer
        self.name = name
        self.device = device
        self.max_length = module.cfg.max_length
        mask_id, pad_id = tokenizer.token_id(MASK_TOKEN), tokenizer.token_id(PAD_TOKEN)
        if mask_id is None or pad_id is None:
            raise ModelLoadError(f"tokenizer of {name} lacks {MASK_TOKEN} or {PAD_TOKEN}")
        self.mask_id, self.pad_id = mask_id, pad_id

        self.graphs: ShapeGraphs | None = None
        # ((address, version) of the embedding weight, its bf16 copy): see `_bf16_embedding`
        self._head_cast: tuple[tuple[int, int], torch.Tensor] | None = None

    @property
    def padded_rows(self) -> bool:
        """Whether rows of different lengths should share a pass, padded to one length
        (`hidden` with `lengths`; serving.StepBatcher): not while steps replay as CUDA
        graphs, where each length replays its own graph (0.7 ms a step of the shipped
        model on an H200) and a padded pass would run eagerly (3.2 ms)."""
        return self.graphs is None

    def use_graphs(self, config: GraphConfig | None = None,
                   capture: Capture = cuda_capture) -> None:
        """Run `hidden` as replayed CUDA graphs for repeated shapes (models/graphs.py).

        The rotation tables are built for the longest sequence first: a graph keeps
        the address of every tensor it read, and a table regrown later would leave
        it reading freed memory.
        """
        head_dim = self.module.cfg.d_model // self.module.cfg.n_heads
        device = torch.zeros((), device=self.device).device  # as tensors name it: cuda:0
        for dtype in (torch.float32, torch.bfloat16):
            _rotation(head_dim, self.module.cfg.rope_base, self.max_length, device, dtype)
        self.graphs = ShapeGraphs(self._graph_hidden, config, capture)

    def _autocast(self, cache: bool = True) -> AbstractContextManager:
        """bf16 autocast when asked for; inside a graph capture its cache of cast
        weights must be off (the cast copies would be freed after the capture)."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=cache)
        return nullcontext()

    @torch.no_grad()
    def _graph_hidden(self, ids: torch.Tensor) -> torch.Tensor:
        with self._autocast(cache=False):
            return self.module.hidden(ids)

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) in float32, whatever dtype the weights run in."""
        with self._autocast():
            return self.module(input_ids.to(self.device)).float()

    @torch.no_grad()
    def hidden(self, input_ids: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> torch.Tensor:
        """Final hidden states (B, T, C): what `head` turns into logits.

        The sampler needs logits only at the span's positions; the output head
        over the whole context (T x vocabulary) is about a quarter of a step's
        work at 450 tokens, so the engine asks for hidden states and applies
        the head to the span alone.  With `lengths`, rows of different lengths
        padded on the right share the pass, each attending to its own tokens only
        (`TinyDenoiser.hidden`); such a pass runs eagerly, not as a graph.
        """
        ids = input_ids.to(self.device)
        if self.graphs is not None and lengths is None:
            return self.graphs(ids)
        with self._autocast():
            return self.module.hidden(ids, lengths)

    @torch.no_grad()
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits (..., V) of hidden states from `hidden`.

        In bf16 on a CPU the product is taken as one matrix product of the rows: the
        hidden states of a span are a slice of the sequence's, which matmul cannot fold
        into rows without a copy, so it broadcast the weight over a batch instead,
        copying all of it (V x C) on every pass, and cast it to bf16 first, again on
        every pass.  For the shipped model (8192 x 256) that was ~4 ms of a ~5 ms head,
        ~60 ms of a single-line fill's ~500 ms of CPU (benchmarks/results/
        fill-overhead-cpu.md).  The rows' product, by a bf16 copy of the weight made
        once (`_bf16_embedding`), is bit for bit the batched one, so fills are unchanged.
        Elsewhere (float32, where the two products differ in their last bits, and CUDA,
        where they were not compared) the head multiplies as before."""
        weight = self.module.embed.weight
        with self._autocast():
            if self.precision != "bf16" or weight.device.type != "cpu":
                return (hidden @ weight.T).float()
            rows = hidden.reshape(-1, hidden.shape[-1]) @ self._bf16_embedding().T
            return rows.float().reshape(*hidden.shape[:-1], rows.shape[-1])

    def _bf16_embedding(self) -> torch.Tensor:
        """The embedding weight cast to bf16, made once per version of the weight (an
        in-place change of the weight makes a new one): autocast casts it anew on each
        pass, ~0.4 ms of the shipped model's."""
        weight = self.module.embed.weight
        key, cast = (weight.data_ptr(), weight._version), self._head_cast
        if cast is None or cast[0] != key:
            cast = self._head_cast = (key, weight.detach().to(torch.bfloat16))
        return cast[1]

    @classmethod
    def load(cls, directory: str | Path, device: torch.device,
             name: str | None = None, precision: str = "auto",
             graphs: bool = True) -> TinyModel:
        """Load a directory written by `save_tiny` (one weights file or shards), failing
        with a clear ModelLoadError; on CUDA, steps replay as graphs unless `graphs`
        is False."""
        path = Path(directory)
        check_not_lfs_pointers(path)  # a trained model kept in a Git LFS repository
        try:
            cfg = TinyConfig.from_dict(json.loads((path / "config.json").read_text()))
            # every file a partial copy lacks, named at once (tokenizers' error names no
            # file; a shard's was "No such file or directory", and only the first was said)
            missing = ([] if (path / "tokenizer.json").is_file() else ["tokenizer.json"])
            missing += missing_weights(path)
            if missing:
                raise FileNotFoundError(f"no {', no '.join(missing)}")
            tokenizer = Tokenizer.from_file(path / "tokenizer.json")
            if tokenizer.vocab_size > cfg.vocab_size:  # else the first fill: an IndexError
                raise ValueError(f"tokenizer.json has {tokenizer.vocab_size} ids but the model "
                                 f"only {cfg.vocab_size} (vocabulary sizes disagree: a "
                                 "tokenizer from another model?)")
            state = load_weights(path)
            module = TinyDenoiser(cfg)
            module.load_state_dict({k: v.float() for k, v in state.items()})
        except Exception as exc:  # tokenizers and safetensors raise bare Exception subclasses
            raise ModelLoadError(f"could not load model from {path}: {exc}") from exc
        model = cls(module, tokenizer, name or str(path), device, precision)
        if graphs and device.type == "cuda":
            model.use_graphs()
        return model


CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX, from /proc/cpuinfo):
    there bf16 autocast pays; elsewhere bf16 is emulated and slower than fp32."""
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as handle:
            flags = next((line for line in handle if line.startswith("flags")), "").split()
    except OSError:  # not Linux: no way to tell, so no
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """What "auto" means on a device, checked: bf16 on CUDA and on a CPU with native bf16
    (AVX512-BF16 or AMX), else fp32; for our own models and published checkpoints alike.

    On a 2-core x86 CPU with AVX512-BF16, at 464 tokens, the shipped model took
    117 ms a pass in fp32 and 76 ms under bf16 autocast; through the LSP a
    single-line fill took 351 ms p50 against 471 ms (20 fills, 1 thread), and 197 of
    200 HumanEval-Infilling single-line fills were identical.  Published checkpoints
    ask for it too: their bf16 is their weights' dtype (not autocast), the dtype they
    are published and run in on GPUs; on the same CPU a step of Open-dCoder's 0.5B
    network at 512 tokens took 1.18 s in bf16 against 2.43 s in fp32, and their
    weights take half the memory.  int8 dynamic quantization (83 ms) was left out:
    torch.ao.quantization is deprecated.
    """
    if precision not in PRECISIONS:
        raise ModelLoadError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        if device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16()):
            return "bf16"
        return "fp32"
    return precision
