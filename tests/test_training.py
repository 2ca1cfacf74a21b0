"""Specifications of the training pipeline (dlm_lsp.training), kept fast on a laptop CPU."""

from __future__ import annotations

import contextlib
import email.message
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models import ModelLoadError, load_model
from dlm_lsp.models.command import inspect
from dlm_lsp.models.tiny import TinyConfig, TinyDenoiser, TinyModel, plan_shards, save_tiny
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN
from dlm_lsp.training import contamination
from dlm_lsp.training import train as train_module
from dlm_lsp.training.contamination import NgramFilter, humaneval_texts, words
from dlm_lsp.training.data import (
    SourceConfig,
    SourceFile,
    collect_sources,
    encode_files,
    encode_stream,
    heldout_rank,
    line_start_flags,
    text_digest,
    train_tokenizer,
    unit_hash,
)
from dlm_lsp.training.fill_probe import ProbeConfig
from dlm_lsp.training.gpu_run import export_plan, full_config
from dlm_lsp.training.licences import classify, python_files_by_distribution, site_packages_dirs
from dlm_lsp.training.lineage import SplitRecord
from dlm_lsp.training.nearcopy import sketch
from dlm_lsp.training.objective import masked_diffusion_loss, row_losses
from dlm_lsp.training.rows import RowConfig, RowSampler
from dlm_lsp.training.train import (
    TrainConfig,
    TrainingError,
    learning_rate,
    main,
    schedule_progress,
    tiny_preset,
    train,
)

SOURCES = {
    "geometry.py": '''
        """Points and distances."""
        import math


        class Point:
            def __init__(self, x: float, y: float) -> None:
                self.x = x
                self.y = y

            def distance(self, other: "Point") -> float:
                return math.hypot(self.x - other.x, self.y - other.y)
        ''',
    "text_utils.py": '''
        def slugify(title):
            """Lower-case words joined by dashes: 'Héllo Wörld' -> 'héllo-wörld'."""
            words = [w for w in title.lower().split() if w]
            return "-".join(words)


        def count_lines(path):
            with open(path, encoding="utf-8") as handle:
                return sum(1 for _ in handle)
        ''',
    "pkg/numbers.py": '''
        def fib(n):
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a


        def is_prime(n):
            if n < 2:
                return False
            for d in range(2, int(n ** 0.5) + 1):
                if n % d == 0:
                    return False
            return True
        ''',
    "pkg/__init__.py": '''
        """A package."""
        from pkg.numbers import fib, is_prime

        __all__ = ["fib", "is_prime"]
        ''',
    "shapes.py": '''
        from dataclasses import dataclass


        @dataclass
        class Rect:
            width: float
            height: float

            def area(self):
                return self.width * self.height

            def scaled(self, k):
                return Rect(self.width * k, self.height * k)
        ''',
    "cli.py": '''
        import argparse
        import sys


        def main(argv=None):
            parser = argparse.ArgumentParser()
            parser.add_argument("--name", default="world")
            args = parser.parse_args(argv)
            print(f"hello, {args.name}")
            return 0


        if __name__ == "__main__":
            sys.exit(main())
        ''',
}


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src")
    for rel, body in SOURCES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip("\n") * 3, encoding="utf-8")
    (root / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))  # not UTF-8
    return root


@pytest.fixture(scope="module")
def corpus(source_dir: Path):
    return collect_sources(SourceConfig(include_stdlib=False, extra_roots=[source_dir]))


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return train_tokenizer([f.text for f in corpus.train], vocab_size=400, split_lines=True)


def make_sampler(corpus, tokenizer, **rows) -> RowSampler:
    stream = encode_stream(tokenizer, corpus.train)
    flags = line_start_flags(stream, tokenizer)
    cfg = RowConfig(**{"seq_len": 64, "max_middle": 24, "max_pads": 8, **rows})
    return RowSampler(stream, flags, tokenizer.token_id(MASK_TOKEN),
                      tokenizer.token_id(PAD_TOKEN), cfg, seed=7)


# --- source collection -------------------------------------------------------


def test_sources_are_deterministic_split_and_skip_undecodable_files(corpus, source_dir):
    again = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[source_dir]))
    assert [f.path for f in again.train] == [f.path for f in corpus.train]
    assert [f.path for f in again.heldout] == [f.path for f in corpus.heldout]
    assert corpus.heldout, "at least one file is held out when there are several"
    names = {f.path for f in corpus.train} | {f.path for f in corpus.heldout}
    assert not {f.path for f in corpus.train} & {f.path for f in corpus.heldout}
    assert "pkg/numbers.py" in names and "latin1.py" not in names


def test_byte_cap_limits_the_corpus(source_dir):
    small = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[source_dir],
                                         max_bytes=1200))
    total = sum(len(f.text.encode()) for f in small.train + small.heldout)
    assert 0 < total <= 1200



def test_a_named_root_without_python_files_is_an_error_not_a_silent_no_op(source_dir,
                                                                        tmp_path):
    """`--extra-root` at a mistyped folder (say, the project's docs) trained on the
    standard library alone and said nothing; `--no-stdlib` alone said 'no readable
    Python source files found under ' and named nothing."""
    (tmp_path / "README.txt").write_text("no code here\n")
    with pytest.raises(FileNotFoundError, match=f"--extra-root {tmp_path} holds no .py files"):
        collect_sources(SourceConfig(extra_roots=[source_dir, tmp_path]))
    with pytest.raises(FileNotFoundError, match="no sources: .* --extra-root"):
        collect_sources(SourceConfig(include_stdlib=False))


