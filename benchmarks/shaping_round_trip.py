"""The oracle round trip of fill shaping: code the document had, written back, unchanged.

Every multi-line fill is shaped before it is offered (`passes.shape_fill`: moved to the
cursor's column, re-indented, cut to whole units), by heuristics written against the
cases someone thought of.  One property holds whatever the heuristics: when the model
writes exactly the code the document had at a span (the oracle fill), at the columns
the document had it, shaping gives it back unchanged.  This samples such spans from
real files and counts the fills that do not come back whole, by the step that changed
them, with a few diffs of each.

A span is a run of whole sibling statements (members) of a block: its first starts a
line, its last ends one, as an editor user deletes code to write it again.  Each is
asked for three ways (`MODES`): the cursor on the blank line left behind, at the
block's indentation (an editor that indents; the fill is the run without its first
line's indentation); a hole marker there (`<FILL>`); the cursor at column 0 of that
line (an editor that does not; the fill is the run with all its indentation).

Two differences are shaping's on purpose (`Outcome.documented`): a blank line's
whitespace is dropped, and a file with no indented line gets the default indentation
(four spaces; Go's tabs; a fill's own tabs, where it is indented with them), not the
fill's.  Spans with a line whose indentation
carries no level are counted apart (`EXCEPTIONS`): a line inside a multi-line
string, a block comment or a heredoc, a preprocessor directive, a label, a Python
line inside brackets.

    python benchmarks/shaping_round_trip.py DIR_OR_FILE... [--per-language 300] [--seed 0]

Files are found by extension (shell scripts without one by their `#!` line); a file
that does not parse cleanly is passed over (its oracle is not valid code).  The fills
are shaped as the engine shapes a model's (`offered`); tests/test_round_trip.py checks
that they are the engine's own, with a planted model, on fixtures/.
"""

from __future__ import annotations

import argparse
import difflib
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.indentation import (
    _bracket_depths,
    _line_comments,
    detect_indent,
    to_cursor_column,
)
from dlm_lsp.passes import checked_span, checked_text, reindented, shape_fill, shown_style
from dlm_lsp.policy import MULTI_LINE, local_text, plan_span
from dlm_lsp.results import InfillRequest
from dlm_lsp.span import borrowed_line_break
from dlm_lsp.syntax import (
    _BODIES,
    _container,
    _Doc,
    _grammar,
    _members,
    _parse,
    free_lines,
)
from dlm_lsp.units import truncate_to_units
from dlm_lsp.validation import LANGUAGES, language_for

HOLE = "<FILL>"
# how a span is asked for: the cursor at the block's column, a hole there, column 0
MODES = ("cursor", "hole", "column-0")
MAX_LINES = 10  # a span's lines, at most
MAX_CHARS = 320  # and its characters
MAX_RUN = 4  # sibling statements a span takes, at most
MAX_FILE = 200_000  # characters: larger files are passed over (parsing costs)
SPAN_TOKENS = 128  # a request's length, as the server's maxSpanTokens default
# Nodes whose members are statements, besides syntax._BODIES and the root, by language:
# the bodies of shell's `if` and `else`, Ruby's `then`, `else`, `do` and `{ }`, Kotlin's
# lambdas, Scala 3's indented blocks.
_MORE_BODIES = {"bash": {"if_statement", "elif_clause", "else_clause"},
                "ruby": {"then", "else", "do", "block_body", "ensure"},
                "kotlin": {"lambda_literal"}, "scala": {"indented_block"}}
# Lines whose indentation carries no level, by what they start inside of or are.
EXCEPTIONS = ("string", "comment", "heredoc", "preprocessor", "label", "python brackets")
_TEXT_NODES = {"heredoc": "heredoc", "comment": "comment", "string": "string",
               "text_block": "string"}  # by what a node's type holds


