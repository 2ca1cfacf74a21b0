"""The prompt for a fill on an SGLang server, and the fill cut back out of its answer.

SGLang's diffusion path only *continues* a prompt: it appends blocks of mask tokens
after the input and denoises them block by block, each block seeing everything before
it and nothing after (sglang `srt/dllm`).  There is no suffix input, and no
fill-in-the-middle format is documented for LLaDA2.  So the infill is posed as a prompt,
in the model's chat format: the user turn shows the code after the gap and asks for the
missing part; the answer is started as a code block holding the code before the gap, so
the model continues the file from the cursor.  A continuation runs on past the gap, so
what it writes is cut where it starts writing the code after the gap again (or closes
the code block).  A model whose chat format is not known here is given the code before
the gap alone, as plain text to continue.

This is kept apart from the HTTP client (`sglang.py`) because it is pure string work,
tested without a server, and because it is what to change for a new model family: its
chat format (`chat_format`) and how it is asked (`_task`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dlm_lsp.config import ServerConfig
from dlm_lsp.policy import MULTI_LINE, REWRITE, SINGLE_LINE, SpanPlan
from dlm_lsp.results import InfillRequest

CHARS_PER_TOKEN = 3.5  # to turn maxContextTokens into characters: code runs ~3-4 a token
FENCE = "```"
# What the model must write before the fill: the blank end of the prefix (the cursor's
# indentation, with the line break before it when the cursor's line is blank).  A prompt
# that ends in whitespace is a token boundary the model rarely saw; it writes it itself.
_HEAD = re.compile(r"(?:\r?\n)?[ \t]*\Z")


@dataclass(frozen=True)
class ChatFormat:
    """How a model's chat turns are written: user text and the answer's start go between."""

    name: str
    before_user: str
    before_answer: str
    stops: tuple[str, ...]  # the end of an answer, in case it is not an end-of-text token

    def render(self, user: str, answer: str) -> str:
        return self.before_user + user + self.before_answer + answer


# LLaDA2's format, as SGLang's documentation for diffusion language models writes it.
LLADA2 = ChatFormat("llada2", "<role>SYSTEM</role>detailed thinking off<|role_end|>"
                    "<role>HUMAN</role>", "<|role_end|><role>ASSISTANT</role>",
                    ("<|role_end|>",))
# ChatML: SDAR (the other block-diffusion family SGLang serves) and Qwen-based models.
CHATML = ChatFormat("chatml", "<|im_start|>user\n",
                    "<|im_end|>\n<|im_start|>assistant\n", ("<|im_end|>",))
PLAIN = ChatFormat("plain", "", "", ())  # no chat: the code before the gap, continued


def chat_format(info: dict[str, Any]) -> ChatFormat:
    """The chat format of the served model, from `/model_info` (architecture, path)."""
    names = " ".join([*(info.get("architectures") or []), str(info.get("model_type") or ""),
                      str(info.get("model_path") or "")]).lower()
    if "llada2" in names:
        return LLADA2
    if "sdar" in names or "qwen" in names:
        return CHATML
    return PLAIN


@dataclass(frozen=True)
class Prompt:
    """One fill as the served model sees it."""

    text: str
    head: str  # the end of the prefix left for the model to write (dropped from the fill)
    line_before: str  # the cursor's line up to the cursor
    suffix: str  # the code after the gap that the model was shown
    fenced: bool  # the answer is a code block: a closing fence ends the fill


def _near(prefix: str, suffix: str, max_tokens: int) -> tuple[str, str]:
    """Whole lines of context around the gap within about `max_tokens` tokens, the prefix
    given up to two thirds when both sides are long (as `dlm_lsp.span.build_layout`)."""
    budget = int(CHARS_PER_TOKEN * max(1, max_tokens))
    keep_suffix = min(len(suffix), max(budget - len(prefix), budget // 3))
    keep_prefix = min(len(prefix), budget - keep_suffix)
    if keep_prefix < len(prefix):
        prefix = prefix[len(prefix) - keep_prefix:]
        prefix = prefix[prefix.find("\n") + 1:] if "\n" in prefix[:-1] else prefix
    if keep_suffix < len(suffix):
        suffix = suffix[:keep_suffix]
        suffix = suffix[:suffix.rfind("\n") + 1] if "\n" in suffix else suffix
    return prefix, suffix


def _task(plan: SpanPlan, language: str, suffix: str, old: str) -> str:
    """The user turn: what the gap is, the code after it, and how to answer."""
    block = f"{FENCE}{language}\n"
    where = {SINGLE_LINE: "The gap is inside one line: write the rest of that line only.",
             MULTI_LINE: "The gap is one or more whole lines.",
             REWRITE: f"The gap replaces this code, which is to be rewritten:\n{block}{old}"
                      f"\n{FENCE}"}[plan.kind]
    after = (f"The code after the gap is:\n{block}{suffix}\n{FENCE}" if suffix.strip()
             else "Nothing comes after the gap.")
    return (f"Fill the gap in this {language or 'source'} file. {where}\n{after}\n"
            "Continue the file from where your answer starts, write only the code that "
            "belongs in the gap, and close the code block where the gap ends.")


def build_prompt(req: InfillRequest, plan: SpanPlan, cfg: ServerConfig, language: str | None,
                 chat: ChatFormat) -> Prompt:
    """The prompt for one fill: the code before the gap as the start of the answer."""
    prefix, suffix = _near(req.shown_prefix(), req.shown_suffix(), cfg.max_context_tokens)
    head = _HEAD.search(prefix).group()
    before = prefix[:len(prefix) - len(head)]
    line_before = req.text[req.text.rfind("\n", 0, req.start) + 1:req.start]
    if chat is PLAIN:
        return Prompt(before, head, line_before, suffix, False)
    name = language or req.language_id or ""
    old = req.text[req.start:req.end] if plan.kind == REWRITE else ""
    return Prompt(chat.render(_task(plan, name, suffix, old), f"{FENCE}{name}\n{before}"),
                  head, line_before, suffix, True)


def _drop_head(text: str, head: str) -> str:
    """The continuation from the cursor on: the head the model wrote first taken off.

    When it wrote the line break but other indentation, the document's indentation wins:
    the lines it wrote at or right of its own are moved with its first line onto the
    cursor's (the model wrote from that base, column 0 often), and a line left of it
    stays where it is (a dedent out of the cursor's block, which shaping does not move
    back into it: in Python a line left of the cursor is a dedent, `dlm_lsp.indentation`)."""
    if text.startswith(head):
        return text[len(head):]
    if "\n" in head:
        text = re.sub(r"\A[ \t]*\r?\n", "", text, count=1)
    own = text[:len(text) - len(text.lstrip(" \t"))]
    cursor = head.rsplit("\n", 1)[-1]
    first, *rest = text[len(own):].split("\n")
    return "\n".join([first, *(cursor + line[len(own):] if line.strip() and line.startswith(own)
                                else line for line in rest)])


def _unfenced(text: str, prompt: Prompt, meta: dict[str, Any]) -> str:
    """The answer up to its closing fence, without the line break that puts the fence on
    a line of its own (the server trims the stop string it met, and says which)."""
    if not prompt.fenced:
        return text
    at = text.find(FENCE)
    reason = meta.get("finish_reason")
    if at != -1:
        text = text[:at]
    elif not (isinstance(reason, dict) and reason.get("matched") == FENCE):
        return text
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def continuation(text: str, prompt: Prompt, meta: dict[str, Any]) -> str:
    """What the model wrote from the cursor on: its answer up to the closing fence, the
    head it wrote first taken off (`meta` is the last update's `meta_info`)."""
    return _drop_head(_unfenced(text, prompt, meta), prompt.head)


def before_suffix(text: str, prompt: Prompt) -> str:
    """The continuation up to where it starts writing the code after the gap again.

    A gap inside a line ends where the model finishes the line as the suffix does; a gap
    before code on the cursor's line (after its indentation) ends where the model writes
    that line again; a gap that ends its line ends before the suffix's next line of code.
    Lines are compared with their indentation (the fill is on the document's by now), and
    the suffix's second line of code must follow where the model wrote more."""
    rest = prompt.suffix.split("\n", 1)[0].rstrip()  # the cursor's line after the gap
    lines = text.split("\n")
    code = [line.rstrip() for line in prompt.suffix.split("\n")[1:] if line.strip()]
    if prompt.line_before.strip():  # inside a line
        first = lines[0].rstrip()
        return first[:len(first) - len(rest)] if rest.strip() and first.endswith(rest) \
            else text
    if rest.strip():
        target, then = prompt.line_before + rest, code[:1]
    elif code:
        target, then = code[0], code[1:2]
    else:
        return text
    at = 0
    for i, line in enumerate(lines):
        whole = (prompt.line_before + line if i == 0 else line).rstrip()
        later = next((x.rstrip() for x in lines[i + 1:] if x.strip()), None)
        if whole == target and (later is None or not then or later == then[0]):
            if i == 0:
                return ""
            return text[:at + len(prompt.line_before)] if rest.strip() else text[:at].rstrip()
        at += len(line) + 1
    return text
