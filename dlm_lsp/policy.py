"""The length policy: how many tokens to mask and how many steps to spend.

When the request does not fix a length, the span's surroundings decide the task
kind.  A cursor or hole with code after it on the same line is a single-line
fill (short span, cut at the first line break).  A cursor on an otherwise empty
line, or a hole alone on its line, is a multi-line fill.  The request's `kind`
option overrides all of this (a benchmark knows its task's kind; an editor may
know what the user asked for).  A non-empty selection
is a block rewrite sized from the selected text.  Each kind has its own default
step budget; the left-to-right baseline always takes one step per token.

Where the language has a grammar, the syntax tree at the cursor decides instead
(`dlm_lsp.span_hints.span_kind`): an unfinished argument list on an otherwise empty
line is still a single-line fill, the end of a `def f():` line opens a
multi-line body, and the kind of block caps the length (`max_lines`, at about
TOKENS_PER_LINE tokens a line).  Only the lines around the cursor are parsed
for this (`local_text`), within so many characters too, so the cost grows neither
with the document nor with its longest line; a cursor in a line longer than that
(a minified bundle's) is left to the text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dlm_lsp.config import DEFAULT_STEPS, MAX_SPAN_TOKENS, InfillOptions, ServerConfig
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.span import CHARS_PER_TOKEN
from dlm_lsp.span_hints import span_kind

TOKENS_PER_LINE = 12  # a line of code is ~8-12 tokens of our BPE; the cap errs long
LOCAL_LINES = 300  # lines either side of the span that syntax decisions look at
LOCAL_CHARS = 30_000  # and characters: 100 a line, where code has 30 to 40
MIN_CONTEXT_TOKENS = 64  # of a model's length, kept for context however long the span

SINGLE_LINE, MULTI_LINE, REWRITE = "single-line", "multi-line", "rewrite"


@dataclass(frozen=True)
class SpanPlan:
    """What the engine will do for one span."""

    kind: str
    n_masked: int
    steps: int
    single_line: bool  # cut the fill at its first line break


@dataclass(frozen=True)
class Budget:
    """What bounds a fill's denoising: a latency target, which picks the steps that fit
    it (the engine, from the cost model), or else a number of steps."""

    steps: int  # the steps where no target decides
    latency_ms: int | None  # the target that decides, if one does


# The settings `step_budget` reads a fill's budget from, every one of which a request's
# own `steps` or `latencyMs` replaces: a benchmark that gives its fills a budget refuses
# them in `--settings` (`bench.pass_at_1.engine_settings`), as no fill would run with them.
BUDGET_SETTINGS = ("steps", "latency_ms", "steps_single_line", "steps_multi_line",
                   "steps_rewrite", "latency_ms_single_line", "latency_ms_multi_line",
                   "latency_ms_rewrite")


def step_budget(config: ServerConfig, options: InfillOptions, kind: str) -> Budget:
    """The budget of a fill of `kind`: the most specific one given wins, a request's own
    (`steps`, `latencyMs`) over its kind's settings (`stepsSingleLine`, `latencyMsSingleLine`
    ...) over the settings for every kind (`steps`, `latencyMs`) over DEFAULT_STEPS; and
    where one place gives both, the latency target.  One rule, read by the span plan and
    the engine alike: a global `steps` had beaten `stepsSingleLine` while a per-kind latency
    target beat a global `steps`, and a request's `steps` once lost to the kind's target."""
    per_kind = {SINGLE_LINE: (config.latency_ms_single_line, config.steps_single_line),
                MULTI_LINE: (config.latency_ms_multi_line, config.steps_multi_line),
                REWRITE: (config.latency_ms_rewrite, config.steps_rewrite)}[kind]
    places = ((options.latency_ms, options.steps), per_kind, (config.latency_ms, config.steps))
    steps = next((s for _, s in places if s is not None), DEFAULT_STEPS[kind])
    target = next((t for t, s in places if t is not None or s is not None), None)
    return Budget(steps, target)


class SpanTooLong(Exception):
    """A rewrite's selection holds more tokens than a fill may write (`maxSpanTokens`).

    Its rewrite could only be shorter than the selection: a whole file selected came
    back as 128 tokens of code in place of a megabyte.  So it is refused, and the
    message says how to go on (select less, or allow longer spans).  Not a ValueError:
    the remote client reads one raised while it reads a service's answer as a broken
    stream, and would send the fill again."""


def task_kind(text: str, start: int, end: int, is_hole: bool = False) -> str:
    """Classify a span by what surrounds it (see module docstring)."""
    if start != end and not is_hole:
        return REWRITE
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    before, after = text[line_start:start], text[end:line_end]
    return MULTI_LINE if not before.strip() and not after.strip() else SINGLE_LINE


def local_text(text: str, start: int, end: int, lines: int = LOCAL_LINES,
               chars: int = LOCAL_CHARS) -> tuple[str, int] | None:
    """The whole lines within `lines` of the span and `chars` characters of its own
    lines, and the offset where they start; None where the span's own lines run on
    further than `chars` before or after it (syntax decisions are then left to the text).

    They are parsed on their own, so they begin where a parse can begin: at the
    document's start or the least indented line in reach (`_outermost_line`).  The line
    `lines` above the span may be inside a block comment (a license header's ` * `
    lines, a Javadoc's) or a module docstring: parsed from there, the comment's prose
    was read as code, an apostrophe in it opened a string, and the code below was read
    as that string (the end of `fun f() {` 310 lines down a Kotlin file was a
    single-line fill).

    Lines are not all short: a minified bundle is one line of megabytes, a generated
    module may hold a table of 500,000 characters on one line.  Taken whole, such a line
    was parsed again for the hint and for every fill shaped (9 s of a ghost-text request
    below a 555,000-character line; a cursor inside a 1 MB line, 0.6 s for the hint)."""
    first = text.rfind("\n", 0, start) + 1  # where the span's first line starts
    last = text.find("\n", end)
    last = len(text) if last == -1 else last  # and where its last line ends
    if start - first > chars or last - end > chars:
        return None
    top, floor = first, first - chars
    for _ in range(lines):
        if top == 0:
            break
        above = text.rfind("\n", 0, top - 1) + 1
        if above < floor:
            break
        top = above
    low = _outermost_line(text, top, lines, top - chars)
    high, ceiling = end, last + chars
    for _ in range(lines + 1):
        found = text.find("\n", high + 1)
        found = len(text) if found == -1 else found
        if found > ceiling:
            break
        high = found
        if found == len(text):
            break
    if high < len(text):
        high = _outermost_end(text, last, high)
    return text[low:high], low


_INDENTATION = re.compile(r"[ \t]*")


def _outermost_line(text: str, low: int, lines: int, floor: int) -> int:
    """The document's start, if it is within `lines` lines above the line at `low` (a
    license header or a module docstring is then read whole); else the start of the
    nearest of the least indented lines from that line up to `lines` lines above it:
    the outermost code in reach (a top-level definition, a class's member), where a
    parse of the lines from it on reads what a parse of the whole document reads.
    Lines that start with a block comment's `*` or with a closer say nothing of a level
    and are passed over; `low` if every line is.  No line starting before `floor` is in
    reach."""
    best, least, at = low, None, low
    for _ in range(lines + 1):
        if at == 0:
            return 0
        code = _INDENTATION.match(text, at).end()
        if code < len(text) and text[code] not in "\n*)]}":
            width = code - at
            if least is None or width < least:
                best, least = at, width
        at = text.rfind("\n", 0, at - 1) + 1
        if at < floor:
            break
    return best


# What a line that closes a block or goes on with the line above starts with: a bracket
# (an Allman `{` too), a block comment's `*`, a case arm's `;;`, a closing or next-clause
# keyword, `#endif`
_CLOSING = re.compile(r"[ \t]*([{}()\[\]*;]|(end|fi|done|esac|else|elif|elsif|elseif|when"
                      r"|rescue|ensure|except|finally|catch)\b|#\s*(endif|else|elif)\b)")


def _outermost_end(text: str, last: int, high: int) -> int:
    """Where the lines around a span end, the last of them ending at `high`: after the
    last of the least indented lines below the span's (whose last line ends at `last`)
    that end a statement, a line whose next code line begins one no deeper (not a
    closer, an Allman `{`, `else`, `;;`: `_CLOSING`) and that is no decorator or
    annotation (which goes with the line below it), so that a parse of the lines reads
    no construct cut in half: at the least indented level in reach, as `_outermost_line`
    chooses where they begin.  `high` where no line below the span ends a statement so.

    The lines below a span ended wherever their count did: inside a shell `case` 300
    lines below the cursor, the parse read the cursor's `else` as inside a string, and a
    fill of its block was cut as a single-line one (xdg-screensaver).  Only the lines in
    reach are read again (and the first code line after them, if near), so the lines
    never grow: a parse of them costs no more than it did."""
    below, stop = high + 1, min(len(text), high + LOCAL_CHARS)
    while below < stop and text[(blank := _INDENTATION.match(text, below).end()):blank + 1] == "\n":
        below = blank + 1  # the first code line after them, if near
    code = _INDENTATION.match(text, below).end() if below < stop else below
    after = code - below if code < stop else -1  # its width; -1: none near
    best, least, at, end = high, None, text.rfind("\n", 0, high) + 1, high
    while at > last:
        code = _INDENTATION.match(text, at).end()
        if text[code] != "\n":
            width = code - at
            if (after <= width and (least is None or width < least) and text[code] not in "*@"
                    and (after < 0 or not _CLOSING.match(text, below))):
                best, least = end, width
                if least == 0:
                    break  # none is less indented: the last such line is found
            after, below = width, at
        end, at = at - 1, text.rfind("\n", 0, at - 1) + 1
    return best


def _tokens_at_least(tokenizer: Tokenizer, text: str, enough: int) -> int:
    """The number of tokens of `text`, or a number of at least `enough` where it has that
    many: its first CHARS_PER_TOKEN characters a token are tokenized first, and the rest
    only where they hold fewer.  A rewrite is sized from its selection up to
    `maxSpanTokens`, and a selected megabyte took 1.8 s to tokenize, for a count the cap
    then cut to 128."""
    head = text[:CHARS_PER_TOKEN * enough]
    count = len(tokenizer.encode(head))
    return count if count >= enough or len(head) == len(text) else len(tokenizer.encode(text))


class LengthEstimate:
    """Stands in for a tokenizer where only a count of tokens is needed and the model's
    tokenizer is elsewhere (a server's): `chars_per_token` characters a token."""

    def __init__(self, chars_per_token: float):
        self.chars_per_token = chars_per_token

    def encode(self, text: str) -> list[int]:
        return [0] * math.ceil(len(text) / self.chars_per_token)


# A selection's tokens where the model's tokenizer is not at hand (before a model is
# loaded, or on a server): CHARS_PER_TOKEN characters a token, where code runs 3-4 (only
# long runs of one character, indentation or banners, go past it)
WITHOUT_TOKENIZER = LengthEstimate(CHARS_PER_TOKEN)


def _too_long(n: int, limit: int, config: ServerConfig) -> str:
    """What a rewrite of at least `n` tokens, past `limit`, is refused with: which limit
    it passes and how to go on."""
    most = (f"maxSpanTokens, {limit}): select less, or raise maxSpanTokens (up to "
            f"{MAX_SPAN_TOKENS.high})" if limit == config.max_span_tokens else
            f"{limit} for this model, which reads {limit + MIN_CONTEXT_TOKENS} in all): "
            "select less, or use a model that reads more")
    return f"the selection is at least {n:,} tokens, more than a rewrite may write ({most}"


_CR = re.compile(r"\r\n?")  # a line break that the model is shown as `\n`


def rewrite_refusal(selected: str, config: ServerConfig, tokenizer: Tokenizer,
                    reach: int | None = None) -> str | None:
    """Why a rewrite of `selected` would be refused as too long (`plan_span`), or None
    where it would not be or that is not plain from its first characters: only
    CHARS_PER_TOKEN characters a token of them are counted, so that an editor can be
    told before it asks (code actions are asked for at every move of a selection).
    They are counted with `\n` line breaks, as every backend sizes the rewrite from the
    text the model is shown (line_endings.py): with a Windows file's `\r`s, a selection
    the command would rewrite was told too long."""
    limit = config.max_span_tokens if reach is None else min(config.max_span_tokens, reach)
    head = CHARS_PER_TOKEN * (limit + 1)
    n = len(tokenizer.encode(_CR.sub("\n", selected[:2 * head])[:head]))
    return _too_long(n, limit, config) if n > limit else None


def span_reach(max_length: int) -> int:
    """The longest span a model that reads `max_length` tokens may write: all but
    MIN_CONTEXT_TOKENS of them, left for the code around it."""
    return max(1, max_length - MIN_CONTEXT_TOKENS)


def plan_span(text: str, start: int, end: int, config: ServerConfig, options: InfillOptions,
              tokenizer: Tokenizer, is_hole: bool = False,
              language: str | None = None, reach: int | None = None) -> SpanPlan:
    """Choose the number of masked tokens and the step budget for a span.

    No span is longer than `maxSpanTokens`, nor than `reach`, the most the model can
    write and still read some context (`span_reach`): a span past what the model reads
    ran it on positions it never saw (the shipped model reads 512; 4,097 tokens took a
    minute of a CPU for noise).  A rewrite of a longer selection is refused."""
    limit = config.max_span_tokens if reach is None else min(config.max_span_tokens, reach)
    kind = options.kind or task_kind(text, start, end, is_hole)
    hint = None
    if kind != REWRITE and language is not None and options.kind is None:
        local = local_text(text, start, end)
        if local is not None:
            hint = span_kind(local[0], start - local[1], end - local[1], language)
        kind = hint.kind if hint is not None else kind
    if options.length is not None:
        n = options.length
    elif kind == REWRITE:
        n = _tokens_at_least(tokenizer, text[start:end], limit + 1)
        if n > limit:
            raise SpanTooLong(_too_long(n, limit, config))
        n += 8
    else:
        n = config.single_line_tokens if kind == SINGLE_LINE else config.multi_line_tokens
        if hint is not None and kind == MULTI_LINE:
            n = min(n, hint.max_lines * TOKENS_PER_LINE)
    n = max(1, min(n, limit))
    strategy = options.strategy or config.strategy
    if strategy == "left-to-right":
        steps = n
    else:
        steps = step_budget(config, options, kind).steps
    return SpanPlan(kind, n, max(1, min(steps, n)), kind == SINGLE_LINE)
