"""Published checkpoint families, specified on tiny random checkpoints written the way the
published ones are (config.json keys, tensor names, tokenizer files), never a hub.

Each family's directory is built once: Dream as a Qwen2 network under Dream's
config.json with a slow tokenizer (vocab.json, merges.txt) and bf16 weights,
DreamOn and DiffuCoder the same with their extra tokens, Open-dCoder as a plain
Qwen2 save with tied embeddings and sharded weights, LLaDA as a LLaMA network
saved under LLaDA's own tensor names and config keys.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sysconfig
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

transformers = pytest.importorskip("transformers")

from dlm_lsp.config import InfillOptions, ServerConfig  # noqa: E402
from dlm_lsp.engine import Engine, InfillRequest  # noqa: E402
from dlm_lsp.models import ModelLoadError, load_model, tiny  # noqa: E402
from dlm_lsp.models.cache import CacheConfig  # noqa: E402
from dlm_lsp.models.checkpoint import Checkpoint  # noqa: E402
from dlm_lsp.models.command import inspect  # noqa: E402
from dlm_lsp.models.command import main as models_main  # noqa: E402
from dlm_lsp.models.hf import HFDiffusionModel  # noqa: E402
from dlm_lsp.models.hf_cache import HFContextCache  # noqa: E402
from dlm_lsp.models.registry import FAMILIES, detect  # noqa: E402
from dlm_lsp.passes import context_cache  # noqa: E402
from dlm_lsp.span import build_layout  # noqa: E402

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SPECIALS = {  # added after the BPE vocabulary, in id order, as the published tokenizers do
    "dream": [*QWEN_SPECIALS, "<|beginoftext|>", "<|mask|>"],
    "dreamon": [*QWEN_SPECIALS, "<|beginoftext|>", "<|mask|>", "<|expand|>", "<|delete|>"],
    "diffucoder": [*QWEN_SPECIALS, "<|beginoftext|>", "<|mask|>", "<|dlm_pad|>"],
    "open-dcoder": [*QWEN_SPECIALS, "<M>"],  # Open-dLLM tasks/train_torch.py adds "<M>"
    "llada": ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|eot_id|>"],
}
MASK = {"llada": "<|mdm_mask|>", "open-dcoder": "<M>"}
# DreamOn's delete signal is <|endoftext|> (DreamLM/DreamOn: src/trainer/sft_expand_dataset.py
# pads the middle with eos, eval/generator.py deletes eos); its tokenizer here also has a token
# named <|delete|> (DreamOn's blog names one), which must not become the span's end
END = {"diffucoder": "<|dlm_pad|>"}
BOS = {"dream": "<|beginoftext|>", "dreamon": "<|beginoftext|>", "llada": "<|startoftext|>"}
SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2}
EXTRA_ROWS = 6  # published embeddings have more rows than the tokenizer has ids


# --- building the checkpoints -----------------------------------------------------------------


def _train_bpe(text: str):
    """A byte-level BPE with Qwen2's pre-tokenizer, trained on `text`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    proto = transformers.Qwen2Tokenizer().backend_tokenizer
    backend = Tokenizer(models.BPE())
    backend.normalizer, backend.pre_tokenizer = proto.normalizer, proto.pre_tokenizer
    backend.decoder = proto.decoder
    backend.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return backend


@pytest.fixture(scope="module")
def bpe():
    """Trained on a little Python."""
    return _train_bpe((Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text())


def _tokenizer_files(bpe, family: str, out: Path, slow: bool) -> dict[str, int]:
    """Write the family's tokenizer; returns text -> id of its special tokens."""
    from tokenizers import AddedToken, Tokenizer

    backend = Tokenizer.from_str(bpe.to_str())
    backend.add_special_tokens([AddedToken(t, special=True) for t in SPECIALS[family]])
    ids = {t: backend.token_to_id(t) for t in SPECIALS[family]}
    eos = "<|endoftext|>"
    tok_config = {"eos_token": eos, "pad_token": END.get(family, eos),
                  "bos_token": BOS.get(family), "mask_token": MASK.get(family, "<|mask|>"),
                  "added_tokens_decoder": {str(i): {"content": t, "special": True}
                                           for t, i in ids.items()}}
    if family == "llada":  # LLaDA-8B-Instruct's tokenizer_config.json names no mask_token:
        del tok_config["mask_token"]  # config.json's mask_token_id does (a copy of the hub
        # files: monash-yann/dllm-research, models/LLaDA-8B-Instruct)
    if slow:  # Dream's layout: a slow tokenizer whose class lives in remote code
        backend.model.save(str(out))  # vocab.json, merges.txt
        tok_config |= {"tokenizer_class": "DreamTokenizer",
                       "auto_map": {"AutoTokenizer": ["tokenization_dream.DreamTokenizer", None]}}
    else:
        backend.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config))
    return ids


def _qwen2(vocab: int, tie: bool = False):
    cfg = transformers.Qwen2Config(vocab_size=vocab, tie_word_embeddings=tie,
                                   max_position_embeddings=131072, rope_theta=1e6, **SHAPE)
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(cfg)


def _dream_config(vocab: int, ids: dict[str, int]) -> dict:
    """config.json as Dream-org publishes it (Dream-v0-Base-7B's keys, tiny sizes)."""
    return {"architectures": ["DreamModel"], "attention_dropout": 0.0,
            "auto_map": {"AutoConfig": "configuration_dream.DreamConfig",
                         "AutoModel": "modeling_dream.DreamModel"},
            "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|endoftext|>"],
            "pad_token_id": ids["<|endoftext|>"], "mask_token_id": ids["<|mask|>"],
            "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 131072,
            "max_window_layers": 2, "model_type": "Dream", "rms_norm_eps": 1e-6,
            "rope_scaling": None, "rope_theta": 1e6, "sliding_window": None,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.46.2", "use_cache": True, "use_sliding_window": False,
            "vocab_size": vocab, **SHAPE}


def _write_dream(bpe, family: str, out: Path) -> Path:
    out.mkdir(parents=True)
    ids = _tokenizer_files(bpe, family, out, slow=True)
    vocab = len(bpe.get_vocab()) + len(ids) + EXTRA_ROWS
    _qwen2(vocab).to(torch.bfloat16).save_pretrained(out)
    (out / "config.json").write_text(json.dumps(_dream_config(vocab, ids), indent=2))
    if family == "dreamon":  # the keys DreamOn's DreamOnGenerationConfig reads (it takes
        # delete_token_id from eos_token_id; no published generation_config.json was read)
        (out / "generation_config.json").write_text(json.dumps(
            {"expand_token_id": ids["<|expand|>"], "mask_token_id": ids["<|mask|>"],
             "eos_token_id": ids["<|endoftext|>"]}))
    return out