# --- tokenizer ----------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "def f(x):\n    return x + 1\n",
    "if a:\n\tif b:\n\t\treturn 'tab'\n",
    "x = 1\r\ny = 2\r\n",
    "naïve = 'héllo wörld'  # ünïcödé\nπ = 3.14159\n名前 = '値'  # 😀\n",
    "   leading spaces and trailing   \n\n\n",
    "",
])
def test_tokenizer_round_trips_source_exactly(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_tokenizer_has_special_tokens_first(tokenizer):
    assert tokenizer.token_id(PAD_TOKEN) == 0
    assert tokenizer.token_id(MASK_TOKEN) == 1
    assert tokenizer.vocab_size <= 400
    assert tokenizer.token_texts[0] == tokenizer.token_texts[1] == ""


def test_stream_encodes_literal_special_token_text_as_text(tokenizer):
    files = [SourceFile("a.py", "MASK = '<|mask|>'\nPAD = '<|pad|>'\n")]
    stream = encode_stream(tokenizer, files)
    assert not set(stream.tolist()) & {0, 1}
    assert tokenizer.decode(stream.tolist()) == files[0].text + "\n"


def test_stream_is_each_file_encoded_on_its_own_in_order_across_chunks(corpus, tokenizer):
    """Chunks only batch the work: the stream is every file's ids, file after file."""
    files = corpus.train[:5]
    expected = [i for f in files for i in tokenizer.backend.encode(
        f.text + "\n", add_special_tokens=False).ids]
    stream = encode_stream(tokenizer, files, chunk=2)
    assert stream.dtype == torch.int32 and stream.tolist() == expected


@pytest.fixture(scope="module")
def merged_tokenizer(corpus):
    """The bootstrap model's kind: plain byte-level BPE, line breaks merged with indentation."""
    return train_tokenizer([f.text for f in corpus.train], vocab_size=400, split_lines=False)


@pytest.mark.parametrize("which", ["tokenizer", "merged_tokenizer"])
def test_line_starts_include_tokens_that_carry_the_newline(request, which):
    tokenizer = request.getfixturevalue(which)
    stream = encode_stream(tokenizer, [SourceFile("a.py", "def f():\n    return 1\n")])
    flags = line_start_flags(stream, tokenizer)
    texts = [tokenizer.token_texts[i] for i in stream.tolist()]
    for i, text in enumerate(texts):
        expected = i == 0 or "\n" in text or texts[i - 1].endswith("\n")
        assert bool(flags[i]) == expected
    joined = any("\n" in t and t.strip(" ") != t for t in texts)
    assert joined == (which == "merged_tokenizer"), "only plain BPE joins newline+indent"
    if which == "tokenizer":
        assert "\n" in texts and "\n    " not in texts


@pytest.mark.parametrize("which", ["tokenizer", "merged_tokenizer"])
def test_line_starts_never_cut_a_crlf_in_two(request, which):
    """A CRLF the vocabulary has no token for is `\\r` then `\\n`: the boundary between
    them was marked (the `\\n` holds a newline) and the one before the `\\r` was not, so
    aligned middles of CRLF files began after a lone `\\r`, which no server span does."""
    tokenizer = request.getfixturevalue(which)
    text = "if x:\r\n    y = 1\r\nz = 2\r\n"
    stream = encode_stream(tokenizer, [SourceFile("a.py", text)])
    texts = [tokenizer.token_texts[i] for i in stream.tolist()]
    assert "\r" in texts, "the case: these tokenizers, trained on LF files, split a CRLF"
    flags = line_start_flags(stream, tokenizer).tolist()
    starts = [sum(map(len, texts[:i])) for i in range(len(texts))]
    marked = {at for at, flag in zip(starts, flags, strict=True) if flag}
    joined = text + "\n"
    assert not {at for at in marked if joined[at - 1:at + 1] == "\r\n"}
    if which == "tokenizer":  # line breaks are tokens: both sides of each are marked
        edges = {m.start() for m in re.finditer("\r\n", text)} | \
            {m.end() for m in re.finditer("\r\n", text)}
        assert edges <= marked


# --- training rows ------------------------------------------------------------


def test_infill_rows_mask_only_middle_and_trailing_pads(corpus, tokenizer):
    sampler = make_sampler(corpus, tokenizer, infill_fraction=1.0)
    batch = sampler.sample(96)
    pad, mask = tokenizer.token_id(PAD_TOKEN), tokenizer.token_id(MASK_TOKEN)
    assert batch.infill.all()
    for b in range(96):
        offset, middle, pads = batch.spans[b].tolist()
        start = int(batch.stream_starts[b])
        region = torch.zeros(64, dtype=torch.bool)
        region[offset:offset + middle + pads] = True
        inputs, targets, weights = batch.inputs[b], batch.targets[b], batch.weights[b]
        assert 1 <= middle <= 24 and 0 <= pads <= 8
        # prefix, middle and suffix are slices of one tokenization of the joined files
        stream = sampler.stream
        assert torch.equal(targets[:offset], stream[start - offset:start])
        assert torch.equal(targets[offset:offset + middle], stream[start:start + middle])
        rest = 64 - offset - middle - pads
        assert torch.equal(targets[offset + middle + pads:],
                           stream[start + middle:start + middle + rest])
        # pads sit exactly between the middle and the suffix
        assert (targets[offset + middle:offset + middle + pads] == pad).all()
        assert (targets == pad).sum() == pads
        # prefix and suffix are never masked; loss weight only where masked
        assert torch.equal(inputs[~region], targets[~region])
        is_masked = inputs == mask
        assert torch.equal(weights > 0, is_masked)
        assert torch.allclose(weights[is_masked], 1 / batch.t[b].expand(int(is_masked.sum())))
        assert batch.denominators[b] == middle + pads
        if batch.t[b] == 1.0:
            assert is_masked[region].all()
    assert (batch.t == 1.0).any(), "some rows are fully masked, as at inference start"


def test_line_aligned_infill_spans_start_and_end_on_line_starts(corpus, tokenizer):
    sampler = make_sampler(corpus, tokenizer, infill_fraction=1.0, line_aligned_fraction=1.0)
    batch = sampler.sample(64)
    boundaries = set(sampler.boundaries.tolist())
    assert batch.aligned.float().mean() > 0.8
    for b in torch.nonzero(batch.aligned).flatten().tolist():
        start, middle = int(batch.stream_starts[b]), int(batch.spans[b, 1])
        assert start in boundaries and start + middle in boundaries


def test_an_infilling_middle_never_runs_from_one_file_into_the_next(corpus, tokenizer):
    """The stream is the files end to end, and a middle drawn near a file's end went on
    into the next file: the model was taught to write the end of one module and the
    start of an unrelated one as one fill.  Now it is cut at its file's end."""
    stream, starts = encode_files(tokenizer, corpus.train)
    sizes = [len(tokenizer.backend.encode(f.text + "\n", add_special_tokens=False).ids)
             for f in corpus.train]
    seams = list(itertools.accumulate(sizes))  # where each file ends and the next starts
    assert torch.nonzero(starts).flatten().tolist() == [0, *seams[:-1]]
    sampler = RowSampler(stream, line_start_flags(stream, tokenizer),
                         tokenizer.token_id(MASK_TOKEN), tokenizer.token_id(PAD_TOKEN),
                         RowConfig(seq_len=64, max_middle=24, max_pads=8, infill_fraction=1.0),
                         seed=7, file_starts=starts)
    batch = sampler.sample(2000)
    ends = set()
    for start, (_, middle, _) in zip(batch.stream_starts.tolist(), batch.spans.tolist(),
                                     strict=True):
        assert not [seam for seam in seams if start < seam < start + middle]
        ends.add(start + middle)
    assert ends & set(seams), "some middles end where their file does"


def test_a_training_row_predicts_each_file_from_that_file_alone(corpus, tokenizer):
    """A row cut from the files end to end may hold the end of one file and the start
    of the next; the model, which attends both ways, read each file's tokens in the
    light of the other's, a context the server never gives it.  The loss of every row
    must be the loss of its files' parts, each run by the model on its own."""
    stream, starts = encode_files(tokenizer, corpus.train)
    sampler = RowSampler(stream, line_start_flags(stream, tokenizer),
                         tokenizer.token_id(MASK_TOKEN), tokenizer.token_id(PAD_TOKEN),
                         RowConfig(seq_len=64, max_middle=24, max_pads=8), seed=7,
                         file_starts=starts)
    batch = sampler.sample(48)
    torch.manual_seed(0)
    module = TinyDenoiser(TinyConfig(vocab_size=tokenizer.vocab_size, d_model=32,
                                     n_layers=2, n_heads=2, max_length=64)).eval()
    expected = torch.zeros(48)
    crossed = 0 if batch.segments is None else len(batch.segments)
    assert 0 < crossed < 48, "some rows hold two files, and they come first"
    for b in range(48):
        files = batch.segments[b] if b < crossed else torch.zeros(64)
        parts = torch.unique_consecutive(files, return_counts=True)[1]
        assert (len(parts) > 1) == (b < crossed)
        for part in torch.arange(64).split(parts.tolist()):
            logits = module(batch.inputs[b, part][None])[0]  # this file's part alone
            ce = torch.nn.functional.cross_entropy(logits, batch.targets[b, part],
                                                   reduction="none")
            expected[b] += (ce * batch.weights[b, part]).sum() / batch.denominators[b]
    with torch.no_grad():
        torch.testing.assert_close(row_losses(module, batch), expected)


def test_a_run_draws_its_rows_knowing_where_each_file_starts(source_dir, tmp_path,
                                                              monkeypatch):
    samplers = []

    class Spy(RowSampler):
        def __init__(self, stream, *args, file_starts=None, **kwargs):
            super().__init__(stream, *args, file_starts=file_starts, **kwargs)
            samplers.append(None if file_starts is None else int(file_starts.sum()))

    monkeypatch.setattr(train_module, "RowSampler", Spy)
    stats = train(tiny_config(source_dir, tmp_path / "out", max_steps=1))
    heldout = len(collect_sources(SourceConfig(include_stdlib=False,
                                               extra_roots=[source_dir])).heldout)
    assert samplers == [stats["train_files"], heldout, heldout]  # training, held-out x2


def test_both_recipes_train_every_pad_count_a_server_span_leaves(tmp_path):
    """A multi-line fill of k tokens leaves `multiLineTokens` - k pads (up to 48, the
    whole span where the fill is empty); the CPU recipe drew at most 32, so its model
    never saw the pads after a multi-line fill shorter than 16 tokens."""
    server = ServerConfig()
    for recipe in (TrainConfig(), full_config(tmp_path)):
        assert recipe.rows.max_pads >= max(server.multi_line_tokens, server.single_line_tokens)
        assert recipe.rows.max_middle >= server.multi_line_tokens
        assert recipe.rows.max_middle + recipe.rows.max_pads <= recipe.seq_len


def test_plain_rows_weight_masked_tokens_by_inverse_rate(corpus, tokenizer):
    sampler = make_sampler(corpus, tokenizer, infill_fraction=0.0)
    batch = sampler.sample(32)
    mask = tokenizer.token_id(MASK_TOKEN)
    assert not batch.infill.any()
    assert ((batch.t >= 1e-3) & (batch.t <= 1.0)).all()
    assert (batch.denominators == 64).all()
    for b in range(32):
        is_masked = batch.inputs[b] == mask
        expected = torch.where(is_masked, 1 / batch.t[b], torch.zeros(()))
        assert torch.allclose(batch.weights[b], expected)
        assert torch.equal(batch.inputs[b][~is_masked], batch.targets[b][~is_masked])


def test_row_mix_and_sampling_are_reproducible(corpus, tokenizer):
    first = make_sampler(corpus, tokenizer).sample(200)
    second = make_sampler(corpus, tokenizer).sample(200)
    assert torch.equal(first.inputs, second.inputs)
    assert 0.45 < first.infill.float().mean() < 0.75


def test_loss_head_on_masked_positions_matches_full_forward(corpus, tokenizer):
    torch.manual_seed(0)
    module = TinyDenoiser(TinyConfig(vocab_size=tokenizer.vocab_size, d_model=32,
                                     n_layers=2, n_heads=2, max_length=64))
    batch = make_sampler(corpus, tokenizer).sample(4)
    ids = batch.inputs
    full = module(ids)
    assert torch.allclose(module.hidden(ids) @ module.embed.weight.T, full, atol=1e-5)
    ce = torch.nn.functional.cross_entropy(full.transpose(1, 2), batch.targets,
                                           reduction="none")
    expected = ((ce * batch.weights).sum(1) / batch.denominators).mean()
    assert torch.allclose(masked_diffusion_loss(module, batch), expected, atol=1e-5)


# --- end to end ---------------------------------------------------------------


def tiny_config(source_dir: Path, out: Path, **changes) -> TrainConfig:
    fields = dict(
        out_dir=out, seconds=2.0, include_stdlib=False, extra_roots=[source_dir],
        vocab_size=400, d_model=32, n_layers=1, n_heads=2, max_length=64, seq_len=48,
        batch_size=4, rows=RowConfig(max_middle=16, max_pads=4), warmup_steps=2,
        eval_rows=8, log_every=1.0,
    )
    return TrainConfig(**{**fields, **changes})


@pytest.fixture(scope="module")
def trained(source_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("model")
    return out, train(tiny_config(source_dir, out))


def test_tiny_run_saves_a_loadable_fp16_model_with_stats(trained):
    out, stats = trained
    model = TinyModel.load(out, torch.device("cpu"))
    assert model.max_length == 64 and model.tokenizer.vocab_size <= 400
    assert all(t.dtype == torch.float16 for t in load_file(str(out / "model.safetensors")).values())
    saved = json.loads((out / "config.json").read_text())["training"]
    assert saved == stats
    assert stats["steps"] > 0 and stats["tokens_seen"] == stats["steps"] * 4 * 48
    assert math.isfinite(stats["heldout_loss"]) and math.isfinite(stats["final_train_loss"])
    ids = torch.tensor([model.tokenizer.encode("def f(x):\n    return x\n")])
    assert torch.isfinite(model.logits(ids)).all()


def test_warm_restart_keeps_the_tokenizer(trained, source_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "cpu_has_native_bf16", lambda: True)
    out, first = trained
    stats = train(tiny_config(source_dir, tmp_path / "again", seconds=1.0, init_from=out,
                              vocab_size=999, d_model=64, cpu_bf16=True))
    assert (tmp_path / "again" / "tokenizer.json").read_text() == \
        (out / "tokenizer.json").read_text()
    again = TinyModel.load(tmp_path / "again", torch.device("cpu"))
    assert again.module.cfg.d_model == 32, "a warm restart keeps the checkpoint's shape"
    assert stats["init_from"] == str(out)
    assert stats["cumulative_tokens_seen"] == first["tokens_seen"] + stats["tokens_seen"]
    assert stats["precision"] == "bf16 autocast" and math.isfinite(stats["heldout_loss"])


def test_a_warm_start_says_the_model_s_shape_in_words(trained, source_dir, tmp_path, capsys):
    """It printed the raw repr, "(shape TinyConfig(vocab_size=400, d_model=32, ...,
    mlp_ratio=4, rope_base=10000.0))"."""
    out, _ = trained
    train(tiny_config(source_dir, tmp_path / "again", max_steps=1, init_from=out))
    model = TinyModel.load(out, torch.device("cpu"))
    parameters = sum(p.numel() for p in model.module.parameters())
    vocabulary = model.tokenizer.vocab_size
    assert f"warm start from {out} (d 32 x 1 layers, 2 heads, 64 tokens, {vocabulary} ids, " \
           f"{parameters:,} parameters)" in capsys.readouterr().err.splitlines()


def test_a_continued_run_keeps_the_earlier_runs_and_adds_itself_to_their_totals(
        trained, source_dir, tmp_path):
    """A continued run's stats replaced the earlier run's: a model trained in three GPU
    sessions kept the record of the last alone, which its model card has to report."""
    out, first = trained
    second = train(tiny_config(source_dir, tmp_path / "second", init_from=out, max_steps=3))
    third = train(tiny_config(source_dir, tmp_path / "third", init_from=tmp_path / "second",
                              max_steps=2))
    assert [(run["tokens_seen"], run["heldout_loss"], run["init_from"])
            for run in third["earlier_runs"]] == [
        (first["tokens_seen"], first["heldout_loss"], None),
        (second["tokens_seen"], second["heldout_loss"], str(out))]
    assert third["earlier_runs"][0]["sources"] == first["sources"]
    runs = (first, second, third)
    assert third["cumulative_tokens_seen"] == sum(run["tokens_seen"] for run in runs)
    assert third["cumulative_seconds"] == pytest.approx(sum(run["seconds"] for run in runs),
                                                        abs=0.1)


def test_a_run_with_a_probe_records_its_fill_curve_against_all_runs_tokens(
        trained, source_dir, tmp_path):
    """The probe's numbers at each evaluation, placed by the tokens the model had seen over
    all its runs: a continued run's curve starts where its model's training ended, and the
    earlier runs' curves stay in the history, so a card can draw the whole curve."""
    out, first = trained
    probe = ProbeConfig(lines=3, humaneval=2)
    second = train(tiny_config(source_dir, tmp_path / "second", init_from=out, max_steps=4,
                               probe=probe))
    third = train(tiny_config(source_dir, tmp_path / "third", init_from=tmp_path / "second",
                              max_steps=3, probe=probe, eval_every=1e-9, log_every=1e-9))
    assert "fill_curve" not in first  # no probe asked for: none run
    assert second["fill_probe"] == {"lines": 3, "humaneval": 2}
    curve = second["fill_curve"]
    assert (curve[0]["tokens"], curve[-1]["tokens"]) == (
        first["tokens_seen"], first["tokens_seen"] + second["tokens_seen"])
    assert third["fill_curve"][0]["tokens"] == second["cumulative_tokens_seen"]
    # one point a set of weights: an evaluation at the last step is the final one's twin
    for run in (second, third):
        tokens = [point["tokens"] for point in run["fill_curve"]]
        assert tokens == sorted(set(tokens))
    assert third["earlier_runs"][1]["fill_curve"] == second["fill_curve"]
    assert set(third["fill_curve"][-1]) == {"tokens"} | {
        f"probe_{name}_{key}" for name in ("lines", "humaneval")
        for key in ("exact", "similarity", "empty")}


def test_a_probe_that_fails_is_said_and_the_run_trains_and_saves_without_it(
        source_dir, tmp_path, monkeypatch, capsys):
    """The GPU run is one of few, and its probe runs the sampler on the GPU, which nothing
    else in it does: a probe that fails must not cost the run."""
    from dlm_lsp.training import fill_probe

    calls = []

    def fails_the_second_time(self, module, device):
        calls.append(module.training)
        if len(calls) == 2:
            raise RuntimeError("CUDA error: device-side assert triggered")
        return {"probe_lines_exact": 0.0, "probe_lines_similarity": 1.0,
                "probe_lines_empty": 0.0}

    monkeypatch.setattr(fill_probe.FillProbe, "__call__", fails_the_second_time)
    stats = train(tiny_config(source_dir, tmp_path / "out", max_steps=6, eval_every=1e-9,
                              log_every=1e-9, probe=ProbeConfig(lines=3)))
    assert stats["steps"] == 6 and (tmp_path / "out" / "config.json").is_file()
    assert len(calls) == 2  # never asked again once it failed
    assert stats["fill_probe_error"] == "RuntimeError: CUDA error: device-side assert triggered"
    assert [point["tokens"] for point in stats["fill_curve"]] == [0]  # the point before it
    assert ("fill probe failed (RuntimeError: CUDA error: device-side assert triggered); "
            "training goes on without it") in capsys.readouterr().err


def test_train_probe_flag_sets_both_sets_and_refuses_a_negative_count(capsys):
    from dlm_lsp.training.train import build_parser, config_from_args

    cfg = config_from_args(build_parser().parse_args(["--tiny", "--out", "x", "--probe", "50"]))
    assert (cfg.probe.lines, cfg.probe.humaneval) == (50, 50)
    assert not config_from_args(build_parser().parse_args(["--tiny", "--out", "x"])).probe.enabled
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--probe", "-1"])
    assert "argument --probe: a whole number of tasks from 0 to 1,000" in capsys.readouterr().err


def test_a_continued_run_draws_rows_the_run_before_it_did_not(source_dir, tmp_path,
                                                              monkeypatch):
    """Every run drew its rows from --seed: one continuing a model on the same corpus saw
    the rows of the run before it, masks included, in the same order."""
    first_batches = []

    class Recording(RowSampler):
        def sample(self, *args, **kwargs):
            batch = super().sample(*args, **kwargs)
            first_batches.append(batch.inputs)
            return batch
    monkeypatch.setattr(train_module, "RowSampler", Recording)
    train(tiny_config(source_dir, tmp_path / "first", max_steps=1, eval_rows=0))
    stats = train(tiny_config(source_dir, tmp_path / "second", init_from=tmp_path / "first",
                              max_steps=1, eval_rows=0))
    assert len(first_batches) == 2 and not torch.equal(first_batches[0], first_batches[1])
    assert (stats["seed"], stats["row_seed"]) == (0, 1)


def _unranked(count: int) -> list[str]:
    """`count` file names none of which ranks below the held-out fraction, the lowest
    ranked first: a corpus of them gets its held-out file from the fallback."""
    names = sorted((f"module_{i}.py" for i in range(300)), key=heldout_rank)
    return [n for n in names if heldout_rank(n) >= SourceConfig().heldout_fraction][:count]


def test_a_continued_run_holds_out_again_the_file_its_model_was_measured_on(tmp_path,
                                                                           monkeypatch):
    """Where no file ranks below the held-out fraction, the fallback held out the
    lowest-ranked of the run's files; a run continuing the model on the project, grown
    by a file that ranks lower still, held that one out and trained on the file its
    model had been measured on."""
    newest, *files = _unranked(6)
    project = tmp_path / "project"
    project.mkdir()
    bodies = [textwrap.dedent(body) for body in SOURCES.values()]
    for i, name in enumerate(files):
        (project / name).write_text(f"{bodies[i % len(bodies)]}\nVERSION = {i}\n")
    corpora = []
    read = train_module.collect_sources
    monkeypatch.setattr(train_module, "collect_sources",
                        lambda cfg: corpora.append(read(cfg)) or corpora[-1])
    first = train(tiny_config(project, tmp_path / "first", max_steps=1))
    assert [f.path for f in corpora[0].heldout] == [files[0]]
    (project / newest).write_text(f"{bodies[0]}\nVERSION = 99\n")
    second = train(tiny_config(project, tmp_path / "second", max_steps=1,
                               init_from=tmp_path / "first"))
    assert [f.path for f in corpora[1].heldout] == [files[0]]
    assert newest in {f.path for f in corpora[1].train}
    assert first["heldout_pinned"] == second["heldout_pinned"] == [files[0]]


def test_a_held_out_set_shorter_than_a_row_is_said_to_mean_little(source_dir, tmp_path,
                                                                   capsys):
    """`--tiny --init-from default` held out one file of 13 tokens, and its held-out loss
    going from 3.69 to 4.62 read as the run making the model worse."""
    small, *files = _unranked(3)
    project = tmp_path / "project"
    project.mkdir()
    bodies = [textwrap.dedent(body) for body in SOURCES.values()]
    (project / small).write_text("x = 1\n")  # the lowest ranked: the fallback holds it out
    for i, name in enumerate(files):
        (project / name).write_text(f"{bodies[i % len(bodies)]}\nVERSION = {i}\n")
    train(tiny_config(project, tmp_path / "out", max_steps=1))
    err = capsys.readouterr().err
    assert re.search(r"note: the held-out set is \d+ tokens, less than one row \(--seq-len 48\)",
                     err), err
    train(tiny_config(source_dir, tmp_path / "again", max_steps=1))  # hundreds of tokens
    assert "note: the held-out set is" not in capsys.readouterr().err


def _ranked_heldout(count: int) -> list[str]:
    """`count` file names that rank below the held-out fraction (held out by path)."""
    names = (f"module_{i}.py" for i in range(5000))
    return [n for n in names if heldout_rank(n) < SourceConfig().heldout_fraction][:count]


def _write_project(root: Path, names: list[str]) -> dict[str, str]:
    """A file of distinct text under each name; {name: text}."""
    root.mkdir(parents=True)
    bodies = [textwrap.dedent(body) for body in SOURCES.values()]
    texts = {name: f"{bodies[i % len(bodies)]}\nVERSION = {i}\n" for i, name in enumerate(names)}
    for name, text in texts.items():
        (root / name).write_text(text)
    return texts


def test_a_continued_run_keeps_apart_by_text_what_earlier_runs_trained_on_and_held_out(
        tmp_path, monkeypatch):
    """The split is by path, and paths change between runs: Python 3.12 holds out
    test/test_ctypes/test_libc.py, the same bytes as 3.11's ctypes/test/test_libc.py that
    the shipped model trained on.  A run continuing a model on renamed files held out
    text its model had trained on, and trained on the text it had been measured on."""
    held, renamed_held, new = _ranked_heldout(3)
    kept, trained, renamed_trained = _unranked(3)
    corpora = []
    read = train_module.collect_sources
    monkeypatch.setattr(train_module, "collect_sources",
                        lambda cfg: corpora.append(read(cfg)) or corpora[-1])
    texts = _write_project(tmp_path / "first", [held, kept, trained])
    first = train(tiny_config(tmp_path / "first", tmp_path / "m1", max_steps=1))
    assert [f.path for f in corpora[0].heldout] == first["heldout_files"] == [held]

    # The trained file moves to a path that ranks held out, the held-out one to a path
    # that does not, and a new file that ranks held out joins them.
    second_root = tmp_path / "second"
    second_root.mkdir()
    for before, after in [(held, renamed_trained), (kept, kept), (trained, renamed_held)]:
        (second_root / after).write_text(texts[before])
    (second_root / new).write_text(f"{texts[kept]}\nNEW = 1\n")
    second = train(tiny_config(second_root, tmp_path / "m2", max_steps=1,
                               init_from=tmp_path / "m1"))
    assert sorted(f.path for f in corpora[1].heldout) == second["heldout_files"] \
        == sorted([renamed_trained, new])
    assert second["heldout_trained_before"] == [renamed_held]
    assert second["split"]["complete"] is True
    assert (second["split"]["trained_files"], second["split"]["heldout_files"]) == (2, 2)


def test_a_continued_run_places_an_edited_copy_as_the_text_it_came_from_was(
        tmp_path, monkeypatch):
    """Moved and edited, a file is a new text, and its path alone decided: Python 3.12's
    held-out test/test_tkinter/test_text.py is the tkinter/test/test_tkinter/test_text.py
    a 3.11 model trained on with its imports changed (Jaccard of shingles 0.92)."""
    from tests.test_nearcopy import edited, module

    (held, renamed_trained), (trained, renamed_held) = _ranked_heldout(2), _unranked(2)
    texts = {held: module("measured"), trained: module("learned"), "kept.py": module("kept")}
    first_root, second_root = tmp_path / "first", tmp_path / "second"
    for root, names in [(first_root, [held, trained, "kept.py"]),
                        (second_root, [renamed_held, renamed_trained, "kept.py"])]:
        root.mkdir()
        for name, before in zip(names, texts, strict=True):
            (root / name).write_text(edited(texts[before]) if name != before else texts[name])
    corpora = []
    read = train_module.collect_sources
    monkeypatch.setattr(train_module, "collect_sources",
                        lambda cfg: corpora.append(read(cfg)) or corpora[-1])
    first = train(tiny_config(first_root, tmp_path / "m1", max_steps=1))
    assert first["heldout_files"] == [held]
    second = train(tiny_config(second_root, tmp_path / "m2", max_steps=1,
                               init_from=tmp_path / "m1"))
    # renamed_trained ranks held out but is learned's edit; renamed_held, measured's
    assert second["heldout_files"] == [f.path for f in corpora[1].heldout] == [renamed_held]
    assert second["heldout_near_trained_before"] == [renamed_trained]
    assert second["near_heldout_before"] == [renamed_held]
    assert second["heldout_trained_before"] == []
    assert second["split"]["near"]["complete"] is True
    record = SplitRecord.of(second)
    assert sketch(edited(texts[trained])) in record.near_trained
    assert sketch(edited(texts[held])) in record.near_heldout - record.near_trained


def _continued_without(out: Path, source_dir: Path, tmp_path: Path, *key: str) -> dict:
    """The stats of a run continuing a copy of model `out` whose config.json lacks
    "training"'s entry `key` (a path of keys): a model saved before runs recorded it."""
    config = json.loads((out / "config.json").read_text())
    *parents, last = key
    parent = config["training"]
    for name in parents:
        parent = parent[name]
    del parent[last]
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / "config.json").write_text(json.dumps(config))
    return train(tiny_config(source_dir, tmp_path / "next", init_from=old, max_steps=1))


def test_a_model_without_near_copy_sketches_is_continued_as_before_with_a_note(
        trained, source_dir, tmp_path, capsys):
    """The runs before the sketches placed an edited file by its path; so does a run
    continuing their model, and says so."""
    stats = _continued_without(trained[0], source_dir, tmp_path, "split", "near")
    assert "does not record near-copy sketches" in capsys.readouterr().err
    assert stats["split"]["complete"] is True and stats["split"]["near"]["complete"] is False
    assert not SplitRecord.of(stats).has_near


def test_the_fallback_holds_out_no_file_an_earlier_run_trained_on(tmp_path):
    """Where every file ranks for training, the fallback held out the lowest-ranked one,
    text the model may have trained on before: then nothing is held out."""
    texts = _write_project(tmp_path / "project", _unranked(3))
    trained = [text_digest(text) for text in texts.values()]
    config = SourceConfig(include_stdlib=False, extra_roots=[tmp_path / "project"])
    assert len(collect_sources(config).heldout) == 1
    config.trained_before = frozenset(trained[1:])
    corpus = collect_sources(config)
    assert [text_digest(f.text) for f in corpus.heldout] == trained[:1]
    config.trained_before = frozenset(trained)
    assert not collect_sources(config).heldout


def test_the_fallback_holds_out_no_near_copy_of_a_file_an_earlier_run_trained_on(tmp_path):
    """Edited since, the text the fallback would hold out is still one the model
    learned: the next lowest-ranked file is held out instead."""
    from tests.test_nearcopy import edited, module

    names = _unranked(3)
    root = tmp_path / "project"
    root.mkdir()
    for name in names:
        (root / name).write_text(edited(module(name.removesuffix(".py"))))
    config = SourceConfig(include_stdlib=False, extra_roots=[root])
    assert [f.path for f in collect_sources(config).heldout] == names[:1]
    config.near_trained = frozenset({sketch(module(names[0].removesuffix(".py")))})
    corpus = collect_sources(config)
    assert [f.path for f in corpus.heldout] == names[1:2]


def test_a_model_that_does_not_record_its_split_says_its_held_out_loss_may_be_unsound(
        trained, source_dir, tmp_path, capsys):
    """The shipped bootstrap was saved before runs recorded what they trained on."""
    stats = _continued_without(trained[0], source_dir, tmp_path, "split")
    assert "does not record the files all its runs trained on" in capsys.readouterr().err
    assert stats["split"]["complete"] is False


def test_the_split_record_stays_out_of_the_printed_stats(source_dir, tmp_path, capsys):
    """Its ~11 bytes a file (164 KB for the GPU recipe's sources) are for the next run,
    not a reader."""
    assert main(["--preset", "tiny", "--no-stdlib", "--extra-root", str(source_dir),
                 "--out", str(tmp_path / "m"), "--max-steps", "1", "--vocab-size", "300"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "split" not in printed and printed["heldout_files"]
    assert json.loads((tmp_path / "m" / "config.json").read_text())["training"]["split"]


def test_tiny_runs_on_one_thread_unless_told_and_gives_the_caller_s_count_back(tmp_path):
    """--tiny took torch's default (a thread per core), so its steps' speed and bytes
    depended on the machine; "seconds on one CPU core" is what it promises."""
    parse = train_module.build_parser().parse_args
    out = ["--out", str(tmp_path / "m")]
    assert train_module.config_from_args(parse(["--tiny", *out])).threads == 1
    assert train_module.config_from_args(parse(["--tiny", "--threads", "2", *out])).threads == 2
    assert train_module.config_from_args(parse(out)).threads is None
    before, seen = torch.get_num_threads(), []
    try:
        torch.set_num_threads(2)
        with train_module._torch_threads(1):
            seen.append(torch.get_num_threads())
        assert (seen, torch.get_num_threads()) == ([1], 2)
    finally:
        torch.set_num_threads(before)


def test_a_pinned_file_is_trained_on_where_it_is_the_only_one(tmp_path):
    """Held out, it would leave a run continuing its model on that file alone nothing
    to train on."""
    (tmp_path / "only.py").write_text(textwrap.dedent(SOURCES["geometry.py"]))
    corpus = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[tmp_path],
                                          pinned_heldout=("only.py",)))
    assert [f.path for f in corpus.train] == ["only.py"] and not corpus.heldout


def test_an_interim_save_of_a_continued_run_keeps_its_history(trained, source_dir, tmp_path,
                                                              monkeypatch):
    """A run killed after an interim save leaves that save as its model: it must not
    lose the earlier runs' record either, nor the files they held out."""
    saved, real = [], train_module._save

    def _save(module, tokenizer, cfg, stats):
        saved.append(stats)
        real(module, tokenizer, cfg, stats)
    monkeypatch.setattr(train_module, "_save", _save)
    out, first = trained
    train(tiny_config(source_dir, tmp_path / "again", init_from=out, max_steps=2,
                      save_every=1e-9))
    interim = saved[0]
    assert interim["interim"] and interim["init_from"] == str(out)
    assert [run["tokens_seen"] for run in interim["earlier_runs"]] == [first["tokens_seen"]]
    assert interim["cumulative_tokens_seen"] == first["tokens_seen"] + interim["tokens_seen"]
    assert interim["heldout_pinned"] == first["heldout_pinned"] != []


def test_the_shipped_bootstrap_s_hand_recorded_first_run_joins_the_history():
    """The shipped model's config.json records its first run under "previous_run"."""
    from dlm_lsp.training.lineage import Lineage

    lineage = Lineage.of({"tokens_seen": 5, "seconds": 2.0, "loss_curve": [],
                          "cumulative_tokens_seen": 8,
                          "previous_run": {"tokens_seen": 3, "seconds": 1.0}})
    assert lineage.earlier == ({"tokens_seen": 3, "seconds": 1.0},
                               {"tokens_seen": 5, "seconds": 2.0})
    assert (lineage.tokens_seen, lineage.seconds) == (8, 3.0)


def test_a_continued_run_s_history_keeps_the_notes_recorded_beside_the_earlier_run_s_stats():
    """The shipped model's record says its sources were counted after training
    (`sources_note`) and which loss its final train loss is (`final_train_loss_note`):
    a run continuing it kept the sources and lost both notes, and the loss itself."""
    from dlm_lsp.training.lineage import Lineage

    lineage = Lineage.of({"tokens_seen": 5, "sources": [{"name": "stdlib"}],
                          "sources_note": "counted after training", "final_train_loss": 4.4,
                          "final_train_loss_note": "a mean", "loss_curve": [[1, 5.0]],
                          "tokens_per_second": 9.0})
    assert lineage.earlier == ({"tokens_seen": 5, "final_train_loss": 4.4,
                                "final_train_loss_note": "a mean",
                                "sources": [{"name": "stdlib"}],
                                "sources_note": "counted after training"},)


def test_learning_rate_warms_up_then_decays_over_the_time_budget():
    cfg = TrainConfig(lr=1e-3, min_lr_ratio=0.1, warmup_steps=100, warmup_fraction=0.05)
    assert learning_rate(cfg, 0, 0.0) == pytest.approx(1e-5)
    assert learning_rate(cfg, 99, 0.01) == pytest.approx(1e-3, rel=1e-3)
    assert learning_rate(cfg, 3, 0.05) == pytest.approx(1e-3, rel=1e-2), "slow machine"
    assert learning_rate(cfg, 5000, 0.5) == pytest.approx(0.55e-3)
    assert learning_rate(cfg, 9000, 1.0) == pytest.approx(1e-4)


def test_with_max_steps_the_schedules_follow_the_steps_and_the_clock_only_stops_the_run():
    cfg = TrainConfig(seconds=60.0, max_steps=1000)
    assert schedule_progress(cfg, 10, elapsed=30.0, seconds=60.0) == 0.01, "a held-up run"
    assert schedule_progress(cfg, 500, elapsed=1.0, seconds=60.0) == 0.5
    assert schedule_progress(replace(cfg, max_steps=None), 10, 30.0, 60.0) == 0.5


def test_a_run_the_clock_ends_before_its_max_steps_says_so(source_dir, tmp_path, capsys):
    stats = train(tiny_config(source_dir, tmp_path / "model", seconds=1.0, max_steps=10**6))
    assert 0 < stats["steps"] < 10**6
    err = capsys.readouterr().err
    assert (f"note: the 1s budget ended the run at step {stats['steps']} of 1000000, before "
            "its learning rate had decayed; ") in err
    assert "(raise --seconds)" in err


def test_a_run_whose_wall_clock_ends_it_names_that_flag(source_dir, tmp_path, capsys):
    """The note said "raise --seconds" where --wall-seconds had set the budget."""
    train(tiny_config(source_dir, tmp_path / "model", seconds=600.0, max_steps=10**6,
                      wall_seconds=3.0, export_reserve=1.0))
    assert "(raise --wall-seconds)" in capsys.readouterr().err


def test_a_run_of_max_steps_trains_the_same_weights_when_the_machine_stalls_it(
        source_dir, tmp_path, monkeypatch):
    """Same flags and seed, same weights, byte for byte, however busy the machine.

    The schedules followed the larger of the step and the time fractions, so a run that
    the machine held up for a moment early on (here 0.6 s in its first step, more than
    the budget's seconds per step) took its next steps at other learning rates and
    trained other weights: a 0.1 s pause in the first step of `--tiny --threads 1`
    moved its held-out loss from 2.9685 to 2.851 (2026-12-03)."""
    cfg = tiny_config(source_dir, tmp_path / "steady", seconds=8.0, max_steps=20)
    steady = train(cfg)
    real, calls = train_module.row_losses, []

    def stalled(module, batch):
        if not calls:
            time.sleep(0.6)  # 8 s for 20 steps is 0.4 s a step: the clock runs ahead
        calls.append(batch)
        return real(module, batch)

    monkeypatch.setattr(train_module, "row_losses", stalled)
    held_up = train(replace(cfg, out_dir=tmp_path / "held-up"))
    assert steady["steps"] == held_up["steps"] == 20
    assert ((tmp_path / "steady" / "model.safetensors").read_bytes()
            == (tmp_path / "held-up" / "model.safetensors").read_bytes())
    assert steady["heldout_loss"] == held_up["heldout_loss"]


def test_cli_reports_a_missing_warm_start_directory(tmp_path, capsys):
    assert main(["--init-from", str(tmp_path / "missing"), "--seconds", "1",
                 "--out", str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'missing'} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("files", "says"), [
    ({"code.py": "x = 1\n"}, "holds no saved model (no config.json)"),
    ({"config.json": '{"model_type": "qwen2"}', "tokenizer.json": "{}"},
     "holds a model of type 'qwen2'; only a model that dlm-lsp train wrote"),
    ({"config.json": '{"model_type": "dlm-tiny"}'}, "could not load model"),
])
def test_a_warm_start_folder_that_is_not_our_model_is_refused_before_reading_sources(
        files, says, source_dir, tmp_path, capsys):
    """Found only after the sources were read (the standard library: seconds to minutes),
    and a downloaded checkpoint was told apart only by a missing tokenizer.json."""
    init = tmp_path / "init"
    init.mkdir()
    for name, text in files.items():
        (init / name).write_text(text)
    assert main(_warm_cli_args(source_dir, tmp_path / "out", init)) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("dlm-lsp train: ") and says in captured.err
    assert "sources:" not in captured.err


@pytest.mark.parametrize(("args", "flags"), [
    (["--d-model", "128"], "--d-model"),
    (["--layers", "4", "--vocab-size", "900"], "--vocab-size, --layers"),
])
def test_shape_flags_with_a_warm_start_are_refused_not_ignored(args, flags, trained, source_dir,
                                                               tmp_path, capsys):
    """The warm-started model keeps its shape: `--init-from M --layers 4` trained M's one
    layer on, saying nothing of the flag."""
    assert main([*_warm_cli_args(source_dir, tmp_path / "out", trained[0]), "--max-steps", "2",
                 *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlm-lsp train: {flags}: a warm start keeps the shape")
    assert not (tmp_path / "out").exists()


def test_a_seq_len_beyond_the_warm_start_s_context_is_refused_before_reading_sources(
        trained, source_dir, tmp_path, capsys):
    """Found only once the sources were read, in the field's name (seq_len)."""
    args = [*_warm_cli_args(source_dir, tmp_path / "out", trained[0]), "--seq-len", "65"]
    assert main([*args, "--max-steps", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"dlm-lsp train: --seq-len 65 exceeds the max_length 64 of the "
                            f"model in --init-from {trained[0]}; give --seq-len 64 or less (or "
                            "the preset it was trained with, --tiny say)\n")
    assert "sources:" not in captured.err


def test_init_from_default_continues_the_shipped_model(tmp_path):
    """As fill --model default names it: inside site-packages, its folder is no path a user
    knows (the README's dlm_lsp/weights/default works only from a checkout)."""
    args = train_module.build_parser().parse_args(["--init-from", "default",
                                                   "--out", str(tmp_path)])
    assert train_module.config_from_args(args).init_from == train_module.DEFAULT_OUT
    assert (train_module.DEFAULT_OUT / "config.json").is_file()


def test_init_from_a_path_to_a_directory_called_default_is_that_directory(tmp_path,
                                                                          monkeypatch):
    """As fill --model ./default takes it: read as a Path, "./default" was "default" and
    warm-started the shipped model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "default").mkdir()
    args = train_module.build_parser().parse_args(["--init-from", "./default",
                                                   "--out", str(tmp_path / "out")])
    assert train_module.config_from_args(args).init_from == Path("default")


@pytest.mark.parametrize(("flags", "trained_at", "warned"), [
    (["--tiny"], 1e-3, True),  # the shipped model's rate under the toy's
    (["--tiny", "--lr", "1e-4"], 1e-3, False),  # asked for
    (["--tiny"], 6e-3, False),  # a toy continued as it was trained
    ([], 1e-3, False), (["--tiny"], None, False),  # the same rate; a model that does not say
])
def test_a_model_continued_above_the_rate_it_was_trained_at_is_warned_of(
        flags, trained_at, warned, tmp_path, capsys):
    """`--tiny --init-from default` trained the shipped model (1e-3) at the toy's 6e-3,
    which undid its training in two steps without a word."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(
        {"model_type": "dlm-tiny", **({"training": {"lr": trained_at}} if trained_at else {})}))
    args = train_module.build_parser().parse_args(
        ["--init-from", str(tmp_path / "model"), "--out", str(tmp_path / "out"), *flags])
    train_module.config_from_args(args)
    said = capsys.readouterr().err
    assert (f"warning: the preset's learning rate, 0.006, is above the 0.001 the model in "
            f"--init-from {tmp_path / 'model'} was trained at" in said) is warned
    assert bool(said) is warned


@pytest.mark.parametrize(("stored", "flags", "saved"), [
    ({"weights_dtype": "int8"}, [], "int8"),  # came back fp16, twice the bytes, unasked
    ({"weights_dtype": "int8"}, ["--weights", "fp16"], "fp16"),
    ({}, [], "fp16"),  # a save from before int8 says nothing: the default
    ({"weights_dtype": "int8"}, ["--weights", "int8"], "int8"),
])
def test_a_continued_model_is_saved_as_it_was_stored_unless_weights_says(stored, flags, saved,
                                                                          tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(
        {"model_type": "dlm-tiny", **stored}))
    args = train_module.build_parser().parse_args(
        ["--init-from", str(tmp_path / "model"), "--out", str(tmp_path / "out"), *flags])
    assert train_module.config_from_args(args).weights == saved


@pytest.mark.parametrize(("spec", "says"), [
    # said as "--init-from default: ...", which read as the shipped model missing
    ("./default", "--init-from ./default: {cwd}/default does not exist"),
    ("", "--init-from is empty: name a saved model's folder, or 'default' for the shipped "
         "model"),  # said "." (the current folder) holds no saved model
    ("none", "--init-from none: {cwd}/none does not exist ('none' and 'auto' are values "
             "of gpu_run's --init-from, not train's)"),
])
def test_a_warm_start_folder_not_found_is_said_as_the_user_spelt_it(spec, says, tmp_path,
                                                                     monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--init-from", spec, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"dlm-lsp train: {says.format(cwd=tmp_path)}\n"


def test_an_empty_extra_root_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch,
                                                                       capsys):
    """`--extra-root "$SRC"` with SRC unset trained on the .py files of wherever the
    command ran, without a word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stray.py").write_text("x = 1\n")
    with pytest.raises(SystemExit) as exited:
        main(["--tiny", "--no-stdlib", "--extra-root", "", "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert "argument --extra-root: is empty: name a folder of .py files" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["--tiny"], [], ["--seconds", "60"]])
def test_no_run_writes_over_the_shipped_model_unless_out_names_it(args, capsys):
    """A bare `dlm-lsp train` (the CPU recipe, 20 minutes) saved into the shipped model's
    folder, site-packages after an install, and replaced the GPU-trained model."""
    assert main(args) == 2
    assert "needs --out DIR" in capsys.readouterr().err


def test_a_tiny_run_without_out_names_the_flag_typed_and_what_out_is_for(capsys):
    """`dlm-lsp train --tiny` said "--preset tiny needs --out": a flag the user did not
    type, and not why a folder is wanted."""
    assert main(["--tiny"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("dlm-lsp train: --tiny needs --out DIR, the folder to save")
    assert "replace the shipped model" in said and str(train_module.DEFAULT_OUT) in said


def test_tiny_and_a_preset_together_are_refused(tmp_path, capsys):
    """`--tiny --preset default` ran the CPU recipe's hours: the last one given won."""
    with pytest.raises(SystemExit) as stop:
        main(["--tiny", "--preset", "default", "--out", str(tmp_path / "m"), "--max-steps", "1"])
    assert stop.value.code == 2
    assert "argument --preset: not allowed with argument --tiny" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def _signal_in_step(monkeypatch, step: int, *signals: int) -> None:
    """Send `signals` to this process during training step `step`, as a Ctrl-C typed in
    the terminal (or a `kill`) arrives in the middle of a step."""
    real, calls = train_module.row_losses, []

    def row_losses(module, batch):
        calls.append(1)
        if len(calls) == step:
            for sig in signals:
                if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
                    pytest.fail(f"training takes {signal.Signals(sig).name} as Python's "
                                "default does: the run would die with nothing saved")
                os.kill(os.getpid(), sig)
        return real(module, batch)
    monkeypatch.setattr(train_module, "row_losses", row_losses)


def _cli_args(source_dir: Path, out: Path) -> list[str]:
    """A tiny run on the test sources with a budget no test waits for."""
    return ["--tiny", "--out", str(out), "--no-stdlib", "--extra-root", str(source_dir),
            "--vocab-size", "400", "--seconds", "600", "--max-steps", "100000"]


def _the_error(err: str) -> str:
    """A failed run's one error line: the last on stderr, after the progress lines that
    came before the failure, and no traceback."""
    lines = err.splitlines()
    assert [line for line in lines if line.startswith(("dlm-lsp train", "Traceback"))] \
        == lines[-1:]
    return lines[-1]


def _warm_cli_args(source_dir: Path, out: Path, init: Path) -> list[str]:
    """`_cli_args` continuing the model in `init` (whose shape no flag may change), at the
    learning rate the test models are trained at (the preset's is above it: warned of)."""
    args = _cli_args(source_dir, out)
    at = args.index("--vocab-size")
    return [*args[:at], *args[at + 2:], "--init-from", str(init), "--lr", "0.001"]


def test_ctrl_c_while_training_ends_the_step_then_saves_and_says_where(
        source_dir, tmp_path, monkeypatch, capsys):
    """A long run stopped with Ctrl-C keeps what it learnt: the step under way ends, the
    model is evaluated and saved as if the clock had run out, and the stats say so."""
    _signal_in_step(monkeypatch, 3, signal.SIGINT)
    out = tmp_path / "stopped"
    stats = train(tiny_config(source_dir, out, seconds=600.0, max_steps=100_000))
    assert stats["steps"] == 3 and stats["interrupted"] == "SIGINT"
    assert json.loads((out / "config.json").read_text())["training"]["interrupted"] == "SIGINT"
    model = TinyModel.load(out, torch.device("cpu"))
    assert torch.isfinite(model.logits(torch.tensor([model.tokenizer.encode("x = 1\n")]))).all()
    captured = capsys.readouterr()
    assert f"saving to {out}" in captured.err
    assert f"stopped by SIGINT after 3 steps; saved to {out}" in captured.err
    assert "for 600s or 100000 steps" in captured.err  # the run says both of its limits
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "handler restored"


def test_a_run_told_to_stop_makes_no_interim_save_before_its_final_one(
        source_dir, tmp_path, monkeypatch):
    """The step a Ctrl-C came in was saved as an interim save, then the model saved again:
    a second Ctrl-C meanwhile left a save made after the first, said as the run's
    interim one."""
    _signal_in_step(monkeypatch, 3, signal.SIGINT)
    saves, real = [], train_module._save

    def save(module, tokenizer, cfg, stats):
        saves.append((bool(stats.get("interim")), stats["steps"]))
        return real(module, tokenizer, cfg, stats)
    monkeypatch.setattr(train_module, "_save", save)
    train(tiny_config(source_dir, tmp_path / "out", seconds=600.0, max_steps=100_000,
                      save_every=1e-9))
    assert saves == [(True, 1), (True, 2), (False, 3)]


def test_ctrl_c_once_every_step_is_taken_leaves_the_run_whole(source_dir, tmp_path,
                                                               monkeypatch, capsys):
    """A Ctrl-C during the evaluation after the last step said "stopping after this step",
    and the model, every step of the run, was recorded as interrupted (exit 130)."""
    optimise, evaluate = train_module._optimise, train_module.evaluate
    over = []

    def optimised(*args, **kwargs):
        over.append(True)
        return optimise(*args, **kwargs)

    def evaluated(*args, **kwargs):
        if over == [True]:
            over.append(False)
            os.kill(os.getpid(), signal.SIGINT)
        return evaluate(*args, **kwargs)
    monkeypatch.setattr(train_module, "_optimise", optimised)
    monkeypatch.setattr(train_module, "evaluate", evaluated)
    out = tmp_path / "whole"
    assert main([*_cli_args(source_dir, out), "--max-steps", "2"]) == 0
    assert over == [True, False]  # the signal came after training, as meant
    assert json.loads((out / "config.json").read_text())["training"]["interrupted"] is None
    err = capsys.readouterr().err
    assert f"SIGINT: training is over; evaluating and saving to {out}" in err
    assert "stopping after this step" not in err and "stopped by" not in err


def test_a_stopped_run_exits_128_plus_the_signal_after_saving(source_dir, tmp_path,
                                                              monkeypatch, capsys):
    """SIGTERM (a job scheduler, `timeout`) is handled like Ctrl-C; the exit status says
    the run was cut short, as an interrupted command's does."""
    _signal_in_step(monkeypatch, 2, signal.SIGTERM)
    out = tmp_path / "terminated"
    assert main(_cli_args(source_dir, out)) == 128 + signal.SIGTERM
    assert json.loads((out / "config.json").read_text())["training"]["interrupted"] == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_closed_terminal_stops_the_run_as_sigterm_does_and_mutes_it(
        source_dir, tmp_path, monkeypatch):
    """SIGHUP (an ssh connection dropped under a run started without nohup) killed the
    run, and what it had learnt since its last interim save was lost.  It is now a stop
    like SIGTERM, exit 129, with the lines meant for the gone terminal sent nowhere."""
    muted = []
    monkeypatch.setattr(train_module, "mute_lost_terminal", lambda: muted.append(True))
    _signal_in_step(monkeypatch, 2, signal.SIGHUP)
    out = tmp_path / "hung-up"
    assert main(_cli_args(source_dir, out)) == 128 + signal.SIGHUP
    assert json.loads((out / "config.json").read_text())["training"]["interrupted"] == "SIGHUP"
    assert muted == [True] and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL


def test_a_closed_terminal_and_a_pipe_are_muted_and_a_file_is_not(tmp_path):
    """After a hangup a write to the terminal fails (EIO), and into the pipe of a `| tee
    log` the hangup also ended (EPIPE): the run's lines on its way to the save would have
    ended it with nothing saved.  A file (`> log`) keeps its lines."""
    import pty

    terminal, gone = pty.openpty()
    os.close(terminal)  # the terminal's side closes: the kernel hangs the other up
    read, write = os.pipe()
    os.close(read)  # `tee`, ended by the same hangup
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT)
    for fd in (gone, write):
        with pytest.raises(OSError):
            os.write(fd, b"x")
    try:
        train_module.mute_lost_terminal((gone, write, log))
        assert os.write(gone, b"step 3\n") == os.write(write, b"step 3\n") == 7  # /dev/null
        os.write(log, b"kept")
        assert (tmp_path / "log").read_bytes() == b"kept"
    finally:
        for fd in (gone, write, log):
            os.close(fd)


def test_a_second_ctrl_c_quits_without_saving_in_one_line(source_dir, tmp_path,
                                                          monkeypatch, capsys):
    """The way out of a run started by mistake (say, over the shipped model): a second
    Ctrl-C before the save leaves the output folder as it was."""
    _signal_in_step(monkeypatch, 2, signal.SIGINT, signal.SIGINT)
    out = tmp_path / "abandoned"
    assert main(_cli_args(source_dir, out)) == 130
    err = capsys.readouterr().err
    assert not out.exists(), "the folder the run made for its save is left behind, empty"
    assert err.splitlines()[-1] == ("dlm-lsp train: stopped by a second SIGINT before saving; "
                                    "nothing saved")
    assert "Traceback" not in err


def test_a_second_sigterm_quits_without_saving_with_status_143(source_dir, tmp_path,
                                                              monkeypatch, capsys):
    """Two SIGTERMs (a scheduler that insists) quit without saving as two Ctrl-C do, but
    the run exited 130, the status of Ctrl-C."""
    _signal_in_step(monkeypatch, 2, signal.SIGTERM, signal.SIGTERM)
    out = tmp_path / "abandoned"
    assert main(_cli_args(source_dir, out)) == 143
    assert capsys.readouterr().err.splitlines()[-1] == (
        "dlm-lsp train: stopped by a second SIGTERM before saving; nothing saved")


def test_a_second_ctrl_c_leaves_a_folder_that_was_there_as_it_was(source_dir, tmp_path,
                                                                 monkeypatch, capsys):
    _signal_in_step(monkeypatch, 2, signal.SIGINT, signal.SIGINT)
    out = tmp_path / "mine"
    out.mkdir()
    assert main(_cli_args(source_dir, out)) == 130
    assert out.is_dir() and list(out.iterdir()) == []


def _two_signals_during_one_long_operation(sig: signal.Signals) -> None:
    """Send `sig` twice while the main thread is inside one long torch operation, as two
    Ctrl-C presses during a backward pass on a CPU arrive: Python runs its handler only
    once the operation returns, once for both."""
    start, pressed = threading.Event(), []

    def press_twice() -> None:
        start.wait()
        for _ in range(2):
            os.kill(os.getpid(), sig)
            pressed.append(time.monotonic())
            time.sleep(0.02)

    presser = threading.Thread(target=press_twice)
    presser.start()
    a, threads = torch.randn(3000, 3000), torch.get_num_threads()
    torch.set_num_threads(1)  # a second or so on one core: no handler runs inside it
    try:
        start.set()
        torch.mm(a, a)
        ended = time.monotonic()
    finally:
        torch.set_num_threads(threads)
    presser.join()
    assert pressed[-1] < ended, "the operation ended before the second press"


def test_two_ctrl_c_during_one_long_operation_still_quit_without_saving(tmp_path):
    """Both presses came before Python ran the handler (3.8 s into a backward pass of the
    shipped model's shape at batch 128 on a 2-core CPU): it ran once, took them for one
    Ctrl-C, and the run saved, though the README says a second Ctrl-C before the save
    quits without saving."""
    with train_module._StopSignals(tmp_path), \
            pytest.raises(KeyboardInterrupt, match="stopped by a second SIGINT before saving"):
        _two_signals_during_one_long_operation(signal.SIGINT)
        for _ in range(3):  # the handler runs at the next bytecode boundaries
            time.sleep(0.01)


def test_where_no_wakeup_pipe_can_be_set_ctrl_c_still_stops_the_run(tmp_path, monkeypatch):
    """Windows' set_wakeup_fd takes only a socket: training must still start, and a
    Ctrl-C still stop it (each handler call then counts as one signal)."""
    def refuse(fd, **kwargs):
        if fd != -1:
            raise ValueError("the fd 5 must be in non-blocking mode")
        return -1
    monkeypatch.setattr(train_module.signal, "set_wakeup_fd", refuse)
    with train_module._StopSignals(tmp_path) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
    assert stop.received == signal.SIGINT


def test_a_loss_that_becomes_nan_ends_the_run_in_one_line(source_dir, tmp_path, capsys):
    """It ended in a FloatingPointError traceback (exit 1 all the same)."""
    (tmp_path / "out").mkdir()  # there before the run: kept, and nothing said of it
    args = [*_cli_args(source_dir, tmp_path / "out"), "--lr", "1e30", "--log-every", "0",
            "--max-steps", "20"]
    assert main(args) == 1
    assert _the_error(capsys.readouterr().err).startswith(
        "dlm-lsp train: training loss became nan at step ")


def test_weights_that_became_nan_are_not_saved_over_the_model_there(
        trained, source_dir, tmp_path, capsys):
    """Diverged after the last progress line, a run saved nan weights over --out."""
    out = tmp_path / "kept"
    shutil.copytree(trained[0], out)
    before = (out / "model.safetensors").read_bytes()
    args = [*_warm_cli_args(source_dir, out, out), "--lr", "1e30", "--log-every", "100",
            "--max-steps", "5"]
    assert main(args) == 1
    assert _the_error(capsys.readouterr().err) == (
        f"dlm-lsp train: the weights became nan or infinite by step 5; nothing saved to {out}; "
        "try a lower --lr")
    assert (out / "model.safetensors").read_bytes() == before


def test_ctrl_c_before_training_says_nothing_was_saved(source_dir, tmp_path, monkeypatch,
                                                       capsys):
    """Ctrl-C while the sources are read raises Python's own KeyboardInterrupt, which has
    no text: the run ended on a bare "dlm-lsp train: " line."""
    def collect_sources(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(train_module, "collect_sources", collect_sources)
    assert main(_cli_args(source_dir, tmp_path / "out")) == 130
    assert capsys.readouterr().err == ("dlm-lsp train: interrupted by SIGINT before training "
                                       "started; nothing saved\n")  # as SIGTERM's says


def test_sigterm_before_training_says_nothing_was_saved_and_exits_143(
        source_dir, tmp_path, monkeypatch, capsys):
    """SIGTERM while the sources are read (before the run's own handlers) killed
    `dlm-lsp train` with no word; then, taken as an interruption, it said
    "dlm-lsp train: SIGTERM" and exited 130, as Ctrl-C does."""
    from dlm_lsp.cli import main as cli_main

    def collect_sources(*args):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            pytest.fail("SIGTERM would kill the run with no word")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises first
        pytest.fail("SIGTERM was not taken as an interruption")
    monkeypatch.setattr(train_module, "collect_sources", collect_sources)
    out = tmp_path / "out"
    assert cli_main(["train", *_cli_args(source_dir, out)]) == 143
    assert capsys.readouterr().err == ("dlm-lsp train: interrupted by SIGTERM before training "
                                       "started; nothing saved\n")
    assert not out.exists()


def test_signals_during_the_save_wait_for_it(source_dir, tmp_path, monkeypatch, capsys):
    """Ctrl-C pressed twice while the model is written must not leave config.json of the
    new model beside the weights of the old one (or none)."""
    real = train_module._save

    def save(*args):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        real(*args)
    monkeypatch.setattr(train_module, "_save", save)
    out = tmp_path / "whole"
    try:
        stats = train(tiny_config(source_dir, out, max_steps=2))
    except KeyboardInterrupt:
        pytest.fail("a signal broke off the save")
    assert json.loads((out / "config.json").read_text())["training"] == stats
    TinyModel.load(out, torch.device("cpu"))



@pytest.mark.parametrize(("flag", "value"), [
    ("--eval-every", "-1"), ("--save-every", "-600"), ("--log-every", "-10"),
    ("--eval-every", "inf"), ("--log-every", "nan"), ("--seconds", "inf"), ("--seconds", "nan"),
    ("--seconds", "0"), ("--wall-seconds", "nan"), ("--max-steps", "0"), ("--seq-len", "0"),
    ("--batch-size", "0"), ("--lr", "-1"), ("--lr", "inf"), ("--data-bytes", "0"),
    ("--vocab-size", "10"), ("--vocab-size", "1048577"), ("--d-model", "0"), ("--layers", "0"),
    ("--heads", "-2"), ("--max-length", "0"), ("--seed", str(2**64)), ("--threads", "0"),
    ("--threads", str(os.cpu_count() + 1)), ("--shard-mib", "inf"), ("--shard-mib", "nan"),
    ("--shard-mib", "-1"),
    ("--out", ""),  # `--out "$OUT"` with OUT unset: it saved into the current folder
])
def test_a_value_no_run_can_use_is_a_usage_error_naming_its_flag(flag, value, source_dir,
                                                                  tmp_path, capsys):
    """Refused while the command line is parsed (exit 2, as any bad option), so before
    anything is read or built: negative --eval-every, --save-every and --log-every and
    --seconds inf were taken (the intervals ran as 0, inf never decayed the rate)."""
    args = [*_cli_args(source_dir, tmp_path / "out"), "--max-steps", "2", flag, value]
    with pytest.raises(SystemExit) as refused:
        main(args)
    assert refused.value.code == 2
    assert f"dlm-lsp train: error: argument {flag}: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("field", "value", "says"), [
    ("eval_every", -1.0, "--eval-every must be a finite number of seconds, 0 or more, got -1.0"),
    ("seconds", math.inf, "--seconds must be a positive, finite number of seconds, got inf"),
    ("n_layers", 0, "--layers must be a whole number, 1 or more, got 0"),
])
def test_a_config_built_in_code_is_held_to_the_flags_values(field, value, says, source_dir,
                                                           tmp_path):
    """The GPU run and other callers build a TrainConfig without the parser."""
    with pytest.raises(TrainingError) as refused:
        train(tiny_config(source_dir, tmp_path / "out", max_steps=2, **{field: value}))
    assert str(refused.value) == says
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--seq-len", "4"], "--seq-len 4 cannot hold an infilling row's middle and pads"),
    (["--wall-seconds", "20"], "--wall-seconds must exceed the"),
    (["--max-length", "20"], "--seq-len 32 exceeds --max-length 20"),
    (["--heads", "3"], "--d-model 64 is not divisible by --heads 3"),
    # rotary embeddings turn channels in pairs: 63 failed after the data was read, 3
    # trained with its positions wrong
    (["--d-model", "63", "--heads", "1"], "heads of 63 channels; the rotary position "
                                          "embedding needs an even number"),
    (["--d-model", "6", "--heads", "2"], "heads of 3 channels"),
    (["--device", "gpu"], "--device gpu: not a torch device"),
    # a traceback from the first tensor moved there, after the data was read
    pytest.param(["--device", "mps"], "--device mps: this torch has no MPS device",
                 marks=pytest.mark.skipif(torch.backends.mps.is_available(),
                                          reason="this torch has MPS")),
    (["--shard-mib", "0.001"], "--shard-mib: tensor embed.weight"),
    (["--out", "{file}"], "is a file, not a folder"),
    (["--out", "{file}/model"], "cannot write there (Not a directory)"),
])
def test_nonsense_values_are_one_line_before_any_training(args, says, source_dir, tmp_path,
                                                          capsys):
    """Each of these raised a traceback, most only after reading the sources and training
    a tokenizer (minutes in the shipped recipe), a bad --out or --shard-mib only at the
    save, after the whole budget; --threads 0 was silently ignored."""
    file = tmp_path / "a-file"
    file.write_text("not a folder\n")
    args = [a.format(file=file) for a in args]
    assert main([*_cli_args(source_dir, tmp_path / "out"), "--max-steps", "2", *args]) == 2
    err = capsys.readouterr().err
    assert _the_error(err).startswith("dlm-lsp train: ") and says in _the_error(err)
    assert not any(line.startswith("training ") for line in err.splitlines())
    assert not (tmp_path / "out" / "config.json").exists()


