"""The oracle round trip of the other requests: single-line fills, holes, rewrites, items.

benchmarks/shaping_round_trip.py holds multi-line fills at a blank line to one property:
a model that writes exactly the code the document had at a span gets it back unchanged.
The other requests an editor sends take other paths (the length policy and span hints
read a cursor after code as a single-line fill, cut at its first line break, and the
end of a line that opens a block as a multi-line one; a hole in a line is single-line
too; a selection is a rewrite, shaped without the unit cut; a completion item replaces
the word before the cursor), and are held to the same property here: the document the
user gets, with the edit the server returns applied, is the document as it was.  Sites
are sampled from real files, by kind (`KINDS`):

- line-end: the cursor after code on a line, at the start of a token; the rest of the
  line is the fill (`total = sum(` and `xs)`).
- mid-line: a named node inside one line with code either side (`sum(|xs|) + 1`); the
  cursor at its start, the node the fill.
- mid-line-hole: that node as a `<FILL>` marker (`x = <FILL>(y)`).
- after-header: the cursor at the end of a line that opens a block (`{`, Python's `:`,
  Ruby's `def g`, shell's `then`) with a run of the block's statements below it taken
  out: the fill is a line break and those lines (multi-line, cut to units).
- rewrite-lines: a run of whole sibling statements (shaping_round_trip's spans)
  selected from column 0 to the end of its last line; rewrite-line-break: to the start
  of the next line (an editor's whole-line selection); rewrite-code: from its first
  code character (a selection the mouse makes).
- rewrite-mid: a named node that starts or ends inside a line (an expression, an
  argument list, a block's body between its braces), on one line or several.
- expand: a token in the middle of a statement, grown by `dlm.rewriteSelection`'s
  `expand` (`syntax.enclosing_node_range`), then rewritten.
- completion: the cursor inside a word, the rest of the line the fill, offered as the
  completion item `protocol.completion_items` makes (the word replaced by the word and
  the fill), its edit applied at its LSP range.
- inline: the line-end sites offered as ghost text (`protocol.inline_items`: its
  insertText at its range); inline-selected: at the completion sites with the word's
  completion item selected (the fill made after the whole word, as the server makes
  it, and offered as the item's text and the fill over the item's range).

A single-line site's fill is one line (the model's text is cut at its first line
break); a rewrite's is the selection as the model writes it (without the line break the
suffix is shown with: `span.borrowed_line_break`).  Fills are made as the engine makes
them, without a model (`shaping_round_trip.offered`); tests/test_request_round_trip.py
checks that they are the engine's own.  As there, a blank line's whitespace dropped and
an unindented file's default indentation are documented, and sites whose lines'
indentation shaping reads (after-header, the rewrites) are counted apart when a line
of them carries no level (`shaping_round_trip.EXCEPTIONS`).  A difference is put down
to the step that made it (`stages`).

With `--in-fours` the model writes four spaces a level, as the shipped model and most
published ones do, in the files whose own unit is another (two spaces, eight, a tab:
`not_in_fours`): the code below the fill's first line nested by four
(`shaping_round_trip.in_fours`; the lines whose indentation is no level as the file has
them, `kept_lines`), at the requests whose fill is lines (`FOURS_KINDS`: the blank
line's three modes at the rewrite-lines sites, after-header, the whole-line rewrites).
The file must still come back as it was; a differing fill's cause says whether the fill
showed the step it nests by (`shows_its_step`).

    python benchmarks/request_round_trip.py DIR_OR_FILE... [--per-language 200]
        [--kinds line-end rewrite-mid ...] [--seed 0] [--in-fours]

The sites of all the kinds asked are drawn in one seeded sequence, so `--kinds` draws
another sample than the default (all kinds), which benchmarks/results/ reports.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from lsprotocol import types
from pygls.workspace import TextDocument
from shaping_round_trip import (
    HOLE,
    MAX_CHARS,
    MAX_LINES,
    MODES,
    Ask,
    Outcome,
    Span,
    checked_arguments,
    corpus,
    exception,
    in_fours,
    kept_lines,
    offered,
    parsed_file,
    print_examples,
    request,
    runs,
)
from shaping_round_trip import ask as ask_blank_line
from tree_sitter import Node

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import ServerConfig
from dlm_lsp.documents import _in_word, _lines, apply_change, word_before
from dlm_lsp.indentation import (
    _code_end,
    _line_comments,
    _opens_keyword_block,
    detect_indent,
    place_literals,
    to_cursor_column,
)
from dlm_lsp.passes import (
    checked_span,
    checked_text,
    fill_free_lines,
    reindented,
    shown_style,
)
from dlm_lsp.policy import MULTI_LINE, local_text, plan_span
from dlm_lsp.protocol import completion_items, inline_items
from dlm_lsp.results import InfillRequest
from dlm_lsp.span import borrowed_line_break
from dlm_lsp.syntax import _Doc, enclosing_node_range
from dlm_lsp.units import truncate_to_units
from dlm_lsp.validation import language_for

LINE_END, MID_LINE, MID_LINE_HOLE = "line-end", "mid-line", "mid-line-hole"
AFTER_HEADER = "after-header"
REWRITE_LINES, REWRITE_LINE_BREAK, REWRITE_CODE = (
    "rewrite-lines", "rewrite-line-break", "rewrite-code")
REWRITE_MID, EXPAND = "rewrite-mid", "expand"
COMPLETION, INLINE, INLINE_SELECTED = "completion", "inline", "inline-selected"
KINDS = (LINE_END, MID_LINE, MID_LINE_HOLE, AFTER_HEADER, REWRITE_LINES, REWRITE_LINE_BREAK,
         REWRITE_CODE, REWRITE_MID, EXPAND, COMPLETION, INLINE, INLINE_SELECTED)
# the blank line's requests (shaping_round_trip.MODES), asked at the rewrite-lines sites
BLANK_LINE = tuple(f"blank-line {mode}" for mode in MODES)
# the kinds asked with the model in four spaces (--in-fours): those whose fill is lines
FOURS_KINDS = (*BLANK_LINE, AFTER_HEADER, REWRITE_LINES, REWRITE_LINE_BREAK, REWRITE_CODE)
# kinds asked at another's sites
_SITES = {MID_LINE_HOLE: MID_LINE, REWRITE_LINE_BREAK: REWRITE_LINES,
          REWRITE_CODE: REWRITE_LINES, INLINE: LINE_END, INLINE_SELECTED: COMPLETION,
          **dict.fromkeys(BLANK_LINE, REWRITE_LINES)}
# sites whose lines' indentation shaping reads: counted apart with an exception
_LEVELS = (AFTER_HEADER, REWRITE_LINES, REWRITE_MID, EXPAND)
_WORD = re.compile(r"[^\W\d]\w*")  # a word a completion item is filtered by
MAX_SINGLE = 80  # characters of a single-line site's fill, at most


@dataclass(frozen=True)
class Site:
    """Where a request is made in a file: `text[start:end]`, the code the model writes."""

    span: Span  # the text, and the lines the site takes (start, end: for exceptions, diffs)
    start: int
    end: int


# --- choosing sites -------------------------------------------------------------------------


def _leaves(node: Node):
    """The tokens under `node`, left to right (a comment or string counts as one)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if node.child_count == 0 or "string" in node.type or "comment" in node.type:
            yield node
        else:
            stack.extend(reversed(node.children))