def _write_open_dcoder(bpe, out: Path) -> Path:
    out.mkdir(parents=True)
    ids = _tokenizer_files(bpe, "open-dcoder", out, slow=False)
    _qwen2(len(bpe.get_vocab()) + len(ids), tie=True).save_pretrained(out,
                                                                       max_shard_size="40KB")
    return out


# LLaDA's tensor names (modeling_llada.py), from the LLaMA ones, written from LLaDA's side
LLADA_BLOCK = {"self_attn.q_proj": "q_proj", "self_attn.k_proj": "k_proj",
               "self_attn.v_proj": "v_proj", "self_attn.o_proj": "attn_out",
               "mlp.gate_proj": "ff_proj", "mlp.up_proj": "up_proj", "mlp.down_proj": "ff_out",
               "input_layernorm": "attn_norm", "post_attention_layernorm": "ff_norm"}


def _llada_name(name: str) -> str:
    top = {"model.embed_tokens.weight": "model.transformer.wte.weight",
           "model.norm.weight": "model.transformer.ln_f.weight",
           "lm_head.weight": "model.transformer.ff_out.weight"}
    if name in top:
        return top[name]
    _, _, layer, rest = name.split(".", 3)
    module = rest.rsplit(".", 1)[0]
    return f"model.transformer.blocks.{layer}.{LLADA_BLOCK[module]}.weight"


def _write_llada(bpe, out: Path) -> Path:
    out.mkdir(parents=True)
    ids = _tokenizer_files(bpe, "llada", out, slow=False)
    vocab = len(bpe.get_vocab()) + len(ids) + EXTRA_ROWS
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=5e5,
                                   max_position_embeddings=4096)
    torch.manual_seed(0)
    state = transformers.LlamaForCausalLM(cfg).state_dict()
    save_file({_llada_name(k): v.contiguous() for k, v in state.items()},
              str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps({
        "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"], "attention_dropout": 0.0,
        "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
        "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                     "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
                     "AutoModel": "modeling_llada.LLaDAModelLM"},
        "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama",
        "d_model": 32, "embedding_dropout": 0.0, "embedding_size": vocab,
        "eos_token_id": ids["<|endoftext|>"], "flash_attention": False, "include_bias": False,
        "include_qkv_bias": False, "init_device": "meta", "init_fn": "mitchell",
        "input_emb_norm": False, "layer_norm_type": "rms", "layer_norm_with_affine": True,
        "mask_token_id": ids["<|mdm_mask|>"], "max_sequence_length": 4096,
        "mlp_hidden_size": 48, "mlp_ratio": 4, "model_type": "llada",
        "multi_query_attention": None, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2,
        "pad_token_id": ids["<|endoftext|>"], "precision": "amp_bf16", "residual_dropout": 0.0,
        "rms_norm_eps": 1e-5, "rope": True, "rope_full_precision": True, "rope_theta": 5e5,
        "scale_logits": False, "use_cache": False, "vocab_size": vocab,
        "weight_tying": False}, indent=2))
    return out


@pytest.fixture(scope="module")
def checkpoints(bpe, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    dirs = {name: _write_dream(bpe, name, root / name)
            for name in ("dream", "dreamon", "diffucoder")}
    dirs["open-dcoder"] = _write_open_dcoder(bpe, root / "open-dcoder")
    dirs["llada"] = _write_llada(bpe, root / "llada")
    return dirs


@pytest.fixture(scope="module")
def models(checkpoints) -> dict[str, HFDiffusionModel]:
    """Each family in float32, whatever the CPU: these tests check the arithmetic exactly
    (a cached step against a full pass, LLaDA against its own architecture)."""
    return {name: load_model(str(path), "cpu", "fp32") for name, path in checkpoints.items()}


@pytest.mark.parametrize("native", [True, False])
def test_a_published_checkpoint_runs_in_bf16_on_a_cpu_with_native_bf16(
        checkpoints, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: native)
    model = load_model(str(checkpoints["dream"]), "cpu")
    assert model.precision == ("bf16" if native else "fp32")
    assert next(model.module.parameters()).dtype == (torch.bfloat16 if native
                                                     else torch.float32)
    assert model.logits(_ids(model)).dtype == torch.float32  # the sampler's dtype either way
    assert load_model(str(checkpoints["dream"]), "cpu", "fp32").precision == "fp32"  # asked


FAMILY_NAMES = list(SPECIALS)


def _ids(model, text: str = "def wrap(text, width):\n    return text\n") -> torch.Tensor:
    return torch.tensor([model.tokenizer.encode(text)])


# --- recognising and loading ------------------------------------------------------------------


def test_every_family_has_a_tiny_checkpoint_here():
    assert sorted(FAMILY_NAMES) == sorted(FAMILIES)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_family_is_detected_from_config_json_and_tokenizer(checkpoints, family):
    checkpoint = Checkpoint.read(checkpoints[family])
    assert detect(checkpoint, checkpoint.load_tokenizer()).name == family


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_mask_end_and_framing_tokens_are_the_familys(models, family):
    model = models[family]
    tok = model.tokenizer
    assert model.family.name == family
    assert model.mask_id == tok.token_id(MASK.get(family, "<|mask|>"))
    assert model.pad_id == tok.token_id(END.get(family, "<|endoftext|>"))
    bos = [tok.token_id(BOS[family])] if family in BOS else []
    eos = [tok.token_id("<|endoftext|>")] if family == "dreamon" else []
    framed = model.frame(_ids(model))[0].tolist()
    assert framed == bos + _ids(model)[0].tolist() + eos


def test_a_family_prefix_overrides_detection(checkpoints):
    model = load_model(f"dream:{checkpoints['dreamon']}", "cpu")
    assert model.family.name == "dream" and model.expand_id is None


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_attention_is_bidirectional(models, family):
    model = models[family]
    ids = _ids(model)
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % model.tokenizer.vocab_size
    first, again = model.logits(ids)[0, 0], model.logits(changed)[0, 0]
    assert not torch.allclose(first, again), "the first position ignored the last token"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logits_are_the_raw_models_shifted_by_one_exactly_where_the_family_shifts(
        models, family):
    model = models[family]
    ids = _ids(model)
    t, lead = ids.shape[1], len(model.conventions.before)
    with torch.no_grad():
        raw = model.module(input_ids=model.frame(ids)).logits.float()
    shift = 1 if family != "llada" else 0
    rows = raw[:, lead - shift:lead - shift + t] if lead - shift >= 0 else \
        torch.cat([raw[:, :1], raw[:, :t - 1]], dim=1)
    out = model.logits(ids)
    assert out.shape == (1, t, model.tokenizer.vocab_size)
    assert torch.equal(out, rows[..., :model.tokenizer.vocab_size])


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_row_padded_beside_a_longer_one_has_its_states_alone(models, family):
    """What lets the batching worker share a pass between fills of different lengths."""
    model = models[family]
    short, long = _ids(model, "x = 1\n"), _ids(model)
    n = short.shape[1]
    padded = torch.cat([torch.cat([short, short.new_full((1, long.shape[1] - n), 7)], 1), long])
    out = model.hidden(padded, torch.tensor([n, long.shape[1]]))
    torch.testing.assert_close(out[:1, :n], model.hidden(short))
    torch.testing.assert_close(out[1:], model.hidden(long))


@pytest.mark.parametrize("spec", ["{dir}", "open-dcoder:{dir}"])
def test_open_dcoders_mask_is_its_added_m_token_even_where_no_config_names_it(
        checkpoints, tmp_path, spec):
    """Open-dLLM's training adds "<M>" when the tokenizer has no mask token, and the published
    checkpoint has it as an added token (id 151665) but no mask_token_id in config.json: that
    checkpoint is recognised, and its mask is <M>."""
    bare = _copy(checkpoints, "open-dcoder", tmp_path)
    tok_config = json.loads((bare / "tokenizer_config.json").read_text())
    del tok_config["mask_token"]
    (bare / "tokenizer_config.json").write_text(json.dumps(tok_config))
    assert "mask_token_id" not in json.loads((bare / "config.json").read_text())
    model = load_model(spec.format(dir=bare), "cpu")
    assert model.family.name == "open-dcoder"
    assert model.mask_id == model.tokenizer.token_id("<M>") is not None


def test_open_dcoder_without_a_bos_keeps_position_0s_own_row(models):
    model = models["open-dcoder"]
    ids = _ids(model)
    with torch.no_grad():
        raw = model.module(input_ids=ids).logits.float()
    out = model.logits(ids)
    assert torch.equal(out[0, 0], raw[0, 0]) and torch.equal(out[0, 1:], raw[0, :-1])


def test_llada_gets_one_bos_even_where_its_tokenizer_would_add_one(checkpoints, tmp_path):
    """LLaDA's published code puts <|startoftext|> in front once: generate.py encodes the chat
    template's text (which starts with bos_token) with add_special_tokens=False, and
    get_log_likelihood.py joins a prompt and an answer tokenized apart.  The frame adds the
    one bos, so a tokenizer.json that would add its own must not make it two."""
    adds_bos = _copy(checkpoints, "llada", tmp_path)
    tok = json.loads((adds_bos / "tokenizer.json").read_text())
    bos_id = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|startoftext|>")
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|startoftext|>": {"id": "<|startoftext|>", "ids": [bos_id],
                                               "tokens": ["<|startoftext|>"]}}}
    (adds_bos / "tokenizer.json").write_text(json.dumps(tok))
    model = load_model(str(adds_bos), "cpu", "fp32")
    assert model.tokenizer.backend.encode("x = 1").ids[0] == bos_id  # it would add one
    framed = model.frame(_ids(model))[0].tolist()
    assert framed[0] == bos_id and framed.count(bos_id) == 1


