"""Published checkpoints through transformers' own model classes, made bidirectional.

Dream, Dream-Coder, DreamOn, DiffuCoder and Open-dCoder are Qwen2 networks and
LLaDA is a LLaMA network; only their attention mask and their file layout
differ from the autoregressive originals.  So no code from a checkpoint runs:
config.json is mapped onto a `Qwen2Config` / `LlamaConfig`, the model is built
empty (no random init), the safetensors are streamed into it one shard at a
time (LLaDA's tensor names mapped onto LLaMA's), and attention is made
non-causal.

Bidirectional attention in transformers 5: the mask builder reads
`config.is_causal` at every forward and builds a full (not causal) mask when
it is False, and SDPA falls back to each attention module's `is_causal` when no
mask is built, so both are set.  A two-row probe at load time proves it (the
first position's output must change when only the last token does) and refuses
a transformers version that ignores both.

Checked offline on tiny random checkpoints: Dream-Coder's own modeling_dream.py
and this loader give identical logits, and LLaDA's modeling_llada.py agrees with
the mapped LLaMA within 1e-7 (tests/test_checkpoints.py keeps an independent
LLaDA forward pass as the specification).

The adapter (`HFDiffusionModel`) frames each sequence with the family's tokens
(a bos before, DreamOn's end-of-text after), undoes the shift of shifted
families (Dream's convention: position i reads the row of i-1, position 0 its
own row, which with a bos in front is never used), drops the embedding rows the
tokenizer has no token for, and returns float32 logits aligned so that row i
scores token i, as the engine expects.

`DLM_LSP_TRUST_REMOTE_CODE=1` (an environment variable of the server process,
never a client setting, so a workspace's settings cannot turn it on) loads the
module with the checkpoint's own Python code instead (`trust_remote_code`):
that code runs with the server's rights.  The registry's conventions still
apply.  That code targets transformers 4.46: LLaDA's runs under 5.x, Dream's
does not without a fix to its RoPE setup, which is one more reason the native
classes are the default.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from pathlib import Path

import torch

from dlm_lsp.models.checkpoint import REMOTE_CODE_ENV, Checkpoint, remote_code_allowed
from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.registry import LLADA, LLAMA, Conventions, Family, conventions, detect
from dlm_lsp.models.tiny import resolve_precision
from dlm_lsp.models.tokenizer import Tokenizer

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}

# LLaDA (modeling_llada.py, an OLMo descendant) -> transformers' LLaMA names
_BLOCK = r"^model\.transformer\.blocks\.(\d+)\."
LLADA_NAMES = [
    (r"^model\.transformer\.wte\.", "model.embed_tokens."),
    (r"^model\.transformer\.ln_f\.", "model.norm."),
    (r"^model\.transformer\.ff_out\.", "lm_head."),
    (_BLOCK + r"(q_proj|k_proj|v_proj)\.", r"model.layers.\1.self_attn.\2."),
    (_BLOCK + r"attn_out\.", r"model.layers.\1.self_attn.o_proj."),
    (_BLOCK + r"ff_proj\.", r"model.layers.\1.mlp.gate_proj."),  # SiLU(ff_proj x) * up_proj x
    (_BLOCK + r"up_proj\.", r"model.layers.\1.mlp.up_proj."),
    (_BLOCK + r"ff_out\.", r"model.layers.\1.mlp.down_proj."),
    (_BLOCK + r"attn_norm\.", r"model.layers.\1.input_layernorm."),
    (_BLOCK + r"ff_norm\.", r"model.layers.\1.post_attention_layernorm."),
]
# LLaDA options the LLaMA classes reproduce, with the only value that they do
LLADA_REQUIRES = {"block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu",
                  "rope": True, "alibi": False, "attention_layer_norm": False,
                  "scale_logits": False, "input_emb_norm": False, "include_bias": False,
                  "include_qkv_bias": False, "layer_norm_with_affine": True,
                  "block_group_size": 1}


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise ModelLoadError("published checkpoints need transformers: "
                             "pip install -e '.[hf]'") from exc
    return transformers


# --- config.json -> a transformers config ----------------------------------------------------


def _need(cfg: dict, key: str, path: Path):
    if key not in cfg:
        raise ModelLoadError(f"{path / 'config.json'} lacks {key!r}")
    return cfg[key]


def arch_config(family: Family, checkpoint: Checkpoint):
    """The transformers config of the network described by the checkpoint's config.json.

    A value of the wrong type there ("hidden_size": "4096", a hand-edited file) is
    refused by transformers' own validation with an exception of huggingface_hub's,
    which `dlm-lsp fill` and `models check` printed as a traceback: it becomes a
    ModelLoadError that names the file."""
    try:
        return _arch_config(family, checkpoint)
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers' config validation raises its own
        raise ModelLoadError(f"{checkpoint.path / 'config.json'}: {type(exc).__name__}: "
                             f"{exc}".replace("\n", " ")) from exc


def _arch_config(family: Family, checkpoint: Checkpoint):
    tf = _transformers()
    cfg, path = checkpoint.config, checkpoint.path
    common = {"attn_implementation": "sdpa", "is_causal": False, "use_cache": False}
    if family.architecture == LLAMA:
        for key, want in LLADA_REQUIRES.items():
            if cfg.get(key, want) not in (want, None):
                raise ModelLoadError(f"{path}: LLaDA option {key}={cfg[key]!r} is not supported "
                                     f"natively (only {want!r}); see {REMOTE_CODE_ENV} in the "
                                     "README")
        d_model, heads = _need(cfg, "d_model", path), _need(cfg, "n_heads", path)
        kv_heads = cfg.get("n_kv_heads") or (1 if cfg.get("multi_query_attention") else heads)
        return tf.LlamaConfig(
            vocab_size=cfg.get("embedding_size") or _need(cfg, "vocab_size", path),
            hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv_heads,
            num_hidden_layers=_need(cfg, "n_layers", path),
            intermediate_size=cfg.get("mlp_hidden_size") or cfg.get("mlp_ratio", 4) * d_model,
            hidden_act="silu", max_position_embeddings=cfg.get("max_sequence_length", 4096),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-5), rope_theta=cfg.get("rope_theta", 1e4),
            tie_word_embeddings=bool(cfg.get("weight_tying", False)),
            attention_bias=False, mlp_bias=False, **common)
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads")
    shape = {key: _need(cfg, key, path) for key in keys}
    optional = {key: cfg[key] for key in ("num_key_value_heads", "hidden_act",
                                          "max_position_embeddings", "rms_norm_eps",
                                          "rope_theta", "tie_word_embeddings",
                                          "attention_dropout") if cfg.get(key) is not None}
    if cfg.get("rope_scaling"):
        optional["rope_scaling"] = cfg["rope_scaling"]
    return tf.Qwen2Config(**shape, **optional, use_sliding_window=False, **common)


def rename(family: Family, name: str) -> str:
    """A checkpoint tensor's name in the transformers model."""
    if family is LLADA:
        for pattern, replacement in LLADA_NAMES:
            name, hits = re.subn(pattern, replacement, name)
            if hits:
                break
    return name


