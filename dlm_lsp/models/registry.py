"""Published masked-diffusion families: how to recognise each and what it expects.

The engine and sampler are the same for every model; what differs between
families is small and lives here as data: which transformers architecture the
weights fit, whether logits are shifted (Dream and the models built on its code
train position i-1 to predict token i, as the autoregressive model they were
adapted from did), which token is the mask, which token ends a span of unknown
length, and which tokens frame the sequence.  `detect` reads a checkpoint's
config.json (model_type, architectures) and its tokenizer; a spec
"family:/path" names the family instead (`split_spec`).

What each entry says was checked, offline, against the families' published
generation code and configs where we could read them (`verified`), and where we
could not, what we assumed (`assumed`).  `dlm-lsp models` prints both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlm_lsp.models.checkpoint import Checkpoint
from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.tokenizer import Tokenizer

QWEN2, LLAMA = "qwen2", "llama"  # the transformers architectures the weights are loaded into
EOS = "<|endoftext|>"


@dataclass(frozen=True)
class Family:
    """One family's conventions; ids are looked up per checkpoint by `conventions`."""

    name: str
    summary: str
    checkpoints: tuple[str, ...]  # published hub ids
    architecture: str  # QWEN2 or LLAMA
    shifted: bool  # logits at i-1 predict token i
    mask_token: str  # the mask's text when config.json has no mask_token_id
    mask_id: int | None = None  # a fixed mask id documented by the family
    end_token: str = EOS  # fills a span past its end; trimmed by the sampler
    bos_token: str | None = None  # put before every sequence, when the tokenizer has it
    eos_after: bool = False  # put the end-of-text token after the suffix
    context_length: int | None = None  # tokens trained on (else config's positions)
    aliases: tuple[str, ...] = ()
    layout: str = ""  # how an infill prompt looks for base and instruct checkpoints
    verified: str = ""
    assumed: str = ""


DREAM = Family(
    "dream", "Dream 7B and Dream-Coder 7B (HKU), Qwen2.5-based",
    ("Dream-org/Dream-v0-Base-7B", "Dream-org/Dream-v0-Instruct-7B",
     "Dream-org/Dream-Coder-v0-Base-7B", "Dream-org/Dream-Coder-v0-Instruct-7B"),
    QWEN2, shifted=True, mask_token="<|mask|>", bos_token="<|beginoftext|>",
    context_length=2048, aliases=("dream-coder",),
    layout="<|beginoftext|> prefix <|mask|>... suffix, the span ends with <|endoftext|>. "
    "Base checkpoints fit raw code infilling best; instruct ones were tuned on chat turns "
    "but keep the pretraining objective over any layout.",
    verified="model_type 'Dream' and mask_token_id in config.json; logits shifted with "
    "position 0 keeping its own row (generation code of Dream/DreamOn); generations end at "
    "<|endoftext|> (Dream's demos split there); bos <|beginoftext|> (151665 in "
    "Dream-Coder); context 2048 (DreamOn README); tensor names and forward pass equal "
    "Qwen2ForCausalLM's with non-causal attention (Dream-Coder's modeling_dream.py gives "
    "identical logits on a tiny random checkpoint); a slow Qwen2 BPE tokenizer "
    "(tokenization_dream.py: vocab.json, merges.txt)",
    assumed="the published repositories ship vocab.json/merges.txt (tokenizer.json is used "
    "when present); a bos before raw code helps base and instruct alike")

DREAMON = Family(
    "dreamon", "DreamOn 7B (HKU): Dream-Coder tuned for variable-length infilling",
    ("Dream-org/DreamOn-v0-7B",),
    QWEN2, shifted=True, mask_token="<|mask|>", bos_token="<|beginoftext|>", eos_after=True,
    context_length=2048,
    layout="<|beginoftext|> prefix <|mask|>... suffix <|endoftext|> (DreamOn's quickstart). "
    "DreamOn grows a span with <|expand|> (one mask becomes two) and shrinks it with its "
    "delete signal, the end-of-text token: our sampler grows a single-row span the same way "
    "up to maxSpanTokens (never on the budget's last step) and shrinks it the same way too: "
    "once <|endoftext|> is committed the masks after it become <|endoftext|> and each one "
    "leaves the span (its pad_eos_to_right and delete_eos_token); where a span cannot change "
    "length (several rows, blocks) <|endoftext|> is its pad, cut at.",
    verified="layout from demo/quickstart.py; <|expand|> is id 151667 (eval/evaluate.py); "
    "the delete signal is the end-of-text token: training appends it after the middle "
    "(src/trainer/sft_expand_dataset.py), eval/generator.py deletes eos tokens "
    "(delete_eos_token) and its generation config sets delete_token_id from eos_token_id, "
    "so a token merely named <|delete|> is never the span's end; with pad_eos_to_right "
    "(eval/configs/eval_infill.yaml) the masks after a committed eos become eos, and "
    "deleted eos take the span's later tokens left, which stay (eval/generator.py); "
    "expand is blocked by a -1e9 logit once the budget is spent (generation code)",
    assumed="the expand id from generation_config.json (expand_token_id) when present, else "
    "the token <|expand|>; a delete_token_id in generation_config.json is honoured (its "
    "generation config accepts one); the published tokenizer and generation_config.json "
    "were not read")