def test_embedding_rows_beyond_the_tokenizer_are_dropped(models):
    model = models["dream"]
    assert model.module.config.vocab_size == model.tokenizer.vocab_size + EXTRA_ROWS
    assert model.logits(_ids(model)).shape[-1] == model.tokenizer.vocab_size


def test_dreamon_names_its_expand_token_and_ends_spans_with_end_of_text_as_it_deletes(models):
    """DreamOn was trained to predict <|endoftext|> where the span should shrink, so that,
    not a token that merely has "delete" in its name, is the span's end."""
    model = models["dreamon"]
    tok = model.tokenizer
    assert model.expand_id == tok.token_id("<|expand|>")
    assert tok.token_id("<|delete|>") is not None  # present, yet not the span's end
    assert model.pad_id == model.delete_id == tok.token_id("<|endoftext|>")
    assert all(models[f].expand_id is None for f in FAMILY_NAMES if f != "dreamon")


def test_a_delete_token_id_in_dreamons_generation_config_is_honoured(checkpoints, tmp_path):
    named = _copy(checkpoints, "dreamon", tmp_path)
    gen = json.loads((named / "generation_config.json").read_text())
    delete = Checkpoint.read(named).load_tokenizer().token_id("<|delete|>")
    (named / "generation_config.json").write_text(json.dumps(gen | {"delete_token_id": delete}))
    assert load_model(str(named), "cpu").pad_id == delete


def _rms_norm(x, weight, eps=1e-5):
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rotate(x, theta):
    """LLaDA's RoPE: rotate-half over (B, H, T, D) with cat(freqs, freqs) angles."""
    d, t = x.shape[-1], x.shape[-2]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    ang = torch.cat([torch.outer(torch.arange(t).float(), inv)] * 2, dim=-1)
    half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * ang.cos() + half * ang.sin()


def _llada_reference(path: Path, ids: torch.Tensor) -> torch.Tensor:
    """LLaDA's forward written out from its own tensor names (modeling_llada.py's llama
    block: pre-norm, non-causal attention, SiLU(ff_proj) * up_proj, ff_out, untied head)."""
    from safetensors.torch import load_file

    w, cfg = load_file(str(path / "model.safetensors")), json.loads((path / "config.json")
                                                                   .read_text())
    heads, x = cfg["n_heads"], None
    x = w["model.transformer.wte.weight"][ids]  # (B, T, C)
    b, t, c = x.shape
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        h = _rms_norm(x, w[p + "attn_norm.weight"])
        q, k, v = ((h @ w[p + f"{n}_proj.weight"].T).view(b, t, heads, -1).transpose(1, 2)
                   for n in "qkv")
        q, k = _rotate(q, cfg["rope_theta"]), _rotate(k, cfg["rope_theta"])
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v
        x = x + att.transpose(1, 2).reshape(b, t, c) @ w[p + "attn_out.weight"].T
        h = _rms_norm(x, w[p + "ff_norm.weight"])
        gate = torch.nn.functional.silu(h @ w[p + "ff_proj.weight"].T)
        x = x + (gate * (h @ w[p + "up_proj.weight"].T)) @ w[p + "ff_out.weight"].T
    return _rms_norm(x, w["model.transformer.ln_f.weight"]) @ w["model.transformer.ff_out.weight"].T


def test_llada_loads_into_llama_with_the_same_outputs_as_its_own_architecture(
        models, checkpoints):
    model = models["llada"]
    framed = model.frame(_ids(model))
    with torch.no_grad():
        ours = model.module(input_ids=framed).logits
    assert torch.allclose(ours, _llada_reference(checkpoints["llada"], framed), atol=1e-4)


def test_the_slow_tokenizer_encodes_like_the_fast_one(bpe, checkpoints, tmp_path):
    slow = Checkpoint.read(checkpoints["dream"]).load_tokenizer()
    fast_dir = tmp_path / "fast"
    fast_dir.mkdir()
    _tokenizer_files(bpe, "dream", fast_dir, slow=False)
    fast = Checkpoint(fast_dir, {}).load_tokenizer()
    text = "def f(x):\n\treturn x  # <|mask|> stays text\n"
    assert slow.encode(text) == fast.encode(text) and slow.vocab_size == fast.vocab_size
    assert slow.token_id("<|mask|>") == fast.token_id("<|mask|>")