@dataclass(frozen=True)
class Span:
    """Whole lines of a file that hold a run of sibling statements: `text[start:end]`."""

    path: str
    language: str  # canonical
    text: str
    start: int  # the first line's start
    end: int  # the last line's end (before its line break)
    exception: str | None = None  # why it is counted apart (EXCEPTIONS), if it is

    @property
    def indent(self) -> str:
        line = self.text[self.start:self.end]
        return line[:len(line) - len(line.lstrip(" \t"))]

    @property
    def line(self) -> int:
        return self.text.count("\n", 0, self.start) + 1


@dataclass(frozen=True)
class Ask:
    """One way of asking for a span: the document, the request's range, the oracle fill."""

    mode: str
    document: str
    start: int
    end: int
    fill: str
    is_hole: bool


def ask(span: Span, mode: str) -> Ask:
    """The document with the span taken out, as `mode` leaves it, and the oracle fill."""
    text, start, end, indent = span.text, span.start, span.end, span.indent
    if mode == "column-0":
        return Ask(mode, text[:start] + text[end:], start, start, text[start:end], False)
    at = start + len(indent)
    marker = HOLE if mode == "hole" else ""
    return Ask(mode, text[:at] + marker + text[end:], at, at + len(marker), text[at:end],
               mode == "hole")


def request(span: Span, asked: Ask, length: int = SPAN_TOKENS) -> InfillRequest:
    """The engine's request for `asked`, `length` tokens long: repair and the retry off, as
    the tests plant fills (its length changes nothing of the shaping)."""
    return InfillRequest(asked.document, asked.start, asked.end, span.language,
                         Path(span.path).absolute().as_uri(),
                         InfillOptions(length=length, steps=4, repair_rounds=0,
                                       fallback=False),
                         is_hole=asked.is_hole)


def offered(req: InfillRequest, fill: str) -> str:
    """The fill the engine offers when its model writes `fill` at `req`: the engine's own
    steps (`Engine._infill`, `InfillRun.raw_text`, `passes.shape_fill`), without a model."""
    language = language_for(req.language_id, req.uri)
    plan = plan_span(req.text, req.start, req.end, ServerConfig(), req.options, None,
                     req.is_hole, language)
    tail = borrowed_line_break(req.text[:req.end], req.text[req.end:])
    local = None if plan.single_line else local_text(req.text, req.start, req.end)
    raw = fill.split("\n", 1)[0] if plan.single_line else fill
    return shape_fill(raw, req, plan, tail, language, local, shown_style(req, language))


def stages(req: InfillRequest, fill: str) -> list[tuple[str, str]]:
    """The fill after each of shape_fill's steps, by name: which one changed it."""
    language = language_for(req.language_id, req.uri)
    plan = plan_span(req.text, req.start, req.end, ServerConfig(), req.options, None,
                     req.is_hole, language)
    if plan.kind != MULTI_LINE:
        return [("single-line plan", fill.split("\n", 1)[0])]
    local = local_text(req.text, req.start, req.end)
    if local is None:  # the span's line runs past policy.LOCAL_CHARS: shaped by the text
        return [("no lines around the span", fill)]
    lines, low = local
    moved = to_cursor_column(fill, lines, req.start - low, req.end - low, language)
    shown = shown_style(req, language)  # a notebook's other cells' indentation
    again = reindented(moved, req, language, (lines, low), shown=shown)
    start, end = checked_span(req)
    cut = truncate_to_units(checked_text(lines, req, low), start - low, end - low, again,
                            language)
    return [("to_cursor_column", moved), ("reindent", again), ("truncate_to_units", cut)]


# --- choosing spans -------------------------------------------------------------------------


def _ends_line(doc: _Doc, node: Node) -> bool:
    end = doc.data.find(b"\n", node.end_byte)
    return not doc.data[node.end_byte:len(doc.data) if end == -1 else end].strip()


def _blocks(root: Node, language: str) -> Iterator[Node]:
    more = _MORE_BODIES.get(language, set())
    stack = [root]
    while stack:
        node = stack.pop()
        if node is root or node.type in _BODIES or node.type in more:
            yield node
        stack.extend(node.named_children)