# --- building and filling the network ---------------------------------------------------------


def _skip_init():
    """transformers' context that builds a model without initialising its weights."""
    for where in ("transformers.initialization", "transformers.modeling_utils"):
        with contextlib.suppress(ImportError, AttributeError):
            return importlib.import_module(where).no_init_weights()
    return contextlib.nullcontext()


def instantiate(config, dtype: torch.dtype, device: torch.device | str, empty: bool = True):
    """The model for `config` on `device`, weights uninitialised when `empty` (they are
    about to be overwritten) or random otherwise (benchmarks)."""
    tf = _transformers()
    with _skip_init() if empty else contextlib.nullcontext(), torch.device(device):
        module = tf.AutoModelForCausalLM.from_config(config, dtype=dtype)
    module.tie_weights()  # tied embeddings (Open-dCoder): skipped along with the init
    make_bidirectional(module)
    return module.eval()


def make_bidirectional(module) -> None:
    """Non-causal attention: the config flag read by the mask builder and every attention
    module's own flag (used by SDPA when no mask is built)."""
    module.config.is_causal = False
    for sub in module.modules():
        if hasattr(sub, "is_causal"):
            sub.is_causal = False


@torch.no_grad()
def attends_both_ways(module, vocab_size: int, **forward) -> bool:
    """Probe: does the first position's output change when only the last token does?"""
    device = next(module.parameters()).device
    ids = torch.arange(1, 9, device=device).remainder(vocab_size).repeat(2, 1)  # (2, 8)
    ids[1, -1] = (ids[0, -1] + 1) % vocab_size
    out = module(input_ids=ids, **forward).logits
    return not torch.equal(out[0, 0], out[1, 0])