def test_merges_that_begin_with_a_hash_are_merges_not_comments(tmp_path):
    """merges.txt's first line, `#version: ...`, is its header, and nothing else there is a
    comment: Qwen2's own has `# #` (`##`) and `# include` among its merges.  Every line
    beginning with `#` was skipped, and a Dream checkpoint's slow tokenizer split
    `#include` into `#`, `in`, `cl`, `ude` where the published one reads one token."""
    bpe = _train_bpe("#include <stdio.h>\n## Heading\n#define X 1\n" * 50)
    slow_dir, fast_dir = tmp_path / "slow", tmp_path / "fast"
    for folder, slow in ((slow_dir, True), (fast_dir, False)):
        folder.mkdir()
        _tokenizer_files(bpe, "dream", folder, slow=slow)
    merges = (slow_dir / "merges.txt").read_text().splitlines()
    assert merges[0].startswith("#version") and any(m.startswith("#") for m in merges[1:])
    slow = Checkpoint(slow_dir, {}).load_tokenizer()
    fast = Checkpoint(fast_dir, {}).load_tokenizer()
    for text in ("#include <stdio.h>", "## Heading", "#define X 1"):
        assert slow.encode(text) == fast.encode(text), text
    assert len(slow.encode("#include")) == 1


# --- through the engine -----------------------------------------------------------------------


def _infill(model_spec: str, text: str = "def f(x):\n    y = |\n    return y\n", **options):
    engine = Engine(ServerConfig(model=model_spec, device="cpu", reuse_fills=False))
    at = text.index("|")
    options = {"length": 6, "steps": 3, "repair_rounds": 0, "fallback": False, **options}
    request = InfillRequest(text.replace("|", ""), at, at, "python", "file:///t.py",
                            InfillOptions(**options))
    return engine, engine.infill(request)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_full_infill_runs_through_the_engine(checkpoints, family):
    engine, result = _infill(str(checkpoints[family]))
    assert isinstance(engine.model, HFDiffusionModel) and result.tokens >= 6  # + a healed edge
    assert result.candidates and "\n" not in result.candidates[0].text
    assert 1 <= result.steps <= 3


def _always_predict(module, token_id: int) -> None:
    """Rig a network so every position's top token is `token_id`: blocks add nothing,
    every embedding has a constant first channel, and only `token_id` reads it."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
        module.get_input_embeddings().weight[:, 0] = 1.0
        module.get_output_embeddings().weight[token_id, 0] = 100.0


@pytest.mark.parametrize("family", ["diffucoder", "llada", "dreamon"])  # DreamOn deletes
def test_a_span_the_model_ends_at_once_is_trimmed_to_nothing(checkpoints, family):
    engine = Engine(ServerConfig(model=str(checkpoints[family]), device="cpu"))
    _always_predict(engine.model.module, engine.model.pad_id)
    request = InfillRequest("a = 1\n\nb = 2\n", 6, 6, "python", "file:///t.py",
                            InfillOptions(length=5, steps=2, repair_rounds=0, fallback=False))
    best = engine.infill(request).candidates[0]
    # the borrowed line break comes back; the head's token may be `\n\n`, whose second
    # line break is the fill's (used 1), trimmed as a blank
    assert best.used <= 1 and best.text.strip() == ""
    if family == "dreamon":  # every end-of-text left the span: the head's token alone stays
        assert len(best.ids) == 1 and engine.model.pad_id not in best.ids


def test_dreamon_grows_a_span_through_the_engine_up_to_max_span_tokens(checkpoints):
    engine = Engine(ServerConfig(model=str(checkpoints["dreamon"]), device="cpu",
                                 max_span_tokens=9))
    expand = engine.model.expand_id
    _always_predict(engine.model.module, expand)
    request = InfillRequest("a = 1\n\nb = 2\n", 6, 6, "python", "file:///t.py",
                            InfillOptions(length=5, steps=4, repair_rounds=0, fallback=False))
    result = engine.infill(request)
    ids = result.candidates[0].ids
    assert result.tokens < 9 and len(ids) == 9  # grown from its masks (and head) to the cap
    assert expand not in ids and engine.model.mask_id not in ids
    two = InfillRequest("a = 1\n\nb = 2\n", 6, 6, "python", "file:///t.py",
                        InfillOptions(length=5, steps=4, candidates=2, repair_rounds=0,
                                      fallback=False))
    assert all(len(c.ids) == result.tokens and expand not in c.ids  # two rows: no growth
               for c in engine.infill(two).candidates)


def test_eos_is_not_diffucoders_span_end(checkpoints):
    engine = Engine(ServerConfig(model=str(checkpoints["diffucoder"]), device="cpu"))
    eos = engine.model.tokenizer.token_id("<|endoftext|>")
    _always_predict(engine.model.module, eos)
    request = InfillRequest("a = 1\n\nb = 2\n", 6, 6, "python", "file:///t.py",
                            InfillOptions(length=5, steps=2, repair_rounds=0, fallback=False))
    best = engine.infill(request).candidates[0]
    assert best.used >= 5 and best.ended is False  # eos ended nothing: every position used


# --- broken, partial or foreign checkpoints ---------------------------------------------------


def _copy(checkpoints, family: str, tmp_path: Path) -> Path:
    broken = tmp_path / family
    shutil.copytree(checkpoints[family], broken)
    return broken


LFS_POINTER_TEXT = ("version https://git-lfs.github.com/spec/v1\noid sha256:"
                    + "0" * 64 + "\nsize 15231272960\n")


def test_a_checkpoint_cloned_without_git_lfs_is_told_to_pull_its_files(
        checkpoints, model_dir, tmp_path, capsys):
    """`git clone` of a hub repository without Git LFS leaves a pointer in place of each
    large file: the load said "header too large (truncated or not safetensors?)"."""
    cloned = _copy(checkpoints, "open-dcoder", tmp_path)
    shards = sorted(p.name for p in cloned.glob("model-*.safetensors"))
    for name in shards:
        (cloned / name).write_text(LFS_POINTER_TEXT)
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(cloned), "cpu")
    assert str(caught.value) == (
        f"{cloned}: {', '.join(shards)} are Git LFS pointers, not the files (cloned without "
        f"Git LFS): run `git lfs pull` in {cloned}, or download the checkpoint with "
        "`hf download`")
    assert models_main(["check", str(cloned)]) == 1
    assert "are Git LFS pointers" in capsys.readouterr().err
    # a pointer the load never reads (a clone that pulled only the safetensors) is no matter
    pulled = _copy(checkpoints, "open-dcoder", tmp_path / "pulled")
    (pulled / "pytorch_model.bin").write_text(LFS_POINTER_TEXT)
    assert load_model(str(pulled), "cpu").mask_id is not None
    ours = tmp_path / "ours"
    shutil.copytree(model_dir, ours)
    (ours / "tokenizer.json").write_text(LFS_POINTER_TEXT)
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json is a Git LFS pointer"):
        load_model(str(ours), "cpu")


def test_a_missing_shard_is_named(checkpoints, tmp_path):
    broken = _copy(checkpoints, "open-dcoder", tmp_path)
    shard = sorted(broken.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(ModelLoadError, match=f"incomplete.*{shard.name}"):
        load_model(str(broken), "cpu")
    assert shard.name in inspect(str(broken)).problems[0]


@pytest.mark.parametrize("weight_map", [5, [], {"model.embed.weight": 5}, None])
def test_a_weight_index_that_maps_no_tensor_to_a_file_is_named(checkpoints, tmp_path,
                                                                weight_map):
    """`{"weight_map": 5}` was an AttributeError's traceback from `models check` and
    `fill`, and in the server an internal error at every fill."""
    broken = _copy(checkpoints, "open-dcoder", tmp_path)
    (broken / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ModelLoadError, match='is no weight index: its "weight_map"'):
        load_model(str(broken), "cpu")
    assert 'is no weight index' in inspect(str(broken)).problems[0]


def test_a_missing_tokenizer_is_a_clear_error(checkpoints, tmp_path):
    broken = _copy(checkpoints, "llada", tmp_path)
    (broken / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match="no tokenizer"):
        load_model(str(broken), "cpu")


def test_an_embedding_that_disagrees_with_config_vocab_is_named(checkpoints, tmp_path):
    broken = _copy(checkpoints, "dream", tmp_path)
    config = json.loads((broken / "config.json").read_text())
    config["vocab_size"] += 64
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="vocabulary sizes disagree"):
        load_model(str(broken), "cpu")


@pytest.mark.parametrize("family", ["dream", "llada"])
def test_a_config_value_of_the_wrong_type_is_named_not_a_traceback(checkpoints, tmp_path,
                                                                     family):
    broken = _copy(checkpoints, family, tmp_path)
    config = json.loads((broken / "config.json").read_text())
    key = "d_model" if family == "llada" else "hidden_size"
    config[key] = str(config[key])  # "32": transformers' validation refuses a string
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"config\.json: .*hidden_size"):
        load_model(str(broken), "cpu")
    assert "config.json" in inspect(str(broken)).problems[0]


def test_a_tokenizer_larger_than_the_model_is_refused(checkpoints, tmp_path):
    broken = _copy(checkpoints, "open-dcoder", tmp_path)
    tok = json.loads((broken / "tokenizer.json").read_text())
    size = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
    tok["added_tokens"] += [{"id": size + i, "content": f"<|extra{i}|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": False,
                             "special": True} for i in range(3)]
    (broken / "tokenizer.json").write_text(json.dumps(tok))
    report = inspect(str(broken))
    assert any("vocabulary sizes disagree" in p for p in report.problems)


def test_an_autoregressive_qwen2_is_not_taken_for_a_diffusion_model(checkpoints, tmp_path):
    broken = _copy(checkpoints, "open-dcoder", tmp_path)
    (broken / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    with pytest.raises(ModelLoadError, match="looks autoregressive"):
        load_model(str(broken), "cpu")


def test_no_code_from_the_checkpoint_runs_by_default(checkpoints, tmp_path, monkeypatch):
    monkeypatch.delenv("DLM_LSP_TRUST_REMOTE_CODE", raising=False)
    planted = _copy(checkpoints, "dream", tmp_path)
    marker = tmp_path / "ran"
    for module in ("modeling_dream.py", "configuration_dream.py", "tokenization_dream.py"):
        (planted / module).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    model = load_model(str(planted), "cpu")
    assert type(model.module).__name__ == "Qwen2ForCausalLM" and not marker.exists()


REMOTE_CONFIG = """
import transformers
open({marker!r}, "a").write("config ")