DIFFUCODER = Family(
    "diffucoder", "DiffuCoder 7B (Apple): Dream architecture trained from Qwen2.5-Coder",
    ("apple/DiffuCoder-7B-Base", "apple/DiffuCoder-7B-Instruct",
     "apple/DiffuCoder-7B-cpGRPO"),
    QWEN2, shifted=True, mask_token="<|mask|>", end_token="<|dlm_pad|>", context_length=2048,
    layout="prefix <|mask|>... suffix, no bos (Qwen2.5-Coder has none); the span ends with "
    "<|dlm_pad|>. Instruct and cpGRPO are chat-tuned; Base fits raw infilling.",
    verified="model_type 'Dream' with Dream's remote code; instruct generations end at "
    "<|dlm_pad|> (inference_demo.py and the README's Instruct example split there; "
    "src/open_r1/coupled_grpo.py ends a completion at <|im_end|>, which decodes to nothing); "
    "mask_token_id 151666; Base takes raw code with nothing in front (the README's Base "
    "example encodes the bare prompt with Dream's tokenizer, which adds no bos; a third-party "
    "infilling script for DiffuCoder-7B-Base, the CAL paper's, lays out prefix, masks, "
    "suffix with add_special_tokens=False)",
    assumed="Base and cpGRPO also end spans with <|dlm_pad|> when their tokenizer has it: "
    "apple/ml-diffucoder publishes no training or infilling code for Base (its README's Base "
    "example splits at tokenizer.eos_token, whose value is in Base's tokenizer_config.json, "
    "which was not found mirrored anywhere we could read), so a Base checkpoint without "
    "<|dlm_pad|> is loaded as 'dream' and ends spans with <|endoftext|>; the 2048-token "
    "context of Dream")

OPEN_DCODER = Family(
    "open-dcoder", "Open-dCoder 0.5B (Open-dLLM): Qwen2.5-Coder-0.5B as a masked diffusion model",
    ("fredzzp/open-dcoder-0.5B",),
    QWEN2, shifted=True, mask_token="<M>", context_length=4096,
    aliases=("opendcoder", "open-dllm"),
    layout="prefix <M>... suffix (its eval_infill.py), no bos; unused span positions "
    "end with <|endoftext|>, the token every pretraining document ends with.",
    verified="Qwen2ForCausalLM weights and config (model_type 'qwen2'); logits shifted like "
    "Dream's (veomni/models/transformers/qwen2/generation_utils.py: cat(logits[:, :1], "
    "logits[:, :-1])); attention bidirectional everywhere: is_causal=False in training "
    "(whenever mask_ratio is given, modeling_qwen2.py) and in generation, whose only mask "
    "hides key positions holding pad_token_id (the batch's padding), with flash_attention_2 "
    "as configured; packed documents attend only within themselves (rmpad_with_pos_ids), so "
    "no special mask inside one; the mask is '<M>', added by "
    "tasks/train_torch.py when the tokenizer has none (Qwen2.5-Coder's has none), id 151665 "
    "in the published added_tokens.json (a third-party adapter's note), not in config.json; "
    "no bos: pretraining encodes each document with add_special_tokens=False and appends "
    "only the eos (veomni/data/data_transform.py process_pretrain_example), eval_infill.py "
    "adds before the prefix only what the tokenizer adds (Qwen2's adds none); "
    "<|endoftext|> ends a span: the eos every document ends with is what the model learnt "
    "to predict after the last token, and its generation decodes the tail with "
    "skip_special_tokens; 4096-token pretraining sequences "
    "(configs/pretrain/qwen2_5_coder_500M.yaml)",
    assumed="the published tokenizer keeps Qwen2.5-Coder's <|endoftext|> as eos and pad "
    "and adds no bos (its tokenizer files were not read; whether its tokenizer_config.json "
    "names mask_token does not matter: an added '<M>' is recognised either way); its own "
    "infilling eval uses the reference length, so an infill with a span longer than the "
    "fill was never measured by its authors")

