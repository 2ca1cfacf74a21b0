"""Training data: Python source files, a byte-level BPE tokenizer, and training rows.

Three steps, each with its own section below:

1. `collect_sources` picks source files (by default the standard library, which
   every user already has) in a deterministic order with a deterministic
   held-out split, so two runs on the same machine see the same data.
2. `train_tokenizer` learns a byte-level BPE, which can encode any text at all,
   so the server never meets an unknown character in a user's file.
3. `RowSampler` cuts training rows out of the tokenized stream.  Plain rows teach
   the general masked-diffusion objective; infilling rows imitate exactly what the
   server asks of the model (a masked middle padded with `<|pad|>` between an
   intact prefix and suffix).
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer as _Backend
from tokenizers import decoders, models, pre_tokenizers, trainers

from dlm_lsp.models.tokenizer import SPECIAL_TOKENS, Tokenizer

# ---------------------------------------------------------------------------
# 1. Source files
# ---------------------------------------------------------------------------


@dataclass
class SourceConfig:
    """Where training text comes from and how much of it to use."""

    include_stdlib: bool = True  # the running interpreter's standard library
    extra_roots: list[Path] = field(default_factory=list)  # more directories to walk
    max_bytes: int = 40_000_000  # cap on train + held-out source, in bytes
    max_file_bytes: int = 1_000_000  # larger files are mostly generated data tables
    heldout_fraction: float = 0.02
    skip_dirs: tuple[str, ...] = ("site-packages", "dist-packages", "__pycache__", ".git")


@dataclass(frozen=True)
class SourceFile:
    """One file's text and its path relative to the root it was found under."""

    path: str  # posix, root-relative: the split depends on it, not on where Python lives
    text: str


@dataclass
class Corpus:
    """Training files and held-out files; no file is in both."""

    train: list[SourceFile]
    heldout: list[SourceFile]


def unit_hash(key: str) -> float:
    """A number in [0, 1) fixed by `key` alone.

    `hash()` is salted per process, so sha256 is used to keep the file order and
    the held-out split identical across runs, machines and Python versions.
    """
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def source_roots(cfg: SourceConfig) -> list[Path]:
    """The directories to walk, standard library first."""
    roots = [Path(sysconfig.get_paths()["stdlib"])] if cfg.include_stdlib else []
    roots.extend(Path(r) for r in cfg.extra_roots)
    return roots


def _python_files(root: Path, skip_dirs: Sequence[str]) -> list[Path]:
    """All `*.py` files under `root`, sorted, not descending into `skip_dirs`."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        found.extend(Path(dirpath) / name for name in filenames if name.endswith(".py"))
    return sorted(found)


def _read_source(path: Path) -> str | None:
    """The file's text, or None when it is unreadable or not UTF-8.

    The standard library's test suite deliberately contains files in other
    encodings and with invalid bytes; they are skipped rather than guessed at.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text.removeprefix("\ufeff")  # editors do not send the BOM to the server


def collect_sources(cfg: SourceConfig) -> Corpus:
    """Read source files under the configured roots into a train/held-out corpus.

    Files are visited in an order given by a hash of their relative path, so a byte
    cap takes a sample spread over the whole library rather than its alphabetical
    beginning.  A file is held out when a second, independent hash of its path
    falls below `heldout_fraction`; at least one file is held out whenever there
    are two or more, so held-out loss always exists.
    """
    candidates: list[tuple[str, Path]] = []
    for root in source_roots(cfg):
        if not root.is_dir():
            raise FileNotFoundError(f"source root {root} is not a directory")
        candidates.extend(
            (path.relative_to(root).as_posix(), path)
            for path in _python_files(root, cfg.skip_dirs)
        )
    candidates.sort(key=lambda c: (unit_hash("order:" + c[0]), c[0], str(c[1])))

    train: list[SourceFile] = []
    heldout: list[SourceFile] = []
    total = 0
    for rel, path in candidates:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size == 0 or size > cfg.max_file_bytes or total + size > cfg.max_bytes:
            continue
        text = _read_source(path)
        if text is None or not text.strip():
            continue
        total += size
        is_heldout = unit_hash("heldout:" + rel) < cfg.heldout_fraction
        (heldout if is_heldout else train).append(SourceFile(rel, text))

    if not train and not heldout:
        raise FileNotFoundError("no readable Python source files found under "
                         + ", ".join(str(r) for r in source_roots(cfg)))
    if not heldout and len(train) >= 2:
        first = min(range(len(train)), key=lambda i: unit_hash("heldout:" + train[i].path))
        heldout.append(train.pop(first))
    return Corpus(train=train, heldout=heldout)


