"""Training rows cut from the token stream: plain masked-diffusion rows and infilling rows.

Plain rows teach the general masked-diffusion objective; infilling rows imitate
exactly what the server asks of the model (a masked middle padded with
`<|pad|>` between an intact prefix and suffix).  A whole batch is drawn with a
handful of tensor operations, never a Python loop per row: a GPU that trains on
a million tokens a second needs about two thousand 512-token rows a second,
and the batch is built on the same CPU thread that launches its kernels.
Measured on one thread of this project's 2-core VM, 64-row batches of 512
tokens: ~48,000 rows/s (the per-row loop this replaced: ~18,000), so building
a batch takes ~1.3 ms of a ~36 ms GPU step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class RowConfig:
    """Shape and mix of training rows.

    `max_pads` is the server's multi-line span (`multiLineTokens`, 48): a fill of k
    tokens there leaves 48 - k pads, and at 32 a model trained by the CPU recipe
    never saw the 33 to 48 pads after every multi-line fill shorter than 16 tokens
    (the GPU recipe had 48 already).  A single-line span (16) leaves at most 16.
    `max_middle` covers both spans; only a rewrite (up to `maxSpanTokens`, 128) asks
    for more, which the GPU recipe's 512-token rows train (128) and the CPU recipe's
    256-token rows leave at 96, so that `--seq-len` 144 still holds an infilling row.
    """

    seq_len: int = 256
    infill_fraction: float = 0.6  # rows shaped like a server request
    line_aligned_fraction: float = 0.7  # of infill rows: middle = whole lines
    max_middle: int = 96  # tokens in an infill middle (log-uniform, so mostly short)
    max_pads: int = 48  # <|pad|> tokens after the middle (uniform 0..max_pads)
    full_mask_fraction: float = 0.2  # of infill rows: t = 1, as at the first sampling step
    eps: float = 1e-3  # smallest masking rate; bounds the 1/t weight


ALIGN_LOOKAHEAD = 128  # line starts considered as the end of a line-aligned middle


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
    positions: torch.Tensor  # (N,) int64, flat indices b * L + i of the masked positions
    t: torch.Tensor  # (B,) float32, masking rate of each row
    infill: torch.Tensor  # (B,) bool
    aligned: torch.Tensor  # (B,) bool, infill middle starts and ends on line starts
    spans: torch.Tensor  # (B, 3) int64: region offset in the row, middle length, pad count
    stream_starts: torch.Tensor  # (B,) int64, stream index of the region's first token
    # (S, L) int64, the file each position's token comes from (an infill row's pads: the
    # middle's) in the S rows that hold two files, which come first, for the model to
    # attend within; None when no row does.
    segments: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        """The same batch with the tensors the training step reads moved to `device`.

        `positions` travels with the batch, so the loss can pick the masked
        positions without asking the device which they are (a sync every step).
        Copies to a GPU go through pinned memory, so they are truly asynchronous.
        """
        if device.type == "cpu":
            return self

        def move(x: torch.Tensor) -> torch.Tensor:
            pinned = x.pin_memory() if device.type == "cuda" else x
            return pinned.to(device, non_blocking=True)

        return Batch(move(self.inputs), move(self.targets), move(self.weights),
                     move(self.denominators), move(self.positions), self.t,
                     move(self.infill), self.aligned, self.spans, self.stream_starts,
                     None if self.segments is None else move(self.segments))


class RowSampler:
    """Draws batches of training rows from one token stream, reproducibly from a seed.

    Plain rows follow the MDLM / LLaDA objective: every token is masked with
    probability t ~ U(eps, 1) and the loss on masked tokens is weighted 1/t.
    Infilling rows mask only a contiguous middle followed by k pads, never the
    prefix or suffix, because that is the only thing the server ever asks for;
    the pads teach the model to end a fill early when it was given more room than
    it needs.

    The stream is files joined end to end, and `file_starts` flags the token that
    begins each.  A middle never runs past the end of its file: cut there, it ends
    at the file's last line break (a line start), so an aligned middle stays
    aligned.  A middle that went on into the next file taught the model to write
    the end of one module and the start of an unrelated one into one fill, which
    no server span holds (3.3 of every 1,000 infilling rows of the CPU recipe on
    the standard library).

    Context stays inside one file too: a row that holds two files (45 of every 1,000
    of the CPU recipe's 256-token rows of the standard library, 87 of the GPU
    recipe's 512-token rows) says which file each position is in (`Batch.segments`),
    and the model attends only within it, so each file's part of the row is what
    the server would show of that file alone: its start or end, then nothing.  No
    token is wasted, as cutting rows at seams and padding them would; and no token
    marks the seam, which would need an id the vocabulary does not have (all 8,192
    of the shipped tokenizer's are taken; `<|pad|>` already means the end of a fill
    with the same file's suffix after it) and which the server would never send.
    """

    def __init__(self, stream: torch.Tensor, line_starts: torch.Tensor, mask_id: int,
                 pad_id: int, cfg: RowConfig | None = None, seed: int = 0,
                 file_starts: torch.Tensor | None = None):
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
            file_starts = None if file_starts is None else file_starts.repeat(reps)
        self.stream = stream.long()
        self.boundaries = torch.nonzero(line_starts).flatten()
        # Where each file ends: the next one's start, and the stream's end for the last
        # (without `file_starts` the stream is one text, cut nowhere).
        later = torch.zeros(0, dtype=torch.long) if file_starts is None else \
            torch.nonzero(file_starts[1:]).flatten() + 1
        self.file_ends = torch.cat([later, torch.tensor([len(stream)])])
        # Row starts are drawn at or after seq_len, so a lone line start at 0 is never
        # found: it only keeps the lookups below valid when the stream has none.
        self._lookup = self.boundaries if len(self.boundaries) else torch.zeros(1, dtype=torch.long)
        self.mask_id, self.pad_id = mask_id, pad_id
        self.gen = torch.Generator().manual_seed(seed)

    def _uniform(self, n: int) -> torch.Tensor:
        return torch.rand(n, generator=self.gen, dtype=torch.float64)

    def _randint(self, low: int, high: torch.Tensor | int, n: int) -> torch.Tensor:
        """n integers, each uniform on [low, high) (high may differ per row)."""
        return low + (self._uniform(n) * (torch.as_tensor(high) - low)).long()

    def sample(self, batch_size: int, infill_fraction: float | None = None) -> Batch:
        """A batch of rows; masking rates are stratified over the batch.

        Spreading t evenly over (eps, 1) within a batch (MDLM's low-discrepancy
        sampler) keeps the marginal U(eps, 1) but cuts the variance that the 1/t
        weight otherwise adds to the loss.  `infill_fraction` overrides the
        configured share of infilling rows (a curriculum changes it over a run).
        """
        cfg, n = self.cfg, batch_size
        share = cfg.infill_fraction if infill_fraction is None else infill_fraction
        u = float(self._uniform(1))
        t = cfg.eps + (1 - cfg.eps) * ((u + torch.arange(n, dtype=torch.float64) / n) % 1.0)
        t = t[torch.randperm(n, generator=self.gen)].float()
        infill = self._uniform(n) < share

        offset, middle, pads, start, aligned = self._infill_geometry(n)
        plain_start = self._randint(0, len(self.stream) - cfg.seq_len + 1, n)
        offset = torch.where(infill, offset, 0)
        middle = torch.where(infill, middle, cfg.seq_len)
        pads = torch.where(infill, pads, 0)
        start = torch.where(infill, start, plain_start)
        aligned &= infill
        t = torch.where(infill & (self._uniform(n) < cfg.full_mask_fraction), 1.0, t)
        return self._assemble(t, infill, aligned, offset, middle, pads, start)

    def _infill_geometry(self, n: int) -> tuple[torch.Tensor, ...]:
        """(offset in row, middle length, pads, stream start, aligned) of n infill rows.

        The middle is log-uniform on 1..max_middle tokens (completions are mostly
        short).  A share of middles is moved onto line starts: the first line
        start at or after the drawn position begins it, and the line start
        among the next ALIGN_LOOKAHEAD whose length is nearest the drawn one ends
        it, within the room the pads leave; a row with no such line start keeps
        its unaligned middle.  A middle that would run past its file's end is cut
        there.
        """
        cfg, length, size = self.cfg, self.cfg.seq_len, len(self.stream)
        pads = self._randint(0, cfg.max_pads + 1, n)
        longest = (length - pads).clamp(max=cfg.max_middle)
        drawn = torch.exp(self._uniform(n) * math.log(cfg.max_middle + 1)).long()
        target = torch.minimum(drawn.clamp(1, cfg.max_middle), longest)
        start = self._randint(length, size - length - cfg.max_middle, n)

        b = self._lookup
        j = torch.searchsorted(b, start)
        found = j < len(b)
        first = b[j.clamp(max=len(b) - 1)]
        k = j[:, None] + 1 + torch.arange(ALIGN_LOOKAHEAD)  # (n, lookahead)
        ends = b[k.clamp(max=len(b) - 1)]
        fits = (k < len(b)) & (ends - first[:, None] <= longest[:, None])
        miss = (ends - first[:, None] - target[:, None]).abs().masked_fill(~fits, size)
        end = ends.gather(1, miss.argmin(1, keepdim=True)).squeeze(1)
        room = first + longest + length <= size
        aligned = (self._uniform(n) < cfg.line_aligned_fraction) & found & fits.any(1) & room
        start = torch.where(aligned, first, start)
        middle = torch.where(aligned, end - first, target)
        middle = torch.minimum(middle, self._file_end(start) - start)
        offset = self._randint(0, length - middle - pads + 1, n)
        return offset, middle, pads, start, aligned

    def _file(self, at: torch.Tensor) -> torch.Tensor:
        """Index of the file holding each stream position in `at`."""
        return torch.searchsorted(self.file_ends, at, right=True)

    def _file_end(self, at: torch.Tensor) -> torch.Tensor:
        """Stream index where the file holding each stream position in `at` ends."""
        return self.file_ends[self._file(at)]

    def _assemble(self, t: torch.Tensor, infill: torch.Tensor, aligned: torch.Tensor,
                  offset: torch.Tensor, middle: torch.Tensor, pads: torch.Tensor,
                  start: torch.Tensor) -> Batch:
        """Gather the rows from the stream, insert the pads and mask the regions.

        Row b reads the stream from `start - offset` on; after its middle come
        `pads` pad tokens, and the suffix goes on where the middle ended.

        The rows that hold two files come first, with each position's file (that of
        its stream token; a pad's is that of the middle it follows, which may end
        where its file does): the model masks attention in those rows alone, and runs
        the others, most of them (91% of the GPU recipe's), as it runs a server
        request, with no mask to keep a GPU's flash attention from them (not measured
        there yet).  On a CPU the split costs a little: in CPU time on one thread, a
        step of the CPU recipe's shape (32 x 256 tokens, a tenth of the rows over a
        seam) took 2.32 s unmasked, 2.35 s with every row masked, 2.39 s with the
        tenth masked apart (attention alone 86, 95 and 105 ms; 2026-12-03).
        """
        n, length = len(t), self.cfg.seq_len
        first = start - offset  # stream index of the row's first token, then its last
        crossing = self._file(first) != self._file(first + length - 1 - pads)
        order = torch.argsort((~crossing).to(torch.int8), stable=True)
        t, infill, aligned, offset, middle, pads, start = (
            x[order] for x in (t, infill, aligned, offset, middle, pads, start))
        crossed = int(crossing.sum())
        p = torch.arange(length)[None, :]  # (1, L)
        region_end = (offset + middle + pads)[:, None]
        in_pads = (p >= (offset + middle)[:, None]) & (p < region_end)
        after = p >= region_end
        index = (start - offset)[:, None] + p - pads[:, None] * after  # (n, L)
        targets = self.stream[index]
        targets = targets.masked_fill(in_pads, self.pad_id)
        region = (p >= offset[:, None]) & (p < region_end)
        masked = region & (torch.rand((n, length), generator=self.gen) < t[:, None])
        inputs = targets.masked_fill(masked, self.mask_id)
        weights = masked.float() / t[:, None]
        segments = None
        if crossed:
            segments = self._file(torch.where(in_pads, start[:, None], index)[:crossed])
        return Batch(
            inputs=inputs,
            targets=targets,
            weights=weights,
            denominators=(middle + pads).float(),
            positions=torch.nonzero(masked.flatten()).flatten(),
            t=t,
            infill=infill,
            aligned=aligned,
            spans=torch.stack([offset, middle, pads], dim=1),
            stream_starts=start,
            segments=segments,
        )