LLADA = Family(
    "llada", "LLaDA 8B (GSAI-ML, Renmin University): a LLaMA-shaped encoder",
    ("GSAI-ML/LLaDA-8B-Base", "GSAI-ML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-1.5"),
    LLAMA, shifted=False, mask_token="<|mdm_mask|>", mask_id=126336,
    bos_token="<|startoftext|>",
    layout="<|startoftext|> prefix <|mdm_mask|>... suffix; the span ends with <|endoftext|> "
    "(126081), the token SFT pads answers with. The bos is put in front once, by us: our "
    "tokenizer never adds special tokens. LLaDA publishes no infill layout; Instruct's chat "
    "template frames chat turns only, and the server sends raw code to Base and Instruct "
    "alike.",
    verified="mask 126336 and eos 126081 (generate.py, GUIDELINES.md); logits not shifted and "
    "attention bidirectional (the mask predictor reads logits[i] for token i); weight names "
    "and shapes of modeling_llada.py (wte, blocks.N.q_proj/k_proj/v_proj/attn_out/ff_proj/"
    "up_proj/ff_out, attn_norm/ff_norm, ln_f, ff_out); rotate-half RoPE like LLaMA's; "
    "config keys d_model, n_heads, n_kv_heads, n_layers, mlp_hidden_size, rope_theta, "
    "max_sequence_length; LlamaForCausalLM with the names mapped gives the logits of a "
    "public copy of modeling_llada.py (within 1e-7, with and without grouped kv heads); one "
    "bos <|startoftext|> (126080) in front: generate.py encodes the chat template's text "
    "with add_special_tokens=False, the template itself puts bos_token first, chat.py drops "
    "exactly one leading token from later turns, and LLaDA-8B-Instruct's tokenizer_config.json "
    "says add_bos_token false (a copy of the hub files: monash-yann/dllm-research); Instruct's "
    "chat template (that tokenizer_config.json): bos, then per turn <|start_header_id|>role"
    "<|end_header_id|> and two line breaks, the trimmed text, <|eot_id|>, then "
    "<|start_header_id|>assistant<|end_header_id|> and two line breaks; SFT answers end with "
    "<|endoftext|> repeated to the row's end (GUIDELINES.md)",
    assumed="only the 'llama' block with RMSNorm, SiLU and no biases (the published 8B "
    "configs); other variants are refused; Base also wants the bos in front (its tokenizer "
    "files and pretraining data were not read: GUIDELINES.md shows the SFT rows only); "
    "Instruct fills raw code without its chat template (no infill prompt was published)")

FAMILIES: dict[str, Family] = {f.name: f for f in (DREAM, DREAMON, DIFFUCODER, OPEN_DCODER,
                                                   LLADA)}
_BY_ALIAS = {alias: f for f in FAMILIES.values() for alias in (f.name, *f.aliases)}


def family_named(name: str) -> Family:
    """The family called `name` (or an alias), or a ModelLoadError listing them."""
    try:
        return _BY_ALIAS[name.lower()]
    except KeyError:
        raise ModelLoadError(f"unknown model family {name!r}; known: dlm-tiny, "
                             f"{', '.join(FAMILIES)}") from None


def split_spec(spec: str) -> tuple[Family | None, str]:
    """'dream:/models/x' -> (DREAM, '/models/x'); a spec without a family prefix is kept."""
    head, sep, rest = spec.partition(":")
    if sep and head.lower() in _BY_ALIAS:
        return _BY_ALIAS[head.lower()], rest
    return None, spec


def detect(checkpoint: Checkpoint, tokenizer: Tokenizer) -> Family:
    """The family of a checkpoint, from config.json and the tokens its tokenizer has."""
    kind = checkpoint.model_type.lower()
    archs = checkpoint.architectures
    if kind == "llada" or any(a.startswith("LLaDA") for a in archs):
        return LLADA
    if kind == "dream" or "DreamModel" in archs:
        if _expand_id(checkpoint, tokenizer) is not None:
            return DREAMON
        if tokenizer.token_id(DIFFUCODER.end_token) is not None:
            return DIFFUCODER
        return DREAM
    if kind == "qwen2":
        if (_mask_id_from_files(checkpoint, tokenizer) is not None
                or _added_token_id(checkpoint, OPEN_DCODER.mask_token) is not None):
            return OPEN_DCODER
        raise ModelLoadError(f"{checkpoint.path}: a Qwen2 checkpoint without a mask token "
                             "(config.json mask_token_id, tokenizer_config.json mask_token or "
                             f"an added {OPEN_DCODER.mask_token!r}) looks autoregressive, not "
                             "like a masked-diffusion model; if it is one, name its family: "
                             "model 'open-dcoder:DIR' or 'dream:DIR'")
    raise ModelLoadError(f"{checkpoint.path}: model_type {checkpoint.model_type!r} "
                         f"(architectures {archs}) is not a known family; supported: dlm-tiny, "
                         f"{', '.join(FAMILIES)}. If it is a masked-diffusion model that "
                         "follows one's conventions, name that family ('dream:DIR'), and set "
                         "DLM_LSP_TRUST_REMOTE_CODE=1 as well where only its own code builds "
                         "it (README: Use a published model)")