@pytest.mark.parametrize("args", [["--shard-mib", "0.001"], ["--extra-root", "{missing}"],
                                  ["--wall-seconds", "100.001", "--seconds", "100"]])
def test_a_run_refused_after_the_out_check_leaves_no_out_folder_behind(
        args, source_dir, tmp_path, monkeypatch, capsys):
    """--out was created (parents too: as root, `--out /nonexistent/x` made /nonexistent)
    when it was checked, before checks that come once the sources are read and the model
    is built, so a run refused by one of those left an empty folder."""
    from dlm_lsp.training import train as train_module

    clock = iter(range(0, 10**6, 50))  # 50 s a reading: preparation spends the wall clock
    if "--wall-seconds" in args:
        monkeypatch.setattr(train_module.time, "monotonic", lambda: next(clock))
    out = tmp_path / "new" / "model"
    args = [a.format(missing=tmp_path / "missing") for a in args]
    assert main([*_cli_args(source_dir, out), *args]) == 2
    assert _the_error(capsys.readouterr().err).startswith("dlm-lsp train: ")
    assert not (tmp_path / "new").exists()


def test_the_out_folder_is_made_as_training_starts_not_at_the_first_save(
        source_dir, tmp_path, monkeypatch):
    """Made at the save (hours in), a folder that cannot be made (the permissions of a
    parent changed meanwhile) would fail the run only after its whole budget."""
    real, seen = train_module.row_losses, []

    def row_losses(module, batch):
        seen.append((tmp_path / "new" / "model").is_dir())
        return real(module, batch)
    monkeypatch.setattr(train_module, "row_losses", row_losses)
    assert main([*_cli_args(source_dir, tmp_path / "new" / "model"), "--max-steps", "1"]) == 0
    assert seen[0] is True