class DreamConfig(transformers.Qwen2Config):
    model_type = "Dream"
"""
REMOTE_MODEL = """
import transformers
from .configuration_dream import DreamConfig
open({marker!r}, "a").write("model ")

class DreamModel(transformers.Qwen2ForCausalLM):
    config_class = DreamConfig
"""


def test_the_checkpoints_own_code_runs_only_when_the_user_allows_it(
        checkpoints, models, tmp_path, monkeypatch):
    import sys

    import transformers.dynamic_module_utils as dynamic

    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    planted = _copy(checkpoints, "dream", tmp_path)
    marker = tmp_path / "ran"
    (planted / "configuration_dream.py").write_text(REMOTE_CONFIG.format(marker=str(marker)))
    (planted / "modeling_dream.py").write_text(REMOTE_MODEL.format(marker=str(marker)))
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", "1")
    model = load_model(str(planted), "cpu", "fp32")
    assert type(model.module).__name__ == "DreamModel"
    assert {"config", "model"} == set(marker.read_text().split())
    ids = _ids(model)
    assert torch.equal(model.logits(ids), models["dream"].logits(ids))  # same conventions


def test_naming_a_directory_allows_that_checkpoint_s_code_and_no_other(
        checkpoints, tmp_path, monkeypatch):
    """DLM_LSP_TRUST_REMOTE_CODE=1 runs the code of whatever directory `model` names, and
    a workspace's settings (or a --tcp client) may name it.  Set to one directory, only
    that one's code runs: another checkpoint loads natively, its code never imported."""
    import sys

    import transformers.dynamic_module_utils as dynamic

    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in [name for name in sys.modules if name.startswith("transformers_modules")]:
        monkeypatch.delitem(sys.modules, name)  # an earlier test's, in its own cache folder
    trusted, other = (_copy(checkpoints, "dream", tmp_path / name) for name in ("a", "b"))
    marker = tmp_path / "ran"
    for planted in (trusted, other):
        (planted / "configuration_dream.py").write_text(REMOTE_CONFIG.format(marker=str(marker)))
        (planted / "modeling_dream.py").write_text(REMOTE_MODEL.format(marker=str(marker)))
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", str(trusted) + "/")
    assert type(load_model(str(other), "cpu").module).__name__ == "Qwen2ForCausalLM"
    assert not marker.exists() and not inspect(str(other)).own_code
    assert type(load_model(str(trusted), "cpu").module).__name__ == "DreamModel"
    assert inspect(str(trusted)).own_code


