"""Property specification of training rows (dlm_lsp.training.rows) over every shape of
stream and RowConfig the sampler accepts, not only the corpus tests/test_training.py uses:
a stream shorter than a row (repeated), one without any line start or with line starts
only in its last tokens (where an aligned middle leaves no room for the suffix after it), a
middle and its pads that fill the whole row, no pads at all, files shorter than a middle.

Each row must look like a server request: the clean row is a slice of the stream with
`pads` pad tokens inserted after the middle and nowhere else, masks and loss weights only
inside the middle and its pads, a line-aligned middle on line starts at both ends, and a
middle inside one file (the stream is files end to end; no span holds two), and each
position marked with its file, for the model to attend within.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlm_lsp.training.rows import RowConfig, RowSampler

PAD, MASK = 0, 1


@st.composite
def samplers(draw: st.DrawFn) -> tuple[RowSampler, torch.Tensor | None]:
    """A sampler, and flags of the tokens of its stream that start a file (None: the
    stream is one text)."""
    length = draw(st.sampled_from([4, 16, 48]))
    middle = draw(st.integers(1, length))
    cfg = RowConfig(seq_len=length, max_middle=middle,
                    max_pads=draw(st.integers(0, length - middle)),
                    infill_fraction=draw(st.sampled_from([0.0, 0.7, 1.0])),
                    line_aligned_fraction=draw(st.sampled_from([0.5, 1.0])),
                    full_mask_fraction=draw(st.sampled_from([0.0, 0.5])))
    size = draw(st.sampled_from([1, 7, 300]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    stream = torch.randint(2, 60, (size,), generator=gen)  # never PAD or MASK
    line_starts = torch.rand(size, generator=gen) < draw(st.sampled_from([0.0, 0.2, 1.0]))
    if draw(st.booleans()):  # lines start only in the last tokens: no room for a suffix
        line_starts[:-3] = False
    file_starts = None
    if draw(st.booleans()):  # files of a few tokens up to a few rows; each starts a line
        file_starts = torch.rand(size, generator=gen) < draw(st.sampled_from([0.02, 0.3]))
        file_starts[0] = True
        line_starts |= file_starts
    sampler = RowSampler(stream, line_starts, MASK, PAD, cfg, seed=draw(st.integers(0, 99)),
                         file_starts=file_starts)
    return sampler, file_starts


@settings(derandomize=True, database=None, deadline=None, max_examples=100,
          suppress_health_check=[HealthCheck.too_slow])
@given(samplers(), st.sampled_from([1, 9]))
def test_every_row_is_a_slice_of_the_stream_masked_only_in_its_middle_and_pads(
        drawn: tuple[RowSampler, torch.Tensor], rows: int) -> None:
    sampler, files = drawn
    cfg, stream = sampler.cfg, sampler.stream
    boundaries = set(sampler.boundaries.tolist())
    # a stream shorter than a row's needs is repeated: each copy starts with a file
    file_starts = torch.zeros(1, dtype=torch.long) if files is None else \
        torch.nonzero(files.repeat(len(stream) // len(files))).flatten()
    batch = sampler.sample(rows)
    files_of = []
    for b in range(rows):
        offset, middle, pads = batch.spans[b].tolist()
        start = int(batch.stream_starts[b])
        targets, inputs = batch.targets[b], batch.inputs[b]
        if batch.infill[b]:
            assert 1 <= middle <= cfg.max_middle and 0 <= pads <= cfg.max_pads
            assert offset >= 0 and offset + middle + pads <= cfg.seq_len
        else:
            assert (offset, middle, pads) == (0, cfg.seq_len, 0)
        end = offset + middle
        clean = torch.cat([stream[start - offset:start + middle],
                           torch.full((pads,), PAD),
                           stream[start + middle:start + middle + cfg.seq_len - end - pads]])
        assert torch.equal(targets, clean)
        region = torch.zeros(cfg.seq_len, dtype=torch.bool)
        region[offset:end + pads] = True
        masked = inputs == MASK
        assert not (masked & ~region).any()
        assert torch.equal(inputs[~masked], targets[~masked])
        assert torch.equal(batch.weights[b] > 0, masked)
        assert torch.allclose(batch.weights[b][masked], 1 / batch.t[b])
        assert cfg.eps <= float(batch.t[b]) <= 1 and batch.denominators[b] == middle + pads
        if batch.aligned[b]:
            assert batch.infill[b] and {start, start + middle} <= boundaries
        if batch.infill[b]:
            assert not ((file_starts > start) & (file_starts < start + middle)).any()
        # the file of each position's token, a pad's being its middle's
        where = torch.cat([torch.arange(start - offset, start + middle),
                           torch.full((pads,), start),
                           torch.arange(start + middle, start + middle + cfg.seq_len - end - pads)])
        files_of.append(torch.searchsorted(file_starts, where, right=True) - 1)
    # the rows that hold two files come first, with each position's file, to attend within
    files_of = torch.stack(files_of)
    crossing = (files_of != files_of[:, :1]).any(1)
    crossed = int(crossing.sum())
    assert not crossing[crossed:].any()
    if crossed:
        assert torch.equal(batch.segments - batch.segments[:, :1],
                           (files_of - files_of[:, :1])[:crossed])
    else:
        assert batch.segments is None