_DIVERGES = ["--lr", "1e30", "--log-every", "0", "--max-steps", "20"]


@pytest.mark.parametrize("failure", ["nan", "second ctrl-c", "error"])
def test_a_run_that_fails_before_saving_removes_the_out_folder_it_made_and_says_so(
        failure, source_dir, tmp_path, monkeypatch, capsys):
    """A diverged run, a second Ctrl-C before the first save, or any error once training
    had started left the empty folder it had created for --out, parents too."""
    extra = []
    if failure == "nan":
        extra = _DIVERGES
    elif failure == "second ctrl-c":
        _signal_in_step(monkeypatch, 2, signal.SIGINT, signal.SIGINT)
    else:
        def row_losses(module, batch):
            raise RuntimeError("a bug")
        monkeypatch.setattr(train_module, "row_losses", row_losses)
    out = tmp_path / "new" / "model"
    with pytest.raises(RuntimeError) if failure == "error" else contextlib.nullcontext():
        main([*_cli_args(source_dir, out), *extra])
    assert not (tmp_path / "new").exists()
    assert (f"note: removed {tmp_path / 'new'} (made for --out {out}): this run created it "
            "and saved nothing in it\n") in capsys.readouterr().err


def test_a_failed_run_keeps_an_out_folder_that_was_there_before(source_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    assert main([*_cli_args(source_dir, out), *_DIVERGES]) == 1
    assert out.is_dir() and "note: removed" not in capsys.readouterr().err


def test_a_failed_run_keeps_the_folder_it_made_once_an_interim_save_is_in_it(
        source_dir, tmp_path, monkeypatch, capsys):
    _signal_in_step(monkeypatch, 3, signal.SIGINT, signal.SIGINT)
    out = tmp_path / "new"
    assert main([*_cli_args(source_dir, out), "--save-every", "1e-9"]) == 130
    assert (out / "config.json").is_file() and "note: removed" not in capsys.readouterr().err


def test_an_error_in_the_final_save_keeps_its_traceback_and_the_interim_save_whole(
        source_dir, tmp_path, monkeypatch):
    """An error is a bug, and keeps its traceback; but the final save it broke off wrote
    its config.json (of a finished run) over the interim save, whose weights it had deleted."""
    from dlm_lsp.models import tiny

    real, calls = tiny.save_file, []

    def save_file(tensors, path):
        calls.append(path)
        if len(calls) == 4:  # after the interim saves of steps 1, 2 and 3
            raise RuntimeError("a bug in the save")
        real(tensors, path)
    monkeypatch.setattr(tiny, "save_file", save_file)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="a bug in the save"):
        main([*_cli_args(source_dir, out), "--max-steps", "3", "--save-every", "1e-9"])
    training = json.loads((out / "config.json").read_text())["training"]
    assert (training["interim"], training["steps"]) == (True, 3)
    TinyModel.load(out, torch.device("cpu"))