# ---------------------------------------------------------------------------
# 2. Tokenizer
# ---------------------------------------------------------------------------


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192) -> Tokenizer:
    """Learn a byte-level BPE whose ids 0 and 1 are `<|pad|>` and `<|mask|>`.

    Every one of the 256 byte symbols is in the initial alphabet, so any text
    (non-ASCII identifiers, tabs, CRLF) encodes and decodes back exactly even if
    the training text never contained it.  No prefix space is added, because the
    server encodes fragments of files and must get back exactly what it sent.
    """
    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size <= minimum:
        raise ValueError(f"vocab_size must exceed {minimum} (bytes + special tokens)")
    backend = _Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    return Tokenizer(backend)


def encode_stream(tokenizer: Tokenizer, files: Sequence[SourceFile],
                  chunk: int = 256) -> torch.Tensor:
    """Token ids (int32) of the files joined with a newline, as one stream.

    Each file is encoded with its joining newline and the results concatenated;
    this equals encoding the joined text except possibly at the seams between
    files.  Within a file, spans cut from the stream therefore have exactly the
    boundaries the server gets when it encodes a whole file.  Text that happens to
    spell a special token (say a literal "<|mask|>" in a string) is encoded as
    ordinary text, so the corpus can never inject a real mask or pad.
    """
    backend = tokenizer.backend  # `Tokenizer` encodes special-token text as plain text
    parts: list[torch.Tensor] = []
    for lo in range(0, len(files), chunk):
        batch = [f.text + "\n" for f in files[lo:lo + chunk]]
        for enc in backend.encode_batch(batch, add_special_tokens=False):
            parts.append(torch.tensor(enc.ids, dtype=torch.int32))
    if not parts:
        return torch.zeros(0, dtype=torch.int32)
    return torch.cat(parts)


def line_start_flags(stream: torch.Tensor, tokenizer: Tokenizer) -> torch.Tensor:
    """flags[i] is True when a span may start (or end) at token i on a line start.

    Byte-level BPE glues a newline to the following indentation ("\\n   " is
    one token such as 'ĊĠĠĠ'), so the character where a line starts is often
    inside a token.  A token boundary counts as a line start when token i contains
    a newline (the server moves that newline into the span) or token i-1 ends with
    one.
    """
    texts = tokenizer.token_texts
    has_newline = torch.tensor(["\n" in t for t in texts], dtype=torch.bool)
    ends_newline = torch.tensor([t.endswith("\n") for t in texts], dtype=torch.bool)
    ids = stream.long()
    flags = has_newline[ids].clone()
    if len(ids):
        flags[1:] |= ends_newline[ids[:-1]]
        flags[0] = True  # the stream starts with a file
    return flags


# ---------------------------------------------------------------------------
# 3. Training rows
# ---------------------------------------------------------------------------


@dataclass
class RowConfig:
    """Shape and mix of training rows."""

    seq_len: int = 256
    infill_fraction: float = 0.6  # rows shaped like a server request
    line_aligned_fraction: float = 0.7  # of infill rows: middle = whole lines
    max_middle: int = 96  # tokens in an infill middle (log-uniform, so mostly short)
    max_pads: int = 32  # <|pad|> tokens after the middle (uniform 0..max_pads)
    full_mask_fraction: float = 0.2  # of infill rows: t = 1, as at the first sampling step
    eps: float = 1e-3  # smallest masking rate; bounds the 1/t weight


@dataclass
class Batch:
    """Rows for the masked-diffusion loss, plus what tests need to inspect them.

    The maskable region of row b is `spans[b, 0]` onwards for
    `spans[b, 1] + spans[b, 2]` positions: the middle then its pads in infill rows,
    the whole row (offset 0, length L, no pads) in plain rows.
    """

    inputs: torch.Tensor  # (B, L) int64, the row with masked positions replaced by <|mask|>
    targets: torch.Tensor  # (B, L) int64, the clean row
    weights: torch.Tensor  # (B, L) float32, 1/t at masked positions, 0 elsewhere
    denominators: torch.Tensor  # (B,) float32, size of each row's maskable region
    t: torch.Tensor  # (B,) float32, masking rate of each row
    infill: torch.Tensor  # (B,) bool
    aligned: torch.Tensor  # (B,) bool, infill middle starts and ends on line starts
    spans: torch.Tensor  # (B, 3) int64: region offset in the row, middle length, pad count
    stream_starts: torch.Tensor  # (B,) int64, stream index of the region's first token

    def to(self, device: torch.device) -> Batch:
        """The same batch with the tensors the loss reads moved to `device`."""
        move = {"non_blocking": True}
        return Batch(self.inputs.to(device, **move), self.targets.to(device, **move),
                     self.weights.to(device, **move), self.denominators.to(device, **move),
                     self.t, self.infill, self.aligned, self.spans, self.stream_starts)


@dataclass
class _Row:
    tokens: torch.Tensor
    offset: int
    middle: int
    pads: int
    t: float
    infill: bool
    aligned: bool
    stream_start: int