def runs(doc: _Doc, language: str) -> Iterator[tuple[int, int]]:
    """(start, end) byte offsets of the whole lines each run of sibling members takes."""
    for block in _blocks(doc.root, language):
        members = _members(block)
        for i, first in enumerate(members):
            if not doc.starts_line(first):
                continue
            for last in members[i:i + MAX_RUN]:
                if _ends_line(doc, last):
                    start = first.start_byte - first.start_point.column
                    end = doc.data.find(b"\n", last.end_byte)
                    yield start, len(doc.data) if end == -1 else end


def exception(doc: _Doc, start: int, end: int, language: str) -> str | None:
    """Why a span's lines (bytes `start` to `end`) are counted apart (EXCEPTIONS), or None."""
    line = start
    while line < end:
        code = line + len(doc.data[line:end]) - len(doc.data[line:end].lstrip(b" \t"))
        node: Node | None = doc.root.descendant_for_byte_range(code, code)
        while node is not None:
            kind = next((k for part, k in _TEXT_NODES.items() if part in node.type), None)
            if kind is not None and node.start_byte < line:
                return kind
            if node.start_byte == code and node.type.startswith("preproc"):
                return "preprocessor"
            if node.start_byte == code and node.type in ("labeled_statement",
                                                         "statement_identifier"):
                return "label"
            node = node.parent
        if language == "python" and line > start and _container(doc, line) is not None:
            return "python brackets"
        following = doc.data.find(b"\n", line, end)
        line = end if following == -1 else following + 1
    return None


def parsed_file(path: Path, language: str, text: str | None = None) -> tuple[str, _Doc] | None:
    """A file's text (`text`, else read) and its parse; None for a file that cannot be
    read, does not parse cleanly, holds a hole marker or `\r`, or is too large."""
    grammar = _grammar(language)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    if grammar is None or len(text) > MAX_FILE or "\r" in text or HOLE in text:
        return None
    doc = _parse(grammar[1], text)
    return None if doc.root.has_error else (text, doc)


def spans(path: Path, language: str, text: str | None = None) -> list[Span] | None:
    """The spans of a file (`text`, else read), each with its exception if any; None for
    a file that does not parse cleanly, holds a hole marker or `\\r`, or is too large."""
    read = parsed_file(path, language, text)
    if read is None:
        return None
    text, doc = read
    found: dict[tuple[int, int], Span] = {}
    for start, end in runs(doc, language):
        lines = doc.data[start:end]
        if (start, end) in found or lines.count(b"\n") >= MAX_LINES or not lines.strip():
            continue
        span = Span(str(path), language, text, doc.char(start), doc.char(end),
                    exception(doc, start, end, language))
        if span.end - span.start <= MAX_CHARS:
            found[start, end] = span
    return list(found.values())


def language_of(path: Path) -> str | None:
    """The canonical language of a file: by extension, a shell script by its `#!` line."""
    found = language_for(None, str(path))
    if found is not None or path.suffix:
        return found
    try:
        with path.open("rb") as handle:
            first = handle.readline(80).rstrip()
    except OSError:
        return None
    return "bash" if first.startswith(b"#!") and first.endswith((b"/sh", b"bash")) else None


def corpus(roots: list[str]) -> dict[str, list[Path]]:
    """The files under `roots` by canonical language, sorted (the sample is reproducible)."""
    found: dict[str, list[Path]] = defaultdict(list)
    for root in map(Path, roots):
        paths = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file())
        for path in paths:
            language = None if path.is_symlink() else language_of(path)
            if language is not None:
                found[language].append(path)
    return {language: sorted(paths) for language, paths in found.items()}


def sample(files: list[Path], language: str, count: int, rng: random.Random,
           per_file: int = 3) -> list[Span]:
    """`count` spans of `language`, at most `per_file` a file, files in a seeded order."""
    order = list(files)
    rng.shuffle(order)
    chosen: list[Span] = []
    for path in order:
        if len(chosen) >= count:
            break
        found = spans(path, language)
        if found:
            chosen += rng.sample(found, min(per_file, len(found), count - len(chosen)))
    return chosen