def _named(node: Node):
    stack = [node]
    while stack:
        node = stack.pop()
        if node.is_named and node.parent is not None:
            yield node
        stack.extend(node.named_children)


def _line_of(text: str, start: int, end: int) -> tuple[int, int]:
    """The start of `start`'s line and the end of `end`'s."""
    low = text.rfind("\n", 0, start) + 1
    high = text.find("\n", end)
    return low, len(text) if high == -1 else high


def _opens_block(line: str, language: str) -> bool:
    """Whether a line ends in what opens a block below it: `{`, Python's `:`, a keyword
    head its language closes with a keyword (Ruby's `def g`, shell's `then`)."""
    comments = _line_comments(language)
    code = line[:_code_end(line, comments)].rstrip()
    return code.endswith(":" if language == "python" else "{") or _opens_keyword_block(
        code, language)


@dataclass(frozen=True)
class Sites:
    """A parsed file and its sites by kind, as (start, end) character offsets (KINDS; a
    kind asked at another's sites has none of its own)."""

    path: str
    language: str
    doc: _Doc
    found: dict[str, list[tuple[int, int]]]

    def site(self, kind: str, start: int, end: int) -> Site | None:
        """A site, with the exception (shaping_round_trip.EXCEPTIONS) of its lines if
        shaping reads their indentation.  An expand site's token is grown first, as
        `expand` grows it: None if that is past MAX_LINES or MAX_CHARS."""
        text = self.doc.text
        if kind == EXPAND:
            start, end = enclosing_node_range(text, start, end, self.language) or (start, end)
            if text.count("\n", start, end) >= MAX_LINES or end - start > MAX_CHARS:
                return None
        low, high = _line_of(text, start, end)
        why = None
        if kind in _LEVELS:
            why = exception(self.doc, self.doc.byte(low), self.doc.byte(high), self.language)
        return Site(Span(self.path, self.language, text, low, high, why), start, end)