class RowSampler:
    """Draws batches of training rows from one token stream, reproducibly from a seed.

    Plain rows follow the MDLM / LLaDA objective: every token is masked with
    probability t ~ U(eps, 1) and the loss on masked tokens is weighted 1/t.
    Infilling rows mask only a contiguous middle followed by k pads, never the
    prefix or suffix, because that is the only thing the server ever asks for;
    the pads teach the model to end a fill early when it was given more room than
    it needs.
    """

    def __init__(self, stream: torch.Tensor, line_starts: torch.Tensor, mask_id: int,
                 pad_id: int, cfg: RowConfig | None = None, seed: int = 0):
        self.cfg = cfg or RowConfig()
        if self.cfg.max_middle + self.cfg.max_pads > self.cfg.seq_len:
            raise ValueError("max_middle + max_pads must fit in seq_len")
        if len(stream) == 0:
            raise ValueError("cannot sample rows from an empty token stream")
        # Room for a full row of context on both sides of any infill middle; a tiny
        # corpus (tests) is repeated to get it rather than special-cased everywhere.
        need = 2 * self.cfg.seq_len + self.cfg.max_middle + 2
        if len(stream) < need:
            reps = math.ceil(need / len(stream))
            stream, line_starts = stream.repeat(reps), line_starts.repeat(reps)
        self.stream = stream.long()
        self.boundaries = torch.nonzero(line_starts).flatten()
        self.mask_id, self.pad_id = mask_id, pad_id
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self, batch_size: int) -> Batch:
        """A batch of rows; masking rates are stratified over the batch.

        Spreading t evenly over (eps, 1) within a batch (MDLM's low-discrepancy
        sampler) keeps the marginal U(eps, 1) but cuts the variance that the 1/t
        weight otherwise adds to the loss.
        """
        cfg = self.cfg
        u = self.rng.random()
        ts = [cfg.eps + (1 - cfg.eps) * ((u + i / batch_size) % 1.0) for i in range(batch_size)]
        self.rng.shuffle(ts)
        rows = [self._infill_row(t) if self.rng.random() < cfg.infill_fraction
                else self._plain_row(t) for t in ts]
        return self._mask(rows)

    def _plain_row(self, t: float) -> _Row:
        length = self.cfg.seq_len
        start = self.rng.randrange(0, len(self.stream) - length + 1)
        return _Row(self.stream[start:start + length], 0, length, 0, t, False, False, start)

    def _middle_length(self) -> int:
        """Log-uniform on 1..max_middle: completions are mostly a few tokens long."""
        return int(math.exp(self.rng.random() * math.log(self.cfg.max_middle + 1)))

    def _aligned_span(self, start: int, target: int, longest: int) -> tuple[int, int] | None:
        """(start, end) on line starts, start at or after `start`, length near `target`."""
        b = self.boundaries
        j = int(torch.searchsorted(b, start))
        if j >= len(b):
            return None
        first = int(b[j])
        ends = b[j + 1:j + 1 + 128]
        ends = ends[ends - first <= longest]
        if len(ends) == 0 or first + longest + self.cfg.seq_len > len(self.stream):
            return None
        end = int(ends[torch.argmin((ends - first - target).abs())])
        return first, end

    def _infill_row(self, t: float) -> _Row:
        cfg, length = self.cfg, self.cfg.seq_len
        pads = self.rng.randint(0, cfg.max_pads)
        longest = min(cfg.max_middle, length - pads)
        target = min(self._middle_length(), longest)
        start = self.rng.randrange(length, len(self.stream) - length - cfg.max_middle)
        span = None
        if self.rng.random() < cfg.line_aligned_fraction:
            span = self._aligned_span(start, target, longest)
        start, end = span if span is not None else (start, start + target)
        middle = end - start
        before = self.rng.randint(0, length - middle - pads)
        after = length - middle - pads - before
        tokens = torch.cat([
            self.stream[start - before:start],
            self.stream[start:end],
            torch.full((pads,), self.pad_id, dtype=torch.long),
            self.stream[end:end + after],
        ])
        if self.rng.random() < cfg.full_mask_fraction:
            t = 1.0
        return _Row(tokens, before, middle, pads, t, True, span is not None, start)

    def _mask(self, rows: list[_Row]) -> Batch:
        targets = torch.stack([r.tokens for r in rows])
        inputs = targets.clone()
        weights = torch.zeros(targets.shape, dtype=torch.float32)
        for b, r in enumerate(rows):
            size = r.middle + r.pads
            chosen = torch.rand(size, generator=self.gen) < r.t
            where = r.offset + torch.nonzero(chosen).flatten()
            inputs[b, where] = self.mask_id
            weights[b, where] = 1.0 / r.t
        return Batch(
            inputs=inputs,
            targets=targets,
            weights=weights,
            denominators=torch.tensor([float(r.middle + r.pads) for r in rows]),
            t=torch.tensor([r.t for r in rows], dtype=torch.float32),
            infill=torch.tensor([r.infill for r in rows]),
            aligned=torch.tensor([r.aligned for r in rows]),
            spans=torch.tensor([[r.offset, r.middle, r.pads] for r in rows], dtype=torch.long),
            stream_starts=torch.tensor([r.stream_start for r in rows], dtype=torch.long),
        )