@pytest.mark.parametrize("interim", [False, True])
def test_a_full_disk_at_a_save_is_one_line_saying_what_was_kept(
        interim, source_dir, tmp_path, monkeypatch, capsys):
    """safetensors' I/O errors are not OSErrors: a disk that filled up during the save
    ended the run in a traceback (as a bug's), after a note that it saved nothing."""
    from safetensors import SafetensorError

    from dlm_lsp.models import tiny

    real, calls = tiny.save_file, []

    def save_file(tensors, path):
        calls.append(path)
        if len(calls) == (2 if interim else 1):
            raise SafetensorError("Error while serializing: I/O error: No space left on "
                                  "device (os error 28)")
        real(tensors, path)
    monkeypatch.setattr(tiny, "save_file", save_file)
    out = tmp_path / "out"
    saves = ["--save-every", "1e-9"] if interim else []
    assert main([*_cli_args(source_dir, out), "--max-steps", "2", *saves]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    kept = "its earlier save is as it was" if interim else "nothing was saved"
    assert _the_error(err) == (f"dlm-lsp train: --out {out}: cannot save the model after "
                               f"step 2 (No space left on device); {kept}")
    if interim:  # the save of step 1 loads
        assert json.loads((out / "config.json").read_text())["training"]["steps"] == 1
        TinyModel.load(out, torch.device("cpu"))


def _out_of_memory_in_step(monkeypatch, step: int, kind: str) -> None:
    """Training step `step` runs out of memory: on a GPU (torch's OutOfMemoryError, its
    text as CUDA words it), in Python (MemoryError), or in torch's CPU allocator (the real
    error, from a tensor no machine can hold)."""
    real, calls = train_module.row_losses, []

    def row_losses(module, batch):
        calls.append(1)
        if len(calls) == step:
            if kind == "gpu":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. "
                                             "GPU 0 has a total capacity of 139.80 GiB")
            if kind == "python":
                raise MemoryError
            torch.empty(2**48, dtype=torch.uint8)
        return real(module, batch)
    monkeypatch.setattr(train_module, "row_losses", row_losses)


@pytest.mark.parametrize("kind", ["gpu", "python", "cpu allocator"])
def test_running_out_of_memory_in_training_is_one_line_saying_what_to_do_and_what_was_kept(
        kind, source_dir, tmp_path, monkeypatch, capsys):
    """It ended in a traceback of torch's internals, as a bug does, naming no flag."""
    _out_of_memory_in_step(monkeypatch, 3, kind)
    out = tmp_path / "out"
    assert main([*_cli_args(source_dir, out), "--save-every", "1e-9"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        "dlm-lsp train: out of the machine's memory once training had started"
        + {"gpu": " (tried to allocate 2.00 gib)", "python": "",
           "cpu allocator": f" (tried to allocate {2**48} bytes)"}[kind]
        + "; try a smaller --batch-size or --seq-len, or a smaller model (--d-model, "
        f"--layers); {out} holds the interim save of step 2")
    training = json.loads((out / "config.json").read_text())["training"]
    assert (training["interim"], training["steps"]) == (True, 2)
    TinyModel.load(out, torch.device("cpu"))


def test_a_gpu_out_of_memory_names_the_device_and_a_warm_start_no_shape_flags(
        trained, source_dir, tmp_path, monkeypatch, capsys):
    """The shape flags are refused beside --init-from: naming them would send the user to
    a usage error."""
    def warm_start(cfg, device):
        raise torch.OutOfMemoryError("MPS backend out of memory (MPS allocated: 17.95 GiB). "
                                     "Tried to allocate 20.00 MiB on private pool.")
    monkeypatch.setattr(train_module, "resolve_device", lambda name: torch.device("mps"))
    monkeypatch.setattr(train_module, "_warm_start", warm_start)
    out = tmp_path / "out"
    assert main([*_warm_cli_args(source_dir, out, trained[0])]) == 1
    assert capsys.readouterr().err == (
        "dlm-lsp train: out of MPS device memory before training (tried to allocate 20.00 "
        f"mib); try a smaller --data-bytes, --batch-size or --seq-len; nothing saved to {out}\n")
    assert not out.exists()


# --- contamination, duplicates and licences ------------------------------------------


def _humaneval_solution(index: int = 0) -> str:
    """A whole HumanEval function (prompt, canonical middle and suffix), as shipped."""
    return humaneval_texts()[2 * index]


def test_a_file_containing_a_humaneval_solution_is_dropped(tmp_path):
    solution = _humaneval_solution()
    (tmp_path / "copied.py").write_text("# found online\n" + solution.replace("    ", "\t"))
    (tmp_path / "unrelated.py").write_text(textwrap.dedent(SOURCES["pkg/numbers.py"]))
    (tmp_path / "also_unrelated.py").write_text(textwrap.dedent(SOURCES["cli.py"]))
    corpus = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[tmp_path]))
    kept = {f.path for f in corpus.train + corpus.heldout}
    assert corpus.contaminated == ["copied.py"], "re-indented, it is still the same words"
    assert kept == {"unrelated.py", "also_unrelated.py"}


def test_contamination_needs_a_long_run_of_content_words():
    shared = ("def count_vowels(text):\n    vowels = 'AEIOU'\n"
              "    return sum(1 for letter in text if letter in vowels)")
    bench = NgramFilter([shared + "\n# and more text after it"])
    assert bench.shared_ngram("x = 1\n" + shared.replace(" ", "  ")) is not None
    assert bench.shared_ngram("def count_vowels(text): return len(text)") is None, "too short"
    idioms = NgramFilter(["for i in range(n):\n    for j in range(i + 1, n):\n        pass"])
    assert idioms.shared_ngram("for i in range(n):\n for j in range(i + 1, n):\n  pass") is None


def test_words_keep_non_ascii_identifiers_whole():
    assert words("naïve = café_1 + 2") == ["naïve", "café_1", "2"]
    assert words("plain = ascii_1 + 2") == ["plain", "ascii_1", "2"]


COPY = ("def count_vowels(text):\n    vowels = 'AEIOU'\n"
        "    return sum(1 for letter in text if letter in vowels)")


