"""The denoising passes of one infill: the first, syntax repairs, the left-to-right retry.

All passes share the infill's layout; the first decides the candidates, and
when none is valid (and the document has a grammar) repair rounds re-mask
what the new syntax errors point at (`dlm_lsp/repair.py`), then one retry runs
strictly left to right.  The same rounds write again the positions whose bytes make
no whole character (a lone byte of `中`) or a control character the model was not
shown (`dlm_lsp/characters.py`), with or without a grammar, when no candidate is whole;
their text leaves those out (`Tokenizer.decode`), so a fill never writes U+FFFD of
broken bytes nor a stray control character.  Only positions whose text the fill shows
count: not those past a single-line fill's line break or past the units a multi-line
one keeps.  Each candidate is shaped for the document (re-indented
and cut to whole units, `dlm_lsp/units.py`) before it is validated; `shape_fill` and
`document_for` do that for the SGLang backend's fills too, so both read alike.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING

import torch

from dlm_lsp.binding_hints import begin_binding, hint_place, plain_header
from dlm_lsp.characters import left_out
from dlm_lsp.config import AUTO, InfillOptions, ServerConfig, setting
from dlm_lsp.indentation import (
    FreeLines,
    IndentStyle,
    place_literals,
    reindent,
    shown_indent,
    to_cursor_column,
)
from dlm_lsp.line_endings import normalize
from dlm_lsp.models.cache import CacheConfig, ContextCache
from dlm_lsp.models.hf import HFDiffusionModel
from dlm_lsp.models.hf_cache import HFContextCache
from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.models.tiny import TinyDenoiser
from dlm_lsp.policy import MULTI_LINE, SpanPlan
from dlm_lsp.python_values import value_hint
from dlm_lsp.repair import (
    BINDING,
    HEADER,
    REPAIR,
    RETURN,
    TALLY,
    VALUE,
    RepairConfig,
    closing,
    culprits,
    positions_to_remask,
    raw_offset,
    spelled_keywords,
    token_offsets,
    unmatched_openers,
)
from dlm_lsp.results import Candidate, InfillRequest
from dlm_lsp.sampler import Denoised, SamplerConfig, denoise
from dlm_lsp.sampler_settings import CANDIDATE_TEMPERATURE
from dlm_lsp.serving import Target, WorkerClosed
from dlm_lsp.span import SpanLayout, head_only_positions, past_head
from dlm_lsp.syntax import free_lines
from dlm_lsp.units import truncate_to_units
from dlm_lsp.validation import (
    ParsedDocument,
    Validation,
    language_for,
    parsed_document,
    room_for,
)
from dlm_lsp.waiting import holding

if TYPE_CHECKING:
    from dlm_lsp.engine import Engine

_BLANKS = re.compile(r"[ \t]*")
_GIVES = re.compile(r"\s*return\b[ \t]*[^\s#;]")  # a `return` with a value
_BARE_RETURN = re.compile(r"\n*([ \t]*)return[ \t]*\n*")  # one without


def caches_context(model: DiffusionModel, cfg: ServerConfig, grows: bool = False) -> bool:
    """Whether a run keeps a context cache: when it is on, for our own denoiser or for a
    published checkpoint loaded through transformers' own classes (not its own code),
    except a model whose spans grow (DreamOn): the cache's span is fixed.

    `contextCache: "auto"` (the default) keeps one for our own denoiser on the CPU only.
    There a step's cost is arithmetic, which the cache cuts: with the shipped model (a
    full pass every 2 steps) fills took 1.6-1.9x less time, at the same single-line
    pass@1 with the oracle length (the 2-core EPYC VM, 2026-12-06; README, Benchmarks,
    Context cache).  On CUDA our steps replay as graphs, which the
    cached step does not (a step there is launches, not arithmetic), and a published
    checkpoint's loss under the cache is not measured here (no hub on this project's
    machines): a user turns it on with `true`.  Nor does "auto" keep one for a fill that
    `grows` (`growForHead`, which a user asked for, and which a cache's fixed span would
    set aside); `true` does, and the span does not grow."""
    if not cfg.context_cache or getattr(model, "expand_id", None) is not None:
        return False
    ours = isinstance(getattr(model, "module", None), TinyDenoiser)
    if cfg.context_cache == AUTO:
        return ours and not grows and torch.device(getattr(model, "device", "cpu")).type == "cpu"
    return ours or (isinstance(model, HFDiffusionModel) and model.native)


def context_cache(model: DiffusionModel, cfg: ServerConfig, layout: SpanLayout,
                  grows: bool = False) -> ContextCache | HFContextCache | None:
    """The context cache of one run, when it keeps one (`caches_context`)."""
    if not caches_context(model, cfg, grows):
        return None
    config = CacheConfig(cfg.cache_refresh, cfg.cache_window)
    if isinstance(model, HFDiffusionModel):
        return HFContextCache(model, layout.span_start, layout.span_end, config)
    return ContextCache(model.module, layout.span_start, layout.span_end, config,
                        bf16=getattr(model, "precision", "fp32") == "bf16", head=model.head)


def checked_span(req: InfillRequest) -> tuple[int, int]:
    """The span a fill is validated over, in `checked_text(req)`: the request's, except
    that a hole's is empty, where its marker stood.

    A marker is not the user's code.  In most grammars it parses as one error node over
    exactly the replaced text, and validation excuses a fill that sits inside damage the
    document already had there (see dlm_lsp/validation.py): checked against the
    document with its marker, every fill that parsed as one error node passed
    (`total += (` in a Java loop, `=` after `return` in TypeScript).
    """
    return (req.start, req.start) if req.is_hole else (req.start, req.end)


def checked_text(text: str, req: InfillRequest, offset: int = 0) -> str:
    """`text` (the request's document, or the part of it from `offset` on) without a
    hole's marker: the text fills are checked and cut against (see checked_span)."""
    if not req.is_hole:
        return text
    return text[:req.start - offset] + text[req.end - offset:]


# What a later hole's marker on a hole's own line is checked as: a name, which stands
# where an operand or an argument is due, as the holes on one line mostly are (`_` alone
# is a pattern, not a name, in Rust: two at least)
LATER_HOLE = "_"


def validated_text(req: InfillRequest) -> str:
    """The document a request's fills are validated in: `checked_text`, with the markers
    of the holes after a hole's taken out too.  Holes are filled left to right, so the
    later ones still stand when the first is checked, each an error of its own beside
    the fill and no more the user's code than the hole's marker: CPython stopped at the
    marker of `add(1, <FILL>)`, or reported one below a block where it had reported the
    block empty, and a good fill was blamed for them.  On the hole's own line they stand
    as a name instead (`LATER_HOLE`): taken out, `return <FILL> + <FILL>` was checked as
    `return b + `, which CPython faults at the line's end, not where it faulted the line
    without the fill, so every fill was rejected.  The span does not move: only text
    after it changes."""
    text = checked_text(req.text, req)
    if not req.is_hole:
        return text
    marker = req.text[req.start:req.end]
    line_end = text.find("\n", req.start)
    line_end = len(text) if line_end < 0 else line_end
    name = LATER_HOLE * max(len(marker), 2)  # as long as the marker where it can: columns hold
    return (text[:req.start] + text[req.start:line_end].replace(marker, name)
            + text[line_end:].replace(marker, ""))


def document_for(req: InfillRequest, cfg: ServerConfig) -> ParsedDocument | str:
    """The request's document parsed for validation (from its last version's tree), a
    hole's marker and those after it taken out (`validated_text`), or why its fills go
    unchecked (validation off, no grammar for the language)."""
    if not cfg.validate:
        return "validation is off (setting 'validate')"
    language = language_for(req.language_id, req.uri)
    document = parsed_document(validated_text(req), language or req.language_id, req.uri)
    return document if isinstance(document, ParsedDocument) else document.reason


def _parses(candidate: Candidate) -> bool:
    return candidate.check is not None and candidate.check.parses


def rank(candidate: Candidate) -> tuple:
    """Candidates best first: valid ones, then those that parse (rejected for a name
    nothing defines), then the rest; whole before those that lost characters; by score."""
    return (candidate.valid is False, candidate.valid is False and not _parses(candidate),
            bool(candidate.broken), -candidate.score)


def judged(document: ParsedDocument, req: InfillRequest, fill: str,
           cfg: ServerConfig) -> Validation:
    """The check's verdict on `fill`: its syntax, then, where that passes and `checkNames`
    is on, the names a Python fill reads (python_names); the code the model is shown
    beside the document (a notebook's other cells) may define them.  A fill that writes
    the hole marker is rejected whatever else it does (`marker_checked`)."""
    start, end = checked_span(req)
    verdict = document.validate(start, end, fill)
    if cfg.check_names:
        verdict = document.names_checked(start, end, fill, verdict, shown_code(req))
    return document.marker_checked(start, fill, cfg.hole_marker, verdict,
                                   document.text[start:end])


def shown_code(req: InfillRequest) -> str:
    """The code the model is shown beside the document (a notebook's other cells)."""
    return f"{req.before}\n{req.after}" if req.before or req.after else ""


# A document of at least this many characters is parsed as soon as it is opened
# (`parse_ahead`): its first fill's cold parse is ~0.2-0.5 s a megabyte of Python.
PARSE_AHEAD_CHARS = 100_000


def parse_ahead(text: str, language_id: str | None, uri: str, cfg: ServerConfig) -> None:
    """Parse a document just opened the way its first fill will (`document_for`: its line
    breaks as the model sees them, `line_endings`), so that the fill finds the tree kept
    and reparses only what was edited since.  Parsed from nothing in the first fill, a
    3 MB Python file cost that fill ~1 s before its first forward pass; opened and read
    first, as a user does, it is ready by then.  A fill that comes sooner waits for this
    parse instead of making another (`validation.parsed_document`).  Small documents are
    left to their fills: theirs is cheap, and parsing every file an editor restores at
    start would push the trees of those being filled out of the few kept; for the same
    reason a large one is parsed only while there is room for its tree (`room_for`)."""
    if len(text) < PARSE_AHEAD_CHARS or not room_for(uri, len(text)):
        return
    document_for(InfillRequest(normalize(text, 0, 0).text, 0, 0, language_id, uri), cfg)


def fill_free_lines(text: str, req: InfillRequest, language: str | None,
                    local: tuple[str, int] | None) -> FreeLines:
    """The lines of a multi-line fill whose indentation is no level (indentation.FreeLines),
    against the lines around the span (`local`; None for a single-line fill)."""
    if language is None or local is None or "\n" not in text:
        return FreeLines()
    lines, low = local
    return free_lines(lines, req.start - low, req.end - low, text, language)


def shown_style(req: InfillRequest, language: str | None) -> IndentStyle | None:
    """The indentation of the code the model is shown around the request's document (a
    notebook cell's other cells, `notebooks.cell_context`), which the shaping of a fill
    in a document that shows none of its own reads (`indentation._or_shown`); None where
    nothing is shown around it: any document but a notebook's cell.  Read once a request
    (up to `detect_indent`'s 5,000 lines of the notebook), not once a candidate."""
    return shown_indent(req.before + req.after, language)


def reindented(text: str, req: InfillRequest, language: str | None,
               local: tuple[str, int] | None, free: FreeLines | None = None,
               shown: IndentStyle | None = None) -> str:
    """A multi-line fill on the document's indentation, against the lines around the span
    (`local`, from `policy.local_text`; None for a single-line fill); no level is read
    from the `free` lines (see fill_free_lines).  The span's text is read as the
    document's (a rewrite's old code is the user's indentation), but for a hole's marker,
    which is taken out; `shown` is `shown_style`'s."""
    if language is None or local is None or "\n" not in text:
        return text
    lines, low = local
    if req.is_hole:
        return reindent(text, checked_text(lines, req, low), req.start - low,
                        req.start - low, language, free, shown)
    return reindent(text, lines, req.start - low, req.end - low, language, free, shown)


def shape_fill(text: str, req: InfillRequest, plan: SpanPlan, tail: str, language: str | None,
               local: tuple[str, int] | None, shown: IndentStyle | None = None) -> str:
    """A fill as it will be offered: at the cursor's column (`to_cursor_column`, multi-line
    plans), on the document's indentation, cut to whole syntactic units (multi-line
    fills, where there is a grammar), with the borrowed line break (`tail`) back.  Every
    backend's fills are shaped here, so they read alike.  Lines whose indentation is no
    level (in a string, a heredoc, a block comment; a `#if`) are not read for one, and a
    string's lines are given back as written (`FreeLines`, `place_literals`).  A notebook
    cell with no indentation of its own is re-indented on its notebook's (`shown`, from
    `shown_style`)."""
    raw, free = text, fill_free_lines(text, req, language, local)
    if local is not None:
        lines, low = local
        start, end = req.start - low, req.end - low
        text = to_cursor_column(text, lines, start, end, language, free)
        if language is not None and "\n" in text:
            text = reindented(text, req, language, local, free, shown)
            text = place_literals(raw, text, lines, start, end, free)
            if plan.kind == MULTI_LINE:
                start, end = checked_span(req)
                text = truncate_to_units(checked_text(lines, req, low), start - low, end - low,
                                         text, language)
    # The borrowed line break follows the fill in what the model was shown.  At a cursor
    # it is new, and only a fill with code gets it (blanks get no line of their own); at
    # a selection that ended in it, it is the document's own, and comes back whatever
    # the fill: a rewrite written as nothing or blanks joined the lines either side.
    replaced = req.text[req.start:req.end].endswith(tail)
    if tail and (text.strip() or replaced) and not text.endswith(tail):
        text += tail
    return trimmed_end(text, req)


def trimmed_end(text: str, req: InfillRequest) -> str:
    """A fill without the blanks and line breaks it ends in where the document's own line
    break follows the span and the span's text did not end in one: a hole's line
    (`    <FILL>` then the line's break), a cursor on an empty line, a selection up to a
    line's end.  There the model often writes its last line's break as well (its training
    middles are whole lines as often as not), and the fill, offered as it came, left an
    empty line after itself that the user never asked for (`dlm-lsp fill
    fixtures/hello.py` wrote three blank lines where the file had two), or blanks at its
    line's end (ghost text `#  `).  At the end of a document with no last line break the
    fill keeps none, and the document still ends without one: it brought a run of empty
    lines (`return a` and four; a blank fill of a file that is only `<FILL>`, 27 of them),
    and the one it kept after that left an empty line at the end of every notebook cell
    filled there (a cell has no last line break).  A
    selection that took its line's break is given one back (the fill replaces it), and a
    fill with no code keeps its line breaks, left to the checks that judge blanks, but not
    the blanks at its line's end (a JavaScript hole's fill " " left its line `   `)."""
    after, replaced = req.text[req.end:req.end + 1], req.text[req.start:req.end]
    if replaced.endswith(("\n", "\r")):
        return text
    code = text.rstrip()
    if not code and after in ("\n", "\r"):
        return text.rstrip(" \t")
    if after in ("\n", "\r"):
        return code
    if after:  # code follows on the line: the fill's end is the user's business
        return text
    return code  # the end of the document: so too for a fill with no code


# RepairConfig's fields and the settings that set them
REPAIR_SETTINGS = (("rounds", "repair_rounds"), ("fallback", "fallback"),
                   ("fallback_max_tokens", "fallback_max_tokens"))


def repair_config(cfg: ServerConfig, opt: InfillOptions) -> RepairConfig:
    """The request's repair settings over the server's, over RepairConfig's defaults."""
    chosen = {name: setting(opt, cfg, key) for name, key in REPAIR_SETTINGS}
    return RepairConfig(**{k: v for k, v in chosen.items() if v is not None})


MASK_PLACEHOLDER = "\u2591"  # how a still-masked token shows in a draft


class InfillRun:
    """One infill's denoising passes: the first, repairs, the fallback; all share a layout."""

    def __init__(self, engine: Engine, model: DiffusionModel, req: InfillRequest,
                 plan: SpanPlan, layout: SpanLayout, tail: str, document: ParsedDocument | str,
                 language: str | None, local: tuple[str, int] | None):
        self.engine, self.req, self.plan, self.layout, self.tail = engine, req, plan, layout, tail
        # the model the fill began with, to its end: new settings may replace the engine's
        # meanwhile, and its ids mean nothing to another tokenizer
        self.model = model
        self.document = document if isinstance(document, ParsedDocument) else None
        self.unchecked = document if isinstance(document, str) else ""
        # multi-line fills are reindented and truncated against the lines around the span
        self.language, self.local = language, local
        self.shown = shown_style(req, language)  # a notebook's indentation, for a bare cell
        self.checked = self.document is not None
        self.passes = 0  # forward passes, all denoising runs together
        self.repair_rounds = 0
        self.blamed: set[tuple[int, int]] = set()  # (position, token) an error started in
        self.banned: list[tuple[int, int]] = []  # those written again: repairs may not
        self.target: Target | None = None  # a latency target: deadline and step time

    def affords(self, steps: int) -> bool:
        """Whether `steps` more passes fit before the latency target (always, without one)."""
        if self.target is None:
            return True
        return time.perf_counter() + steps * self.target.step_ms / 1000 <= self.target.deadline

    def content_length(self, ids: list[int]) -> int:
        """Span positions before the first pad."""
        pad = self.model.pad_id
        return ids.index(pad) if pad in ids else len(ids)

    def used(self, ids: list[int]) -> int:
        """Span positions the fill really used: up to the first pad, less those that hold
        the head's characters only (`span.head_only_positions`; one that goes on past the
        head writes the fill too).  The head's chain takes the positions the model chose
        for it, not its own tokenization's (`layout.head_tokens`): with the shipped model
        an indentation of 20 spaces, one token of its own, took 14 (`\n       `, 12 single
        spaces, ` =`), and the 13 more counted as the fill's."""
        content = ids[:self.content_length(ids)]
        return len(content) - head_only_positions(self.model.tokenizer, content,
                                                  self.layout.head, self.leave_out)

    @cached_property
    def leave_out(self) -> frozenset[str]:
        """The control characters the fill leaves out: those the model was not shown (the
        context either side, the head, a rewrite's old code; `dlm_lsp/characters.py`)."""
        tok, layout, req = self.model.tokenizer, self.layout, self.req
        return left_out(tok.decode(layout.prefix_ids) + layout.head + req.text[req.start:req.end]
                        + tok.decode(layout.suffix_ids))

    def decode(self, ids: list[int]) -> str:
        """The text of `ids` as a fill may write it: without the bytes that make no whole
        character and the control characters it leaves out."""
        return self.model.tokenizer.decode(ids, self.leave_out)

    def flawed(self, ids: list[int], fill: str) -> list[int]:
        """The span positions whose text the offered `fill` would show but leaves out
        (bytes that make no whole character, a control character it may not write).

        A position past the line break that ends a single-line fill, or past the units a
        multi-line one keeps, writes nothing the user sees: writing it again would cost
        a repair round for nothing.
        """
        content = ids[:self.content_length(ids)]
        flawed = self.model.tokenizer.broken(content, self.leave_out)
        if not flawed:
            return []
        offsets = token_offsets(self.model.tokenizer, content, self.leave_out)
        head = len(self.layout.head)
        written = self.decode(content)
        if not written.startswith(self.layout.head):
            return flawed  # cannot happen (see raw_text): all of it counts
        raw = written[head:].split("\n", 1)[0] if self.plan.single_line else written[head:]
        # the first character the fill does not show, in the decoded span
        cut = head + raw_offset(raw, fill, len(fill))
        # the positions before the token that holds it, and that one if it starts before
        shown = next((k + 1 if offsets[k] < cut else k for k in range(len(content))
                      if offsets[k + 1] > cut), len(content))
        return [k for k in flawed if k < shown]

    def raw_text(self, ids: list[int], layout: SpanLayout | None = None) -> str:
        """The fill as the model wrote it: decoded up to its first pad, the head dropped
        (the prefix's edge, written again), cut to one line if asked."""
        return past_head(self.decode(ids[:self.content_length(ids)]),
                         (layout or self.layout).head, self.plan.single_line)

    def draft(self, ids: list[int], head: str) -> str:
        """The span as it stands: committed tokens as text, masked ones as placeholders.
        Each run of committed tokens is decoded as one (the bytes of a character may be
        two tokens), without the bytes that make no character yet and the control
        characters the fill leaves out."""
        model = self.model
        pieces: list[str] = []
        run: list[int] = []
        for i in ids:
            if i == model.pad_id:
                break
            if i == model.mask_id:
                pieces += [self.decode(run), MASK_PLACEHOLDER]
                run = []
            else:
                run.append(i)
        draft = "".join(pieces) + self.decode(run)
        return draft[len(head):] if draft.startswith(head) else draft

    def fill_text(self, ids: list[int], layout: SpanLayout | None = None) -> str:
        """The fill as it will be offered: on the document's indentation, cut to whole
        syntactic units (multi-line fills, where there is a grammar), with the borrowed
        line break back."""
        return shape_fill(self.raw_text(ids, layout), self.req, self.plan, self.tail,
                          self.language, self.local, self.shown)

    def validate(self, fill: str) -> Validation | None:
        if self.document is None:
            return None
        return judged(self.document, self.req, fill, self.engine.config_for(self.req))

    def beyond_reach(self, candidates: list[Candidate]) -> bool:
        """Whether the error that rejects every candidate is one no single-line fill here can
        mend, so that repair and the left-to-right retry (~20 passes) would be spent for
        nothing.

        A single-line fill at a cursor after code is often rejected for damage the line
        already has away from the cursor: `if x = 3: foo(|)`, or `for i in xs: x|` above an
        indented line. The document as it is (the empty fill) has the same error at the
        same place, and it is blamed because it sits on the fill's line or just below it
        (see python_syntax: a fill must complete its line). It is taken for out of reach
        when the empty fill, each candidate, and what closes the brackets the line leaves
        open (how a fill mends `result = foo(a, |`, whose error CPython reports at the `(`;
        and the quote of an open string) all get that same rejection, away from the fill's
        text and its blanks. Only after code on the line: at the start of a line the fill
        may begin any statement (the opener of the broken line below).
        """
        req = self.req
        if (not self.plan.single_line or self.document is None
                or any(c.check is None or c.valid is not False for c in candidates)):
            return False
        start, end = checked_span(req)
        text = self.document.text
        line_start = text.rfind("\n", 0, start) + 1
        before = text[line_start:start]
        if not before.strip():
            return False
        reach = (start - (len(before) - len(before.rstrip(" \t"))), _BLANKS.match(text, end).end())
        line_end = text.find("\n", end)
        closers = closing(before + text[end:len(text) if line_end == -1 else line_end])

        def error(fill: str, check: Validation | None = None) -> tuple | None:
            """The rejection of `fill` in the document's own coordinates, or None where
            it is valid or an error meets the fill (the fill's own doing)."""
            check = check or self.document.validate(start, end, fill)
            if check.valid:
                return None
            moved = []
            for a, b in check.new_ranges:
                if b > start and a < start + len(fill):  # inside the fill
                    return None
                if a >= start + len(fill):
                    a, b = a - len(fill) + end - start, b - len(fill) + end - start
                if b >= reach[0] and a <= reach[1]:  # at the fill or beside it on its line
                    return None
                moved.append((a, b))
            return tuple(sorted(moved)), check.reason.partition(" (")[2]

        found = error("")
        return found is not None and all(
            error(fill) == found for fill in ([closers] if closers else [])) and all(
            error(c.text, c.check) == found for c in candidates)

    def bind_hint(self, best: Candidate, sampler: SamplerConfig, seed: int,
                  repair: RepairConfig | None = None) -> Candidate | None:
        """A fill begun with the binding the code below the span needs, where `best` leaves
        it out; None where nothing is wanted, the fill binds it, or the hinted fill does
        not pass the checks (after one round of `repair`, where it parses) or bind it.

        The lines below a Python span may read a name that nothing binds before them
        (`res.append(x)` with `res` bound nowhere, `while not ok(s[b:]):` with `b` bound
        only in that loop): whatever else it writes, a fill that does not bind it leaves
        code that raises NameError or UnboundLocalError as it runs.  The code says what the
        fill should begin with, so one more pass gets it: the span starts with `res =` (or
        `import math`) on the indentation of the line below, or, where the code below is
        indented deeper than a statement on the span's line could be, with the header of
        its block (`for c in`, `def is_prime(n):`) one level out (binding_hints), and the
        model writes the rest.  Of HumanEval-Infilling's 1,033 single-line tasks, 138 ask
        for a statement's hint with their line missing and 99 for a header's, and the
        hint begins the canonical line in 229 of them (binding_hints); of 3,000 held-out
        standard-library lines written back, 3 leave a name wanted (an intentional
        NameError in idlelib's tests).  Only on a blank line or at a line's start
        (`hint_place`).
        """
        document, req = self.document, self.req
        if document is None:
            return None
        start, end = checked_span(req)
        place = hint_place(document.text, start, end)
        if place is None:
            return None
        # what the best fill leaves first: most leave nothing, and the chunk is not parsed
        # again without a fill
        shown = shown_code(req)
        calls = place.slot is not None  # a header may be the `def` of a function called below
        left = (document.wanted(start, end, best.text, shown, calls) if _parses(best)
                else None)
        if left == []:
            return None
        needed = document.wanted(start, end, place.empty, shown, calls)  # the code below's
        first = next((n for n in needed if left is None or n in left), None)
        if first is None:
            return None
        # the line binds all the code below wants, those the best fill bound too (`i, j =`
        # where it wrote `i = 0`)
        hint = begin_binding(needed, first, place.below, place.slot)
        if hint is None:
            return None
        left = needed if left is None else left
        # what it writes after the binding may fail a check (`for c in depth:`, a number)
        found = self._begun_with(place.indent + hint.text, sampler, seed, repair, BINDING)
        if found is None:
            return None  # no room left for what the binding binds
        after = (document.wanted(start, end, found.text, shown, calls) if found.valid
                 else hint.names)
        # it binds the names, and leaves no other unbound that the best fill bound (`j = 0`
        # for `i = 0` where the lines below read both)
        return found if not set(hint.names) & set(after) and set(after) <= set(left) else None

    def blank_hint(self, best: Candidate, sampler: SamplerConfig, seed: int,
                   repair: RepairConfig | None = None) -> Candidate | None:
        """A fill begun with the line the code says is missing, where `best` writes no
        code on a blank line of Python: `return` at the end of a function that must give
        a value (python_returns), or the header of the block that the code below is
        indented as (`if`; in a class, `def`: binding_hints.plain_header) where that block
        reads no name its header must bind (those are `bind_hint`'s).  And where `best`
        is a bare `return` in a function that gives a value (it returns one elsewhere,
        its annotation or docstring says so: python_returns.bare_return), one begun with
        `return` that goes on, on its indentation.  On a blank line or at a line's start,
        as `bind_hint`.  None where `best` writes other code, nothing is missing, or the
        hinted fill does not pass the checks (after one round of `repair`, where it
        parses), give a value, or leave the function needing one.

        The model often writes nothing where a line is plainly missing.  After a
        function's last statement, where its `return` was, the document falls off the end
        of a function that other code says gives a value (`return []` above, `->
        List[int]`, a docstring's example): the `return` goes at the function body's
        indentation, where it ends the function whatever block the line above closes.
        Above code indented deeper than a statement there could be, a blank leaves that
        code to the block above (or breaks the indentation): a header is missing.  The
        model writes the rest (`return ans`, `if c in d:`).  Where the `return` it wrote
        gives another value than one the function computes and uses nowhere (`return
        False` where `largest` is updated in a loop and read nowhere else:
        python_returns.unused_values), one more pass begins it with `return largest`.
        """
        document, req = self.document, self.req
        bare = _BARE_RETURN.fullmatch(best.text)
        if document is None or (best.text.strip() and bare is None):
            return None
        start, end = checked_span(req)
        text = document.text
        place = hint_place(text, start, end)
        if place is None:
            return None  # the fill belongs to the code on its line
        before = text[text.rfind("\n", 0, start) + 1:start]
        need = (document.return_needed(start, end, best.text)
                if _parses(best) and bare is None else None)
        if bare is not None:
            # a `return` without the value its function gives elsewhere
            if not _parses(best) or document.bare_return(start, end, best.text) is None:
                return None
            indent = bare.group(1)
        elif need is not None:
            if not need.indent.startswith(before):
                return None  # the cursor is deeper than the body: no `return` ends it
            indent = need.indent[len(before):]
        if bare is not None or need is not None:
            # what follows is code: a bare `return` (what the model wrote for `return
            # times`) gives no value
            found = self._begun_with(indent + "return", sampler, seed, repair, RETURN,
                                     goes_on=True)
            if not self._returns(found, start, end):
                return None
            unused = document.unused_values(start, end, found.text)
            if unused and self.affords(sampler.steps):
                # it returns another value than the one the function computed (`return
                # False` where `largest` is updated in a loop and read nowhere): that one
                again = self._begun_with(f"{indent}return {unused[0]}", sampler, seed, repair,
                                         RETURN)
                if self._returns(again, start, end):
                    return again
            return found
        if place.slot is None or document.wanted(start, end, place.empty, shown_code(req), True):
            return None
        found = self._begun_with(place.indent + plain_header(place.slot), sampler, seed,
                                 repair, HEADER)
        return found if found is not None and found.valid else None

    def tally_hint(self, best: Candidate, sampler: SamplerConfig, seed: int,
                   repair: RepairConfig | None = None) -> Candidate | None:
        """A fill begun with the local that a loop around the span is there to update,
        where `best` leaves it idle (python_tallies); None where it leaves none so, writes
        no code on its first line, or the hinted fill does not pass the checks (after one
        round of `repair`, where it parses) or still leaves that local idle.

        `ans = 0` just before a loop and `return ans` after it say what the line in the
        loop is for; the model often writes another valid line there (`return i`,
        `odd_count += 1` where `even_count` was set), and the function returns the
        constant it began with.  One more pass begins the fill with the local's name on
        the best fill's indentation, and the model writes the rest (`ans += 1`,
        `new_lst.append(word)`): the position after the name may not end the line, since
        a name alone changes nothing.  Where what it wrote still changes nothing (`ans +=
        0`) or sets a counter to a number once more (`ans = 1`: python_tallies.resets),
        it is written again with one more token barred where it stood (the last, or the
        `=`), three times at most.  On a blank line or at a line's start, as `bind_hint`.
        """
        document = self.document
        first = best.text.split("\n", 1)[0]
        if document is None or not first.strip() or not _parses(best):
            return None
        start, end = checked_span(self.req)
        if hint_place(document.text, start, end) is None:
            return None
        idle = document.idle_tallies(start, end, best.text)
        if not idle:
            return None
        indent = first[:len(first) - len(first.lstrip(" \t"))]
        hint = indent + idle[0]

        def updates(fill: Candidate | None) -> bool:  # valid, and the local moves
            return (fill is not None and bool(fill.valid)
                    and idle[0] not in document.idle_tallies(start, end, fill.text))
        found = self._begun_with(hint, sampler, seed, repair, TALLY, goes_on=True)
        if found is None or not found.valid:
            return None
        after = len(self.model.tokenizer.encode(self.layout.head + hint))
        kept = None  # the first fill that moves the local, though it sets it to a number
        barred: tuple[tuple[int, int], ...] = ()
        method = re.compile(rf"[ \t]*{re.escape(idle[0])}\.\w+[ \t]*")
        for tries in (3, 2, 1, 0):  # three more passes at most
            last = self._last_on_line(found.ids, after)
            if method.fullmatch(found.text.split("\n", 1)[0]):
                # a method named and not called (`idx.append`): once more, the line
                # going on after it
                bars = () if last is None else tuple((last + 1, token)
                                                     for token in self.line_ends)
            elif updates(found):
                if not document.resets(start, end, found.text, idle[0]):
                    return found
                # `odd = 1` where `odd = 0` began it, `idx = i` where `idx = []` did:
                # once more with the `=` after the name barred where it stood (`odd +=
                # 1`); kept where no try updates it otherwise (a flag: `flg = 1`)
                kept = kept or found
                bars = ((after, found.ids[after]),) if after < len(found.ids) else ()
            else:
                # what it wrote after the name changes nothing (`count += 0`, `ans = ans`):
                # once more, the last token of its line barred where it stood (`count += 1`)
                bars = () if last is None else ((last, found.ids[last]),)
            if not tries or not bars or not self.affords(sampler.steps):
                return kept
            barred += bars
            found = self._begun_with(hint, sampler, seed, repair, TALLY, goes_on=True,
                                     barred=barred)
            if found is None or not found.valid:
                return kept
        return kept

    def value_hint(self, best: Candidate, sampler: SamplerConfig, seed: int,
                   repair: RepairConfig | None = None) -> Candidate | None:
        """A fill whose first line reads a value the function around the span computed
        above it, or a parameter, that with `best` in nothing reads
        (python_values.unread_values); None where `best` leaves none so (or only ones it
        names), writes no code on its first line or none with a place for an expression
        (python_values.value_slot), or the hinted fill does not pass the checks (after one
        round of `repair`, where it parses), still leaves the value unread or leaves
        another so that `best` read.

        `balance += op` in a loop and then nothing reading `balance` says what the line
        below is for: `if balance < 0:`.  The model often writes another valid line there
        (`if op is not None:`, `ans.append(i)` for `ans.append(val)`, `return True` where
        `largest` was worked out, `for c in c:` where the parameter `paren_string` is
        read nowhere).  One more pass keeps the best fill's first line up to where its
        expression starts (`if `, `ans.append(`, `for c in `) and begins that expression
        with the value's name, which may not go on into a longer one; the model writes the
        rest.  On a blank line or at a line's start, as `bind_hint`.
        """
        document = self.document
        if document is None or not _parses(best):
            return None
        start, end = checked_span(self.req)
        if hint_place(document.text, start, end) is None:
            return None
        unread = document.unread_values(start, end, best.text)
        hint = value_hint(best.text, unread)
        if hint is None:
            return None
        text, name = hint
        found = self._begun_with(text, sampler, seed, repair, VALUE, name_ends=True)
        # it reads the value, and leaves none unread that `best` read (`return y` for
        # `return x` where `x + y` was wanted)
        if (found is None or not found.valid
                or not set(document.unread_values(start, end, found.text)) < set(unread)):
            return None
        return found

    @cached_property
    def line_ends(self) -> frozenset[int]:
        """The ids that end a line: a line break's, or the pad that ends the fill."""
        return frozenset(self.model.tokenizer.line_break_ids | {self.model.pad_id})

    def _last_on_line(self, ids: list[int], start: int) -> int | None:
        """The span position of the last token on the line that position `start` is on
        (None where the line ends there)."""
        last = None
        for at in range(start, len(ids)):
            if ids[at] in self.line_ends:
                break
            last = at
        return last

    def _returns(self, found: Candidate | None, start: int, end: int) -> bool:
        """Whether a fill begun with `return` passed the checks, gives a value and leaves no
        function falling off its end."""
        return (found is not None and bool(found.valid) and _GIVES.match(found.text) is not None
                and self.document.return_needed(start, end, found.text) is None)

    def _begun_with(self, text: str, sampler: SamplerConfig, seed: int,
                    repair: RepairConfig | None, path: str,
                    goes_on: bool = False,
                    barred: tuple[tuple[int, int], ...] = (),
                    name_ends: bool = False) -> Candidate | None:
        """One more pass over the span begun with `text` (after the head), which the model
        keeps; what it writes after (`text` stays) is written again once with `repair` where
        it parses but fails a check.  With `goes_on`, the position after `text` may not end
        the line (a pad, a line break): the line goes on.  `barred`: more (span position,
        token) pairs the pass may not commit.  With `name_ends`, the position after `text`
        may not go on with the name `text` ends with (`dic` then `_arr`).  None where `text`
        leaves no position for the model to write."""
        layout, tok = self.layout, self.model.tokenizer
        ids = tok.encode(layout.head + text)
        if len(ids) >= layout.n_masked:
            return None
        offsets = token_offsets(tok, ids)
        head = len(layout.head)
        protected = next((i for i, at in enumerate(offsets) if at >= head), len(ids)) if head else 0
        banned = layout.banned
        banned += barred
        if goes_on:  # no pad, nor a line break: a space may come first (` ` then `k`)
            banned += tuple((len(ids), token) for token in sorted(self.line_ends))
        if name_ends:
            banned += tuple((len(ids), token) for token in sorted(tok.word_going_on_ids))
        hinted = replace(layout, init_ids=tuple(ids + [self.model.mask_id] * (layout.n_masked
                                                                              - len(ids))),
                         head_tokens=protected, banned=banned)
        [found] = self.candidates(self.denoise(hinted, sampler, seed), path)
        if (repair is not None and not found.valid and _parses(found)
                and self.affords(min(sampler.steps, 2 * repair.margin + 1))):
            fixed = self._repair_once(found, repair, sampler, seed, kept=len(ids))
            found = found if fixed is None else replace(fixed, path=path)
        return found

    def denoise(self, layout: SpanLayout, sampler: SamplerConfig, seed: int,
                with_drafts: bool = False) -> Denoised:
        req, engine = self.req, self.engine
        on_step = None
        if with_drafts and req.on_draft is not None:
            def on_step(step: int, steps: int, span: torch.Tensor) -> None:
                req.on_draft(step, steps, self.draft(span[0].tolist(), layout.head))

        def syntax_ok(ids: list[int]) -> bool:  # the early stop's independent check
            verdict = self.validate(self.fill_text(ids, layout))
            return verdict is None or verdict.valid

        cache = context_cache(self.model, engine.config_for(req), layout,
                              bool(sampler.grow_for_head))
        if cache is not None:  # the cache's span is fixed: a head's chain does not grow it
            sampler = replace(sampler, grow_for_head=False)
        # a pass with a context cache runs alone: no batching worker is started for it
        batcher = engine.batcher(self.model) if cache is None else None
        out = None
        if batcher is not None:
            try:
                # with a latency target the worker cuts the steps its shared rounds overrun
                run = batcher.run if self.target is None else functools.partial(
                    batcher.run, target=self.target)
                out = denoise(self.model, layout, sampler, seed, on_step, req.should_stop,
                              syntax_ok, run)
            except WorkerClosed:
                pass  # it ended after the engine handed it out (closed, or retired by new
                # settings) and never took this pass: the pass runs alone, from its start
        if out is None:
            # alone: without batching, or with a context cache (its store is this request's)
            with holding(engine._alone, req.should_stop):  # stopped while waiting too
                began = time.perf_counter()
                out = denoise(self.model, layout, sampler, seed, on_step, req.should_stop,
                              syntax_ok, forward=cache)
                engine.alone_stats.count_passes(out.steps, len(out.span_ids))
                engine.alone_stats.requests += 1
                # a target's run is timed for the load factor (in the worker each pass is):
                # all of it, its sampler's steps and checks too (~1.1x the predicted
                # passes on a quiet CPU, under the factor's threshold)
                predicted = None if self.target is None else self.target.predicted_ms
                if predicted is not None:
                    engine.load_factor.note((time.perf_counter() - began) * 1000,
                                            out.steps * predicted)
        self.passes += out.steps
        return out

    def candidates(self, out: Denoised, path: str) -> list[Candidate]:
        """Decode and validate each row of a denoising run; the bytes a row holds that make
        no whole character, and the control characters it may not write, are left out of
        its text, and the positions holding them that its text would show kept (`broken`)."""
        found = []
        for ids, score in zip(out.span_ids.tolist(), out.scores.tolist(), strict=True):
            text = self.fill_text(ids)
            verdict = self.validate(text)
            broken = self.flawed(ids, text)
            found.append(Candidate(text, verdict.valid if verdict else None, score,
                                   self.used(ids), path,
                                   ids, verdict, tuple(broken),
                                   ended=self.content_length(ids) < len(ids)))
        return found

    def repair(self, candidates: list[Candidate], cfg: RepairConfig, sampler: SamplerConfig,
               seed: int, syntax: bool = True) -> list[Candidate]:
        """Re-mask what the new syntax errors point at (with `syntax`) and the tokens whose
        text the fill leaves out (`Candidate.broken`), and denoise them again, best
        candidate first, until one is whole (and valid) or `cfg.rounds` rounds are spent."""
        def mended(c: Candidate) -> bool:
            return not c.broken and (c.valid or not syntax)

        candidates = sorted(candidates, key=lambda c: -c.score)
        for index, candidate in enumerate(candidates):
            first = candidate
            while (self.repair_rounds < cfg.rounds and not mended(candidate)
                   and self.affords(min(sampler.steps, 2 * cfg.margin + 1))):
                fixed = self._repair_once(candidate, cfg, sampler, seed + self.repair_rounds,
                                          syntax)
                self.repair_rounds += 1
                if fixed is None:
                    break
                candidate = candidates[index] = fixed
            if not mended(candidate) and _parses(first) and not _parses(candidate):
                # rewriting a name nothing defines broke the syntax: the fill that parsed
                # is the better offer (`ifgpa > 3.0:` for `if gpa > 3.0:`)
                candidates[index] = first
            if mended(candidate) or self.repair_rounds >= cfg.rounds:
                break
        return candidates

    def _repair_once(self, candidate: Candidate, cfg: RepairConfig, sampler: SamplerConfig,
                     seed: int, syntax: bool = True, kept: int = 0) -> Candidate | None:
        """One repair round of `candidate`: the tokens its errors point at, and those
        around them, masked and written again.  The first `kept` positions are never
        masked: a hinted pass's hint (`_begun_with`), which the code asks for.  Its repair
        wrote `for e in t:` (`t` an int) as `for s in l:`, no longer binding the `e`
        the code below reads, and the fill was dropped (HumanEval/52)."""
        model, layout = self.model, self.layout
        ids = list(candidate.ids)
        offsets = token_offsets(model.tokenizer, ids[:self.content_length(ids)], self.leave_out)
        used = len(offsets) - 1
        head = len(layout.head)
        protected = next((i for i, at in enumerate(offsets) if at >= head), used) if head else 0
        start = self.req.start
        # error ranges of the filled document, moved into the decoded span's coordinates
        raw = self.raw_text(ids)
        check = candidate.check if syntax else None
        errors = [] if check is None or check.valid else [
            (raw_offset(raw, candidate.text, a - start) + head,
             raw_offset(raw, candidate.text, b - start) + head) for a, b in check.new_ranges]
        # a token the fill's text leaves out is to blame as a syntax error's token is
        blamed = culprits(offsets, used, kept, errors, ids) + [
            (i, ids[i]) for i in candidate.broken if i >= kept]
        # a token blamed again after a round that could rewrite it came back unchanged:
        # the same context gives the same greedy choice, so the next round may not write it;
        # nor one a check shows wrong wherever it stands (`spelled_keywords`), from the first
        certain = spelled_keywords(model.tokenizer, blamed, check.names) if check else []
        self.banned += [c for c in blamed
                        if (c in self.blamed or c in certain) and c not in self.banned]
        self.blamed.update(blamed)
        # The token that carries the head (` #` after `x = `) is at fault: write it again too;
        # the sampler then spells the head anew, as on a first pass (HeadChain).
        reopened = range(protected) if any(i < protected for i, _ in blamed) else range(0)
        protected = 0 if reopened else protected
        fixed = max(protected, kept)  # positions never masked
        if any(b >= head + len(raw) - 1 for _, b in errors):  # broken where the fill ends:
            errors += [(head + i, head + i + 1) for i in unmatched_openers(raw)]  # the cause?
        margin = range(-cfg.margin, cfg.margin + 1)
        around_broken = {i + d for i in candidate.broken for d in margin
                         if fixed <= i + d < len(ids)}
        chosen = sorted(set(positions_to_remask(offsets, used, fixed, errors, len(ids),
                                                cfg.margin)) | around_broken | set(reopened))
        if not chosen:
            return None
        for i in chosen:
            ids[i] = model.mask_id
        again = replace(layout, init_ids=tuple(ids), n_masked=len(ids), head_tokens=protected,
                        banned=layout.banned + tuple(self.banned))
        # a second round explores: the same context would give the same greedy tokens
        temperature = sampler.temperatures[0] if self.repair_rounds == 0 else max(
            sampler.temperatures[0], CANDIDATE_TEMPERATURE)
        steps = max(1, min(sampler.steps, len(chosen)))
        out = self.denoise(again, replace(sampler, steps=steps, temperatures=(temperature,)),
                           seed)
        [fixed] = self.candidates(out, REPAIR)
        return fixed