@dataclass
class Conventions:
    """A family's conventions resolved to this checkpoint's token ids."""

    family: Family
    mask_id: int
    end_id: int  # the engine's pad_id: a span's unused tail
    eos_id: int | None = None
    before: list[int] = field(default_factory=list)  # ids put before every sequence
    after: list[int] = field(default_factory=list)  # ids put after every sequence
    expand_id: int | None = None  # DreamOn: one mask becomes two
    delete_id: int | None = None  # DreamOn: the position goes away

    @property
    def shifted(self) -> bool:
        return self.family.shifted


def _first(*ids: int | None) -> int | None:
    """The first id that is not None (0 is an id)."""
    return next((i for i in ids if i is not None), None)


def _config_id(checkpoint: Checkpoint, key: str) -> int | None:
    value = checkpoint.config.get(key)
    if isinstance(value, list):  # eos_token_id may be a list
        value = value[0] if value else None
    return value if isinstance(value, int) else None


def _mask_id_from_files(checkpoint: Checkpoint, tokenizer: Tokenizer) -> int | None:
    mask_id = _config_id(checkpoint, "mask_token_id")
    if mask_id is None and checkpoint.special_token("mask_token"):
        mask_id = tokenizer.token_id(checkpoint.special_token("mask_token"))
    return mask_id


def _added_token_id(checkpoint: Checkpoint, text: str) -> int | None:
    """The id of `text` among the tokens added to the vocabulary (added_tokens.json,
    tokenizer_config.json's added_tokens_decoder), or None.

    Open-dCoder's training added its mask "<M>" to Qwen2.5-Coder's tokenizer without
    writing mask_token_id into config.json; an added "<M>" is what marks a Qwen2
    checkpoint as one, where a token that merely spells "<M>" in a BPE vocabulary
    would not.
    """
    return next((i for i, (content, _) in checkpoint.added_tokens().items()
                 if content == text), None)


def _expand_id(checkpoint: Checkpoint, tokenizer: Tokenizer) -> int | None:
    value = checkpoint.generation_config.get("expand_token_id")
    return value if isinstance(value, int) else tokenizer.token_id("<|expand|>")


def conventions(family: Family, checkpoint: Checkpoint, tokenizer: Tokenizer) -> Conventions:
    """Look up the ids a family's conventions name, in this checkpoint's files."""
    mask_id = _first(_mask_id_from_files(checkpoint, tokenizer),
                     tokenizer.token_id(family.mask_token), family.mask_id)
    if mask_id is None:
        raise ModelLoadError(f"{checkpoint.path}: no mask token (config.json mask_token_id, "
                             f"tokenizer_config.json mask_token or {family.mask_token!r})")
    by_text = tokenizer.token_id(family.mask_token)
    if by_text is not None and by_text != mask_id:
        raise ModelLoadError(f"{checkpoint.path}: config.json says the mask is id {mask_id} but "
                             f"the tokenizer has {family.mask_token!r} at {by_text}")
    eos_text = checkpoint.special_token("eos_token") or EOS
    eos_id = _first(tokenizer.token_id(eos_text), _config_id(checkpoint, "eos_token_id"))
    end_id = tokenizer.token_id(family.end_token)
    expand_id = delete_id = None
    if family is DREAMON:
        expand_id = _expand_id(checkpoint, tokenizer)
        # DreamOn deletes end-of-text tokens (its training pads the middle with them and its
        # generation config sets delete_token_id = eos_token_id), not a "<|delete|>" token
        delete = checkpoint.generation_config.get("delete_token_id")
        delete_id = delete if isinstance(delete, int) else eos_id
        end_id = delete_id
    end_id = _first(end_id, eos_id)
    if end_id is None:
        raise ModelLoadError(f"{checkpoint.path}: no token to end a span ({family.end_token!r} "
                             "or an eos token)")
    outside = {what: i for what, i in (("mask", mask_id), ("span end", end_id))
               if not 0 <= i < tokenizer.vocab_size}
    if outside:
        raise ModelLoadError(f"{checkpoint.path}: {', '.join(outside)} id outside the "
                             f"tokenizer's {tokenizer.vocab_size} ids: {outside}")
    bos_id = tokenizer.token_id(family.bos_token) if family.bos_token else None
    return Conventions(
        family, mask_id, end_id, eos_id,
        before=[bos_id] if bos_id is not None else [],
        after=[eos_id] if family.eos_after and eos_id is not None else [],
        expand_id=expand_id, delete_id=delete_id)