def test_the_process_pool_gives_the_serial_verdicts():
    bench = NgramFilter([COPY])
    texts = [f"x_{i} = {i}\n" + (COPY.replace(" ", "  ") if i % 4 == 1 else "pass")
             for i in range(40)]
    serial = [bench.shared_ngram(text) for text in texts]
    assert bench.shared_ngrams(texts, workers=2, min_chars=0) == serial
    assert sum(v is not None for v in serial) == 10


def _worker_pid(text: str) -> int:
    return os.getpid()


@pytest.mark.skipif(sys.platform != "linux", reason="the pool forks, on Linux only")
def test_only_large_inputs_are_scanned_in_other_processes(monkeypatch):
    monkeypatch.setattr(contamination, "_worker_shared_ngram", _worker_pid)
    bench, texts = NgramFilter([COPY]), ["pass"] * 8
    pids = bench.shared_ngrams(texts, workers=2, min_chars=0)
    assert all(pid not in (None, os.getpid()) for pid in pids), "scanned by workers"
    assert bench.shared_ngrams(texts, workers=2) == [None] * 8, "small: scanned here"


def test_a_dropped_copy_leaves_the_byte_cap_to_the_files_after_it(tmp_path):
    names = [f"copy_{c}.py" for c in "abcdefgh"]
    first = min(names, key=lambda name: unit_hash("order:" + name))
    padding = "# a long comment\n" * 200  # together they outweigh the copy, which must fit
    others = {"unrelated.py": textwrap.dedent(SOURCES["pkg/numbers.py"]) + padding,
              "also_unrelated.py": textwrap.dedent(SOURCES["cli.py"]) + padding}
    assert all(unit_hash("order:" + first) < unit_hash("order:" + name) for name in others)
    (tmp_path / first).write_text(_humaneval_solution())
    for name, text in others.items():
        (tmp_path / name).write_text(text)
    cap = sum(len(text.encode()) for text in others.values())
    corpus = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[tmp_path],
                                          max_bytes=cap))
    assert corpus.contaminated == [first]
    assert {f.path for f in corpus.train + corpus.heldout} == set(others)


def test_identical_files_are_read_once(tmp_path):
    body = textwrap.dedent(SOURCES["shapes.py"])
    for name in ("a.py", "vendored/a.py", "b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body if name != "b.py" else body + "\nX = 1\n")
    corpus = collect_sources(SourceConfig(include_stdlib=False, extra_roots=[tmp_path]))
    assert corpus.duplicates == 1 and len(corpus.train + corpus.heldout) == 2


@pytest.mark.parametrize(("fields", "permissive"), [
    ({"License-Expression": "MIT"}, True),
    ({"License-Expression": "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"},
     True),
    ({"License-Expression": "MPL-2.0 AND MIT"}, False),
    ({"License-Expression": "GPL-3.0-only OR MIT"}, True),
    ({"License-Expression": "MIT AND (Apache-2.0 OR BSD-2-Clause)"}, True),
    # the GPL binds every alternative: the parentheses group the OR under the AND
    ({"License-Expression": "GPL-3.0-only AND (MIT OR Apache-2.0)"}, False),
    ({"License-Expression": "(MIT OR Apache-2.0) AND LGPL-3.0-or-later"}, False),
    ({"License-Expression": "MIT AND"}, False),  # malformed: not read as permissive
    ({"Classifier": ["License :: OSI Approved :: BSD License"]}, True),
    ({"Classifier": ["License :: OSI Approved :: BSD License",
                     "License :: OSI Approved :: GNU General Public License (GPL)"]}, False),
    ({"License": "Modified BSD License"}, True),
    ({"License": "LGPL with exceptions or ZPL"}, False),
    ({"License": "MIT and GPLv3"}, False),  # a copyleft name with its version attached
    ({"License": "BSD; parts LGPLv2.1+"}, False),
    # copyleft spelt out, or with a suffix, beside a permissive name: all were permissive
    ({"License": "MIT, with GPLed parts"}, False),
    ({"License": "BSD; the server is under the Affero General Public License v3"}, False),
    ({"License": "MIT or the Mozilla Public License 2.0"}, False),
    ({"License": "Apache 2.0 / European Union Public Licence 1.2"}, False),
    ({"License": "BSD, docs CC BY-SA 4.0"}, False),
    ({"License": "MIT; Server Side Public License for the daemon"}, False),
    ({"License": "Apache 2.0 License"}, True),
    # a restriction beside a permissive name takes it back: all were permissive
    ({"License": "MIT; the plug-ins are proprietary"}, False),
    ({"License": "BSD for non-commercial use; a commercial licence is required otherwise"},
     False),
    ({"License": "Apache 2.0, not for commercial use"}, False),
    ({"License": "MIT (data: CC BY-NC 4.0)"}, False),
    # "non commercial" with a space, and the Commons Clause (no selling): both were permissive
    ({"License": "MIT, for non commercial use"}, False),
    ({"License": "Apache License 2.0 with Commons Clause"}, False),
    # other wordings of a use restricted: all were permissive
    ({"License": "MIT, no commercial use"}, False),
    ({"License": "MIT; commercial use prohibited"}, False),
    ({"License": "MIT except for commercial use"}, False),
    ({"License": "BSD, for academic use only"}, False),
    ({"License": "MIT (research purposes only)"}, False),
    ({"License": "Apache 2.0; evaluation only"}, False),
    ({"License": "BSD, only for educational use"}, False),
    ({"License": "MIT; not for resale"}, False),
    ({"License": "Copyright 2024 Acme Inc. All rights reserved. MIT"}, False),
    # ... but the copyright line of a BSD or MIT text reserves rights its grant then gives
    ({"License": "Copyright (c) 2010, Jane Doe\nAll rights reserved.\n\nRedistribution and"
                 " use in source and binary forms, with or without modification, are"
                 " permitted provided that ... (BSD)"}, True),
    ({"License": "MIT License\n\nCopyright (c) 2019 Jane Doe. All rights reserved.\n\n"
                 "Permission is hereby granted, free of charge, to any person ..."}, True),
    ({"License": "MIT; commercial support is available"}, True),
    # SPDX operators may be all lower case: a choice of permissive licences is permissive
    ({"License-Expression": "mit or apache-2.0"}, True),
    ({"License-Expression": "Apache-2.0 with LLVM-exception"}, True),
    ({"License-Expression": "mit and gpl-3.0-only"}, False),
    ({"License-Expression": "mit Or apache-2.0"}, False),  # mixed case is no operator
    ({"License": "UNKNOWN"}, False),
    ({}, False),
])
def test_only_permissive_licences_are_trained_on(fields, permissive):
    meta = email.message.Message()
    for key, value in fields.items():
        for v in value if isinstance(value, list) else [value]:
            meta[key] = v
    assert classify(meta)[1] is permissive


def test_site_packages_files_are_attributed_to_their_distribution():
    owners = {}
    for root in site_packages_dirs():
        owners.update(python_files_by_distribution(root))
    torch_init = owners.get("torch/__init__.py")
    assert torch_init is not None and torch_init.name == "torch" and torch_init.permissive


# --- sharded weights ------------------------------------------------------------------


def _small_model(tokenizer) -> TinyDenoiser:
    torch.manual_seed(0)
    return TinyDenoiser(TinyConfig(vocab_size=tokenizer.vocab_size, d_model=64, n_layers=2,
                                   n_heads=2, max_length=64))


def test_weights_above_the_shard_limit_are_split_and_load_the_same(tokenizer, tmp_path):
    module = _small_model(tokenizer)
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    save_tiny(module, tokenizer, single)
    limit = 60_000
    written = save_tiny(module, tokenizer, sharded, max_shard_bytes=limit)
    shards = sorted(sharded.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and not (sharded / "model.safetensors").exists()
    assert all(p.stat().st_size <= limit for p in shards)
    assert set(written) == {*shards, sharded / "model.safetensors.index.json",
                            sharded / "config.json", sharded / "tokenizer.json"}
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(module.state_dict())
    ids = torch.tensor([tokenizer.encode("def f(x):\n    return x\n")])
    a, b = load_model(str(single), "cpu"), load_model(str(sharded), "cpu")
    assert torch.equal(a.logits(ids), b.logits(ids))


def test_a_save_replaces_the_weights_of_an_earlier_one(tokenizer, tmp_path):
    module = _small_model(tokenizer)
    save_tiny(module, tokenizer, tmp_path, max_shard_bytes=60_000)
    save_tiny(module, tokenizer, tmp_path)  # now small enough for one file
    assert sorted(p.name for p in tmp_path.glob("model*")) == ["model.safetensors"]
    load_model(str(tmp_path), "cpu")


def test_a_folder_with_one_weights_file_and_a_shard_index_is_refused_naming_both(
        tokenizer, tmp_path):
    """Shards copied beside an older model.safetensors (a GPU run's output over the
    shipped bootstrap) were ignored and the older weights loaded without a word."""
    module = _small_model(tokenizer)
    save_tiny(module, tokenizer, tmp_path, max_shard_bytes=60_000)
    save_tiny(module, tokenizer, tmp_path / "single")
    (tmp_path / "model.safetensors").write_bytes(
        (tmp_path / "single" / "model.safetensors").read_bytes())
    with pytest.raises(ModelLoadError, match="both model.safetensors and "
                       "model.safetensors.index.json are in"):
        load_model(str(tmp_path), "cpu")


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
@pytest.mark.parametrize("shard_bytes", [None, 60_000])
def test_every_file_a_save_writes_gets_the_mode_the_umask_gives(tokenizer, tmp_path, umask,
                                                                 shard_bytes):
    """The weights were 0600 (safetensors' temporary file, renamed into place) beside a
    config.json and tokenizer.json of 0644: a model saved for others to use was not
    readable by them."""
    import os

    previous = os.umask(umask)
    try:
        written = save_tiny(_small_model(tokenizer), tokenizer, tmp_path,
                            max_shard_bytes=shard_bytes)
    finally:
        os.umask(previous)
    assert any(p.suffix == ".safetensors" for p in written)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {
        p.name: oct(0o666 & ~umask) for p in written}


@pytest.mark.parametrize(("shard_bytes", "failing"), [(None, 1), (60_000, 1), (60_000, 2)])
def test_a_save_that_fails_partway_leaves_the_earlier_save_whole(tokenizer, tmp_path,
                                                                  monkeypatch, shard_bytes,
                                                                  failing):
    """A save that failed while writing the weights (a full disk, memory running out)
    left the new config.json beside no weights, or beside some of the new shards: a
    folder that looks like a model and is none, the earlier model in it lost."""
    from dlm_lsp.models import tiny

    earlier = _small_model(tokenizer)
    save_tiny(earlier, tokenizer, tmp_path, extra={"training": {"steps": 1}})
    before = sorted(p.name for p in tmp_path.iterdir())
    real, files = tiny.save_file, []

    def save_file(tensors, path):
        files.append(path)
        if len(files) == failing:
            raise OSError(28, "No space left on device")
        real(tensors, path)
    monkeypatch.setattr(tiny, "save_file", save_file)
    later = _small_model(tokenizer)
    with torch.no_grad():
        for tensor in later.parameters():
            tensor.add_(1.0)
    with pytest.raises(OSError, match="No space left"):
        save_tiny(later, tokenizer, tmp_path, extra={"training": {"steps": 2}},
                  max_shard_bytes=shard_bytes)
    assert len(files) == failing  # the failure came where the test meant it to
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert json.loads((tmp_path / "config.json").read_text())["training"] == {"steps": 1}
    loaded = TinyModel.load(tmp_path, torch.device("cpu")).module.state_dict()
    assert all(torch.equal(loaded[k], v.half().float()) for k, v in earlier.state_dict().items())


def _leftover_of_a_killed_save(folder: Path) -> Path:
    """The hidden folder a save killed by SIGKILL while writing its weights leaves."""
    leftover = folder / ".saving-k1ll3d"
    leftover.mkdir()
    (leftover / "tokenizer.json").write_text("{}")
    (leftover / "model.safetensors").write_bytes(b"half a tensor")
    return leftover


def test_a_save_removes_the_hidden_folder_a_killed_save_left(tokenizer, tmp_path):
    """A save killed outright never reached its clean-up: its hidden folder, weights
    and all, stayed in the model folder through every later save."""
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path)
    _leftover_of_a_killed_save(tmp_path)
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]


def test_a_model_folder_with_a_killed_save_s_leftover_still_loads(tokenizer, tmp_path):
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path)
    leftover = _leftover_of_a_killed_save(tmp_path)
    (leftover / "config.json").write_text("not json")
    assert load_model(str(tmp_path), "cpu").tokenizer.vocab_size == tokenizer.vocab_size
    assert inspect(str(tmp_path)).problems == []


def _without_flock(monkeypatch) -> None:
    """A file system without flock (NFS): taking the lock fails."""
    from dlm_lsp.models import tiny

    def flock(fd, operation):
        raise OSError(37, "No locks available")
    monkeypatch.setattr(tiny.fcntl, "flock", flock)


KILLED_SAVE = """
import os, signal, sys
import torch
from dlm_lsp.models import DEFAULT_MODEL_DIR, tiny
model = tiny.TinyModel.load(DEFAULT_MODEL_DIR, torch.device("cpu"))
tiny.save_file = lambda tensors, path: os.kill(os.getpid(), signal.SIGKILL)
tiny.save_tiny(model.module, model.tokenizer, sys.argv[1])
"""


def test_without_flock_a_save_removes_the_leftover_of_a_save_killed_on_this_host(
        tokenizer, tmp_path, monkeypatch):
    """On a file system without flock the hidden folder of a save killed outright was
    never removed (it might have been a live save's), so each killed save's weights
    stayed in the model folder for good.  The folder's name says who wrote it."""
    killed = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(tmp_path)], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(".saving-*"))) == 1
    _without_flock(monkeypatch)
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]


def test_without_flock_a_save_keeps_the_leftovers_that_may_be_a_live_save_s(
        tokenizer, tmp_path, monkeypatch):
    """A folder of a process that still runs, of another host sharing the folder, or named
    before saves recorded their writer: any of them may be a save still writing."""
    from dlm_lsp.models import tiny

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(60)
    kept = [f".saving-{os.getpid()}@{tiny._host()}-live", f".saving-{gone.pid}@elsewhere-x1",
            ".saving-k1ll3d"]
    for name in kept:
        (tmp_path / name).mkdir()
    _without_flock(monkeypatch)
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path)
    assert sorted(p.name for p in tmp_path.glob(".saving-*")) == sorted(kept)


def test_a_second_save_into_a_folder_waits_for_the_first_and_keeps_its_files(
        tokenizer, tmp_path, monkeypatch):
    """Two saves into one folder can run at once (two train runs with one --out): the
    second must not take the first's hidden folder for a killed save's and remove it
    under it, and their files must not mix."""
    from dlm_lsp.models import tiny

    real, writing, go_on = tiny.save_file, threading.Event(), threading.Event()

    def save_file(tensors, path):
        if not writing.is_set():  # the first save pauses at its weights
            writing.set()
            go_on.wait(30)
        real(tensors, path)
    monkeypatch.setattr(tiny, "save_file", save_file)
    first = threading.Thread(target=save_tiny, args=(_small_model(tokenizer), tokenizer,
                                                     tmp_path),
                             kwargs={"extra": {"training": {"steps": 1}}})
    first.start()
    assert writing.wait(30)
    [staging] = tmp_path.glob(".saving-*")
    second = threading.Thread(target=save_tiny, args=(_small_model(tokenizer), tokenizer,
                                                      tmp_path),
                              kwargs={"extra": {"training": {"steps": 2}}})
    second.start()
    second.join(1.0)
    try:
        assert second.is_alive() and staging.is_dir()
    finally:
        go_on.set()
        first.join(30)
        second.join(30)
    assert json.loads((tmp_path / "config.json").read_text())["training"] == {"steps": 2}
    assert not list(tmp_path.glob(".saving-*"))
    load_model(str(tmp_path), "cpu")