def expected_shapes(config) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter the model for `config` needs (tied ones once),
    from a model on the meta device: no memory, no time."""
    tf = _transformers()
    with torch.device("meta"):
        module = tf.AutoModelForCausalLM.from_config(config)
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


def weight_problems(family: Family, config, found: dict[str, tuple[int, ...]]) -> list[str]:
    """What keeps the checkpoint's tensors (`found`: name -> shape) from filling the model."""
    expected, problems = expected_shapes(config), []
    seen, unknown = set(), []
    for name, shape in found.items():
        target = rename(family, name)
        if target not in expected:
            if not (target == "lm_head.weight" and config.tie_word_embeddings
                    or target.endswith("rotary_emb.inv_freq")):
                unknown.append(name)
            continue
        seen.add(target)
        if shape != expected[target]:
            problems.append(f"{name} has shape {shape}, the config makes {expected[target]}"
                            + (" (vocabulary sizes disagree)" if "embed" in target
                               or "lm_head" in target else ""))
    missing = sorted(set(expected) - seen)
    if missing:
        problems.append(f"{len(missing)} tensors missing: {', '.join(missing[:4])}"
                        f"{' ...' if len(missing) > 4 else ''}")
    if unknown:
        problems.append(f"{len(unknown)} tensors of no known place (not a {family.name} "
                        f"checkpoint?): {', '.join(sorted(unknown)[:4])}")
    return problems


@torch.no_grad()
def fill(module, checkpoint: Checkpoint, family: Family) -> None:
    """Copy the checkpoint's tensors into `module`, one shard open at a time."""
    params = dict(module.named_parameters())
    for name, tensor in checkpoint.tensors():
        target = params.get(rename(family, name))
        if target is not None:
            target.copy_(tensor)


# --- the adapter ------------------------------------------------------------------------------


