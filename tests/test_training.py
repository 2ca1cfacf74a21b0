"""Specifications of the training pipeline (dlm_lsp.training), kept fast on a laptop CPU."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dlm_lsp.models.tiny import TinyConfig, TinyDenoiser, TinyModel
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN
from dlm_lsp.training.data import (
    RowConfig,
    RowSampler,
    SourceConfig,
    SourceFile,
    collect_sources,
    encode_stream,
    line_start_flags,
    train_tokenizer,
)
from dlm_lsp.training.objective import masked_diffusion_loss
from dlm_lsp.training.train import TrainConfig, learning_rate, main, train

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
    return train_tokenizer([f.text for f in corpus.train], vocab_size=400)


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


def test_line_starts_include_tokens_that_carry_the_newline(tokenizer):
    stream = encode_stream(tokenizer, [SourceFile("a.py", "def f():\n    return 1\n")])
    flags = line_start_flags(stream, tokenizer)
    texts = [tokenizer.token_texts[i] for i in stream.tolist()]
    for i, text in enumerate(texts):
        expected = i == 0 or "\n" in text or texts[i - 1].endswith("\n")
        assert bool(flags[i]) == expected
    assert any("\n" in t and t.strip(" ") != t for t in texts), "newline+indent is one token"


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


def test_warm_restart_keeps_the_tokenizer(trained, source_dir, tmp_path):
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


def test_learning_rate_warms_up_then_decays_over_the_time_budget():
    cfg = TrainConfig(lr=1e-3, min_lr_ratio=0.1, warmup_steps=100, warmup_fraction=0.05)
    assert learning_rate(cfg, 0, 0.0) == pytest.approx(1e-5)
    assert learning_rate(cfg, 99, 0.01) == pytest.approx(1e-3, rel=1e-3)
    assert learning_rate(cfg, 3, 0.05) == pytest.approx(1e-3, rel=1e-2), "slow machine"
    assert learning_rate(cfg, 5000, 0.5) == pytest.approx(0.55e-3)
    assert learning_rate(cfg, 9000, 1.0) == pytest.approx(1e-4)


def test_cli_reports_a_missing_warm_start_directory(tmp_path, capsys):
    assert main(["--init-from", str(tmp_path / "missing"), "--seconds", "1"]) == 2
    assert "not a directory" in capsys.readouterr().err