def test_a_shard_the_index_names_must_exist(tokenizer, tmp_path):
    save_tiny(_small_model(tokenizer), tokenizer, tmp_path, max_shard_bytes=60_000)
    next(tmp_path.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(ModelLoadError, match="could not load"):
        load_model(str(tmp_path), "cpu")


def test_a_tokenizer_with_more_ids_than_the_model_is_refused_at_load(tokenizer, tmp_path):
    """A tokenizer.json from another model loaded, `models check` said ok, and the first
    fill ended in an IndexError from the embedding."""
    torch.manual_seed(0)
    smaller = TinyDenoiser(TinyConfig(vocab_size=tokenizer.vocab_size - 100, d_model=64,
                                      n_layers=2, n_heads=2, max_length=64))
    save_tiny(smaller, tokenizer, tmp_path)
    with pytest.raises(ModelLoadError, match="vocabulary sizes disagree"):
        load_model(str(tmp_path), "cpu")
    assert "vocabulary sizes disagree" in inspect(str(tmp_path)).problems[0]


def test_a_tensor_larger_than_the_shard_limit_is_refused():
    with pytest.raises(ValueError, match="alone exceeds"):
        plan_shards({"small": 10, "embed": 5000}, 1000)


def test_the_shipped_single_file_model_still_loads():
    model = load_model("default", "cpu")
    assert model.tokenizer.vocab_size == 8192 and model.max_length == 512


# --- the tiny preset: the whole pipeline in seconds --------------------------------------


PATTERN = "total = price + tax\nlog.info(price)\n"


@pytest.fixture(scope="module")
def pattern_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files made of one repeated two-line pattern, plus a copy of a HumanEval solution."""
    root = tmp_path_factory.mktemp("pattern")
    for i in range(6):
        (root / f"ledger_{i}.py").write_text(f"# ledger {i}\n" + PATTERN * 60)
    (root / "leaked.py").write_text(_humaneval_solution(3))
    return root


@pytest.fixture(scope="module")
def tiny_run(pattern_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-model")
    assert main(["--tiny", "--no-stdlib", "--extra-root", str(pattern_dir),
                 "--out", str(out)]) == 0
    return out


def test_tiny_preset_learns_and_reports_what_it_dropped(tiny_run):
    stats = json.loads((tiny_run / "config.json").read_text())["training"]
    assert stats["steps"] == tiny_preset().max_steps, "fixed, however busy the machine"
    assert stats["heldout_loss"] < stats["initial_heldout_loss"] / 3
    assert stats["contaminated_files"] == 1 and stats["contaminated_paths"] == ["leaked.py"]
    assert stats["tokenizer"].endswith("line breaks apart")


def test_tiny_model_fills_the_repeated_pattern_exactly(tiny_run):
    """At the line's own length, exactly that long, as the benchmarks ask (`exactLength`):
    where the line ends, a model of 1,500 CPU steps learns less surely, and which CPU
    trained it decides (on an AMD EPYC VM it stopped after ` price` when free to end;
    on an Intel Xeon it did not)."""
    engine = Engine(ServerConfig(model=str(tiny_run), device="cpu"))
    text = PATTERN * 4
    start = len(PATTERN) * 2 + len("total =")
    end = text.index("\n", start)
    length = len(engine.model.tokenizer.encode(" price + tax"))
    result = engine.infill(InfillRequest(text[:start] + text[end:], start, start, "python",
                                         options=InfillOptions(length=length,
                                                               exact_length=True)))
    assert result.candidates[0].text == " price + tax"


# --- the GPU run -------------------------------------------------------------------------


def test_gpu_recipe_fits_what_comes_back_from_the_gpu_machine(tmp_path):
    files, size = export_plan(full_config(tmp_path))
    assert files <= 8 and size <= 64 * 2**20
    cfg = full_config(tmp_path)
    # 6 layers: with int8 weights 12 would fit what comes back and what travels to the next
    # GPU run (64 MiB a call, tests/test_device_transfer.py), but a model grown deeper lost
    # to the model as it was at equal time, measured at small scale (gpu_run's docstring)
    assert (cfg.d_model, cfg.n_layers, cfg.seq_len, cfg.vocab_size) == (512, 6, 512, 8192)


def _gpu_run_start(tmp_path, *flags):
    """The TrainConfig of a gpu_run with these flags, and where it starts."""
    from dlm_lsp.training import gpu_run

    return gpu_run.config_from_args(gpu_run.build_parser().parse_args(
        ["--out", str(tmp_path / "out"), *flags]))


def _gpu_run_config(tmp_path, *flags):
    return _gpu_run_start(tmp_path, *flags)[0]


def test_gpu_run_init_from_default_continues_the_shipped_model_as_train_does(tmp_path):
    """Read as a Path, "default" was a folder ./default beside the repository's root."""
    cfg = _gpu_run_config(tmp_path, "--init-from", "default")
    assert cfg.init_from == train_module.DEFAULT_OUT
    shipped = json.loads((train_module.DEFAULT_OUT / "config.json").read_text())
    planned = export_plan(cfg)  # the shipped model's shape, not the recipe's, is what counts
    files, size = export_plan(replace(full_config(tmp_path), init_from=None,
                                      d_model=shipped["d_model"], n_layers=shipped["n_layers"],
                                      n_heads=shipped["n_heads"]))
    # and its own config.json and tokenizer, whose record of earlier runs grows with each
    # (the shipped model's came to 1.05 MiB, over the 1 MiB a new model's are allowed)
    own = sum((train_module.DEFAULT_OUT / name).stat().st_size
              for name in ("config.json", "tokenizer.json"))
    assert planned == (files, size + own)


def test_gpu_run_init_from_a_path_to_a_directory_called_default_is_that_directory(
        trained, tmp_path, monkeypatch):
    shutil.copytree(trained[0], tmp_path / "default")
    monkeypatch.chdir(tmp_path)
    assert _gpu_run_config(tmp_path, "--init-from", "./default").init_from == Path("default")


@pytest.mark.parametrize(("flags", "said"), [
    (["--out", ""], "argument --out: is empty: name the folder to save the model in"),
    (["--extra-root", ""], "argument --extra-root: is empty: name a folder of .py files"),
    (["--init-from", "nowhere"], "gpu_run: --init-from nowhere: {cwd}/nowhere does not exist"),
    (["--init-from", "."], "gpu_run: --init-from . holds no saved model (no config.json); "
                           "name a folder that dlm-lsp train wrote"),
])
def test_gpu_run_refuses_a_folder_it_cannot_use_in_one_line_before_any_work(
        flags, said, tmp_path, monkeypatch, capsys):
    """`--out "$OUT"` with OUT unset saved the model among the repository's files, whence
    nothing comes back from the GPU machine; a wrong --init-from was a traceback from the
    export plan, and blamed "any interim save" of a run that had not begun."""
    from dlm_lsp.training import gpu_run

    monkeypatch.chdir(tmp_path)
    with contextlib.suppress(SystemExit):
        assert gpu_run.main(["--size", "tiny", "--device", "cpu", "--out", "out", *flags]) == 2
    err = capsys.readouterr().err
    assert said.format(cwd=tmp_path) in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == []  # nothing written, here or in out


@pytest.mark.parametrize("saves", [False, True])
def test_gpu_run_names_an_interim_save_only_where_this_run_made_one(
        saves, trained, tmp_path, monkeypatch, capsys):
    """A failure before any save (no CUDA, a bug) said "any interim save is in OUT", also
    where OUT held an earlier run's model, which the user then took for this run's."""
    from dlm_lsp.training import gpu_run

    out = tmp_path / "out"
    shutil.copytree(trained[0], out)  # an earlier run's model, saved before this run began
    os.utime(out / "config.json", (time.time() - 60,) * 2)

    def train(cfg):
        if saves:
            (out / "config.json").write_text((trained[0] / "config.json").read_text())
        raise RuntimeError("the run failed")
    monkeypatch.setattr(gpu_run, "train", train)
    assert gpu_run.main(["--size", "tiny", "--device", "cpu", "--out", str(out),
                         "--init-from", "none"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("gpu_run: failed after") and "the run failed" in last
    assert ("an interim save is in" in last) is saves


def test_running_out_of_memory_while_growing_layers_names_grow_layers(monkeypatch):
    """Only the flags of a new model's shape were named, and a warm start has none: an
    out-of-memory of --grow-layers 100000 said to try a smaller --batch-size."""
    cfg = replace(TrainConfig(), init_from=Path("m"), grow_layers=100_000, out_dir=Path("o"))
    with pytest.raises(train_module.OutOfMemory, match=r"or fewer --grow-layers than 100000;"):
        with train_module._memory_errors(cfg, torch.device("cpu"), "before training"):
            raise MemoryError()


@pytest.fixture(scope="module")
def tiny_gpu_model(pattern_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new model of gpu_run's tiny size, as an earlier GPU run would leave it."""
    from dlm_lsp.training import gpu_run

    out = tmp_path_factory.mktemp("gpu-tiny") / "model"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--init-from", "none",
                         "--no-stdlib", "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "20"]) == 0
    return out


def _ship(monkeypatch, folder: Path) -> None:
    """Make `folder` the shipped model for this test (dlm_lsp/weights is never touched)."""
    import dlm_lsp.models

    monkeypatch.setattr(dlm_lsp.models, "DEFAULT_MODEL_DIR", folder)


def test_gpu_run_continues_the_shipped_model_of_its_size_by_default_and_says_so(
        tiny_gpu_model, pattern_dir, tmp_path, monkeypatch, capsys):
    """Without --init-from, a run whose size is the shipped model's continues it: each
    GPU session improves the model the last one shipped instead of starting over."""
    from dlm_lsp.training import gpu_run

    _ship(monkeypatch, tiny_gpu_model)
    capsys.readouterr()
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"gpu_run: continuing the shipped model in {tiny_gpu_model} "
                               "(d 64 x 1 layers, 2 heads, 128 tokens, ")
    assert lines[1].endswith("it has --size tiny's shape (--init-from none trains a new model)")
    training = json.loads((out / "config.json").read_text())["training"]
    assert training["init_from"] == str(tiny_gpu_model)
    assert (out / "tokenizer.json").read_text() == (tiny_gpu_model / "tokenizer.json").read_text()


def test_gpu_run_trains_a_new_model_when_the_shipped_one_is_another_shape_and_says_why(
        trained, tmp_path, monkeypatch):
    """A shipped model of another shape (the 5.2M-parameter CPU bootstrap, shipped until
    2026-12-04, was smaller than --size full: continuing it would have left most of the
    GPU's budget unused) is not continued: the run trains a new model of its size, and
    its first line says so (and how to continue the shipped one anyway)."""
    _ship(monkeypatch, trained[0])  # d 32, 1 layer, 64 tokens: not the tiny size's shape
    cfg, start = _gpu_run_start(tmp_path, "--size", "tiny")
    assert cfg.init_from is None and start.init_from is None
    assert re.fullmatch(
        rf"the shipped model in {re.escape(str(trained[0]))} is d 32 x 1 layers, 2 heads, 64 "
        r"tokens, \d+ ids, [\d,]+ parameters, not --size tiny's d 64 x 1 layers, 2 heads, 128 "
        r"tokens, 512 ids, [\d,]+ parameters: training a new model \(--init-from default "
        r"continues it anyway\)", start.why)


def test_the_next_gpu_run_continues_the_shipped_model():
    """The shipped model was trained by gpu_run at --size full, so the next GPU session's
    run continues it with no flag, and each session's run improves on the last; a recipe
    change that altered the shape would silently start over from a new model."""
    from dlm_lsp.training.gpu_run import auto_start

    start = auto_start(full_config(Path("unused")), "full")
    assert start.init_from == train_module.DEFAULT_OUT
    assert start.why.startswith(f"continuing the shipped model in {train_module.DEFAULT_OUT}")


PREP_STAGES = ["reading", "tokenizer", "model", "tokenizing", "rows", "first_eval"]


def test_gpu_run_reports_the_seconds_of_each_stage_of_preparation_and_training(
        pattern_dir, tmp_path, capsys):
    """Preparation comes out of the GPU run's wall budget: its log and config.json say
    what reading, tokenizer training and tokenizing cost there, and what training got."""
    from dlm_lsp.training import gpu_run

    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--init-from", "none",
                         "--no-stdlib", "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "5"]) == 0
    training = json.loads((out / "config.json").read_text())["training"]
    assert list(training["prep"]) == PREP_STAGES
    assert sum(training["prep"].values()) == pytest.approx(training["prep_seconds"], abs=0.5)
    stages = r", ".join(rf"{stage} \d+\.\ds" for stage in PREP_STAGES)
    assert any(re.fullmatch(rf"gpu_run: seconds: {stages}, training \d+\.\ds, the rest "
                            r"-?\d+\.\ds; \d+s in all", line)
               for line in capsys.readouterr().out.splitlines())


def test_gpu_run_init_from_none_trains_a_new_model_even_at_the_shipped_model_s_size(
        tiny_gpu_model, tmp_path, monkeypatch):
    _ship(monkeypatch, tiny_gpu_model)
    assert _gpu_run_start(tmp_path, "--size", "tiny")[1].init_from == tiny_gpu_model
    cfg, start = _gpu_run_start(tmp_path, "--size", "tiny", "--init-from", "none")
    assert cfg.init_from is None and start.why == "training a new model (--init-from none)"


# The GPU machine has torch, tokenizers, safetensors and numpy, and runs the module
# from a copy of the repository: the run must never import the server's dependencies.
BLOCKED_IMPORTS = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pygls", "lsprotocol"} or name.startswith("tree_sitter"):
            raise ImportError(f"{name} is not installed on the GPU machine")
sys.meta_path.insert(0, Block())
sys.argv = ["gpu_run", *sys.argv[1:]]
runpy.run_module("dlm_lsp.training.gpu_run", run_name="__main__")
"""


def test_gpu_run_works_end_to_end_at_tiny_size_without_the_server_s_dependencies(
        pattern_dir, tmp_path):
    out = tmp_path / "out"
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORTS, "--out", str(out), "--size", "tiny",
         "--no-stdlib", "--no-site-packages", "--extra-root", str(pattern_dir),
         "--device", "cpu", "--max-steps", "40", "--shard-mib", "0.04"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpu_run: done" in done.stdout
    shards = list(out.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2
    assert any(t.dtype == torch.int8 for shard in shards for t in load_file(str(shard)).values())
    stats = json.loads((out / "config.json").read_text())["training"]
    assert stats["steps"] == 40 and stats["contaminated_files"] == 1
    # the fill probe ran there too: a point before training, one at each evaluation, one after
    curve = stats["fill_curve"]
    assert len(curve) >= 2 and curve[0]["tokens"] == 0
    assert curve[-1]["tokens"] == stats["tokens_seen"]
    assert [p["tokens"] for p in curve] == sorted(p["tokens"] for p in curve)
    assert stats["fill_probe"]["humaneval"] == 4
    assert all(0 <= p["probe_humaneval_exact"] <= 100 for p in curve)
    assert "gpu_run: fill curve at 0 tokens: fills exact/similar " in done.stdout
    engine = Engine(ServerConfig(model=str(out), device="cpu"))
    result = engine.infill(InfillRequest("total = price\nlog.info(x)\n", 5, 5, "python"))
    assert result.candidates and result.steps >= 1


def test_gpu_run_stopped_by_a_second_sigterm_exits_143_without_saving(
        pattern_dir, tmp_path, monkeypatch, capsys):
    """A second SIGTERM (the device's limit, then a kill) quits as `dlm-lsp train` does,
    with SIGTERM's status: it exited 130, the status of Ctrl-C."""
    from dlm_lsp.training import gpu_run

    _signal_in_step(monkeypatch, 2, signal.SIGTERM, signal.SIGTERM)
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "100000"]) == 128 + signal.SIGTERM
    assert "stopped by a second SIGTERM before saving" in capsys.readouterr().err
    assert not (out / "config.json").exists()


def test_gpu_run_stopped_by_the_device_s_timeout_keeps_and_checks_its_model(
        pattern_dir, tmp_path, monkeypatch, capsys):
    """The GPU machine's time limit ends a run with a signal: the model trained so far is
    saved and verified, and the status is not the 0 of a run that spent its budget."""
    from dlm_lsp.training import gpu_run

    _signal_in_step(monkeypatch, 5, signal.SIGTERM)
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "100000"]) == 128 + signal.SIGTERM
    stdout = capsys.readouterr().out
    assert "gpu_run: stopped by SIGTERM after" in stdout and "gpu_run: done" not in stdout
    assert json.loads((out / "config.json").read_text())["training"]["steps"] == 5


@pytest.mark.parametrize("flags", [["--shard-mib", "nan"], ["--max-steps", "0"],
                                   ["--wall-seconds", "-1"], ["--data-bytes", "0"]])