def test_with_the_checkpoints_own_code_allowed_the_check_looks_for_that_code(
        checkpoints, tmp_path, monkeypatch):
    """`models check` ran the native loader's checks whatever DLM_LSP_TRUST_REMOTE_CODE
    said: it passed a Dream download without its `*.py`, which the load then could not
    build, and refused a LLaDA variant the checkpoint's own code loads."""
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", "1")
    bare = _copy(checkpoints, "dream", tmp_path)
    auto_map = json.loads((bare / "config.json").read_text())["auto_map"]
    report = inspect(str(bare))
    assert report.own_code and len(report.problems) == 1
    assert "lacks configuration_dream.py, modeling_dream.py" in report.problems[0]
    assert auto_map  # the files it names are what is missing

    variant = _copy(checkpoints, "llada", tmp_path)
    config = json.loads((variant / "config.json").read_text())
    config["block_type"] = "sequential"  # the native loader takes "llama" blocks only
    config["auto_map"] = {"AutoConfig": "configuration_llada.LLaDAConfig",
                          "AutoModel": "modeling_llada.LLaDAModelLM"}
    (variant / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "ran"
    for module in ("configuration_llada.py", "modeling_llada.py"):
        (variant / module).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    report = inspect(str(variant))
    assert report.own_code and report.problems == [] and not marker.exists()
    config["auto_map"] = {"AutoConfig": "configuration_llada.LLaDAConfig",
                          "AutoModelForMaskedLM": "modeling_llada.LLaDAModelLM"}
    (variant / "config.json").write_text(json.dumps(config))
    [problem] = inspect(str(variant)).problems  # not a class the load builds
    assert "auto_map names no AutoModel nor AutoModelForCausalLM" in problem
    config["auto_map"] = {"AutoConfig": "configuration_llada.LLaDAConfig",
                          "AutoModel": "org/other--modeling_llada.LLaDAModelLM"}
    (variant / "config.json").write_text(json.dumps(config))
    (variant / "modeling_llada.py").unlink()  # the model's code is another repository's
    assert inspect(str(variant)).problems == []  # found in the hub cache, not here
    monkeypatch.delenv("DLM_LSP_TRUST_REMOTE_CODE")
    assert "not supported natively" in " ".join(inspect(str(variant)).problems)
    assert inspect(str(bare)).problems == []


def test_a_load_with_its_own_code_allowed_says_which_of_its_code_is_missing(
        checkpoints, tmp_path, monkeypatch):
    """As `models check` does: transformers' own error named a hub URL made of the
    local folder's path."""
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", "1")
    bare = _copy(checkpoints, "dream", tmp_path)
    with pytest.raises(ModelLoadError, match=r"lacks configuration_dream\.py, modeling_dream"
                       r"\.py, the code its config\.json's auto_map names"):
        load_model(str(bare), "cpu")
    config = json.loads((bare / "config.json").read_text())
    config["auto_map"]["AutoTokenizer"] = ["tokenization_dream.DreamTokenizer", None]
    (bare / "config.json").write_text(json.dumps(config))
    (bare / "configuration_dream.py").write_text("")
    (bare / "modeling_dream.py").write_text("")
    # a tokenizer module it does not ship is no matter: the tokenizer is read natively
    assert inspect(str(bare)).problems == []


def test_a_hub_download_never_fetches_python_files_even_with_own_code_allowed(
        checkpoints, tmp_path, monkeypatch):
    """With DLM_LSP_TRUST_REMOTE_CODE set for one trusted checkpoint, a `model` setting
    from a workspace (or a --tcp client) naming another hub id would have its code
    fetched and run: the `*.py` are never downloaded, and such a load says what it lacks."""
    import huggingface_hub

    asked: list[list[str]] = []

    def snapshot(repo_id, allow_patterns, local_files_only):
        asked.append(allow_patterns)
        return str(checkpoints["dream"])
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    monkeypatch.chdir(tmp_path)  # no folder of the hub id's name
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", "1")
    with pytest.raises(ModelLoadError, match="lacks configuration_dream.py"):
        load_model("Dream-org/Dream-v0-Base-7B", "cpu")
    assert asked and not any(p.endswith(".py") or p == "*" for p in asked[0])


def test_a_hub_id_offline_says_where_to_put_the_files(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelLoadError, match="offline.*--local-dir ~/models/Dream-Coder"):
        load_model("Dream-org/Dream-Coder-v0-Instruct-7B", "cpu")


def _error_loading(spec: str, cwd: Path) -> str:
    """What loading `spec` from directory `cwd` fails with."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        with pytest.raises(ModelLoadError) as caught:
            load_model(spec, "cpu")
    return str(caught.value)


def test_a_mistyped_relative_path_says_there_is_no_such_directory_and_no_cached_hub_id(
        monkeypatch, tmp_path):
    """"models/dreem" reads as a hub id: the error spoke of downloading alone, not of the
    directory that is not there."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert _error_loading("models/dreem", tmp_path).startswith(
        f"model 'models/dreem' not found: {tmp_path / 'models' / 'dreem'} does not exist, "
        "and as a hub id it is not in the local hub cache (offline: HF_HUB_OFFLINE=1). If it "
        "is a hub id: ")


def test_a_hub_id_shaped_path_that_cannot_be_downloaded_says_both_readings(
        monkeypatch, tmp_path):
    import huggingface_hub

    def not_found(*args, **kwargs):
        raise ConnectionError("huggingface.co cannot be reached")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", not_found)
    assert _error_loading("models/dreem", tmp_path).startswith(
        f"model 'models/dreem' not found: {tmp_path / 'models' / 'dreem'} does not exist, "
        "and as a hub id it could not be downloaded (ConnectionError: huggingface.co cannot be "
        "reached). If it is a hub id: ")


def test_a_relative_path_that_is_not_there_is_said_with_its_absolute_path(tmp_path):
    assert _error_loading("./models/dreem", tmp_path) == (
        f"model './models/dreem' not found: {tmp_path / 'models' / 'dreem'} does not "
        "exist. Use 'default', a model directory, FAMILY:DIR (dream:DIR) or a hub id "
        "(owner/name).")


# --- dlm-lsp models ---------------------------------------------------------------------------


def test_models_lists_every_family(capsys):
    assert models_main([]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}:" in out for name in [*FAMILIES, "dlm-tiny"])


def test_models_check_reports_family_mask_shift_vocab_and_parameters(checkpoints, capsys):
    assert models_main(["check", str(checkpoints["llada"])]) == 0
    out = capsys.readouterr().out
    tok = Checkpoint.read(checkpoints["llada"]).load_tokenizer()
    assert "llada (detected)" in out and f"{tok.token_id('<|mdm_mask|>')} (<|mdm_mask|>)" in out
    assert "logits shifted           False" in out
    assert f"tokenizer vocabulary     {tok.vocab_size}" in out
    report = inspect(str(checkpoints["llada"]))
    assert report.parameters == sum(p.numel() for p in load_model(
        str(checkpoints["llada"]), "cpu").module.parameters())