def sites(path: Path, language: str, text: str | None = None) -> Sites | None:
    """The sites of a file; None for a file that does not parse cleanly, holds a hole
    marker or `\\r`, or is too large."""
    read = parsed_file(path, language, text)
    if read is None:
        return None
    text, doc = read
    found: dict[str, dict[tuple[int, int], None]] = defaultdict(dict)
    for leaf in _leaves(doc.root):
        at = doc.char(leaf.start_byte)
        low, high = _line_of(text, at, at)
        before, rest = text[low:at], text[at:high]
        if before.strip() and rest.strip() and len(rest) <= MAX_SINGLE:
            found[LINE_END][at, high] = None
            end = doc.char(leaf.end_byte)
            if end - at > 1 and _WORD.fullmatch(text[at:end]):
                found[COMPLETION][at + 1 + (end - at - 1) // 2, high] = None
    for node in _named(doc.root):
        start, end = doc.char(node.start_byte), doc.char(node.end_byte)
        if end <= start or node.is_error or node.is_missing:
            continue
        low, high = _line_of(text, start, end)
        starts, ends = not text[low:start].strip(), not text[end:high].strip()
        if "\n" not in text[start:end] and not starts and not ends and end - start <= MAX_SINGLE:
            found[MID_LINE][start, end] = None
        if (not starts or not ends) and text.count("\n", start, end) < MAX_LINES and (
                end - start <= MAX_CHARS):
            found[REWRITE_MID][start, end] = None
    for start, end in runs(doc, language):
        lines = doc.data[start:end]
        if lines.count(b"\n") < MAX_LINES and lines.strip() and end - start <= MAX_CHARS:
            first, last = doc.char(start), doc.char(end)
            found[REWRITE_LINES][first, last] = None
            header = text.rfind("\n", 0, first - 1) + 1
            if first > 0 and _opens_block(text[header:first - 1], language):
                found[AFTER_HEADER][first - 1, last] = None  # from the header line's end
        # a token in the middle of the run's first statement, which `expand` grows
        code = start + len(lines) - len(lines.lstrip(b" \t"))
        first_token = statement = doc.root.descendant_for_byte_range(code, code)
        while (statement.parent is not None
               and statement.parent.start_byte == first_token.start_byte):
            statement = statement.parent
        tokens = [leaf for leaf in _leaves(statement) if leaf.end_byte > leaf.start_byte]
        if tokens:
            token = tokens[len(tokens) // 2]
            found[EXPAND][doc.char(token.start_byte), doc.char(token.end_byte)] = None
    return Sites(str(path), language, doc, {kind: list(f) for kind, f in found.items()})


# --- asking ----------------------------------------------------------------------------------


def ask(site: Site, kind: str) -> Ask:
    """The document as `kind` leaves it at `site`, the request's range and the fill the
    model writes there (see the module docstring).  A completion site's range is the
    cursor; for inline-selected, the document is the one the server fills: the word's
    completion item applied (`DlmServer.fill_range`), the cursor after it."""
    text, start, end = site.span.text, site.start, site.end
    if kind in BLANK_LINE:
        return ask_blank_line(site.span, kind.split(" ", 1)[1])
    if kind == MID_LINE_HOLE:
        return Ask(kind, text[:start] + HOLE + text[end:], start, start + len(HOLE),
                   text[start:end], True)
    if kind == INLINE_SELECTED:
        word_end = _WORD.match(text, _word_start(text, start)).end()
        return Ask(kind, text[:word_end] + text[end:], word_end, word_end,
                   text[word_end:end], False)
    if kind in (LINE_END, MID_LINE, AFTER_HEADER, COMPLETION, INLINE):
        return Ask(kind, text[:start] + text[end:], start, start, text[start:end], False)
    if kind == REWRITE_LINE_BREAK:
        end = min(end + 1, len(text))
    elif kind == REWRITE_CODE:
        line = text[start:end]
        start += len(line) - len(line.lstrip(" \t"))
    fill = text[start:end]
    if borrowed_line_break(text[:end], text[end:]):
        fill = fill[:-1]  # the borrowed line break: shown with the suffix, given back after
    return Ask(kind, text, start, end, fill, False)


def _word_start(text: str, at: int) -> int:
    """Where the word that holds `at` starts (as documents.word_before reads it)."""
    while at > 0 and _in_word(text[at - 1]):
        at -= 1
    return at


def applied(asked: Ask, site: Site, fill: str) -> str:
    """The document the user gets: the server's edit for the offered `fill` applied, at
    its LSP range (the editor's document: for inline-selected, the word as typed, the
    item not applied yet)."""
    if asked.mode not in (COMPLETION, INLINE, INLINE_SELECTED):
        return asked.document[:asked.start] + fill + asked.document[asked.end:]
    text = site.span.text
    document = text[:site.start] + text[site.end:]  # what the user has typed
    doc = TextDocument("file:///round-trip", document)
    cursor = _lines(doc).position(site.start)
    if asked.mode == COMPLETION:
        typed, word = word_before(doc, cursor)
        edits = [item.text_edit for item in completion_items([fill], typed, word)]
    else:
        selected = None
        if asked.mode == INLINE_SELECTED:
            typed, _ = word_before(doc, cursor)
            selected = types.SelectedCompletionInfo(typed, text[_word_start(text, site.start):
                                                                 asked.start])
        edits = [types.TextEdit(item.range, item.insert_text)
                 for item in inline_items([fill], types.Range(cursor, cursor), selected)]
    [edit] = edits
    return apply_change(doc, types.TextDocumentContentChangePartial(edit.range, edit.new_text))


def round_trip(site: Site, kind: str, fours: bool = False) -> Outcome:
    """The file the user gets at `site` asked as `kind`; with `fours`, from a model that
    writes the code nested by four spaces a level (`in_fours`, in a file that is not)."""
    asked = ask(site, kind)
    if fours:
        asked = written_in_fours(asked, site.span.language)
    fill = offered(request(site.span, asked), asked.fill)
    return Outcome(site.span, asked, applied(asked, site, fill))


def written_in_fours(asked: Ask, language: str) -> Ask:
    """`asked` with the fill a model nesting by four spaces writes in place of the file's
    code (`shaping_round_trip.in_fours`, on the file's unit): the lines whose indentation
    is no level as the file has them (`kept_lines`)."""
    unit = detect_indent(asked.document, language).unit
    kept = kept_lines(asked.document, asked.start, asked.end, asked.fill, language)
    return replace(asked, fill=in_fours(asked.fill, asked.document, asked.start, unit,
                                        language, kept))


def not_in_fours(found: Sites) -> bool:
    """Whether a file nests by another unit than four spaces (two, eight, a tab): where a
    model that writes four spaces a level is re-indented.  A file that shows no unit, or
    GNU style (tabs for 8 columns of levels of two or four), is passed over."""
    style = detect_indent(found.doc.text, found.language)
    return style.measured and not style.gnu and style.unit != "    "


def stages(req: InfillRequest, fill: str) -> list[tuple[str, str]]:
    """The fill after each of shape_fill's steps for this request's plan, by name: which
    one changed it (the single-line cut; to the cursor's column, re-indented, a string's
    lines as written, cut to units for a multi-line plan; the borrowed line break)."""
    language = language_for(req.language_id, req.uri)
    plan = plan_span(req.text, req.start, req.end, ServerConfig(), req.options, None,
                     req.is_hole, language)
    if plan.single_line:
        return [("the single-line cut", fill.split("\n", 1)[0])]
    local = local_text(req.text, req.start, req.end)
    if local is None:  # the span's line runs past policy.LOCAL_CHARS: shaped by the text
        return [("no lines around the span", fill)]
    lines, low = local
    free = fill_free_lines(fill, req, language, local)
    moved = to_cursor_column(fill, lines, req.start - low, req.end - low, language, free)
    shown = shown_style(req, language)  # a notebook's other cells' indentation
    again = reindented(moved, req, language, local, free, shown)
    placed = place_literals(fill, again, lines, req.start - low, req.end - low, free)
    found = [("to_cursor_column", moved), ("reindent", again), ("place_literals", placed)]
    if plan.kind == MULTI_LINE:
        start, end = checked_span(req)
        found.append(("truncate_to_units", truncate_to_units(
            checked_text(lines, req, low), start - low, end - low, placed, language)))
    tail = borrowed_line_break(req.text[:req.end], req.text[req.end:])
    return found + [("the borrowed line break", offered(req, fill))] if tail else found


def cause(outcome: Outcome, fours: bool = False) -> str:
    """The step that changed the fill (see `stages`), or the edit that did; with `fours`
    (the model in four spaces), whether the fill showed the step it nests by."""
    fill, found = outcome.asked.fill, "the edit"
    for name, after in stages(request(outcome.span, outcome.asked), fill):
        if after != fill:
            found = name
            break
        fill = after
    if fours and not shows_its_step(outcome.asked, outcome.span.language):
        return f"{found}, the fill shows no step"
    return found


def shows_its_step(asked: Ask, language: str) -> bool:
    """Whether a fill (with the cursor's line) has a line that opens a block and a deeper
    line right below it: the only evidence of the unit it nests by.  A fill without one
    (a statement and its continuation, a run of statements of one level) is kept as the
    model wrote it."""
    lines = (asked.document[asked.document.rfind("\n", 0, asked.start) + 1:asked.start]
             + asked.fill).split("\n")
    width = [len(line) - len(line.lstrip()) for line in lines]
    return any(_opens_block(lines[i], language) and lines[i + 1].strip()
               and width[i + 1] > width[i] for i in range(len(lines) - 1))


def sample(files: list[Path], language: str, kinds: list[str], count: int,
           rng: random.Random, per_file: int = 3,
           fits: Callable[[Sites], bool] | None = None) -> dict[str, list[Site]]:
    """`count` sites a kind, at most `per_file` a file, files in a seeded order; only in
    the files that `fits` (if given)."""
    order = list(files)
    rng.shuffle(order)
    wanted = {_SITES.get(kind, kind) for kind in kinds}
    chosen: dict[str, list[Site]] = {kind: [] for kind in wanted}
    for path in order:
        if all(len(found) >= count for found in chosen.values()):
            break
        found = sites(path, language)
        if found is None or (fits is not None and not fits(found)):
            continue
        for kind in sorted(wanted):
            options, have = found.found.get(kind, []), chosen[kind]
            picked = rng.sample(options, min(per_file, len(options), count - len(have)))
            have += filter(None, (found.site(kind, start, end) for start, end in picked))
    return {kind: chosen[_SITES.get(kind, kind)] for kind in kinds}


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    held = [o for o in outcomes if o.span.exception is None]
    return {"asked": len(held), "identical": sum(o.identical for o in held),
            "documented": sum(o.documented and not o.identical for o in held),
            "differing": sum(not o.documented for o in held),
            "excepted": len(outcomes) - len(held)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="directories or files to sample")
    parser.add_argument("--per-language", type=positive, default=200, help="sites a kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=2, help="diffs shown per kind")
    parser.add_argument("--languages", nargs="*", help="only these (canonical names)")
    parser.add_argument("--kinds", nargs="*", choices=KINDS + BLANK_LINE,
                        help=f"the kinds asked (default: {' '.join(KINDS)}; with --in-fours, "
                             f"{' '.join(FOURS_KINDS)})")
    parser.add_argument("--in-fours", action="store_true",
                        help="in files that nest by two spaces or tabs, the model writes "
                             "four spaces a level (in_fours)")
    args = parser.parse_args(argv)
    args.kinds = args.kinds or list(FOURS_KINDS if args.in_fours else KINDS)
    checked_arguments(parser, args)
    files = corpus(args.roots)
    print("| language | kind | fills | identical | documented | differing | excepted |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    examples: dict[str, list[Outcome]] = defaultdict(list)
    for language in sorted(files):
        if args.languages and language not in args.languages:
            continue
        chosen = sample(files[language], language, args.kinds, args.per_language,
                        random.Random(f"{args.seed}:{language}"),
                        fits=not_in_fours if args.in_fours else None)
        for kind in args.kinds:
            outcomes = [round_trip(site, kind, args.in_fours) for site in chosen[kind]]
            for outcome in outcomes:
                if outcome.span.exception is None and not outcome.documented:
                    examples[f"{language}, {kind}, {cause(outcome, args.in_fours)}"].append(
                        outcome)
            n = tally(outcomes)
            print(f"| {language} | {kind} | {n['asked']} | {n['identical']} "
                  f"| {n['documented']} | {n['differing']} | {n['excepted']} |", flush=True)
    print_examples(examples, args.examples)
    return 0


if __name__ == "__main__":
    run_script(main)