def test_gpu_run_refuses_the_values_train_refuses_naming_the_flag(flags, tmp_path, capsys):
    """`--shard-mib nan` ended the GPU kit in a traceback from int(), `--max-steps 0` in
    another: its flags now take train's own checks, a usage error before anything runs."""
    from dlm_lsp.training import gpu_run

    with pytest.raises(SystemExit) as exit_:
        gpu_run.main(["--out", str(tmp_path / "out"), "--size", "tiny", *flags])
    assert exit_.value.code == 2
    assert f"argument {flags[0]}: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_gpu_run_says_a_training_error_in_one_line(pattern_dir, tmp_path, capsys):
    """A run our checks refuse (a device torch cannot name, say) is one
    line of ours, not a traceback whose last line repeats it."""
    from dlm_lsp.training import gpu_run

    assert gpu_run.main(["--out", str(tmp_path / "out"), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "nonsense"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "gpu_run: failed after" in err


def test_gpu_run_says_running_out_of_memory_in_one_line(pattern_dir, tmp_path, monkeypatch,
                                                        capsys):
    from dlm_lsp.training import gpu_run

    _out_of_memory_in_step(monkeypatch, 2, "gpu")
    assert gpu_run.main(["--out", str(tmp_path / "out"), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "100000"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(r"gpu_run: failed after \d+s: out of the machine's memory once training "
                     r"had started .*; try a smaller --batch-size .*; nothing saved to \S+$",
                     err)


def test_gpu_run_says_a_full_disk_at_its_save_in_one_line(pattern_dir, tmp_path, monkeypatch,
                                                          capsys):
    """The GPU run's one chance: a save the disk refused was a traceback of safetensors."""
    from safetensors import SafetensorError

    from dlm_lsp.models import tiny
    from dlm_lsp.training import gpu_run

    def save_file(tensors, path):
        raise SafetensorError("Error while serializing: I/O error: No space left on device "
                              "(os error 28)")
    monkeypatch.setattr(tiny, "save_file", save_file)
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu", "--max-steps", "2"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(rf"gpu_run: failed after \d+s: --out {re.escape(str(out))}: cannot save "
                     r"the model after step \d+ \(No space left on device\); nothing was "
                     r"saved$", err.strip())


def test_gpu_run_interrupted_before_training_says_so(pattern_dir, tmp_path, monkeypatch,
                                                    capsys):
    """Ctrl-C's own KeyboardInterrupt has no text: the line ended after the colon."""
    from dlm_lsp.training import gpu_run

    def collect_sources(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(train_module, "collect_sources", collect_sources)
    assert gpu_run.main(["--out", str(tmp_path / "out"), "--size", "tiny", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(pattern_dir),
                         "--device", "cpu"]) == 130
    assert capsys.readouterr().err.endswith("s: before training\n")


def test_cpu_bf16_is_dropped_with_a_warning_where_the_cpu_only_emulates_it(
        trained, source_dir, tmp_path, monkeypatch, capsys):
    """Emulated bf16 trained ~20x slower than fp32 on an AVX2 CPU: asking for it there
    gets fp32 and says so, rather than a run that quietly does 1/20th of its work."""
    monkeypatch.setattr(train_module, "cpu_has_native_bf16", lambda: False)
    out, _ = trained
    stats = train(tiny_config(source_dir, tmp_path / "again", seconds=1.0, init_from=out,
                              cpu_bf16=True))
    assert stats["precision"] == "float32"
    assert "--cpu-bf16 ignored" in capsys.readouterr().err


def test_the_training_line_counts_its_step_limit_in_english():
    """`--max-steps 1` printed "for 600s or 1 steps"."""
    from dlm_lsp.training.train import _or_steps

    assert (_or_steps(None), _or_steps(1), _or_steps(2)) == ("", " or 1 step", " or 2 steps")


def test_the_device_line_counts_threads_in_english():
    from dlm_lsp.training.train import describe_device

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert describe_device(torch.device("cpu")) == "cpu (1 thread)"
        torch.set_num_threads(2)
        assert describe_device(torch.device("cpu")) == "cpu (2 threads)"
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("held", ["published", "config-not-json", "bare-weights"])
def test_a_folder_holding_another_model_is_refused_before_training_and_left_whole(
        source_dir, tmp_path, held):
    """A save deletes the folder's *.safetensors; `--out` at a downloaded checkpoint (a
    typo away from a new folder) would have lost its shards after the whole budget."""
    out = tmp_path / "dream"
    out.mkdir()
    shard = out / "model-00001-of-00004.safetensors"
    shard.write_bytes(b"a 4 GB shard")
    if held == "published":
        (out / "config.json").write_text('{"model_type": "Dream"}')
    elif held == "config-not-json":
        (out / "config.json").write_text("not json")
    with pytest.raises(TrainingError, match="choose another folder"):
        train(tiny_config(source_dir, out))
    assert shard.read_bytes() == b"a 4 GB shard"


def test_a_model_of_our_own_is_replaced_and_its_stale_card_pointed_out(trained, source_dir,
                                                                       tmp_path, capsys):
    out = tmp_path / "again"
    shutil.copytree(trained[0], out)
    (out / "MODEL_CARD.md").write_text("# the model that was here\n")
    stats = train(tiny_config(source_dir, out, max_steps=2))
    assert json.loads((out / "config.json").read_text())["training"]["steps"] == stats["steps"]
    assert f"note: {out / 'MODEL_CARD.md'} describes the model that was there" in \
        capsys.readouterr().err


def test_a_card_with_no_model_beside_it_is_said_to_describe_none(source_dir, tmp_path,
                                                                 capsys):
    """It was said to describe "the model that was there before this run": none was."""
    out = tmp_path / "carded"
    out.mkdir()
    (out / "MODEL_CARD.md").write_text("# to be written\n")
    train(tiny_config(source_dir, out, max_steps=2))
    assert (f"note: {out / 'MODEL_CARD.md'} was there before this run and describes none of "
            "its weights") in capsys.readouterr().err


def test_a_folder_of_another_config_and_no_weights_is_refused_without_talk_of_weights(
        source_dir, tmp_path):
    out = tmp_path / "other"
    out.mkdir()
    (out / "config.json").write_text("not json")
    with pytest.raises(TrainingError) as refused:
        train(tiny_config(source_dir, out))
    assert "weights" not in str(refused.value) and "choose another folder" in str(refused.value)


def test_a_corpus_of_one_file_says_it_holds_nothing_out(tmp_path, capsys):
    """With one source file no file is held out, and the run ended on 'held-out loss
    None -> None', which did not say why."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "only.py").write_text("def add(a, b):\n    return a + b\n" * 40)
    out = tmp_path / "out"
    assert main([*_cli_args(tmp_path / "src", out), "--max-steps", "2"]) == 0
    printed = capsys.readouterr().err
    assert "None" not in printed
    # why, once: the last line said it four times over
    assert (f"saved to {out} after " in printed and printed.rstrip().endswith(
        "s: nothing to evaluate, none (a single source file: nothing held out)"))
    assert "sources: 1 file in " in printed and ", 0 duplicates" in printed


def test_train_s_standard_output_is_its_closing_json_alone(source_dir, tmp_path, capsys):
    """Progress went to stdout beside the statistics, so `dlm-lsp train ... | jq` failed
    on the first line ("sources: ..."): the lines a person reads go to stderr."""
    assert main([*_cli_args(source_dir, tmp_path / "out"), "--max-steps", "2"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["steps"] == 2
    assert "sources: " in captured.err and "saved to " in captured.err


def test_each_held_out_evaluation_says_when_it_starts_and_what_it_found_in_how_long(
        source_dir, tmp_path, capsys):
    """The evaluations before and after training (~9 s each in the shipped recipe on a
    2-core CPU) printed nothing while they ran: the run looked hung."""
    stats = train(tiny_config(source_dir, tmp_path / "out", max_steps=2))
    lines = capsys.readouterr().err.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("evaluating held-out")]
    assert [lines[i] for i in starts] == [
        f"evaluating held-out loss {when} training on 8 rows and 8 infilling rows..."
        for when in ("before", "after")]
    assert re.fullmatch(r"held-out loss [\d.]+, infill loss [\d.]+ in \d+\.\ds",
                        lines[starts[0] + 1])
    assert lines[starts[1] + 1].startswith(f"held-out loss {stats['heldout_loss']}, infill "
                                           f"loss {stats['heldout_infill_loss']} in ")
    assert lines[starts[0] + 2].startswith("training ")
    assert lines[starts[1] + 2].startswith("saved to ")


def test_a_periodic_evaluation_says_when_it_starts_and_its_progress_line_keeps_its_result(
        source_dir, tmp_path, capsys):
    """--eval-every's evaluations printed no line of their own: one as long as those before
    and after training showed nothing moving until the progress line that carries it."""
    train(tiny_config(source_dir, tmp_path / "out", max_steps=2, log_every=0.0,
                      eval_every=1e-9))
    lines = capsys.readouterr().err.splitlines()
    progress = [i for i, line in enumerate(lines) if line.startswith("step ")]
    assert [lines[i - 1] for i in progress] == [
        f"evaluating held-out loss at step {step} on 8 rows and 8 infilling rows..."
        for step in (1, 2)]
    assert all(re.fullmatch(r"step +\d+  loss .*  held-out [\d.]+", lines[i])
               for i in progress)


def test_a_warm_start_on_rows_shorter_than_its_model_says_so(trained, source_dir, tmp_path,
                                                              capsys):
    """`--seq-len` keeps the preset's value whatever the model: a 512-token model trained
    further with the README's command went on 256-token rows without a word."""
    out, _ = trained
    train(tiny_config(source_dir, tmp_path / "short", max_steps=1, init_from=out, seq_len=48))
    assert ("warm start: rows of 48 tokens, shorter than the model's 64 (--seq-len 64 "
            "trains it at its full length)") in capsys.readouterr().err.splitlines()
    train(tiny_config(source_dir, tmp_path / "full", max_steps=1, init_from=out, seq_len=64))
    assert "warm start: rows" not in capsys.readouterr().err


def test_a_continued_run_with_nothing_left_to_hold_out_says_why(trained, source_dir, tmp_path,
                                                                 capsys):
    """Every file of its corpus a text its model trained on before (moved since), a
    continued run holds nothing out; it said 'a single source file' of many."""
    out, stats = trained
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in source_dir.rglob("*.py"):
        rel = path.relative_to(source_dir).as_posix()
        if rel not in stats["heldout_files"]:
            (moved / ("moved_" + rel.replace("/", "_"))).write_bytes(path.read_bytes())
    capsys.readouterr()
    again = train(tiny_config(moved, tmp_path / "next", init_from=out, max_steps=1))
    printed = capsys.readouterr().err
    assert again["heldout_files"] == [] and len(again["split"]["trained"]) > 0
    assert "single source file" not in printed
    assert ("nothing to evaluate, none (nothing held out: an earlier run of the model trained "
            "on every file, or a near-copy of it)\n") in printed


def test_a_corpus_whose_every_file_is_held_out_is_trained_on_all_but_one(tmp_path):
    """Every file held out (ranked below the fraction by its path, or a text a continued
    model's earlier runs held out) left nothing to train on: the run read the sources,
    trained a tokenizer and ended in a traceback ("cannot sample rows from an empty token
    stream").  As where nothing is held out, one file is, the lowest-ranked, and the rest
    are trained on; a single file is trained on, nothing held out."""
    names = _ranked_heldout(3)
    texts = _write_project(tmp_path / "project", names)
    config = SourceConfig(include_stdlib=False, extra_roots=[tmp_path / "project"])
    corpus = collect_sources(config)
    lowest = min(names, key=heldout_rank)
    assert [f.path for f in corpus.heldout] == [lowest]
    assert sorted(f.path for f in corpus.train) == sorted(set(names) - {lowest})
    renamed = _write_project(tmp_path / "renamed", _unranked(2))  # held out before
    config = SourceConfig(include_stdlib=False, extra_roots=[tmp_path / "renamed"],
                          heldout_before=frozenset(map(text_digest, renamed.values())))
    corpus = collect_sources(config)
    assert (len(corpus.train), len(corpus.heldout)) == (1, 1)
    single = tmp_path / "single"
    single.mkdir()
    (single / names[0]).write_text(texts[names[0]])
    out = tmp_path / "out"
    assert main([*_cli_args(single, out), "--max-steps", "2"]) == 0
    stats = json.loads((out / "config.json").read_text())["training"]
    assert (stats["train_files"], stats["heldout_files"]) == (1, [])


def test_the_held_out_loss_is_the_same_at_any_batch_size(trained, source_dir, tmp_path):
    """The held-out rows were drawn in batches of --batch-size, so the rows and their
    masks were others at each size: one saved model scored 3.35, 2.80 and 1.82 at 8, 16
    and 64, and a continued run's "before" was not the earlier run's "after"."""
    model, _ = trained
    losses = {
        size: train(tiny_config(source_dir, tmp_path / f"b{size}", init_from=str(model),
                                batch_size=size, eval_rows=24, max_steps=1))
        for size in (2, 8)}
    assert losses[2]["initial_heldout_loss"] == losses[8]["initial_heldout_loss"]
    assert (losses[2]["initial_heldout_infill_loss"]
            == losses[8]["initial_heldout_infill_loss"])


def test_a_run_into_a_folder_holding_a_model_says_it_replaces_it(trained, source_dir,
                                                                 tmp_path, capsys):
    """A second run into one --out replaced the first's model without a word."""
    import shutil

    model, first = trained
    out = tmp_path / "again"
    shutil.copytree(model, out)
    capsys.readouterr()
    train(tiny_config(source_dir, out, max_steps=1))
    assert (f"note: --out {out} holds a model trained before ({first['steps']:,} steps); "
            "this run's save replaces it") in capsys.readouterr().err
    train(tiny_config(source_dir, out, max_steps=1, init_from=str(out)))  # continued
    assert "holds a model trained before" not in capsys.readouterr().err


def test_a_data_cap_below_every_file_names_the_cap(source_dir, tmp_path, capsys):
    """It said "no readable Python source files found", of sources that were there."""
    assert main([*_cli_args(source_dir, tmp_path / "out"), "--max-steps", "2",
                 "--data-bytes", "10"]) != 0
    assert "--data-bytes 10 is smaller than any source file (the smallest is " in \
        _the_error(capsys.readouterr().err)


def test_a_folder_of_python_files_none_of_them_usable_says_why(tmp_path):
    """A folder of only non-UTF-8 and oversized files was refused as if it held no .py
    file at all ("no readable Python source files found under X"), without the reason."""
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\nx = 1\n")
    (tmp_path / "table.py").write_text("x = 1\n" * 200)
    (tmp_path / "__init__.py").write_text("\n")
    with pytest.raises(FileNotFoundError) as found:
        collect_sources(SourceConfig(include_stdlib=False, extra_roots=[tmp_path],
                                     max_file_bytes=1000))
    assert str(found.value) == (f"no readable Python source files found under {tmp_path} "
                                "(3 .py file(s) found: 1 empty or over 1,000 bytes; 1 not UTF-8 "
                                "or unreadable; 1 blank)")


def test_a_held_out_loss_weighs_each_batch_by_its_rows(monkeypatch):
    """A last batch shorter than the others counted as much as each of them."""
    from types import SimpleNamespace

    from dlm_lsp.training import objective

    def batch(*losses):
        made = SimpleNamespace(inputs=torch.tensor(losses))
        made.to = lambda device: made
        return made
    monkeypatch.setattr(objective, "masked_diffusion_loss",
                        lambda module, b: b.inputs.float().mean())
    module = torch.nn.Linear(1, 1)
    loss = objective.evaluate(module, [batch(1, 1, 1), batch(4)], torch.device("cpu"))
    assert loss == pytest.approx(7 / 4)  # the rows' mean; the batches' was 2.5


@pytest.mark.parametrize("flag", ["--seconds", "--max-steps", "--wall-seconds", "--lr",
                                  "--eval-every", "--save-every", "--device"])
def test_train_help_says_what_each_budget_and_schedule_flag_does(flag):
    """`train --help` said only "default: the preset's" of them: --seconds and
    --wall-seconds read alike, and a user could not tell which bounds what."""
    action = next(a for a in train_module.build_parser()._actions if flag in a.option_strings)
    assert not action.help.startswith("default:"), action.help