def test_a_load_on_cuda_without_a_gpu_names_the_server_s_device_setting(monkeypatch):
    """The server's message (commands say their --device flag: test_cli)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ModelLoadError, match="set device to 'auto' or 'cpu'"):
        load_model("default", "cuda")


def test_models_check_of_a_published_checkpoint_says_its_weights_were_not_loaded(
        checkpoints, capsys):
    """Read from config.json, the tokenizer and the safetensors headers alone, it was
    "ok: the server can load it", which only a load (`--load`) finds out."""
    assert models_main(["check", str(checkpoints["llada"])]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ok: config.json, the tokenizer and the safetensors headers agree; the weights were "
        "not loaded (--load loads them and times a forward pass)")


def test_models_check_load_says_the_device_it_loaded_the_checkpoint_on(checkpoints, capsys):
    assert models_main(["check", str(checkpoints["llada"]), "--load", "--device", "cpu"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ok: the server can load it (loaded on cpu)")


@pytest.mark.parametrize(("cuda", "args", "told"), [
    (True, [], "this check loaded it on cpu; the server would load it on cuda"),
    (False, [], "loaded on cpu"),
    (True, ["--device", "cpu"], "loaded on cpu")])
def test_models_check_of_our_own_model_says_where_the_server_would_load_it(
        monkeypatch, capsys, cuda, args, told):
    """Our own model is checked by a load on the CPU, and the verdict said "loaded on
    cpu" also on a machine with CUDA, where the server (device auto) loads it on the GPU;
    --device names the server's setting.  CUDA is faked: the check's load stays on the
    CPU either way."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert models_main(["check", "default", *args]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == f"ok: the server can load it ({told})"


@pytest.mark.parametrize("model", ["default", "llada"])
def test_a_model_checked_with_device_cuda_where_there_is_none_is_a_problem(
        model, checkpoints, monkeypatch, capsys):
    """`--device cuda` names the server's setting, and a server set so on a machine
    without CUDA fails to load the model: the check said "ok: the server can load it
    (...; the server would load it on cuda)" there, and exited 0; so it did of a
    published checkpoint read without --load."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    directory = model if model == "default" else str(checkpoints[model])
    assert models_main(["check", directory, "--device", "cuda"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "1 problem(s)"
    assert "CUDA is not available" in lines[-2]


def test_models_check_loads_our_own_model_and_times_a_forward_pass(capsys):
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    assert models_main(["check", str(DEFAULT_MODEL_DIR), "--load", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "dlm-tiny (detected)" in out and "forward ms (256 tokens)" in out


def test_models_check_default_checks_the_shipped_model_as_fill_model_default_loads_it(
        tmp_path, monkeypatch, capsys):
    """`models check default` said "<cwd>/default is not a directory", though `default`
    names the shipped model everywhere else (`fill --model`, `train --init-from`, the
    `model` setting); a folder named default in the current directory does not win."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    (tmp_path / "default").mkdir()
    monkeypatch.chdir(tmp_path)
    assert models_main(["check", "default"]) == 0
    out = capsys.readouterr().out
    assert f"directory                {DEFAULT_MODEL_DIR}" in out and "dlm-tiny (detected)" in out


def test_models_check_reads_default_after_a_prefix_as_the_directory_the_loader_loads(
        checkpoints, tmp_path, monkeypatch):
    """Only the whole spec "default" is the shipped model: "dlm-tiny:default" names the
    directory ./default (FAMILY:DIR) for the loader, but `models check` checked the
    shipped model and said it loads."""
    shutil.copytree(checkpoints["llada"], tmp_path / "default")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match="not 'dlm-tiny'"):
        load_model("dlm-tiny:default", "cpu")
    report = inspect("dlm-tiny:default")
    assert report.directory == "default" and "not 'dlm-tiny'" in " ".join(report.problems)


def test_a_prefix_that_names_no_family_is_said_to_be_so(tmp_path):
    with pytest.raises(ModelLoadError, match="'drem:' names no model family: dlm-tiny, dream"):
        load_model(f"drem:{tmp_path / 'absent'}", "cpu")


def test_our_family_may_be_named_and_is_then_checked(checkpoints):
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    assert load_model(f"dlm-tiny:{DEFAULT_MODEL_DIR}", "cpu").mask_id == 1
    with pytest.raises(ModelLoadError, match="not 'dlm-tiny'"):
        load_model(f"dlm-tiny:{checkpoints['llada']}", "cpu")


def test_models_check_takes_our_family_by_name_as_the_loader_does(checkpoints, capsys):
    """`--family dlm-tiny` was "unknown model family 'dlm-tiny'", exit 1, though `dlm-lsp
    models` lists it and the loader takes "dlm-tiny:DIR"."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    assert models_main(["check", str(DEFAULT_MODEL_DIR), "--family", "dlm-tiny"]) == 0
    assert "dlm-tiny (named)" in capsys.readouterr().out
    assert models_main(["check", str(checkpoints["llada"]), "--family", "dlm-tiny"]) == 1
    assert "not 'dlm-tiny'" in capsys.readouterr().err


def test_models_check_default_with_a_published_family_says_it_is_not_one(capsys):
    """`models check default --family dream` read the shipped model as a Dream checkpoint
    and failed on "no token to end a span", as if the model were broken."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    assert models_main(["check", "default", "--family", "dream"]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"problem: {DEFAULT_MODEL_DIR / 'config.json'} has model_type 'dlm-tiny': this is a "
        "model `dlm-lsp train` wrote, not a dream checkpoint; leave the family out (or name "
        "dlm-tiny) to load it as one\n1 problem(s)\n")
    assert "family" not in captured.out


def test_models_check_of_our_model_with_an_unknown_family_names_the_known_ones(capsys):
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    assert models_main(["check", str(DEFAULT_MODEL_DIR), "--family", "drem"]) == 1
    assert "problem: unknown model family 'drem'; known: dlm-tiny, dream" in \
        capsys.readouterr().err


def test_a_checkpoint_of_no_known_family_is_told_to_name_one_even_with_its_own_code(
        checkpoints, tmp_path, monkeypatch):
    """The error pointed to DLM_LSP_TRUST_REMOTE_CODE alone, and with it set the load
    failed the same way: the family's conventions (mask, span end) still have to be
    known, so the family must be named."""
    other = _copy(checkpoints, "dream", tmp_path)
    config = json.loads((other / "config.json").read_text())
    config |= {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}
    (other / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DLM_LSP_TRUST_REMOTE_CODE", "1")
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(other), "cpu")
    assert "is not a known family; supported: dlm-tiny, dream" in str(caught.value)
    assert "name that family ('dream:DIR'), and set DLM_LSP_TRUST_REMOTE_CODE=1 as well " \
        "where only its own code builds it" in str(caught.value)


def test_loading_our_model_as_a_published_family_says_it_is_not_one():
    from dlm_lsp.models import DEFAULT_MODEL_DIR

    with pytest.raises(ModelLoadError, match="not a dream checkpoint; leave the family out"):
        load_model(f"dream:{DEFAULT_MODEL_DIR}", "cpu")


