"""A model saved as int8 loads back within its rounding, and a model deepened by
`grow.deepen` computes what it computed before.

Both serve the same end: a larger shipped model in the bytes one GPU run can bring back
(64 MiB), continued from the model shipped today rather than trained anew.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from dlm_lsp.models.grow import deepen, deeper_positions
from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.tiny import (
    INT8_GROUP,
    SCALE_SUFFIX,
    TinyConfig,
    TinyDenoiser,
    TinyModel,
    load_weights,
    save_tiny,
    stored_sizes,
)
from dlm_lsp.training.rows import RowConfig
from dlm_lsp.training.train import TrainConfig, TrainingError, train
from dlm_lsp.training.train import main as train_main
from tests.tiny_model import small_tokenizer


@pytest.fixture(scope="module")
def tok():
    return small_tokenizer(512)


def _model(tok, n_layers: int = 2, seed: int = 0) -> TinyDenoiser:
    torch.manual_seed(seed)
    return TinyDenoiser(TinyConfig(vocab_size=tok.vocab_size, d_model=64, n_layers=n_layers,
                                   n_heads=4, max_length=128))


def _ids(tok) -> torch.Tensor:
    return torch.tensor([tok.encode("def area(r):\n    return 3.14 * r * r\n")])


# --- int8 storage ----------------------------------------------------------------------


def test_an_int8_save_is_about_half_the_bytes_of_fp16(tok, tmp_path):
    module = _model(tok)
    fp16 = sum(p.stat().st_size for p in save_tiny(module, tok, tmp_path / "a")
               if p.suffix == ".safetensors")
    int8 = sum(p.stat().st_size for p in save_tiny(module, tok, tmp_path / "b",
                                                   dtype=torch.int8)
               if p.suffix == ".safetensors")
    assert 0.5 < int8 / fp16 < 0.6  # 8 bits + a 16-bit scale per 32 weights: 8.5 of 16


def test_each_int8_weight_comes_back_within_half_a_step_of_its_group(tok, tmp_path):
    module = _model(tok)
    save_tiny(module, tok, tmp_path, dtype=torch.int8)
    loaded = load_weights(tmp_path)
    for name, value in module.state_dict().items():
        back = loaded[name].float()
        assert back.shape == value.shape
        if value.dim() == 2:  # a matrix: int8 with a scale per group of a row, as float32
            assert loaded[name].dtype == torch.float32
            groups = value.reshape(value.shape[0], -1, INT8_GROUP)
            half_step = groups.abs().amax(dim=2, keepdim=True) / 127 / 2
            error = (back.reshape(groups.shape) - groups).abs()
            assert (error <= half_step * 1.01 + 1e-7).all(), name
        else:  # a layer norm's vector: fp16
            assert torch.equal(back, value.half().float()), name


def test_an_int8_save_says_so_and_loads_as_a_model_with_nearly_the_same_logits(tok, tmp_path):
    module = _model(tok)
    save_tiny(module, tok, tmp_path, dtype=torch.int8)
    assert json.loads((tmp_path / "config.json").read_text())["weights_dtype"] == "int8"
    model = TinyModel.load(tmp_path, torch.device("cpu"), precision="fp32")
    with torch.no_grad():
        want = module(_ids(tok))
    got = model.logits(_ids(tok))
    assert (got - want).abs().max() < 0.05 * want.abs().max()
    assert not torch.equal(got, want)  # it was rounded: the check above is not vacuous


def test_int8_planning_on_meta_tensors_matches_the_bytes_written(tok, tmp_path):
    module = _model(tok)
    with torch.device("meta"):
        planned = stored_sizes(TinyDenoiser(module.cfg).state_dict(), torch.int8)
    save_tiny(module, tok, tmp_path, dtype=torch.int8)
    written = {k: v.numel() * v.element_size()
               for k, v in load_file(str(tmp_path / "model.safetensors")).items()}
    assert planned == written


def test_an_int8_matrix_whose_scales_are_missing_or_misshapen_is_refused_by_name(tok, tmp_path):
    save_tiny(_model(tok), tok, tmp_path, dtype=torch.int8)
    path = tmp_path / "model.safetensors"
    state = load_file(str(path))
    scale = "blocks.0.up.weight" + SCALE_SUFFIX
    save_file({k: v for k, v in state.items() if k != scale}, str(path))
    with pytest.raises(ModelLoadError, match=r"int8 tensors without their .*blocks\.0\.up\.weight"):
        TinyModel.load(tmp_path, torch.device("cpu"))
    save_file({**state, scale: state[scale][:, :1].contiguous()}, str(path))
    with pytest.raises(ModelLoadError, match=r"blocks\.0\.up\.weight\.int8_scale \(256, 1\) "
                                             r"scales no int8 matrix"):
        TinyModel.load(tmp_path, torch.device("cpu"))


def test_an_int8_save_can_be_trained_further_and_saved_again(tok, tmp_path):
    """A warm restart from int8 weights starts from their float values, which train."""
    save_tiny(_model(tok), tok, tmp_path / "a", dtype=torch.int8)
    module = TinyModel.load(tmp_path / "a", torch.device("cpu"), precision="fp32").module
    module.train()
    loss = module(_ids(tok)).logsumexp(-1).mean()
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    save_tiny(module, tok, tmp_path / "b", dtype=torch.int8)
    assert torch.equal(load_weights(tmp_path / "b")["embed.weight"],
                       load_weights(tmp_path / "a")["embed.weight"])  # rounding is stable


# --- growing a model ---------------------------------------------------------------------


def test_the_old_layers_are_spread_evenly_through_the_deeper_model():
    assert deeper_positions(6, 12) == [0, 2, 4, 6, 8, 10]
    assert deeper_positions(2, 3) == [0, 1]
    assert deeper_positions(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="cannot grow a model of 6 layers to 4"):
        deeper_positions(6, 4)


def test_a_deepened_model_computes_exactly_what_the_model_did(tok):
    module = _model(tok, n_layers=2)
    grown = deepen(module, 5)
    assert grown.cfg.n_layers == 5 and len(grown.blocks) == 5
    assert grown.num_parameters() > module.num_parameters()
    with torch.no_grad():
        assert torch.equal(grown(_ids(tok)), module(_ids(tok)))


def test_a_deepened_model_s_new_layers_learn_from_the_first_step(tok):
    """Zeroed output projections get a gradient (their inputs are not zero); after one
    step the new layers change what the model computes."""
    grown = deepen(_model(tok, n_layers=1), 2)
    new = grown.blocks[1]
    loss = grown(_ids(tok)).logsumexp(-1).mean()
    loss.backward()
    assert new.proj.weight.grad.abs().sum() > 0 and new.down.weight.grad.abs().sum() > 0
    before = grown(_ids(tok)).detach()
    torch.optim.SGD(grown.parameters(), lr=0.1).step()
    assert not torch.equal(grown(_ids(tok)).detach(), before)


def test_deepening_leaves_the_callers_random_numbers_and_the_model_alone(tok):
    module = _model(tok, n_layers=1)
    snapshot = {k: v.clone() for k, v in module.state_dict().items()}
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    first = deepen(module, 3, seed=1)
    assert torch.equal(torch.rand(3), expected)
    assert all(torch.equal(v, snapshot[k]) for k, v in module.state_dict().items())
    again = deepen(module, 3, seed=1)
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in first.state_dict().items())


# --- in a training run ----------------------------------------------------------------

SOURCE = '''
def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount
        return self.balance
'''


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sources")
    for i in range(8):
        (root / f"module_{i}.py").write_text(f"# module {i}\n" + SOURCE * 4)
    return root


def _config(sources: Path, out: Path, **changes) -> TrainConfig:
    return TrainConfig(**{**dict(
        out_dir=out, seconds=60.0, max_steps=6, include_stdlib=False, extra_roots=[sources],
        vocab_size=400, d_model=32, n_layers=1, n_heads=2, max_length=64, seq_len=48,
        batch_size=4, rows=RowConfig(max_middle=16, max_pads=4), warmup_steps=2,
        eval_rows=8, log_every=60.0, threads=1), **changes})


@pytest.fixture(scope="module")
def one_layer(sources, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one-layer")
    train(_config(sources, out))
    return out


def test_a_run_grown_deeper_starts_from_the_model_s_own_loss_and_records_the_growth(
        one_layer, sources, tmp_path, capsys):
    plain = train(_config(sources, tmp_path / "plain", init_from=one_layer, max_steps=1))
    grown = train(_config(sources, tmp_path / "deep", init_from=one_layer, grow_layers=3,
                          max_steps=1))
    # the same held-out rows, the same function: the same loss, to the last digit
    assert grown["initial_heldout_loss"] == plain["initial_heldout_loss"]
    assert grown["grew_layers"] == [1, 3] and "grew_layers" not in plain
    assert grown["parameters"] > plain["parameters"]
    assert TinyModel.load(tmp_path / "deep", torch.device("cpu")).module.cfg.n_layers == 3
    assert "grown from 1 to 3 layers (d 32 x 3 layers, " in capsys.readouterr().err


def test_growing_needs_a_model_to_grow_and_never_removes_layers(one_layer, sources, tmp_path):
    with pytest.raises(TrainingError, match="--grow-layers deepens the model of --init-from"):
        train(_config(sources, tmp_path / "a", grow_layers=3))
    with pytest.raises(TrainingError, match="--grow-layers must be a whole number, 1 or more"):
        train(_config(sources, tmp_path / "b", init_from=one_layer, grow_layers=0))
    deep = tmp_path / "deep"
    train(_config(sources, deep, init_from=one_layer, grow_layers=2, max_steps=1))
    with pytest.raises(TrainingError, match=rf"--grow-layers 1: the model in --init-from "
                                            rf"{re.escape(str(deep))} has 2 layers already"):
        train(_config(sources, tmp_path / "c", init_from=deep, grow_layers=1))
    assert not (tmp_path / "c").exists()


def test_a_run_saves_int8_weights_when_asked_and_fp16_by_default(one_layer, sources, tmp_path):
    train(_config(sources, tmp_path / "int8", init_from=one_layer, max_steps=1, weights="int8"))
    stored = load_file(str(tmp_path / "int8" / "model.safetensors"))
    assert stored["blocks.0.up.weight"].dtype == torch.int8
    assert json.loads((tmp_path / "int8" / "config.json").read_text())["weights_dtype"] == "int8"
    TinyModel.load(tmp_path / "int8", torch.device("cpu"))
    assert load_file(str(one_layer / "model.safetensors"))["blocks.0.up.weight"].dtype \
        == torch.float16
    with pytest.raises(TrainingError, match="--weights must be fp16 or int8, got 'int4'"):
        train(_config(sources, tmp_path / "int4", weights="int4"))


def test_the_command_line_grows_and_stores_as_its_flags_say(one_layer, sources, tmp_path):
    out = tmp_path / "out"
    assert train_main(["--tiny", "--out", str(out), "--init-from", str(one_layer),
                       "--grow-layers", "2", "--weights", "int8", "--no-stdlib",
                       "--extra-root", str(sources), "--max-steps", "1"]) == 0
    assert TinyModel.load(out, torch.device("cpu")).module.cfg.n_layers == 2
    assert load_file(str(out / "model.safetensors"))["blocks.1.up.weight"].dtype == torch.int8


def test_the_gpu_run_grows_a_shipped_model_of_its_width_but_fewer_layers_and_says_so(
        one_layer, sources, tmp_path, monkeypatch, capsys):
    """A recipe made deeper continues the shipped model, deepened, rather than starting
    over: every token the shipped model has seen still counts."""
    import dlm_lsp.models
    from dlm_lsp.training import gpu_run

    shipped = json.loads((one_layer / "config.json").read_text())
    monkeypatch.setattr(dlm_lsp.models, "DEFAULT_MODEL_DIR", one_layer)
    deeper = _config(sources, tmp_path / "out", n_layers=3, weights="int8",
                     vocab_size=shipped["vocab_size"])
    start = gpu_run.auto_start(deeper, "tiny")
    assert start.init_from == one_layer and start.grow_layers == 3
    assert start.why.startswith(f"growing the shipped model in {one_layer} (d 32 x 1 layers")
    assert "to this run's 3 layers, the new ones starting as the identity" in start.why
    files, size = gpu_run.export_plan(replace(deeper, init_from=one_layer, grow_layers=3))
    with torch.device("meta"):
        three = TinyDenoiser(TinyConfig.from_dict({**shipped, "n_layers": 3})).state_dict()
    own = sum((one_layer / name).stat().st_size for name in ("config.json", "tokenizer.json"))
    assert size == (sum(stored_sizes(three, torch.int8).values()) + gpu_run.OTHER_FILES_BYTES
                    + own)  # the model grown, its own files, and room for the run's additions
    wider = replace(deeper, d_model=64)
    assert gpu_run.auto_start(wider, "tiny").init_from is None  # another width: a new model


def test_the_gpu_run_s_layers_flag_deepens_the_shipped_model_end_to_end(
        one_layer, sources, tmp_path, monkeypatch, capsys):
    import dlm_lsp.models
    from dlm_lsp.training import gpu_run

    shipped = json.loads((one_layer / "config.json").read_text())
    monkeypatch.setattr(dlm_lsp.models, "DEFAULT_MODEL_DIR", one_layer)
    tiny = gpu_run.tiny_config  # the tiny size at the shipped model's width
    monkeypatch.setattr(gpu_run, "tiny_config", lambda out: replace(
        tiny(out), d_model=32, n_heads=2, max_length=64, vocab_size=shipped["vocab_size"]))
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--size", "tiny", "--layers", "2", "--no-stdlib",
                         "--no-site-packages", "--extra-root", str(sources), "--device", "cpu",
                         "--max-steps", "2", "--probe", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(
        f"gpu_run: growing the shipped model in {one_layer} (d 32 x 1 layers")
    saved = json.loads((out / "config.json").read_text())
    assert saved["n_layers"] == 2 and saved["training"]["grew_layers"] == [1, 2]
    assert saved["weights_dtype"] == "int8"


def test_the_gpu_run_s_layers_flag_deepens_a_model_named_by_init_from_or_says_it_cannot(
        one_layer, sources, tmp_path, capsys):
    """`--layers` was ignored with `--init-from DIR`: the run trained DIR's depth."""
    from dlm_lsp.training import gpu_run

    cfg = _config(sources, tmp_path / "out")
    grown = gpu_run.choose_start(str(one_layer), cfg, "tiny", layers=3)
    assert (grown.init_from, grown.grow_layers) == (one_layer, 3)
    assert grown.why.endswith("grown from 1 to 3 layers, the new ones starting as the identity")
    assert gpu_run.choose_start(str(one_layer), cfg, "tiny", layers=1).grow_layers is None
    assert gpu_run.choose_start(str(one_layer), cfg, "tiny").grow_layers is None
    deep = tmp_path / "deep"
    train(_config(sources, deep, init_from=one_layer, grow_layers=2, max_steps=1))
    with pytest.raises(TrainingError, match=rf"--layers 1: the model in {re.escape(str(deep))} "
                                            "has 2 layers, and a run never removes layers"):
        gpu_run.choose_start(str(deep), cfg, "tiny", layers=1)
    assert gpu_run.main(["--out", str(tmp_path / "x"), "--size", "tiny", "--init-from",
                         str(deep), "--layers", "1", "--device", "cpu"]) == 2
    assert "a run never removes layers" in capsys.readouterr().err