class HFDiffusionModel:
    """A transformers network behind the `DiffusionModel` interface, aligned per family."""

    def __init__(self, module, tokenizer: Tokenizer, conv: Conventions, name: str,
                 device: torch.device, precision: str, max_length: int, vocab_size: int,
                 native: bool = True):
        self.module, self.tokenizer, self.conventions = module, tokenizer, conv
        self.family = conv.family
        self.name, self.device, self.precision = name, device, precision
        self.mask_id, self.pad_id = conv.mask_id, conv.end_id
        self.expand_id = conv.expand_id  # DreamOn: the sampler grows a span with it
        self.delete_id = conv.delete_id  # DreamOn: and shrinks it, where it grows
        self.max_length = max_length
        self.vocab_size = vocab_size  # logits beyond the tokenizer's ids are dropped
        self._forward = {"use_cache": False} if native else {}
        self._before = torch.tensor(conv.before, dtype=torch.long, device=device)
        self._after = torch.tensor(conv.after, dtype=torch.long, device=device)
        self.native = native
        # rows of different lengths share a pass, padded (`hidden`): transformers' own
        # classes take a padding mask, and with is_causal False build it for both ways
        self.padded_rows = native
        if not native:  # a checkpoint's own class: no known split into network and head
            self.hidden = self.head = None  # type: ignore[assignment]

    def frame(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The sequence the network sees: (B, T) -> (B, before + T + after)."""
        b = input_ids.shape[0]
        return torch.cat([self._before.expand(b, -1), input_ids, self._after.expand(b, -1)], 1)

    def _first_row(self) -> int:
        """The framed position whose output scores token 0: its own, or the one before
        it in a shifted family (-1 when nothing is framed in front)."""
        return len(self.conventions.before) - (1 if self.conventions.shifted else 0)

    def rows(self, t: int) -> list[int]:
        """The framed positions whose outputs score tokens 0..t-1 of the input
        (position 0 keeps its own row when nothing is framed in front: Dream's rule)."""
        start = self._first_row()
        return [max(0, start + i) for i in range(t)]

    def _aligned(self, raw: torch.Tensor, t: int) -> torch.Tensor:
        """Rows of `raw` aligned with the t input tokens (as `rows`, without the list)."""
        start = self._first_row()
        if start >= 0:
            return raw[:, start:start + t]
        return torch.cat([raw[:, :1], raw[:, :t - 1]], dim=1)

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Float32 logits (B, T, V): row i scores token i of `input_ids`."""
        ids = input_ids.to(self.device)
        raw = self.module(input_ids=self.frame(ids), **self._forward).logits  # (B, T', V')
        return self._scores(self._aligned(raw, ids.shape[1]))

    @torch.no_grad()
    def hidden(self, input_ids: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> torch.Tensor:
        """The network's last hidden states (B, T, H), row i aligned with token i, so
        the output head can run on the span's rows alone (`head`): at a 150k-token
        vocabulary the logits of every position cost more memory than the network.
        With `lengths`, row i holds lengths[i] tokens and pad after them: each row is
        framed around its own tokens (DreamOn's end-of-text right after them), then
        padded, and the padding mask keeps every query off the pad."""
        ids = input_ids.to(self.device)
        if lengths is None:
            raw = self.module.model(input_ids=self.frame(ids), use_cache=False)
        else:
            framed, mask = self._padded_frame(ids, lengths.tolist())
            raw = self.module.model(input_ids=framed, attention_mask=mask, use_cache=False)
        return self._aligned(raw.last_hidden_state, ids.shape[1])

    def _padded_frame(self, ids: torch.Tensor, lengths: list[int]
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row framed around its first lengths[i] tokens, padded on the right to one
        length, and the (B, T') mask of its real tokens (1) and pad (0)."""
        before, after = self._before, self._after
        width = len(before) + ids.shape[1] + len(after)
        framed = torch.full((ids.shape[0], width), self.pad_id, dtype=ids.dtype,
                            device=ids.device)
        mask = torch.zeros_like(framed)
        for i, n in enumerate(lengths):
            row = torch.cat([before, ids[i, :n], after])
            framed[i, :len(row)] = row
            mask[i, :len(row)] = 1
        return framed, mask

    @torch.no_grad()
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits of hidden states from `hidden`."""
        return self._scores(self.module.lm_head(hidden))

    def _scores(self, raw: torch.Tensor) -> torch.Tensor:
        return raw[..., :self.vocab_size].float()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.module.parameters())


def context_length(checkpoint: Checkpoint, family: Family) -> int:
    """Tokens the model takes: its position table, capped at what the family trained on."""
    cfg = checkpoint.config
    positions = cfg.get("max_position_embeddings") or cfg.get("max_sequence_length") or 2048
    return min(positions, family.context_length or positions)


def load_checkpoint(path: str | Path, device: torch.device, precision: str = "auto",
                    family: Family | None = None, name: str | None = None,
                    trust_remote_code: bool | None = None) -> HFDiffusionModel:
    """Load a published checkpoint directory as a `DiffusionModel`, failing with a
    ModelLoadError that says what is wrong (family, weights, tokenizer, attention)."""
    checkpoint = Checkpoint.read(path)
    tokenizer = checkpoint.load_tokenizer()
    family = family or detect(checkpoint, tokenizer)
    conv = conventions(family, checkpoint, tokenizer)
    dtype = DTYPES[resolve_precision(precision, device)]
    remote = (remote_code_allowed(checkpoint.path) if trust_remote_code is None
              else trust_remote_code)
    if remote:
        module, vocab_rows = _remote_module(checkpoint, dtype, device), None
    else:
        config = arch_config(family, checkpoint)
        problems = weight_problems(family, config, checkpoint.tensor_shapes())
        if problems:
            raise ModelLoadError(f"cannot load {checkpoint.path} as {family.name}: "
                                 + "; ".join(problems))
        module = instantiate(config, dtype, device)
        fill(module, checkpoint, family)
        vocab_rows = config.vocab_size
    vocab_rows = vocab_rows or module.get_output_embeddings().weight.shape[0]
    if tokenizer.vocab_size > vocab_rows:
        raise ModelLoadError(f"{checkpoint.path}: the tokenizer has {tokenizer.vocab_size} ids "
                             f"but the model only {vocab_rows} output rows (vocabulary sizes "
                             "disagree)")
    forward = {} if remote else {"use_cache": False}
    if not attends_both_ways(module, tokenizer.vocab_size, **forward):
        raise ModelLoadError(f"{checkpoint.path}: attention stayed causal with transformers "
                             f"{_transformers().__version__}; this loader needs transformers 5 "
                             "(config.is_causal)")
    before_after = len(conv.before) + len(conv.after)
    return HFDiffusionModel(module, tokenizer, conv, name or str(path), device,
                            resolve_precision(precision, device),
                            context_length(checkpoint, family) - before_after,
                            tokenizer.vocab_size, native=not remote)


# the auto_map entries a load with the checkpoint's own code imports (`_remote_module`)
_OWN_CODE_CLASSES = ("AutoConfig", "AutoModel", "AutoModelForCausalLM")


def own_code_problems(checkpoint: Checkpoint) -> list[str]:
    """Why the checkpoint's own code (DLM_LSP_TRUST_REMOTE_CODE=1) cannot build its model,
    read from its files without running any: the modules its config.json's `auto_map`
    names must be in its directory (a download without its `*.py` loaded as nothing),
    and with no `auto_map` transformers must know its `model_type` itself.  `models
    check` ran the native loader's checks instead, and refused a checkpoint the load
    takes, or passed one it cannot build."""
    auto_map = checkpoint.config.get("auto_map")
    if not auto_map:
        if checkpoint.model_type in _transformers().CONFIG_MAPPING:
            return []
        return [f"{checkpoint.path}: config.json has no auto_map, so the checkpoint has no "
                f"code of its own, and transformers knows no model_type "
                f"{checkpoint.model_type!r}: unset {REMOTE_CODE_ENV} to load it natively"]
    if not isinstance(auto_map, dict):
        return [f"{checkpoint.path}: config.json's auto_map is not an object"]
    if not {"AutoModel", "AutoModelForCausalLM"} & set(auto_map):  # what `_remote_module`
        return [f"{checkpoint.path}: config.json's auto_map names no AutoModel nor "  # builds
                f"AutoModelForCausalLM ({', '.join(sorted(auto_map))}), the classes the "
                f"load builds: unset {REMOTE_CODE_ENV} to load it natively"]
    # "owner/repo--module.Class" is another repository's code, found in the hub cache;
    # only the config's and the model's modules are imported (the tokenizer is ours)
    refs = [ref for key, value in auto_map.items() if key in _OWN_CODE_CLASSES
            for ref in (value if isinstance(value, list) else [value])
            if isinstance(ref, str) and "--" not in ref]
    modules = sorted({ref.rpartition(".")[0] + ".py" for ref in refs})
    absent = [name for name in modules if not (checkpoint.path / name).is_file()]
    if absent:
        return [f"{checkpoint.path} lacks {', '.join(absent)}, the code its config.json's "
                f"auto_map names ({REMOTE_CODE_ENV} is set): download the repository's "
                "*.py files too, or unset it to load the checkpoint natively"]
    return []


def _remote_module(checkpoint: Checkpoint, dtype: torch.dtype, device: torch.device):
    """The checkpoint's own model class (its Python code runs: opted in by the user),
    filled with the checkpoint's tensors under their own names.

    Built with `from_config` and filled here rather than by `from_pretrained`,
    whose transformers 5 loading rejects the 4.x-era classes these checkpoints
    ship (seen with LLaDA's and Dream's code).  What `models check` finds missing
    (`own_code_problems`: a download without its `*.py`) is said first, as there:
    transformers' own error named a hub URL made of the local folder's path."""
    problems = own_code_problems(checkpoint)
    if problems:
        raise ModelLoadError("; ".join(problems))
    tf = _transformers()
    auto_map = checkpoint.config.get("auto_map") or {}
    loader = tf.AutoModel if "AutoModel" in auto_map else tf.AutoModelForCausalLM
    try:
        config = tf.AutoConfig.from_pretrained(str(checkpoint.path), trust_remote_code=True,
                                               local_files_only=True)
        with _skip_init():
            module = loader.from_config(config, trust_remote_code=True, dtype=dtype)
    except Exception as exc:  # remote code can raise anything
        raise ModelLoadError(f"could not build {checkpoint.path} with its own code: "
                             f"{type(exc).__name__}: {exc}") from exc
    params = dict(module.named_parameters())
    missing = set(params)
    with torch.no_grad():
        for name, tensor in checkpoint.tensors():
            if name in params:
                params[name].copy_(tensor)
                missing.discard(name)
    if missing:
        raise ModelLoadError(f"{checkpoint.path}: its own model class needs tensors the "
                             f"checkpoint lacks: {', '.join(sorted(missing)[:4])}")
    module.tie_weights()
    make_bidirectional(module)
    return module.to(device).eval()