@pytest.mark.parametrize("spec, says", [
    ("", "model '' is empty: use 'default', a model directory, FAMILY:DIR"),
    ("dream:", "model 'dream:' names no directory after 'dream:' (FAMILY:DIR"),
    ("dlm-tiny:", "model 'dlm-tiny:' names no directory after 'dlm-tiny:'"),
])
def test_a_spec_with_no_directory_is_an_error_not_the_current_directory(
        spec, says, checkpoints, monkeypatch):
    """"" or "dream:" read as the path "", the current directory: a model there loaded."""
    monkeypatch.chdir(checkpoints["dream"])
    with pytest.raises(ModelLoadError, match=re.escape(says)):
        load_model(spec, "cpu")


def test_models_check_takes_a_family_named_as_the_loader_takes_it(checkpoints, capsys):
    """`models check dream:DIR` said "dream:DIR is not a directory", though the `model`
    setting takes it; it reads as `check DIR --family dream`."""
    assert models_main(["check", f"dream:{checkpoints['dream']}"]) == 0
    out = capsys.readouterr().out
    assert "dream (named)" in out and f"directory                {checkpoints['dream']}" in out
    assert models_main(["check", f"dream:{checkpoints['dream']}", "--family", "Dream"]) == 0
    capsys.readouterr()
    assert models_main(["check", f"dream:{checkpoints['dream']}", "--family", "llada"]) == 1
    assert ("problem: 'dream:" + str(checkpoints["dream"]) + "' names family dream, "
            "--family llada: give one") in capsys.readouterr().err


def test_models_check_of_a_spec_with_no_directory_says_so(checkpoints, monkeypatch, capsys):
    monkeypatch.chdir(checkpoints["dream"])  # it was checked as the current directory
    assert models_main(["check", "dream:"]) == 1
    assert "problem: model 'dream:' names no directory after 'dream:'" in \
        capsys.readouterr().err


def test_models_check_fails_on_a_partial_checkpoint(checkpoints, tmp_path, capsys):
    broken = _copy(checkpoints, "open-dcoder", tmp_path)
    sorted(broken.glob("model-*.safetensors"))[0].unlink()
    assert models_main(["check", str(broken)]) == 1
    assert "incomplete" in capsys.readouterr().err


def test_the_gpu_benchmark_runs_at_tiny_size(tmp_path, capsys):
    import importlib.util

    path = Path(__file__).parent.parent / "benchmarks" / "checkpoints_gpu.py"
    spec = importlib.util.spec_from_file_location("checkpoints_gpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--tiny", "--contexts", "16", "--batches", "1", "2", "--warmup", "0",
                       "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [f["family"] for f in report["families"]] == list(FAMILIES)
    assert all(f["bidirectional"] and len(f["rows"]) == 2 for f in report["families"])


# --- the output head on the span alone, and the context cache (models/hf_cache.py) --------


TEXT = ("def wrap(text, width):\n    lines = []\n    for word in text.split():\n"
        "        lines.append(word)\n    return lines\n")


def _span(model, lo: int = 6, hi: int = 12) -> tuple[torch.Tensor, int, int]:
    ids = _ids(model, TEXT)
    ids[0, lo:hi] = model.mask_id
    return ids, lo, hi


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_head_on_hidden_states_gives_the_models_logits(models, family):
    model = models[family]
    ids = _ids(model, TEXT)
    whole = model.logits(ids)
    span = model.head(model.hidden(ids)[:, 5:9])
    keep = torch.isfinite(whole[:, 5:9])
    assert torch.allclose(span[keep], whole[:, 5:9][keep], atol=1e-5)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_cached_step_on_unchanged_tokens_is_the_full_pass(models, family):
    """The stored keys and values are exactly what a full pass computes for the
    context, so a step that only recomputes the span and its window agrees with it."""
    model = models[family]
    ids, lo, hi = _span(model)
    cache = HFContextCache(model, lo, hi, CacheConfig(refresh=100, window=2))
    first = cache(ids)  # a full pass, storing the context
    second = cache(ids)  # span + window only
    assert cache.full_passes == 1
    expected = model.logits(ids)[:, lo:hi]
    keep = torch.isfinite(expected)
    assert torch.allclose(first[keep], expected[keep], atol=1e-5)
    assert torch.allclose(second[keep], expected[keep], atol=1e-4)


@pytest.mark.parametrize("family", ["dream", "llada"])
def test_a_cached_step_sees_the_span_change_but_keeps_the_stored_context(models, family):
    model = models[family]
    ids, lo, hi = _span(model)
    cache = HFContextCache(model, lo, hi, CacheConfig(refresh=100, window=1))
    cache(ids)
    changed = ids.clone()
    changed[0, lo] = model.tokenizer.encode("return")[0]  # one span token committed
    cached, exact = cache(changed), model.logits(changed)[:, lo:hi]
    assert not torch.allclose(cached, cache.full(ids))  # it read the new span token
    assert (cached - exact).abs().max() < 0.5 * (exact - model.logits(ids)[:, lo:hi]).abs().max()


def test_refresh_every_step_is_the_uncached_model(models):
    """The same logits up to float rounding: the cache's full pass keeps keys and values,
    a different code path whose sums run in another order on several threads (identical
    on one thread)."""
    model = models["diffucoder"]
    ids, lo, hi = _span(model)
    cache = HFContextCache(model, lo, hi, CacheConfig(refresh=1, window=0))
    for _ in range(3):
        assert torch.allclose(cache(ids), model.logits(ids)[:, lo:hi], rtol=0, atol=1e-6)
    assert cache.full_passes == 3


@pytest.mark.parametrize("family", ["dream", "llada"])
def test_the_engine_uses_the_cache_for_published_checkpoints_when_asked(models, family):
    model = models[family]
    tok = model.tokenizer
    layout = build_layout(tok, "def f(x):\n    y = ", "\n    return y\n", 6, 64,
                          max_length=model.max_length)
    assert context_cache(model, ServerConfig(), layout) is None  # off by default
    assert isinstance(context_cache(model, ServerConfig(context_cache=True), layout),
                      HFContextCache)


def _fill_with(path, **settings):
    engine = Engine(ServerConfig(model=str(path), device="cpu", reuse_fills=False, **settings))
    text = "def f(x):\n    y = \n    return y\n"
    at = text.index("= ") + 2
    return engine.infill(InfillRequest(text, at, at, "python", "file:///t.py", InfillOptions(
        length=6, steps=4, repair_rounds=0, fallback=False)))


@pytest.mark.parametrize("family", ["dream", "open-dcoder"])
def test_the_cache_with_refresh_1_fills_exactly_as_without_it(checkpoints, family):
    plain = _fill_with(checkpoints[family])
    cached = _fill_with(checkpoints[family], context_cache=True, cache_refresh=1)
    assert [c.text for c in cached.candidates] == [c.text for c in plain.candidates]
    assert [c.score for c in cached.candidates] == pytest.approx(
        [c.score for c in plain.candidates], abs=1e-5)