# --- a model that nests by four spaces ------------------------------------------------------


def in_fours(fill: str, document: str, start: int, unit: str, language: str = "python",
             kept: frozenset[int] = frozenset()) -> str:
    """`fill`, at `start` of `document`, as a model that nests by four spaces writes it
    where the document nests by `unit` (two spaces, a tab): its first line where the
    document has it (the cursor's line goes on with it), and each line below, past that
    line's whitespace, `unit` a level, written four spaces a level, what is left over
    kept.  A line after a backslash, or in Python inside brackets, is an alignment, no
    level: it moves as its statement's line did, where both are led by spaces
    (notebook_round_trip's `reindented_by` moved it so).  Elsewhere a line inside
    brackets is written by levels too: a formatter's hanging indent is one (prettier's,
    gofmt's), and a block in a call's lambda is levels.  The `kept` lines (indexes into
    `fill.split("\n")`: a string's, a heredoc's, a block comment's inner lines, a
    directive; `kept_lines`) are no level and stay as they are."""
    first = document[document.rfind("\n", 0, start) + 1:start] + fill.split("\n", 1)[0]
    base = first[:len(first) - len(first.lstrip(" \t"))]
    comments = _line_comments(language)
    out, depth, above, moved = [], 0, "", 0  # moved: how far the statement's line moved
    for index, line in enumerate(fill.split("\n")):
        if index in kept:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip(" \t"))]
        continued = depth > 0 or above.rstrip().endswith("\\")
        if line.strip():
            above = line
            if language == "python":
                depth += _bracket_depths(line, comments)[1]
        if continued and line.strip() and "\t" not in lead:
            out.append(" " * max(0, len(lead) + moved) + line[len(lead):])
            continue
        if index == 0 or continued or not line.strip() or not lead.startswith(base):
            moved = 0
            out.append(line)
            continue
        rest, levels = lead[len(base):], 0
        while rest.startswith(unit):
            rest, levels = rest[len(unit):], levels + 1
        written = base + "    " * levels + rest
        moved = len(written) - len(lead) if "\t" not in written else 0
        out.append(written + line[len(lead):])
    return "\n".join(out)


def kept_lines(text: str, start: int, end: int, fill: str, language: str) -> frozenset[int]:
    """The lines of `fill`, in place of `text[start:end]`, that `in_fours` keeps as they
    are: those whose indentation is no level (`syntax.free_lines`), but a comment line
    that starts a comment (`//`, `#`, `/*`): the model writes it at its level."""
    free = free_lines(text, start, end, fill, language)
    starts = ("/*", *_line_comments(language))
    lines = fill.split("\n")
    return frozenset(set(free.literal) | {index for index in free.passive
                                          if not lines[index].lstrip().startswith(starts)})


# --- the round trip -------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One span asked one way, and the document with the offered fill in it."""

    span: Span
    asked: Ask
    got: str

    @property
    def identical(self) -> bool:
        return self.got == self.span.text

    @property
    def documented(self) -> bool:
        """Different only as shaping means to be: a blank line's whitespace dropped (a line
        of spaces is noise, `indentation.reindent`), or, in a file with no indented line,
        the default indentation for the fill's (`indentation.detect_indent`; a fill
        indented with tabs keeps them)."""
        if _bare_blank_lines(self.got) == _bare_blank_lines(self.span.text):
            return True
        document = self.asked.document
        unindented = not any(line[:1] in (" ", "\t") for line in document.split("\n")
                             if line.strip())
        return unindented and _stripped(self.got) == _stripped(self.span.text) and (
            not detect_indent(document, self.span.language).measured)


def _bare_blank_lines(text: str) -> list[str]:
    return [line if line.strip() else "" for line in text.split("\n")]


def _stripped(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n")]


def round_trip(span: Span, mode: str) -> Outcome:
    asked = ask(span, mode)
    fill = offered(request(span, asked), asked.fill)
    return Outcome(span, asked, asked.document[:asked.start] + fill + asked.document[asked.end:])


def cause(outcome: Outcome) -> str:
    """The step that changed the fill, and how: cut, moved (whitespace only), or changed."""
    fill = outcome.asked.fill
    for name, after in stages(request(outcome.span, outcome.asked), fill):
        if after != fill:
            if _stripped(after) == _stripped(fill):
                return f"{name}: moved"
            return f"{name}: {'cut' if fill.startswith(after.rstrip()) else 'changed'}"
        fill = after
    return "the borrowed line break"


def diff(outcome: Outcome, context: int = 2) -> str:
    lines = difflib.unified_diff(outcome.span.text.split("\n"), outcome.got.split("\n"),
                                 "expected", "offered", n=context, lineterm="")
    return "\n".join(lines)


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    """One language's counts: spans; fills held to the round trip (not excepted), those
    identical, different as shaping means to be (documented) and differing; the
    excepted fills and how many of them came back identical all the same."""
    held = [o for o in outcomes if o.span.exception is None]
    excepted = [o for o in outcomes if o.span.exception is not None]
    return {"spans": len({(o.span.path, o.span.start, o.span.end) for o in outcomes}),
            "asked": len(held),
            "identical": sum(o.identical for o in held),
            "documented": sum(o.documented and not o.identical for o in held),
            "differing": sum(not o.documented for o in held),
            "excepted": len(excepted),
            "excepted identical": sum(o.identical for o in excepted)}


def print_examples(examples: dict[str, list[Outcome]], count: int) -> None:
    """The differing fills by cause, most first: `count` diffs of each."""
    for key, found in sorted(examples.items(), key=lambda item: -len(item[1])):
        print(f"\n### {key}: {len(found)} fills\n")
        for outcome in found[:count]:
            print(f"{outcome.span.path}:{outcome.span.line}, {outcome.asked.mode}")
            print(diff(outcome), end="\n\n")


def checked_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse roots that are not there and languages no grammar has, and read language
    names in any case (the tables spell them `Python`): either gave an empty table and
    status 0, which read as a run with nothing to report."""
    missing = [root for root in args.roots if not Path(root).exists()]
    if missing:
        parser.error(f"no such file or directory: {', '.join(missing)}")
    if args.languages:
        args.languages = [name.lower() for name in args.languages]
        unknown = [name for name in args.languages if name not in LANGUAGES]
        if unknown:
            parser.error(f"no grammar for {', '.join(unknown)}; one of: "
                         f"{', '.join(sorted(LANGUAGES))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="directories or files to sample")
    parser.add_argument("--per-language", type=positive, default=300, help="spans a language")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=2, help="diffs shown per cause")
    parser.add_argument("--languages", nargs="*", help="only these (canonical names)")
    args = parser.parse_args(argv)
    checked_arguments(parser, args)
    files = corpus(args.roots)
    print("| language | files | spans | fills | identical | documented | differing "
          "| excepted: identical / fills |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    examples: dict[str, list[Outcome]] = defaultdict(list)
    for language in sorted(files):
        if args.languages and language not in args.languages:
            continue
        chosen = sample(files[language], language, args.per_language,
                        random.Random(f"{args.seed}:{language}"))
        outcomes = [round_trip(span, mode) for span in chosen for mode in MODES]
        for outcome in outcomes:
            if outcome.span.exception is None and not outcome.documented:
                examples[f"{language}, {cause(outcome)}"].append(outcome)
        n = tally(outcomes)
        print(f"| {language} | {len(files[language])} | {n['spans']} | {n['asked']} "
              f"| {n['identical']} | {n['documented']} | {n['differing']} "
              f"| {n['excepted identical']} / {n['excepted']} |", flush=True)
    print_examples(examples, args.examples)
    return 0


if __name__ == "__main__":
    run_script(main)
