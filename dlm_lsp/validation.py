"""Tree-sitter syntax validation of a candidate fill.

A diffusion model proposes text for a span; before the server offers it we parse the
document with the fill in place and ask whether the fill made the syntax *worse*.
Documents being edited are often broken already, so an error only counts against the
fill when no baseline explains it: the document with the span removed, or the original
document (the two are the same text for an insertion).

Errors are the outermost ERROR nodes plus the MISSING nodes outside them, compared as
character ranges of the candidate document, where the fill occupies [start, start+len(fill)):

* Away from the fill, an error is pre-existing when a baseline has one of the same kind
  starting at the same (shifted) place: recovery may resize distant damage, not move it.
* Touching the fill (blanks on the same line count as touching), an error is new unless
  the original document had the same damage -- same kind, same extent, same nested
  errors -- overlapping the replaced text: the fill then sits inside code that was
  already broken.  Damage that merely borders the hole is the fill's to repair, which
  also means an empty fill is invalid where the hole itself is incomplete (`x = |`).
* On the first code line below the fill's, past comments (where line breaks are white
  space, an incomplete line shows its error there), an error is the fill's when the document
  without the span's lines lacks it; where that document and the document as it is
  are both broken there, the line is the user's and the fill is judged as if it were
  blank, by tree-sitter and by CPython (see _Below).
* A fill on one line inside a comment that keeps its end is comment text: it changes
  no code, so the code's errors are the document's (`_comment_text`).
* A fill whose line ends in a backslash (C, C++, shell) or in an operator of its own
  (`const x = a +`, `echo a &&`, every grammar) that takes the user's next line of
  code, a line of its own, into the fill's is refused, though the joined text parses
  (`_joins_next_line`, `_joins_by_operator`); so is the empty fill after the user's
  operator there (`const x = |` over `foo();`), and a fill that ends in a name or a
  closing bracket over a line that a bracket joins to it (`a` over `(b)();`).
"""

from __future__ import annotations

import bisect
import contextlib
import importlib
import itertools
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

from tree_sitter import Language, Node, Parser, Tree

from dlm_lsp.bash_syntax import BashSyntax, bash_for
from dlm_lsp.holes import find_holes
from dlm_lsp.python_returns import ReturnNeed
from dlm_lsp.python_syntax import PythonSyntax, Rejection, broken_alone
from dlm_lsp.trees import ancestors, error_nodes


@dataclass(frozen=True)
class Validation:
    """The verdict on one fill; `valid` is True when unchecked so a missing grammar never blocks."""

    checked: bool
    valid: bool
    language: str | None
    new_errors: tuple[tuple[int, int], ...] = ()  # (line, column) of each new error
    reason: str = ""
    new_ranges: tuple[tuple[int, int], ...] = ()  # character ranges in the filled document
    # a fill that parses, rejected for names it uses (`ParsedDocument.names_checked`):
    # those it reads that nothing defines, or the callees it calls with arguments they
    # cannot take; or the keyword (`return`) that ends a block above code never run
    names: tuple[str, ...] = ()

    @property
    def parses(self) -> bool:
        """Whether the fill is valid syntax, whatever its names: of fills none of which
        is valid, one that parses is the better offer."""
        return self.valid or bool(self.names)


# canonical name -> (grammar module, function returning the language capsule)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "php": ("tree_sitter_php", "language_php"),  # PHP inside HTML, as .php files are
    "bash": ("tree_sitter_bash", "language"),
    "lua": ("tree_sitter_lua", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "scala": ("tree_sitter_scala", "language"),
    "swift": ("tree_sitter_swift", "language"),
}
LANGUAGES: tuple[str, ...] = tuple(_GRAMMARS)

# LSP languageIds (and a few common aliases) -> canonical name; JSX is part of the
# JavaScript grammar, while TypeScript needs the separate TSX grammar for JSX.
_LANGUAGE_IDS: dict[str, str] = {
    **{name: name for name in LANGUAGES},
    "py": "python", "python3": "python",
    "js": "javascript", "jsx": "javascript", "javascriptreact": "javascript",
    "ts": "typescript", "typescriptreact": "tsx",
    "golang": "go", "rs": "rust",
    "c++": "cpp", "cxx": "cpp", "cuda-cpp": "cpp",
    "c#": "csharp", "cs": "csharp", "rb": "ruby",
    "shellscript": "bash", "sh": "bash", "shell": "bash", "kt": "kotlin",
}
LANGUAGE_IDS: tuple[str, ...] = tuple(sorted(set(_LANGUAGE_IDS) - set(LANGUAGES)))  # the others

# .h is mapped to C: clients normally send a languageId, which takes precedence.
_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".sh": "bash", ".bash": "bash",
    ".lua": "lua", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".sc": "scala",
    ".swift": "swift",
}

# Documents longer than this are validated in a window around the span (see
# ParsedDocument._validate_in_window): tree-sitter's incremental reparse still walks
# every top-level node, ~80 ms on a 5 MB file, more than a denoising step.
WINDOW_ABOVE = 200_000  # characters
WINDOW_LINES = 400  # the window's syntax node spans at most this many lines
WINDOW_MAX_CHARS = 200_000  # a window of lines longer than this is cut inside them, if at all
KEEP_VERDICTS = 256  # verdicts a document version keeps (a fill meets its text repeatedly)

# One parser per language, built on first use; a string records why a grammar failed to load.
_PARSERS: dict[str, Parser | str] = {}
# Guards the documents kept for incremental reparsing (`_DOCUMENTS`, `_PARSING`).  Parses
# do not take it: each thread parses with a parser of its own (`_own`).
_LOCK = threading.Lock()
# Each thread's parsers, by the shared parser of their grammar (see `_own`), and whether
# its parses wait for others' work (`parsed_behind`).
_OWN = threading.local()
YIELD_SECONDS = 0.005  # how long a parse made behind others' work waits before it looks again
# A parse made behind others' work waits no more once this long has passed since it
# began: fills that never end (a job a connection gone left registered) must not hold
# it, or its thread, for ever.
YIELD_LIMIT = 30.0  # seconds
# Text longer than this is handed to tree-sitter in chunks of this size (see `parse`).
PARSE_CHUNK = 1 << 16  # bytes: ~20-40 ms of parsing on the CI machine


class _Error(NamedTuple):
    """An error node as a character range, so errors of different parses can be compared."""

    kind: str  # "ERROR" or "MISSING <type>"
    start: int
    end: int
    inner: tuple[tuple[str, int, int], ...]  # nested error nodes, the shape of the damage


def _own(parser: Parser) -> Parser:
    """This thread's parser of `parser`'s grammar, made on its first parse there.

    A tree-sitter parser is not safe to share between threads, and the server parses on
    several (the fills', the one that parses a large file when it is opened).  One parser
    a language under one lock made a fill in a small file wait for a large file's whole
    parse: 1.4 s, a moment after a 4.3 M-character file was opened.  A parser of its own
    gives each thread the same trees, and they take turns at the GIL (`parse`)."""
    own = getattr(_OWN, "parsers", None)
    if own is None:
        own = _OWN.parsers = {}
    mine = own.get(parser)
    if mine is None:
        mine = own[parser] = Parser(parser.language)
    return mine


def parse(parser: Parser, data: bytes, old_tree: Tree | None = None) -> Tree:
    """`parser.parse(data, old_tree)` on this thread's own parser of its grammar (`_own`),
    letting the server's other threads run meanwhile.

    tree-sitter holds Python's GIL for a whole parse, and parsing a large file from
    nothing takes seconds (a 3 MB bundle: 1-4 s on the CI machine); the server's event
    loop, which reads the editor's messages on another thread, answered nothing for that
    long: no `$/cancelRequest`, no status, no fill of another document.  Given the text
    through a read callback instead, tree-sitter asks for it a chunk at a time, and each
    call hands the GIL over (`time.sleep(0)`), so the loop waits one chunk at most.  The
    tree is the same; a small text is given whole, as the callback costs more than it
    saves there.
    """
    parser = _own(parser)
    if len(data) <= PARSE_CHUNK:
        return parser.parse(data, old_tree) if old_tree else parser.parse(data)
    whole = memoryview(data)
    behind = getattr(_OWN, "behind", None)
    until = time.monotonic() + YIELD_LIMIT  # a parse behind others' work waits no longer

    def read(offset: int, _point: tuple[int, int]) -> bytes:
        while behind is not None and behind() and time.monotonic() < until:
            time.sleep(YIELD_SECONDS)  # a parse ahead of need: the fills go first
        time.sleep(0)  # let a waiting thread take the GIL
        return _piece(whole, offset)

    return parser.parse(read, old_tree) if old_tree else parser.parse(read)


def _piece(whole: memoryview, offset: int) -> memoryview | bytes:
    """whole[offset:offset + PARSE_CHUNK], copied into this thread's one buffer and handed
    out as a view of it kept for its length.  py-tree-sitter (0.26) keeps a reference to
    every object its read callback returns: a new `bytes` a piece, as `parse` gave, was
    never freed, about twice a large document's size lost at each parse of a version of
    it (typing in a 5 MB file with fills asked as it went, the server grew by ~100 MB a
    minute, and kept it once the file was closed).  The buffer and its views live as
    long as the thread, so the references kept to them cost nothing; tree-sitter reads a
    piece only until it asks for the next."""
    piece = whole[offset:offset + PARSE_CHUNK]
    size = len(piece)
    if not size:
        return b""
    kept = getattr(_PIECES, "kept", None)
    if kept is None or len(kept[0]) < size:  # (PARSE_CHUNK raised since)
        kept = _PIECES.kept = (bytearray(size), {})
    buffer, views = kept
    buffer[:size] = piece
    view = views.get(size)
    if view is None:  # one a length: at most PARSE_CHUNK of them, in practice a few
        view = views[size] = memoryview(buffer)[:size]
    return view


_PIECES = threading.local()  # each parsing thread's buffer and views (`_piece`)


def language_for(language_id: str | None, uri: str | None = None) -> str | None:
    """Canonical language from an LSP languageId, else from the uri/path extension, else None.

    A uri with a fragment names a part of the file its path names: a notebook's cell
    (`vscode-notebook-cell:/work/etl.py#W3sZmlsZQ%3D%3D`), whose path is the notebook's
    file.  Where the client names the part's language and it is none of ours (a markdown
    or SQL cell), the file's extension does not say it: a markdown cell of a notebook kept
    as a .py file (Databricks, Jupytext) was checked, planned and cut as Python."""
    if language_id:
        canonical = _LANGUAGE_IDS.get(language_id.strip().lower())
        if canonical is not None:
            return canonical
    if uri and not (language_id and language_id.strip() and "#" in uri):
        path = uri.split("?", 1)[0].split("#", 1)[0]
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        return _EXTENSIONS.get(os.path.splitext(name)[1].lower())
    return None


def _parser(language: str) -> Parser | str:
    """Build the parser lazily so importing this module never pays for nine grammars."""
    return _loaded(language, language, *_GRAMMARS[language])


def _loaded(key: str, language: str, module_name: str, function: str) -> Parser | str:
    """The parser of grammar `function` of `module_name`, built once under `key`."""
    if key not in _PARSERS:
        try:
            capsule = getattr(importlib.import_module(module_name), function)()
            _PARSERS[key] = Parser(Language(capsule))
        except (ImportError, AttributeError, ValueError) as exc:
            _PARSERS[key] = (
                f"grammar package {module_name!r} for {language!r} is missing or unusable: {exc}"
            )
    return _PARSERS[key]


def _starts_in_php(text: str) -> bool:
    """Whether a part of a PHP document starts in its code: no tag opens before the first
    that closes (`?>`), or none is there at all."""
    opening = min((at for at in (text.find("<?php"), text.find("<?=")) if at >= 0),
                  default=-1)
    closing = text.find("?>")
    return opening == -1 or -1 < closing < opening


def part_parser(language: str, text: str) -> Parser | str:
    """The parser for `text`, a part of a document of `language` (the lines around a
    span, a large document's window): the language's, but a part of a PHP document that
    starts below a `<?php` (no tag opens before the first that closes, if any) is PHP
    code, read with tree-sitter-php's grammar for code alone.  The grammar of .php files
    reads the text before a tag as HTML: a cursor's lines 300 below the file's `<?php`,
    to the `?>` that ends it or not, were one `text` node, with no block, bracket or
    statement in them."""
    if language == "php" and _starts_in_php(text):
        parser = _loaded("php code", language, "tree_sitter_php", "language_php_only")
        if not isinstance(parser, str):
            return parser
    return _parser(language)


def _kind(node: Node) -> str:
    """MISSING nodes are typed by the token that was expected, which makes them comparable."""
    return "ERROR" if node.is_error else f"MISSING {node.type}"


_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def _char_offsets(data: bytes, byte_offsets: set[int]) -> dict[int, int]:
    """Map UTF-8 byte offsets to code-point offsets in one pass over the sorted offsets."""
    result: dict[int, int] = {}
    chars = previous = 0
    for offset in sorted(byte_offsets):
        # Every code point has exactly one byte that is not a continuation byte (0x80-0xBF).
        chars += len(data[previous:offset].translate(None, _CONTINUATION_BYTES))
        result[offset] = chars
        previous = offset
    return result


def _errors(tree: Tree, data: bytes, text: str) -> list[tuple[_Error, tuple[int, int]]]:
    """Each error of a parse as a char range plus its (line, character column)."""
    nodes = error_nodes(tree.root_node, nested=False)
    inner = {node.id: error_nodes(node, nested=True) for node in nodes}
    wanted = {node.start_byte - node.start_point[1] for node in nodes}  # line starts
    for node in nodes + [n for found in inner.values() for n in found]:
        wanted.update((node.start_byte, node.end_byte))
    if len(data) == len(text):  # pure ASCII: bytes are characters
        chars = {offset: offset for offset in wanted}
    else:
        chars = _char_offsets(data, wanted)
    errors: list[tuple[_Error, tuple[int, int]]] = []
    for node in nodes:
        shape = tuple((_kind(n), chars[n.start_byte], chars[n.end_byte]) for n in inner[node.id])
        error = _Error(_kind(node), chars[node.start_byte], chars[node.end_byte], shape)
        column = chars[node.start_byte] - chars[node.start_byte - node.start_point[1]]
        errors.append((error, (node.start_point[0], column)))
    return errors


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class _Place(NamedTuple):
    """A character offset of a document as tree-sitter addresses it."""

    byte: int
    point: tuple[int, int]  # (row, byte column)


_BYTE_BLOCK = 1 << 16  # characters between the byte offsets a document not in ASCII keeps


def _encode_blocks(text: str) -> tuple[bytes, list[int] | None]:
    """`text` in UTF-8, and the byte offset of every _BYTE_BLOCK-th character in it (up
    to the end), so that a character's byte offset is found by encoding at most a block
    (`ParsedDocument._byte`); None for ASCII text, whose bytes are its characters."""
    if text.isascii():
        return _encode(text), None
    blocks = [_encode(text[at:at + _BYTE_BLOCK]) for at in range(0, len(text), _BYTE_BLOCK)]
    return b"".join(blocks), list(itertools.accumulate(map(len, blocks), initial=0))


def _end_place(start: _Place, inserted: str) -> _Place:
    """Where `inserted`, written at `start`, ends."""
    data = _encode(inserted)
    lines = inserted.count("\n")
    if not lines:
        return _Place(start.byte + len(data), (start.point[0], start.point[1] + len(data)))
    last = len(_encode(inserted[inserted.rfind("\n") + 1:]))
    return _Place(start.byte + len(data), (start.point[0] + lines, last))


_BLOCK = 1 << 15  # characters compared at a time by _common_ends


def _common_ends(old: str, new: str) -> tuple[int, int]:
    """Lengths of the common prefix and (non-overlapping) common suffix of two texts.

    Blocks are compared in turn (slice comparisons run at memcmp speed) and the first
    that differs is bisected.  Bisecting the whole text instead copied megabytes at
    each of its ~23 steps (a slice is a copy): 175 ms a keystroke in a 4.7 MB document.
    """
    limit = min(len(old), len(new))
    prefix = _matching(lambda a, b: old[a:b] == new[a:b], limit)
    m, n = len(old), len(new)
    suffix = _matching(lambda a, b: old[m - b:m - a] == new[n - b:n - a], limit - prefix)
    return prefix, suffix


def _matching(same: Callable[[int, int], bool], limit: int) -> int:
    """The largest k <= limit with same(0, k), given that same(a, b) says whether
    positions [a, b) agree (counted from the end being compared)."""
    at = 0
    while at < limit:
        block_end = min(at + _BLOCK, limit)
        if same(at, block_end):
            at = block_end
            continue
        lo, hi = at, block_end - 1  # positions [at, lo) agree; the answer is in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if same(at, mid):
                lo = mid
            else:
                hi = mid - 1
        return lo
    return limit


class ParsedDocument:
    """One version of a document, parsed once; candidate fills reparse incrementally.

    Validating a fill needs three parses (the candidate, the document without
    the span, the document as it is).  All of them differ from the document by
    one edit, so each copies the document's tree, applies `Tree.edit` and lets
    tree-sitter reuse every untouched subtree: on a large file a fill costs a
    small fraction of a full parse.  A new version of the same document (see
    `parsed_document`) is parsed the same way from the previous version's tree.
    """

    def __init__(self, text: str, language: str, parser: Parser,
                 previous: ParsedDocument | None = None, bash: str | None = None):
        self.text, self.language, self._parser = text, language, parser
        self.bash = bash  # the bash that confirms a shell fill (bash_syntax), or None
        self.data, self._blocks = _encode_blocks(text)
        old_tree = None
        self._known_row = (0, 0)  # an offset and its line (`_row`)
        if previous is not None and previous.language == language:
            prefix, suffix = _common_ends(previous.text, text)
            old_tree, first, _ = previous._edited(prefix, len(previous.text) - suffix,
                                                  text[prefix:len(text) - suffix])
            self._known_row = (prefix, first.point[0])  # the texts agree up to there
        self.tree = parse(parser, self.data, old_tree)
        self._original: list[_Error] | None = None
        self._lines: list[int] | None = None
        self._windows: dict[tuple[int, int], ParsedDocument] = {}
        # this version with a line written otherwise (`_rewritten`: `_blanked`, `_mended`)
        self._rewrites: dict[tuple[int, int, str], ParsedDocument] = {}
        self._python: PythonSyntax | None = None
        self._shell: BashSyntax | None = None
        self._verdicts: dict[tuple[int, int, str], Validation] = {}
        # a Python fill's names and calls: its rejection, or False (see `names_checked`)
        self._unbound: dict[tuple[int, int, str, str], Validation | bool] = {}
        self._errors_without: dict[tuple[int, int], list[_Error]] = {}  # see `errors_without`
        self._cut: dict[tuple[int, int], tuple[Tree, bytes]] = {}  # see `_stands_alone`
        self.windowed = True  # large documents validate in a window (a window itself never)

    def _byte(self, offset: int) -> int:
        """The byte offset of character `offset`: where its block starts, and the block's
        characters before it encoded.  Encoding the text up to it cost ~1 ms a MB, four
        times a version (its edit, its window) in a large document that is not ASCII."""
        if self._blocks is None:
            return offset
        block = offset // _BYTE_BLOCK
        return self._blocks[block] + len(_encode(self.text[block * _BYTE_BLOCK:offset]))

    def _char(self, byte: int) -> int:
        """The character offset of byte `byte` (a character's first byte): the block it
        lies in, and that block's bytes before it decoded (see `_byte`)."""
        if self._blocks is None:
            return byte
        block = bisect.bisect_right(self._blocks, byte) - 1
        before = self.data[self._blocks[block]:byte]
        return block * _BYTE_BLOCK + len(before.decode("utf-8", "surrogatepass"))

    def _row(self, offset: int) -> int:
        """The line character `offset` is on, counted from the last offset whose line this
        version found (the first version's from where it differs from the last one): a
        fill's offsets lie around its span.  Counted from the document's start, a line
        cost ~0.3 ms a MB, for the version's edit, each fill's window and each rejected
        fill's error, ~6 ms a request at 1.8 M characters."""
        known, row = self._known_row
        if offset >= known:
            row += self.text.count("\n", known, offset)
        else:
            row -= self.text.count("\n", offset, known)
        self._known_row = (offset, row)  # one tuple: right for any thread that reads it
        return row

    def _place(self, offset: int) -> _Place:
        """Byte offset and point of character `offset`."""
        byte, line = self._byte(offset), self.text.rfind("\n", 0, offset) + 1
        return _Place(byte, (self._row(offset), byte - self._byte(line)))

    def _edited(self, start: int, end: int, inserted: str) -> tuple[Tree, _Place, _Place]:
        """A copy of this document's tree told that [start, end) became `inserted`,
        and where start and end are in it."""
        first, last = self._place(start), self._place(end)
        new_end = _end_place(first, inserted)
        tree = self.tree.copy()
        tree.edit(first.byte, last.byte, new_end.byte, first.point, last.point, new_end.point)
        return tree, first, last

    def _parse_with(self, start: int, end: int, inserted: str) -> tuple[Tree, bytes, str]:
        """Parse the document with [start, end) replaced, reusing this version's tree."""
        tree, first, last = self._edited(start, end, inserted)
        data = self.data[:first.byte] + _encode(inserted) + self.data[last.byte:]
        parsed = parse(self._parser, data, tree)
        return parsed, data, self.text[:start] + inserted + self.text[end:]

    @property
    def errors(self) -> list[_Error]:
        """The document's own errors, found once per version."""
        if self._original is None:
            self._original = [e for e, _ in _errors(self.tree, self.data, self.text)]
        return self._original

    def errors_without(self, start: int, end: int) -> list[_Error]:
        """The errors of this version with [start, end) taken out, found once per range:
        each candidate at a span asks it (the span's baseline, and `_Below`'s of the
        span's lines), and each ask was a parse of the whole document (a hole's second
        candidate cost two parses instead of one, in a file whose 200 hole markers are
        errors).  Kept with the version, as its verdicts are, so never read for another
        text."""
        key = (start, end)
        found = self._errors_without.get(key)
        if found is None:
            found = [e for e, _ in _errors(*self._parse_with(start, end, ""))]
            if len(self._errors_without) >= KEEP_VERDICTS:
                self._errors_without.clear()  # one call, safe beside another fill's thread
            self._errors_without[key] = found
        return found

    def validate(self, start: int, end: int, fill: str) -> Validation:
        """Report the errors that `fill`, written over [start, end), introduces.

        A version's verdicts are kept: a fill meets the same text again and again (repair
        rounds and the retry write a text already judged, the early stop judges a text
        that is then judged as a candidate; 124 verdicts of 76 texts in 30 fills), and
        each cost one to three parses and CPython's compile.  A new version is a new
        ParsedDocument, so a verdict never outlives the text it was given on."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(
                f"span [{start}, {end}) is outside a document of {len(self.text)} characters")
        key = (start, end, fill)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._validate(start, end, fill)
            if len(self._verdicts) >= KEEP_VERDICTS:
                self._verdicts.clear()  # one call, safe beside another fill's thread
            self._verdicts[key] = verdict
        return verdict

    def _validate(self, start: int, end: int, fill: str) -> Validation:
        text = self.text
        if self.windowed and len(text) > WINDOW_ABOVE:
            low, high = self.window(start, end)
            if high - low <= WINDOW_MAX_CHARS:
                return self._validate_in_window(start, end, fill, low, high)
            inside = self._validate_inside_lines(start, end, fill)
            if inside is not None:
                return inside
        joined = self._joins_next_line(start, end, fill)
        if joined is not None:
            return joined
        tree, data, filled = self._parse_with(start, end, fill)
        candidate = _errors(tree, data, filled)
        if not candidate:  # the common case: no need for a baseline at all
            verdict = self._confirmed(start, end, fill, "no syntax errors")
        elif self._comment_text(start, end, fill, tree):  # nor a second parser's verdict
            return Validation(True, True, self.language,
                              reason="the fill is comment text: the code is the document's")
        else:
            verdict, judged_in = self._judged(start, end, fill, candidate)
            if not verdict.valid:
                return self._ended_by_line_break(start, end, fill) or verdict
            verdict = self._confirmed(start, end, fill, verdict.reason, judged_in)
        if not verdict.valid:  # the parsers' error, where they found one, comes first
            return verdict
        return self._joins_by_operator(start, end, fill, tree, data) or verdict

    def _joins_next_line(self, start: int, end: int, fill: str) -> Validation | None:
        """The rejection of a C, C++ or shell fill that ends its line in a backslash the
        line did not have, where the line below is code the user wrote as a line of its
        own: not blank, not continued itself, and no deeper than the fill's line.  None
        otherwise.

        The preprocessor joins the two lines before anything else reads them, which is
        valid C, so no parse objects: ` \\` after `#define N 10` took `int y = N;` into
        the macro, and after `// note` the `return x;` below into the comment.  A
        continuation the user wrote below (deeper, as a macro's body is, or itself ending
        in a backslash) is what the backslash asks for, and is left to the parse.

        bash joins lines the same way (`echo a \\` over `ls` runs `echo a ls`), but only
        where the backslash is code (`_shell_continues`): in a comment, in single quotes
        or after another backslash (`a\\\\`, a backslash written out) it ends nothing.

        The fill's line is that of its last code: a fill of whole lines that ends in a
        line break (`#define N 10 \\` and a line break, over `int y = N;`, or at the
        cursor after that line's indentation) joins the user's next line as well
        (`_lines_end`)."""
        kept = fill.rstrip()  # the fill to its last code: the backslash, if any
        written = kept[kept.rfind("\n") + 1:]
        if self.language not in ("c", "cpp", "bash") or not written.endswith("\\"):
            return None
        text = self.text
        breaks = "\n" in fill[len(kept):]
        line_end = text.find("\n", end)
        if not breaks and (line_end == -1 or text[end:line_end].strip(" \t\r")):
            return None  # the fill does not end its line
        below_start = self._lines_end(end, breaks)  # where the user's line below starts
        if below_start is None:
            return None  # the user's text after the span is on the line below the fill's
        line_start = text.rfind("\n", 0, max(0, below_start - 1)) + 1
        if below_start and text[line_start:below_start - 1].rstrip(" \t\r").endswith("\\"):
            return None  # the line was continued already
        below_end = text.find("\n", below_start)
        below = text[below_start:len(text) if below_end == -1 else below_end].rstrip(" \t\r")
        filled_line = (written if "\n" in kept
                       else text[text.rfind("\n", 0, start) + 1:start] + written)
        if not below.strip() or below.endswith("\\") or _width(below) > _width(filled_line):
            return None
        if self.language == "bash" and not self._shell_continues(start, end, fill, kept):
            return None
        line, column = self._fill_end(start, kept)
        at = start + len(kept) - 1
        return Validation(True, False, self.language, ((line, column - 1),),
                          reason=f"{_introduced(1, line, column - 1)}"
                                 f" ({_joins('a backslash', line + 1)})",
                          new_ranges=((at, at + 1),))

    def _joins_by_operator(self, start: int, end: int, fill: str, tree: Tree,
                           data: bytes) -> Validation | None:
        """The rejection of a fill whose last line ends in an operator or separator of its
        own that takes the user's next line of code into the fill's expression, where
        that line is one of its own without the fill; None otherwise.  `tree` and `data`
        are the filled document's.

        Where a line break is white space (the brace languages, Ruby, Lua, Kotlin, and
        shell after `&&`, `||` and `|`), `const x = a +` over `foo();` reads `const x = a
        + foo();` and `echo a &&` over `ls` runs `echo a && ls`: both parse, so no error
        objected.  One rule for every grammar, read from the tree (`_joint`): the last
        token of the fill's line, the fill's (not the user's text after the span), joins
        the next line of code below to it.  A line the user goes on with the same way
        (`ls &&` below `echo a &&`) is a chain they write, and the line below must be
        one of its own without the span's lines (`_stands_alone`).  The line below may
        join by its own first token too, a bracket that opens the arguments or the
        index of the fill's last operand (`a` over `(b)();`, see `_opened`).

        The fill's line is that of its last code: a fill of whole lines ends in a line
        break (`echo a &&\n` over a line of its own, or at the cursor after its
        indentation), and the user's next line then starts the line after it, as it
        does below a fill that ends its line.

        A blank fill (the empty fill) writes no token, and the line's last is the
        user's, before the span: `const x = |` over `foo();` left as it is reads
        `const x = foo();`, a line left incomplete that the fill was to complete, as
        where the line below does not parse after it (`return x;`, see `_Below`)."""
        first = self._byte(start)
        size = len(_encode(fill))
        code = fill.rstrip()
        code_end = first + len(_encode(code))  # in the filled document's bytes
        line_end = data.find(b"\n", code_end)
        blank = not code
        if line_end == -1:
            return None
        high = self._lines_end(end, "\n" in fill[len(code):])
        if high is None:
            return None  # the user's text after the span starts the line below the fill's
        root = tree.root_node
        last = _code_leaf_before(root, data, data.rfind(b"\n", 0, code_end) + 1, line_end)
        below = _code_leaf_after(root, data, line_end)
        if last is None or below is None or (last.end_byte > first if blank
                                             else last.start_byte < first):
            return None  # the user's text ends the line, or no code is below it
        if self.language in _BREAK_ENDS_STATEMENT and (
                blank or not data[last.end_byte:line_end].rstrip(b" \t\r").endswith(b"\\")):
            return None  # the line break ends the fill's statement (in brackets, see
            # `_stands_alone`, it joins no line of its own either), or the backslash that
            # joins it is the user's, as `_joins_next_line` leaves it
        joint = _joint(root, data, last, below, self._byte(self.text.rfind("\n", 0, start) + 1),
                       opened=not blank)  # a line the user ended in a name may be whole
        if joint is None:
            return None
        node, taken = joint
        token = data[last.start_byte:last.end_byte]
        below_end = data.find(b"\n", below.start_byte)
        tail = _code_leaf_before(root, data, below.start_byte,
                                 len(data) if below_end == -1 else below_end)
        operator = not _ends_operand(last) or (
            node.child_by_field_name("operator") == last)  # not a join by the bracket below
        if operator and tail is not None and data[tail.start_byte:tail.end_byte] == token:
            return None  # a chain the user goes on with
        lines = (self.text.rfind("\n", 0, start) + 1, high)
        shift = size - (self._byte(end) - first)  # from this version's bytes to the filled
        if self._joined_already(below.start_byte - shift, high, self._byte(lines[0]),
                                first, self._byte(end)):
            return None  # the user's operator in the span joined it: the fill rewrote it
        if not self._stands_alone(below.start_byte - shift, *lines,
                                  (node.type, taken.type, node.end_byte - shift, last.type)):
            return None
        written = token.decode("utf-8", "surrogatepass")
        if blank:  # the user's token, before the span: the same bytes in both versions
            at = self._char(last.start_byte)
            line, column = self._fill_end(at, "")
        else:
            at = start + len(data[first:last.start_byte].decode("utf-8", "surrogatepass"))
            line, column = self._fill_end(start, fill[:at - start])
        return Validation(True, False, self.language, ((line, column),),
                          reason=f"{_introduced(1, line, column)}"
                                 f" ({_joins(f'`{written}`', below.start_point[0])})",
                          new_ranges=((at, at + len(written)),))

    def _ended_by_line_break(self, start: int, end: int, fill: str) -> Validation | None:
        """The pass of a JavaScript or TypeScript fill that tree-sitter refused where the
        user's line below starts with `(` or `[`, and the fill's statement is one that no
        such bracket continues (`_no_bracket_continues`): `break`, `continue`, `debugger`,
        `let d`, or one that ends in `x++` or an arrow function's body.  None otherwise.

        JavaScript ends a statement at a line break where the next token cannot continue
        it (automatic semicolon insertion), and `x++` over `(a, b) => a;` is `x++;` and
        an arrow function; tree-sitter's grammars insert no `;` before a bracket (after a
        name, `a` over `(b)()`, the bracket does continue: the call `a(b)()`), so they
        read one broken statement.  The fill is judged as the language reads it: with a
        `;` written right before the bracket (checked against TypeScript's parser)."""
        code = fill.rstrip()
        line_end = self.text.find("\n", end)
        if self.language not in _ASI_LANGUAGES or not code or (
                "\n" not in fill[len(code):]
                and (line_end == -1 or self.text[end:line_end].strip())):
            return None  # no fill's statement, or the user's text goes on after it
        below = _code_leaf_after(self.tree.root_node, self.data, self._byte(end))
        if below is None or below.type not in _OPENERS or below.is_named:
            return None
        at = self._char(below.start_byte)
        ended = fill + self.text[end:at] + ";"
        tree, data, _ = self._parse_with(start, at, ended)
        root = tree.root_node
        first = self._byte(start)
        semicolon = first + len(_encode(ended)) - 1
        last = _code_leaf_before(root, data, first, semicolon)  # the fill's, past comments
        statement = root.descendant_for_byte_range(semicolon, semicolon + 1).parent
        if (last is None or last.end_byte <= first or statement is None
                or statement.has_error or not _no_bracket_continues(statement, last)):
            return None
        verdict = self.validate(start, at, ended)
        return replace(verdict, reason=f"{verdict.reason}; the line break ends the fill's "
                                       f"statement") if verdict.valid else None

    def _joined_already(self, byte: int, high: int, low: int, first: int,
                        last_byte: int) -> bool:
        """Whether, in this version, an operator of the span's own, bytes [first,
        last_byte), ends the last of the span's lines (which end at character `high`)
        and joins the code at `byte` below them to it (`_joint`, from byte `low` on):
        the user's `ls &&` over `echo ok`, which a fill that keeps it rewrites (`ls -la
        &&`).  The user's operator before the span (`const x =` and the span) joins
        nothing the fill is not asked to write: the fill is judged as usual."""
        if high <= 0:
            return False
        root = self.tree.root_node
        line_end = self._byte(high - 1)
        last = _code_leaf_before(root, self.data, self.data.rfind(b"\n", 0, line_end) + 1,
                                 line_end)
        below = root.descendant_for_byte_range(byte, byte + 1)
        return (last is not None and below is not None and first <= last.start_byte
                and last.end_byte <= last_byte
                and _joint(root, self.data, last, below, low) is not None)

    def _lines_end(self, end: int, breaks: bool) -> int | None:
        """Where the span's lines end, for a span that ends at `end` with a fill whose last
        code is followed by a line break of its own where `breaks`: past the line break of
        `end`'s line, or at the start of `end`'s line where the fill's break ends the
        span's last line: the span ends at a line's start or in its indentation (the
        cursor at `  |(b)();`), and the user's code after it is a line of its own below
        the fill's, at whatever indentation the fill leaves it.  None where the fill's
        break puts the user's code after the span, on the line's code before the span,
        on a line below the fill's (`const x = |a;`)."""
        text = self.text
        line_end = text.find("\n", end)
        if not breaks or (line_end != -1 and not text[end:line_end].strip()):
            return line_end + 1
        line_start = text.rfind("\n", 0, end) + 1
        return None if text[line_start:end].strip() else line_start

    def _stands_alone(self, byte: int, low: int, high: int,
                      joint: tuple[str, str, int, str]) -> bool:
        """Whether the code at `byte` (the first of a line below the span, in this
        version's bytes) is a line of its own in this version with the span's lines
        text[low:high] taken out: not broken there (`foo(x,` over `y)`: the user's `y)`
        closes what the fill opened), not inside round or square brackets (the lines of
        a call's arguments or of an expression in parentheses, where a line break never
        ends anything), not joined to the code above by the user's own operator
        (`_joint`: `x =` above the span, `foo();` below it).  Nor where the node the
        fill's token joins it in is this version's, with one more child in front: `joint`
        is that node's type, its child's that holds the line, where it ends (in this
        version's bytes) and the token's type, and the node that starts with the line
        here is of that type, ends there, starts with a child of that type and holds no
        such token of its own.  The token then parts the two as the user's lines are
        parted (a statement's `;` in a Python block, or a script's); a class's field is
        not parted from its own name (`sync =` over `opt;` makes `opt` the value of the
        fill's field, not a field of its own), and a line whose parts the token parts
        itself is a chain the fill goes on in front (`echo a |` over `ls | wc`, one flat
        pipeline, pipes `echo a` into `ls`).  Nor
        where the line is not code there at all: the span's lines closed a comment or a
        string that, without them, holds it."""
        key = (low, high)
        cut = self._cut.get(key)  # one read: another fill's thread may replace the dict
        if cut is None:
            tree, data, _ = self._parse_with(low, high, "")
            cut = tree, data
            self._cut = {key: cut}
        tree, data = cut
        at = byte - (self._byte(high) - self._byte(low))  # in the version without them
        root = tree.root_node
        leaf = root.descendant_for_byte_range(at, at + 1)
        chain = ancestors(root, leaf)
        for node in chain:
            if node.is_error or node.start_byte == at and node.has_error:
                return False
            opener = node.child(0) if node.start_byte < at and node.child_count else None
            if opener is not None and opener.type in _OPENERS and not opener.is_named:
                return False
        starting = [node for node in chain if node.start_byte == at]
        if not starting:  # a comment or a string that a line of the span's closed holds it
            return False
        removed = self._byte(high) - self._byte(low)
        outer = starting[-1]
        kind, child, joint_end, token = joint
        if (outer.type == kind and outer.end_byte == joint_end - removed
                and outer.child(0) is not None and outer.child(0).type == child
                and all(part.type != token for part in outer.children)):
            return False
        above = _code_leaf_before(root, data, 0, at)
        return above is None or _joint(root, data, above, leaf, 0) is None

    def _shell_continues(self, start: int, end: int, fill: str, kept: str) -> bool:
        """Whether the backslash that ends `kept` (the fill up to it) continues its line in
        a shell script: code, not a comment, a quoted string or a heredoc's text, and not
        itself escaped (an odd run of backslashes).  A double-quoted string and an
        unquoted heredoc join lines too, but there the line below is the user's text
        inside them, not a line of code of its own."""
        run = len(kept) - len(kept.rstrip("\\"))
        if run % 2 == 0:
            return False
        tree, _, _ = self._parse_with(start, end, fill)
        at = self._byte(start) + len(_encode(kept)) - 1
        leaf = tree.root_node.descendant_for_byte_range(at, at + 1)
        return not any(node.type in _SHELL_TEXT for node in ancestors(tree.root_node, leaf))

    def _judged(self, start: int, end: int, fill: str,
                candidate: list[tuple[_Error, tuple[int, int]]],
                ) -> tuple[Validation, ParsedDocument]:
        """tree-sitter's verdict on `fill` over [start, end), whose filled document has
        the errors `candidate`, and the version it was judged in: this one, or this one
        with the lines below the span that are broken on their own blank (see `_Below`)."""
        text = self.text
        below = _Below(self, start, end, len(fill))
        if below.broken_on_its_own([error for error, _ in candidate]):
            line = (below.next_code, below.next_end)
            blanked = self._blanked(*line)
            inner = _errors(*blanked._parse_with(start, end, fill))
            verdict, judged_in = (blanked._judged(start, end, fill, inner) if inner else
                                  (Validation(True, True, self.language,
                                              reason="no syntax errors"), blanked))
            if verdict.valid:
                verdict = replace(verdict, reason=_broken_below(
                    verdict.reason, self._row(line[0]) + 1))
            return verdict, judged_in
        # The document as it is, and the document with the span removed; for an
        # insertion they are the same text.
        original = _Baseline(self.errors, end - start, start, len(fill))
        removed = original if end == start else _Baseline(
            self.errors_without(start, end), 0, start, len(fill))
        reach = (_skip_blanks_back(text, start), start + len(fill) + _blanks_at(text, end))
        new = []
        for error, where in candidate:
            if below.blames(error):  # reported where the fill leaves its line
                new.append((self._fill_end(start, fill), (error.start, error.end)))
            elif _is_new(error, removed, original, start, len(fill), reach):
                new.append((self._at_fill(where, error, start), (error.start, error.end)))
        new.sort()
        if not new:
            return Validation(True, True, self.language, reason=f"no new syntax errors "
                              f"({len(candidate)} pre-existing ignored)"), self
        places = tuple(sorted({where for where, _ in new}))
        line, column = places[0]
        return Validation(True, False, self.language, places,
                          reason=_introduced(len(places), line, column),
                          new_ranges=tuple(sorted({span for _, span in new}))), self

    def _confirmed(self, start: int, end: int, fill: str, reason: str,
                   judged_in: ParsedDocument | None = None) -> Validation:
        """tree-sitter's pass, unless CPython rejects a Python fill (see python_syntax) or
        bash a shell fill (see bash_syntax).

        Where tree-sitter judged the fill with lines below blank (`judged_in`, see
        `_Below`), CPython's error on one of those lines is the user's, unless CPython
        also rejects the fill there before them: it stops at its first error, and its
        tokenizer's (`unmatched ')'` below) come before any of the parser's (`x = ` left
        incomplete)."""
        if self.language == "python":
            rejected = self._python_rejects(start, end, fill) or self._rejected_past_damage(
                start, end, fill)
            if rejected is not None:
                rejected = self._rejected_over_damage(start, end, fill, rejected)
            if rejected is not None and judged_in is not None and judged_in is not self:
                low, suffix = _common_ends(self.text, judged_in.text)
                shift = len(fill) - (end - start)  # the blank lines, in the filled document
                low, high = low + shift, len(self.text) - suffix + shift
                if low <= rejected.start <= high:
                    again = judged_in._python_rejects(start, end, fill)
                    rejected = again if again is not None and again.start < low else None
            if rejected is not None:
                return self._rejected(rejected, "Python")
        return self._bash_confirmed(start, end, fill,
                                    Validation(True, True, self.language, reason=reason))

    def _rejected_past_damage(self, start: int, end: int, fill: str) -> Rejection | None:
        """CPython's objection to a fill that the user's own damage above it hid: a hole
        marker or another line broken on its own in the same block (`damage_above`),
        where CPython stopped at its first error, and tree-sitter let the fill's pass as
        old (its span taken out left the same error: `mid = (lo + ` written as `lo =`
        over `hi) // 2`, an unmatched `)`, two lines below a `<FILL>`).  Judged again with
        that line written as `...` (`_mended`), where the chunk parses then; None
        otherwise."""
        line = self._python_syntax().damage_above(start, end)
        if line is None:
            return None
        mended = self._mended(*line)
        syntax = mended._python_syntax()
        if syntax.damage_above(start, end) is not None or not syntax.chunk_parses(start, end):
            return None
        return mended._python_rejects(start, end, fill)

    def _rejected_over_damage(self, start: int, end: int, fill: str,
                              rejected: Rejection) -> Rejection | None:
        """`rejected`, CPython's objection to a fill, unless it is the user's line below the
        fill, broken on its own (`broken_alone`: a hole marker, `x = `): CPython stops at
        its first error, so it rejected every rewrite of the line above a `<FILL>`, the
        line written back as it was included, where tree-sitter let the same damage pass
        as old (an insertion there is judged with that line blank: `_Below`, which takes
        no span that starts its line).  Judged again with that line written as `...`
        (`_mended`), where the span's chunk parses then; `rejected` otherwise."""
        shift = len(fill) - (end - start)
        at = rejected.start - shift  # in this version's offsets
        if at < end or self._row(at) <= self._row(end):
            return rejected
        low = self.text.rfind("\n", 0, at) + 1
        high = self.text.find("\n", at)
        high = len(self.text) if high == -1 else high
        if not broken_alone(self.text[low:high].rstrip("\r")):
            return rejected
        mended = self._mended(low, high - (self.text[low:high].endswith("\r")))
        if not mended._python_syntax().chunk_parses(start, end):
            return rejected
        return mended._python_rejects(start, end, fill)

    def _mended(self, low: int, high: int) -> ParsedDocument:
        """This version with the code of text[low:high] (one line, after its indentation)
        written as `...`, an expression statement, padded with spaces to its length, so
        that offsets stay the document's.  Spaces alone would leave a block's only
        statement out (`if x:` over nothing)."""
        line = self.text[low:high]
        indent = len(line) - len(line.lstrip(" \t"))
        code = high - low - indent
        return self._rewritten(low + indent, high,
                               "..." + " " * (code - 3) if code >= 3 else " " * code)

    def _rewritten(self, low: int, high: int, written: str) -> ParsedDocument:
        """This version with text[low:high] written as `written`, of the same length so
        that offsets (and so verdicts) stay the document's, parsed from this version's
        tree; the last two kept (a fill may be judged with a line below blank and a line
        above mended)."""
        key = (low, high, written)
        rewritten = self._rewrites.get(key)
        if rewritten is None:
            text = self.text[:low] + written + self.text[high:]
            rewritten = ParsedDocument(text, self.language, self._parser, self, self.bash)
            rewritten.windowed = self.windowed
            if len(self._rewrites) >= 2:
                self._rewrites.clear()
            self._rewrites[key] = rewritten
        return rewritten

    def _python_syntax(self) -> PythonSyntax:
        if self._python is None:
            self._python = PythonSyntax(self.text, self.tree.root_node, self._line_starts())
        return self._python

    def _python_rejects(self, start: int, end: int, fill: str) -> Rejection | None:
        """CPython's objection to a fill of this Python version (see python_syntax)."""
        return self._python_syntax().rejects(start, end, fill)

    def wanted(self, start: int, end: int, fill: str = "", shown: str = "",
               calls: bool = False) -> list[str]:
        """The names the code below the span, in the function around it, reads where
        nothing binds them before, with `fill` over [start, end) (see
        PythonSyntax.wanted); none but in Python."""
        if self.language != "python":
            return []
        return self._python_syntax().wanted(start, end, fill, shown, calls)

    def return_needed(self, start: int, end: int, fill: str) -> ReturnNeed | None:
        """The function a code-less `fill` over [start, end) leaves falling off its end
        though it must give a value (see PythonSyntax.return_needed); none but in Python."""
        if self.language != "python":
            return None
        return self._python_syntax().return_needed(start, end, fill)

    def bare_return(self, start: int, end: int, fill: str) -> str | None:
        """What says the function around a bare `return` that `fill` over [start, end)
        writes must give a value (see PythonSyntax.bare_return); None but in Python."""
        if self.language != "python":
            return None
        return self._python_syntax().bare_return(start, end, fill)

    def unused_values(self, start: int, end: int, fill: str) -> list[str]:
        """The values the function around the span computes and never uses, with `fill`
        over [start, end) (see PythonSyntax.unused_values); none but in Python."""
        if self.language != "python":
            return []
        return self._python_syntax().unused_values(start, end, fill)

    def unread_values(self, start: int, end: int, fill: str) -> list[str]:
        """The values the function around the span has (locals it binds above it, a plain
        function's parameters) that, with `fill` over [start, end), nothing reads (see
        PythonSyntax.unread_values); none but in Python."""
        if self.language != "python":
            return []
        return self._python_syntax().unread_values(start, end, fill)

    def idle_tallies(self, start: int, end: int, fill: str) -> list[str]:
        """The locals a loop around the span is there to update and, with `fill` over
        [start, end), does not (see PythonSyntax.idle_tallies); none but in Python."""
        if self.language != "python":
            return []
        return self._python_syntax().idle_tallies(start, end, fill)

    def resets(self, start: int, end: int, fill: str, name: str) -> bool:
        """Whether `fill` over [start, end) sets the counter `name` to a number once more
        (see PythonSyntax.resets); never but in Python."""
        return self.language == "python" and self._python_syntax().resets(start, end, fill,
                                                                          name)

    def marker_checked(self, start: int, fill: str, marker: str, verdict: Validation,
                       replaced: str = "") -> Validation:
        """`verdict`, unless `fill` (written at `start` over `replaced`) holds more hole
        markers than the code it replaces: then that verdict's rejection with the markers'
        places added, for repair to write them anew.  The model is shown the document's
        other holes (and a notebook's other cells' holes) as they are, and copied them: a
        fill applied as a string that began `"<FILL> + r` put back a hole that the next
        "Fill holes" took for the user's, whatever its syntax.  A rewrite of code that
        holds the marker itself (`m = "<FILL>"`) may keep it."""
        if not marker or fill.count(marker) <= replaced.count(marker):
            return verdict
        ranges = tuple((start + a, start + b) for a, b in find_holes(fill, marker))
        places = tuple(self._fill_end(start, fill[:a - start]) for a, _ in ranges)
        why = f"fill writes the hole marker {marker}, {_at(*places[0])}"
        if verdict.valid:
            return Validation(True, False, self.language, places, reason=why,
                              new_ranges=ranges)
        # rejected already: its own places kept beside the markers' (and its names, where
        # it parses), so that one repair round writes both anew
        return replace(verdict, new_errors=verdict.new_errors + places,
                       new_ranges=verdict.new_ranges + ranges,
                       reason=f"{verdict.reason}; {why}" if verdict.reason else why)

    def names_checked(self, start: int, end: int, fill: str, verdict: Validation,
                      shown: str = "") -> Validation:
        """`verdict` (this version's on `fill` over [start, end)), or where it passed a
        Python fill that reads names nothing defines (python_names) or a function's local
        before anything binds it (python_order), calls a function with arguments it
        cannot take (python_calls), uses a name as its kind cannot be (python_kinds),
        begins a local at a number its updates never move (`prod = 0` above `prod *= x`:
        python_tallies), deletes a name the code below reads (python_order), makes a
        function returning values a generator (python_yields), ends a block above code
        that then never runs (python_reach) or returns a bool that fixes its function's
        answer or a loop's (python_predicates), its rejection, pointing at those names (or the
        statement, or the constant) for repair.
        `shown`: code the model sees beside the document (a notebook's other cells); it
        may define them."""
        if not verdict.valid or self.language != "python":
            return verdict
        key = (start, end, fill, shown)
        found = self._unbound.get(key)
        if found is None:
            found = self._names_verdict(start, end, fill, shown)
            if len(self._unbound) >= KEEP_VERDICTS:
                self._unbound.clear()  # one call, safe beside another fill's thread
            self._unbound[key] = found
        return found or verdict

    def _names_verdict(self, start: int, end: int, fill: str, shown: str) -> Validation | bool:
        """The rejection of a fill that parses for the names it reads (python_names,
        python_order), the calls it makes (python_calls), a name it uses as its kind
        cannot be (python_kinds), a number it begins a product at that nothing then
        moves (python_tallies), a name it deletes that the code then reads
        (python_order.deleted_reads), a `yield` that makes a function returning values a
        generator (python_yields), the code it leaves unreachable (python_reach) or a
        `return` of a bool that fixes its function's answer or a loop's
        (python_predicates), or False."""
        python = self._python_syntax()
        reads = python.unbound(start, end, fill, shown)
        found = reads or python.read_early(start, end, fill)
        if found:
            names = tuple(dict.fromkeys(read.name for read in found))
            listed = ", ".join(f"'{name}'" for name in names)
            it = "it" if len(names) == 1 else "them"
            why = (f"fill reads {listed}, defined nowhere in the document" if reads else
                   f"fill reads {listed} before the function binds {it} (UnboundLocalError)")
            ranges = [(read.start, read.end) for read in found]
        elif calls := python.bad_calls(start, end, fill, shown):
            names = tuple(dict.fromkeys(call.name for call in calls))
            why = f"fill calls {calls[0].why}"
            ranges = [(call.start, call.end) for call in calls]
        elif uses := python.misused(start, end, fill, shown):
            names = tuple(use.name for use in uses)
            why = f"fill uses '{uses[0].name}' as it cannot be ({uses[0].why})"
            ranges = [(use.start, use.end) for use in uses]
        elif stuck := python.stuck(start, end, fill):
            names = tuple(found.name for found in stuck)
            why = (f"fill begins '{stuck[0].name}' at a number its `{stuck[0].op}` never "
                   f"moves")
            ranges = [(found.start, found.end) for found in stuck]
        elif gone := python.deleted(start, end, fill):
            names = ("del",)  # the statement is at fault, not the name (spelled_keywords)
            why = (f"fill's `del {gone[0].name}` leaves '{gone[0].name}' unbound where the "
                   f"code below reads it (NameError)")
            ranges = [(found.start, found.end) for found in gone]
        elif made := python.generators(start, end, fill):
            names = ("yield",)  # the statement is at fault (spelled_keywords)
            why = (f"fill's `yield` makes '{made[0].function}', which returns values, a "
                   f"generator")
            ranges = [(found.start, found.end) for found in made]
        elif dead := python.unreachable(start, end, fill):
            names = tuple(dict.fromkeys(found.keyword for found in dead))
            why = f"fill's `{dead[0].keyword}` {dead[0].why}"
            ranges = [(found.start, found.end) for found in dead]
        elif constant := python.constant_predicates(start, end, fill):
            names = tuple(dict.fromkeys(repr(found.value) for found in constant))
            why = f"fill's `return {constant[0].value}` {constant[0].why}"
            ranges = [(found.start, found.end) for found in constant]
        else:
            return False
        # a name the user began before the span (`st` + `h`) is placed at the fill
        places = tuple(self._fill_end(start, fill[:max(0, at - start)]) for at, _ in ranges)
        return Validation(True, False, self.language, places,
                          reason=f"{why}, {_at(*places[0])}", new_ranges=tuple(ranges),
                          names=names)

    def _bash_confirmed(self, start: int, end: int, fill: str, passed: Validation) -> Validation:
        """`passed`, unless bash (or dash, for a POSIX sh script) rejects the fill of a shell
        document (see bash_syntax).

        bash reads the commands around the span in the whole document, also where
        tree-sitter judged a window of it: a window's edges cut through the functions
        that hold it, which bash would report at its first line, for every fill."""
        if self.bash is None:
            return passed
        if self._shell is None:
            self._shell = BashSyntax(self.text, self.tree.root_node, self._line_starts(),
                                     self.bash)
        rejected, ignored = self._shell.rejects(start, end, fill)
        if rejected is not None:
            return self._rejected(rejected, rejected.parser)
        if ignored is None:
            return passed
        return replace(passed, reason=_broken_below(passed.reason, ignored + 1))

    def _rejected(self, rejected: Rejection, parser: str) -> Validation:
        """The verdict of a second parser that rejects a fill tree-sitter passed."""
        return Validation(True, False, self.language, ((rejected.line, rejected.column),),
                          reason=f"{_introduced(1, rejected.line, rejected.column)}"
                                 f" ({parser}: {rejected.message})",
                          new_ranges=((rejected.start, rejected.end),))

    def _at_fill(self, where: tuple[int, int], error: _Error, start: int) -> tuple[int, int]:
        """Where to report an error: one that began on an earlier line and runs into the
        fill (recovery often swallows the whole enclosing definition) is reported where
        the fill starts, the place the user can act on."""
        if not error.start < start <= error.end:
            return where
        line = self._row(start)
        if where[0] >= line:  # it starts on the fill's line: that is precise enough
            return where
        return line, start - (self.text.rfind("\n", 0, start) + 1)

    def _fill_end(self, start: int, fill: str) -> tuple[int, int]:
        """(line, column) where `fill`, written at `start`, ends."""
        line = self._row(start) + fill.count("\n")
        if "\n" in fill:
            return line, len(fill) - fill.rfind("\n") - 1
        return line, start - (self.text.rfind("\n", 0, start) + 1) + len(fill)

    def _line_starts(self) -> list[int]:
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer("\n", self.text)]
        return self._lines

    def window(self, start: int, end: int) -> tuple[int, int]:
        """Whole lines around [start, end): the largest syntax node holding the span
        within WINDOW_LINES lines, with its neighbours on either side (`window_rows`).

        The window's edges are found by stepping from the span's lines (`_row_start`):
        listing every line start of the document cost 6 ms a version at 1 MB, for a
        window a few hundred lines tall."""
        text = self.text
        first_start = text.rfind("\n", 0, start) + 1
        last_start = text.rfind("\n", 0, end) + 1
        first = self._row(start)
        last = first + text.count("\n", start, end)
        top, bottom = self.window_rows(first, last, first_start, last_start)
        return (_row_start(text, top, first, first_start),
                _row_start(text, bottom + 1, last, last_start))

    def window_rows(self, first: int, last: int, first_start: int,
                    last_start: int) -> tuple[int, int]:
        """The first and last line of the window around lines `first` to `last` (which
        start at offsets `first_start` and `last_start`): see `window`."""
        node = self.tree.root_node.named_descendant_for_point_range((first, 0), (last, 0))
        chosen = node
        while node is not None and node.parent is not None:
            if node.end_point[0] - node.start_point[0] > WINDOW_LINES:
                break
            chosen, node = node, node.parent
        if chosen.parent is None or chosen.end_point[0] - chosen.start_point[0] > WINDOW_LINES:
            # No node of a window's size holds the span: it lies between the children of
            # the module or of a huge class (a blank line between two definitions).  The
            # window is then the children either side, not the whole file, which cost a
            # full parse of it for every new version.
            top, bottom = first, last
            before, after = _children_around(
                chosen, self._byte(first_start), self._byte(last_start))
        else:
            top, bottom = min(first, chosen.start_point[0]), max(last, chosen.end_point[0])
            before, after = chosen.prev_sibling, chosen.next_sibling
        if before is not None:
            top = min(top, max(before.start_point[0], top - WINDOW_LINES))
        if after is not None:
            bottom = max(bottom, min(after.end_point[0], bottom + WINDOW_LINES))
        return top, bottom

    def _validate_in_window(self, start: int, end: int, fill: str, low: int,
                            high: int) -> Validation:
        """Validate inside a window of the document, so the cost does not grow with it.

        The window is parsed on its own, with and without the fill; cutting it out
        of the document can make errors at its edges, but they are in the
        baselines too and so are never blamed on the fill.  What this cannot see
        is damage the fill does beyond the window, such as an unclosed string
        that runs to the end of a huge file: it shows as an error at the
        window's end instead, which is still new and still blamed.

        A window is whole lines, and a line may be megabytes (a minified bundle is one):
        a window longer than WINDOW_MAX_CHARS, parsed afresh for each version, cost more than
        the document's own tree, which each version reparses incrementally from the last
        (a 1 MB bundle's window 0.9 s a keystroke, its tree 0.07 s), so the window is cut
        inside the line instead (`_validate_inside_lines`), or the document validated
        whole where no cut reads as it does (`_validate`).
        """
        verdict = self._part(low, high).validate(start - low, end - low, fill)
        if verdict.valid:
            return self._bash_confirmed(start, end, fill, verdict)
        line_start = self.text.rfind("\n", 0, low) + 1
        return _moved(verdict, self._row(low), low - line_start, low)

    def _part(self, low: int, high: int) -> ParsedDocument:
        """text[low:high] parsed on its own, the last window's kept."""
        key = (low, high)
        part = self._windows.get(key)
        if part is None:
            text = self.text[low:high]
            parser = part_parser(self.language, text)
            part = ParsedDocument(text, self.language,
                                  self._parser if isinstance(parser, str) else parser)
            part.windowed = False
            self._windows = {key: part}
        return part

    def _blanked(self, low: int, high: int) -> ParsedDocument:
        """This version with text[low:high] (a line below a span, broken on its own: see
        `_Below`) written as spaces (`_rewritten`).

        A fill is judged there as if that line were blank: its error is the user's, and
        it hid the fill's.  Read with it, the fill's own line was not judged at all: an
        empty fill passed at `const x = |` over `) ) ;` (recovery joined the two lines'
        damage into the error the line below has on its own), and CPython, which stops
        at its first error, rejected every fill there (`x = 1` over `) )`: "unmatched
        ')'").  The offsets are the document's, so the verdict is too."""
        return self._rewritten(low, high, " " * (high - low))

    def _comment_text(self, start: int, end: int, fill: str, tree: Tree) -> bool:
        """Whether `fill`, on one line over text of one line, lies inside a comment that
        began before it, and that comment ends where the document's did (shifted by the
        fill): the fill changed no code, so the code's errors are the document's own.

        A cursor at the end of `x = a +  # note` or `const x = // note` got every fill
        rejected: the line left incomplete before the comment was blamed on the fill,
        which can only add to the comment.  A fill that ends the comment (a C line
        comment's last `\\`, PHP's `?>`) or starts one of its own is judged as code.  The
        empty fill is comment text where a comment holds the cursor: where one letter
        written there would be (a line comment's end, not a block comment's `*/`)."""
        if "\n" in fill or "\n" in self.text[start:end]:
            return False
        if not fill:
            if start == 0 or _comment_over(self.tree.root_node, self._byte(start - 1),
                                           self._byte(start)) is None:
                return False
            return self._comment_text(start, end, "x", self._parse_with(start, end, "x")[0])
        first, size = self._byte(start), len(_encode(fill))
        comment = _comment_over(tree.root_node, first, first + size)
        if comment is None or not comment.start_byte < first:
            return False
        old_end = comment.end_byte - size + (self._byte(end) - first)
        mine = _comment_over(self.tree.root_node, comment.start_byte, comment.start_byte + 1)
        return (mine is not None and mine.start_byte == comment.start_byte
                and mine.end_byte == old_end)

    def _validate_inside_lines(self, start: int, end: int, fill: str) -> Validation | None:
        """Validate in a window cut inside the span's line, where its whole lines are too
        long for one (a minified bundle is one line of megabytes); None where no cut
        reads as the document does.

        The document's tree is reparsed from the last version's, but each fill's reparse
        still walks the bundle's one node: ~0.35 s a parse at 3 MB, two or three a round
        of a rewrite whose candidates fail.  The window is cut at the tree's own
        boundaries (`_cut_inside_lines`: a function, a statement of the bundle's body, or
        the run of them a span across several covers, with their neighbours) and used only
        where it reads as the document does there: its top-level nodes are the document's
        nodes it was cut at (a list's items cut out of their brackets read as one
        expression, in which `1; 2` is code), its errors are the document's inside it, no
        more, no fewer (an object's pairs cut out of their braces read as broken code),
        and the fill leaves the nodes at its edges as they were (`_reads_around`): damage
        that goes on past it is seen whole."""
        nodes = self._cut_inside_lines(start, end)
        if nodes is None:
            return None
        low, high = self._char(nodes[0].start_byte), self._char(nodes[-1].end_byte)
        theirs = []
        for error in self.errors:
            if error.end > low and error.start < high:
                if error.start < low or error.end > high:
                    return None  # damage across the cut: the window cannot read it
                theirs.append((error.kind, error.start - low, error.end - low))
        part = self._part(low, high)
        shift = nodes[0].start_byte
        if ([(n.type, n.start_byte, n.end_byte) for n in part.tree.root_node.named_children]
                != [(n.type, n.start_byte - shift, n.end_byte - shift) for n in nodes]
                or [(e.kind, e.start, e.end) for e in part.errors] != theirs
                or not part._reads_around(start - low, end - low, fill)):
            return None
        return self._validate_in_window(start, end, fill, low, high)

    def _reads_around(self, start: int, end: int, fill: str) -> bool:
        """Whether the first and last nodes of this text that lie wholly outside [start,
        end) read the same with `fill` there: the same type over the same text.  A fill
        that makes the node after it read otherwise may go on doing so past a cut window
        (`f(){}` replaced by `n+` makes the next declaration an operand, and the one
        after that cannot follow it): the document is validated whole then."""
        tree, _, _ = self._parse_with(start, end, fill)
        old, new = self.tree.root_node, tree.root_node
        if not (old.child_count and new.child_count):
            return old.child_count == new.child_count
        shift = len(_encode(fill)) - (self._byte(end) - self._byte(start))
        head, tail = old.child(0), old.child(old.child_count - 1)
        if head.end_byte <= self._byte(start):
            moved = new.child(0)
            if (moved.type, moved.start_byte, moved.end_byte) != (
                    head.type, head.start_byte, head.end_byte):
                return False
        if tail.start_byte >= self._byte(end):
            moved = new.child(new.child_count - 1)
            if (moved.type, moved.start_byte, moved.end_byte) != (
                    tail.type, tail.start_byte + shift, tail.end_byte + shift):
                return False
        return True

    def _cut_inside_lines(self, start: int, end: int) -> list[Node] | None:
        """The named nodes, siblings in the document's tree, that a window inside lines
        is cut at, in order (see `_validate_inside_lines`): the largest node holding
        [start, end) within WINDOW_MAX_CHARS, or else the run of children of the
        smallest node holding it that covers the span (a rewrite across the end of one
        function of a bundle and into the statements after it: no node but the bundle's
        body holds it, and the document was validated whole, 0.7 s a candidate at 3 MB),
        with their named neighbours either side where those fit too; None where neither
        fits."""
        root = self.tree.root_node
        first, last = self._byte(start), self._byte(end)
        inner = root.named_descendant_for_byte_range(first, last) or root
        chosen = None
        for node in ancestors(root, inner):  # one descent (a bundle nests deep)
            if node == root or node.end_byte - node.start_byte > WINDOW_MAX_CHARS:
                break
            chosen = node
        if chosen is not None:
            head = tail = chosen
        else:
            run = _children_covering(inner, first, last)
            if run is None:
                return None
            head, tail = run
        low, high = head.start_byte, tail.end_byte
        if high - low > WINDOW_MAX_CHARS:
            return None
        before, after = head.prev_named_sibling, tail.next_named_sibling
        if before is not None and high - before.start_byte <= WINDOW_MAX_CHARS:
            head = before
        if after is not None and after.end_byte - head.start_byte <= WINDOW_MAX_CHARS:
            tail = after
        if not (head.is_named and tail.is_named
                and head.start_byte <= first <= last <= tail.end_byte):
            return None  # a bracket of the body in the run, or the span past its ends
        nodes = [head]
        while nodes[-1] != tail:
            nodes.append(nodes[-1].next_named_sibling)
        return nodes


def _children_covering(parent: Node, first: int, last: int) -> tuple[Node, Node] | None:
    """The first and last of `parent`'s children that hold bytes [first, last) (an empty
    span: the child after it), found by byte (a bundle's body has tens of thousands)."""
    final = parent.child(parent.child_count - 1) if parent.child_count else None
    head = _first_child_ending_after(parent, final, first)
    tail = head if last == first else _first_child_ending_after(parent, final, last - 1)
    if head is None or tail is None:
        return None
    return head, tail


def _row_start(text: str, row: int, known: int, known_start: int) -> int:
    """Where line `row` of `text` starts (its length past the last line), stepping line
    by line from line `known`, which starts at `known_start`: a window's edges lie a few
    hundred lines from the span, and the lines between are all that is read."""
    at = known_start
    for _ in range(known - row):
        at = text.rfind("\n", 0, at - 1) + 1
    for _ in range(row - known):
        found = text.find("\n", at)
        if found == -1:
            return len(text)
        at = found + 1
    return at


def _children_around(parent: Node, start: int, end: int) -> tuple[Node | None, Node | None]:
    """The child of `parent` that holds byte `start` (where the span's first line
    begins) or else the last one before it, and the first child that ends after
    byte `end` (where its last line begins); found by byte, without walking the
    children (a module can have tens of thousands)."""
    last = parent.child(parent.child_count - 1) if parent.child_count else None
    at = _first_child_ending_after(parent, last, start)
    if at is None:
        before = last
    else:
        before = at if at.start_byte < start else at.prev_sibling
    return before, _first_child_ending_after(parent, last, end)


def _comment_over(root: Node, low: int, high: int) -> Node | None:
    """The innermost comment node that holds bytes [low, high) of `root`'s tree, if any."""
    leaf = root.descendant_for_byte_range(low, high)
    return next((node for node in (ancestors(root, leaf) if leaf is not None else ())
                 if "comment" in node.type), None)


def _first_child_ending_after(parent: Node, last: Node | None, byte: int) -> Node | None:
    """`parent.first_child_for_byte(byte)`, which crashes the process (py-tree-sitter
    0.26.1, a segmentation fault) when no child ends after `byte`."""
    if last is None or last.end_byte <= byte:
        return None
    return parent.first_child_for_byte(byte)


def _introduced(count: int, line: int, column: int) -> str:
    """The reason of a rejected fill (0-based line and column), one wording for
    tree-sitter's and CPython's verdicts: `_moved` rewrites its line and column."""
    return f"fill introduces {count} syntax error(s), {_at(line, column)}"


def _broken_below(reason: str, number: int) -> str:
    """A passing verdict's `reason`, saying that line `number` (1-based) below the span
    was judged blank, broken on its own (tree-sitter's `_Below`, or bash's check: see
    bash_syntax), once however many checks judged it so."""
    note = f"line {number}, broken on its own, pre-existing and ignored"
    return reason if note in reason else f"{reason}; {note}"


def _at(line: int, column: int) -> str:
    return f"first at line {line + 1}, column {column + 1}"


def _joins(what: str, line: int) -> str:
    """Why a fill whose line ends in `what` is refused: it joins (0-based) `line` below
    to its own (`ParsedDocument._joins_next_line`, `_joins_by_operator`); `_moved`
    rewrites the number."""
    return f"{what} at the end of the line joins line {line + 1} to it"


_JOINED = re.compile(r"joins line (\d+) to it")


def _moved(verdict: Validation, lines: int, columns: int, chars: int) -> Validation:
    """A window's verdict in the document's coordinates: the window starts `lines` lines
    and `chars` characters into it, `columns` into its first line (0 for whole lines);
    the reason says the document's line and column (any detail after them kept)."""

    def place(line: int, column: int) -> tuple[int, int]:
        return line + lines, column + columns if line == 0 else column

    line, column = verdict.new_errors[0]
    reason = verdict.reason.replace(_at(line, column), _at(*place(line, column)), 1)
    return replace(verdict, new_errors=tuple(place(*where) for where in verdict.new_errors),
                   new_ranges=tuple((a + chars, b + chars) for a, b in verdict.new_ranges),
                   reason=_JOINED.sub(lambda m: f"joins line {int(m[1]) + lines} to it", reason))


def _skip_blanks_back(text: str, at: int) -> int:
    """Offset of the first of the spaces and tabs that end text[:at]."""
    while at > 0 and text[at - 1] in " \t":
        at -= 1
    return at


_BLANKS = re.compile(r"[ \t]*")


def _width(line: str) -> int:
    """The columns a line's indentation covers, tabs to the next multiple of eight."""
    return len(line[:len(line) - len(line.lstrip(" \t"))].expandtabs(8))


def _indent(data: bytes, at: int) -> int:
    """The columns the indentation of the line that starts at byte `at` covers."""
    return _width(data[at:_BLANK_BYTES.match(data, at).end()].decode("ascii"))


_BLANK_BYTES = re.compile(rb"[ \t]*")
# Brackets join no line to a fill's (`ParsedDocument._joins_by_operator`): a closing one
# ends what it closes, and round and square ones hold lines that never end anything.
_CLOSERS = frozenset({")", "]", "}"})
_OPENERS = frozenset({"(", "["})
# What a grammar reads as called or indexed by the line below that the language does not
# (`_opened`): JavaScript's and TypeScript's arrow function, and TypeScript's expression
# that ends in a type (`a as T`, `a satisfies T`), which no `(` or `[` on the next line
# goes on with (`_TYPED`)
_TYPED = frozenset({"as_expression", "satisfies_expression"})
_NO_CALLEE = frozenset({"arrow_function"}) | _TYPED
# Where a line break ends a statement before a `(` or `[` that tree-sitter reads as
# continuing it (`ParsedDocument._ended_by_line_break`): the languages, the statements a
# line break ends whatever comes next, and the declarations
_ASI_LANGUAGES = frozenset({"javascript", "typescript", "tsx"})
_BREAK_ENDS_IT = frozenset({"break_statement", "continue_statement", "debugger_statement"})
_DECLARATIONS = frozenset({"lexical_declaration", "variable_declaration"})
_SPACE_BYTES = re.compile(rb"\s*")
# Languages where a line break outside brackets always ends the statement and only a
# backslash continues the line (`ParsedDocument._joins_by_operator`): tree-sitter-python
# reads `args,` over `call = ''` as the one assignment `args, call = ''`, CPython as the
# tuple `(args,)` and then the user's own statement, unchanged.
_BREAK_ENDS_STATEMENT = frozenset({"python"})


def _extra(root: Node, leaf: Node) -> Node | None:
    """The extra node (a comment, Python's line continuation: white space to the
    grammar) that holds `leaf`, if any."""
    return next((node for node in ancestors(root, leaf) if node.is_extra), None)


def _code_leaf_before(root: Node, data: bytes, low: int, high: int) -> Node | None:
    """The last token of code in data[low:high], past white space and comments."""
    while True:
        while high > low and data[high - 1] in b" \t\r\n\f\v":
            high -= 1
        if high <= low:
            return None
        leaf = root.descendant_for_byte_range(high - 1, high)
        extra = _extra(root, leaf)
        if extra is None:
            return leaf
        high = extra.start_byte


def _code_leaf_after(root: Node, data: bytes, at: int) -> Node | None:
    """The first token of code at or after byte `at`, past white space and comments."""
    while True:
        at = _SPACE_BYTES.match(data, at).end()
        if at >= len(data):
            return None
        leaf = root.descendant_for_byte_range(at, at + 1)
        extra = _extra(root, leaf)
        if extra is None:
            return leaf
        at = extra.end_byte


def _joint(root: Node, data: bytes, last: Node, below: Node,
           low: int, opened: bool = True) -> tuple[Node, Node] | None:
    """The node in which token `last`, the last code of its line, joins the line that
    starts with token `below` to its own, and its child that holds `below`; None where
    it does not (`ParsedDocument._joins_by_operator`, `_stands_alone`).

    `last` is an unnamed token (an operator, `=`, `.`, `,`, `&&`, `|`), not a closing
    bracket, or a named one that is its node's operator (Scala's grammar names its
    operators, `operator_identifier`: `val x = a +` over `foo()` reads `val x = a +
    foo()`, as scalac does, which takes a line break after an infix operator as white
    space), and the line below is no deeper than its line: a continuation is indented,
    as a macro's body is for the backslash.  The node that holds both has `last` as a
    child of its own, not its first (an opening bracket or a keyword that begins it);
    it begins at byte `low` or after (the span's first line: a list's items, one a line,
    are the list's, which began above), has no errors, and ends on the last line of its
    child that holds `below` (`then` or `{` open a body that the user's `fi` or `}`
    closes below: the line below is still a statement of its own).

    Where `opened`, the line below may also join by its first token, a round or square
    bracket that opens the arguments or the index of what `last` ends (`_opened`)."""
    if last.is_missing or (_indent(data, data.rfind(b"\n", 0, below.start_byte) + 1)
                           > _indent(data, data.rfind(b"\n", 0, last.start_byte) + 1)):
        return None
    inner = ancestors(root, below)
    by_operator = _by_operator(root, last, inner, low)
    if by_operator is None and opened:
        return _opened(last, below, inner, low)
    return by_operator


def _by_operator(root: Node, last: Node, inner: list[Node],
                 low: int) -> tuple[Node, Node] | None:
    """`_joint` by the operator `last`, its node's child; `inner`: the line below's
    first token and the nodes that hold it, innermost first."""
    if last.type in _CLOSERS:
        return None
    outer = ancestors(root, last)
    if len(outer) < 2:
        return None
    node = outer[1]
    if last.is_named and node.child_by_field_name("operator") != last:
        return None
    if node.has_error or node.start_byte < low or node.child(0) == last:
        return None
    if node not in inner or inner.index(node) == 0:
        return None
    taken = inner[inner.index(node) - 1]
    return (node, taken) if node.end_point[0] == taken.end_point[0] else None


def _opened(last: Node, below: Node, inner: list[Node],
            low: int) -> tuple[Node, Node] | None:
    """`_joint` by the line below's first token `below`, an opening round or square
    bracket: `last` ends an operand (`_ends_operand`), and the node
    that holds it too (`inner`: `below` and the nodes that hold it, innermost first)
    has the bracket, or the arguments it begins, as the child right after the one
    `last` ends, on no later line.  Where a line break is white space and no `;` ended
    the line above, `a` over `(b)()` reads `a(b)()` (a call) and `a` over `[1,
    2].map(f)` reads `a[1, 2]` (an index); a statement, a body or a cast that starts
    with the bracket (`if (x)` over `(void)y;`) is no such child.  After an operator
    or a keyword (`x++`, `return`), and after an arrow function's body (`() => {}`, no
    callee in JavaScript), tree-sitter-javascript reads a call where JavaScript ends
    the statement: those are left to the parse."""
    if below.type not in _OPENERS or below.is_named or not _ends_operand(last):
        return None
    node = next((n for n in inner[1:] if n.start_byte <= last.start_byte), None)
    if node is None or node.has_error or node.start_byte < low or inner.index(node) > 2:
        return None
    taken = inner[inner.index(node) - 1]
    before = taken.prev_sibling  # what `last` ends, past a comment between
    while before is not None and before.is_extra:
        before = before.prev_sibling
    if taken.start_byte != below.start_byte or before is None or before.type in _NO_CALLEE:
        return None
    return (node, taken) if node.end_point[0] == taken.end_point[0] else None


def _no_bracket_continues(statement: Node, last: Node) -> bool:
    """Whether JavaScript ends `statement`, whose last code before its `;` is the token
    `last`, at a line break before a `(` or `[` (`ParsedDocument._ended_by_line_break`):
    `break` and `continue` end at any line break (a label must be on their line); and
    a bracket continues no `debugger`, no declaration's name left without a value (`let
    d`), and neither `x++` nor an arrow function's block body, which are no callee, nor
    TypeScript's type after `as` or `satisfies` (which a `[` continues on its own line
    only), nor then what ends in them (`a = x++`, `const g = () => {}`)."""
    if statement.type in _BREAK_ENDS_IT:
        return True
    parts = [part for part in statement.named_children if not part.is_extra]
    node = parts[-1] if parts else None
    if node is not None and statement.type in _DECLARATIONS:
        if node.type != "variable_declarator":
            return False
        node = node.child_by_field_name("value")
        if node is None:
            return True
    elif statement.type != "expression_statement":
        return False
    while node is not None and node.end_byte == last.end_byte:
        if (node.type == "update_expression" and node.child(node.child_count - 1).type
                in ("++", "--")):
            return True
        body = node.child_by_field_name("body") if node.type == "arrow_function" else None
        if node.type in _TYPED or body is not None and body.type == "statement_block":
            return True
        node = node.child(node.child_count - 1) if node.child_count else None
    return False


def _ends_operand(last: Node) -> bool:
    """Whether token `last` ends an operand: a named token (a name, a number), a closing
    bracket, or the closing delimiter of a literal, the last child of a named node that
    starts with one of its type (a string's quote, a template's backquote, a regular
    expression's slash), or TypeScript's non-null `!`.  Read as an operator, the quote
    let `const s = "a"` over `(b)()` pass, which JavaScript reads as the call
    `"a"(b)()`, as C and Rust do, and TypeScript reads `a!` over it as `a!(b)()`."""
    if last.is_named or last.type in _CLOSERS:
        return True
    literal = last.parent
    if literal is not None and literal.type == "non_null_expression":
        return True
    return (literal is not None and literal.is_named and literal.child_count > 1
            and literal.child(literal.child_count - 1) == last
            and literal.child(0).type == last.type)


def _blanks_at(text: str, at: int) -> int:
    """How many spaces and tabs start text[at:]."""
    return _BLANKS.match(text, at).end() - at


_SPACE = re.compile(r"\s*")
# tree-sitter-bash's nodes whose text a backslash at a line's end does not join to the
# next line as code (`ParsedDocument._shell_continues`)
_SHELL_TEXT = frozenset({"comment", "raw_string", "ansi_c_string", "string", "heredoc_body",
                         "translated_string"})


def _past_comments(document: ParsedDocument, at: int) -> int:
    """Where the code at or after offset `at` (not in white space) begins: past the
    comments there and the white space after each (`// note` after `const x = `, a
    comment line below it).  A comment is white space to the parser: an incomplete line
    shows its error at the code after it, and read as the next code the comment hid
    it (`const x = // note` passed with an empty fill, and with `a +`)."""
    text, root = document.text, document.tree.root_node
    while at < len(text):
        byte = document._byte(at)
        leaf = root.descendant_for_byte_range(byte, byte + 1)
        comment = None
        for node in ancestors(root, leaf) if leaf is not None else ():  # one descent
            if node.start_byte != byte:
                break  # the nodes that start here, innermost first
            if "comment" in node.type:
                comment = node
                break
        if comment is None:
            break
        at = _SPACE.match(text, document._char(comment.end_byte)).end()
    return at


class _Below:
    """Errors that a line left incomplete at the fill causes on the code line below.

    Where line breaks are only white space (all the brace languages), a line left
    incomplete (`const x = |`, `x := |`) is an error on the next line with code: the
    `return` that cannot follow `=`, or (after recovery reads `return` as a name) the
    code after it.  The original document has that error too, at the same place, so it
    passed as damage away from the fill: an empty fill, or `a +`, was accepted there.
    Such an error is the fill's when the document with the span's lines taken out
    lacks it: those lines cause it, and the fill did not complete them.

    A line below that is broken on its own stays broken without them, and is broken in
    the document as it is: its error is the user's, whatever the fill, and the fill is
    judged as if that line were blank (`ParsedDocument._blanked`).  Read with it, the
    fill's own line could not be judged: recovery joins the incomplete line's damage
    with the line's below into one error that starts above (`const x = ` over `) ) ;`),
    which the document as it is has too, so the empty fill passed, and CPython, which
    stops at its first error, rejected every fill for the line below.
    """

    def __init__(self, document: ParsedDocument, start: int, end: int, size: int):
        self.document, self.start, self.end = document, start, end
        self.shift = size - (end - start)  # from document to filled-document offsets
        text = document.text
        self.next_code = _past_comments(document, _SPACE.match(text, end).end())
        next_end = text.find("\n", self.next_code)
        self.next_end = len(text) if next_end == -1 else next_end
        self.line_start = text.rfind("\n", 0, start) + 1
        self.line_end = text.find("\n", end) + 1  # the span's lines are [line_start, line_end)
        self.applies = ("\n" in text[end:self.next_code]
                        and bool(text[self.line_start:start].strip()))

    def _without(self) -> list[_Error]:
        """The document's errors with the span's lines taken out (kept by the version)."""
        return self.document.errors_without(self.line_start, self.line_end)

    def blames(self, error: _Error) -> bool:
        """Whether `error`, of the filled document, is one the fill's line causes on the
        first code line below it, see above; False where the usual rules judge it: away
        from that line, or with nothing before the span on its line."""
        if not (self.applies and self.next_code + self.shift <= error.start
                <= self.next_end + self.shift):
            return False
        moved = error.start - self.shift - (self.line_end - self.line_start)
        return not any(old.kind == error.kind and old.start == moved for old in self._without())

    def broken_on_its_own(self, candidate: list[_Error]) -> bool:
        """Whether the first code line below the span's, where the filled document
        (`candidate`'s errors) has damage, is broken on its own: an error starts on it
        with the span's lines taken out, and the document as it is has damage on it.
        Taken out, the span's lines may also take the opener of what the line below
        closes (`function()` over `end)`): that line is broken on its own only where the
        document as it is has damage on it too."""
        low, high = self.next_code, self.next_end
        if not (self.applies and any(e.start <= high + self.shift and e.end >= low + self.shift
                                     for e in candidate)):
            return False
        removed = self.line_end - self.line_start
        return (any(low - removed <= old.start <= high - removed for old in self._without())
                and any(old.start <= high and old.end >= low for old in self.document.errors))


class _Baseline:
    """A parse of the document with `middle` characters where the candidate has the fill,
    its errors listed by kind and by where they start in the candidate (`at`).

    A baseline error explains a candidate's only where both are of one kind and start at
    one place (`_explains`), so each is compared with those alone: compared with every
    one, a document of 200 hole markers (each an error) cost 40,000 comparisons a
    verdict, a quarter of a hole's validation."""

    def __init__(self, errors: list[_Error], middle: int, hole: int, size: int):
        self.middle = middle
        self.at: dict[tuple[str, int], list[_Error]] = {}
        for old in errors:
            mapped = _map(old.start, old.end, hole, middle, size)
            if mapped is not None:
                self.at.setdefault((old.kind, mapped[0]), []).append(old)


def _map(start: int, end: int, hole: int, middle: int, size: int) -> tuple[int, int] | None:
    """Move a baseline range into candidate coordinates; None if it ends in the replaced text."""
    if start >= hole + middle:  # after the replaced text (a zero-width error at an empty hole too)
        return start + size - middle, end + size - middle
    if end <= hole:
        return start, end
    if start <= hole and end >= hole + middle:  # covers the replaced text
        return start, end + size - middle
    return None


def _explains(old: _Error, error: _Error, touches: bool, hole: int, middle: int, size: int) -> bool:
    """Whether baseline error `old` is the same damage as candidate error `error`."""
    mapped = _map(old.start, old.end, hole, middle, size)
    if old.kind != error.kind or mapped is None:
        return False
    if not touches:
        # Away from the fill, recovery may carve up old damage differently: its start is enough.
        return mapped[0] == error.start
    # At the fill, only damage that overlapped the replaced text (or strictly enclosed an empty
    # hole), with the same extent and the same nested errors, is excused: the fill then sits
    # inside code that was already broken.  Merely touching the hole is not enough.
    if not (old.start < hole + middle and old.end > hole) or mapped != (error.start, error.end):
        return False
    inner: list[tuple[str, int, int]] = []
    for kind, start, end in old.inner:
        moved = _map(start, end, hole, middle, size)
        if moved is None:
            return False
        inner.append((kind, *moved))
    return tuple(inner) == error.inner


def _is_new(error: _Error, removed: _Baseline, original: _Baseline, hole: int, size: int,
            reach: tuple[int, int]) -> bool:
    """Whether the baselines fail to explain `error`; at the fill only the user's text can."""
    # Touching counts, even across blanks on the same line: an error that ends where the
    # fill starts is one the fill failed to close (`x = ` stays broken if the fill is empty).
    touches = error.start <= reach[1] and error.end >= reach[0]
    # Removing the span leaves artifacts at the hole, so only the original document can
    # vouch for damage there; away from the fill either parse may.
    bases = (original,) if touches else (removed, original)
    return not any(_explains(old, error, touches, hole, base.middle, size)
                   for base in bases for old in base.at.get((error.kind, error.start), ()))


def canonical_language(language: str | None) -> tuple[str | None, Parser | None, str]:
    """(canonical name, parser, "") when `language` can be checked, else (name, None, why not).

    LSP languageIds are accepted too, so callers may pass what the client sent.
    """
    canonical = _LANGUAGE_IDS.get(language.strip().lower()) if language else None
    if canonical is None:
        return None, None, (f"no grammar for language {language!r}" if language
                            else "no language given")
    parser = _parser(canonical)
    if isinstance(parser, str):
        return canonical, None, parser
    return canonical, parser, ""


# The latest parsed version of each recently validated document, for incremental reparsing.
# Bounded by count and by the characters their texts hold together: a tree costs ~23-31
# bytes a character (README, "Memory per document"), so 16 files of 2.5 MB held ~0.9 GB.
# The document parsed last is always kept, whatever its size: dropped, its next version
# (the next keystroke) would be parsed from nothing.
_DOCUMENTS: OrderedDict[str, ParsedDocument] = OrderedDict()
_KEEP_DOCUMENTS = 16
_KEEP_CHARACTERS = 8_000_000  # ~0.2-0.25 GB of trees


def _over_the_limits(documents: int, characters: int) -> bool:
    """Whether this many kept documents, holding this many characters, are more than
    are kept: one rule for dropping the least recent tree and for `room_for`."""
    return documents > _KEEP_DOCUMENTS or characters > _KEEP_CHARACTERS


def _kept_characters() -> int:
    """The characters the kept documents hold together; the caller holds `_LOCK`."""
    return sum(len(document.text) for document in _DOCUMENTS.values())


# One lock per document kept (taken before `_LOCK`, never inside it): a version is
# parsed once however many threads ask for it.  A fill that came while the document was
# being parsed (as it is at didOpen, see passes.parse_ahead) waited on `_LOCK` and then
# parsed it again from nothing, as nothing was kept yet when it looked.
_PARSING: dict[str, threading.Lock] = {}
# The threads waiting for each document's lock: a parse made behind others' work
# (`parsed_behind`) goes on at once while a fill waits for it.
_WAITING: dict[str, int] = {}


@contextlib.contextmanager
def parsed_behind(busy: Callable[[], bool], uri: str) -> Iterator[None]:
    """This thread's parses wait between chunks while `busy()` says other work is under
    way, unless a fill waits for `uri`'s parse: for a document parsed when it is opened
    (passes.parse_ahead), work ahead of its fills.  tree-sitter holds the GIL for each
    chunk it parses, and a fill's Python and each of its torch calls' returns waited for
    it: ghost text in a small file took as long beside a large file's parse as after it
    (1.7 s against 1.2-1.3 s alone, 50 ms after a 1.8 M-character file's didOpen)."""
    _OWN.behind = lambda: busy() and not _WAITING.get(uri)
    try:
        yield
    finally:
        _OWN.behind = None


def parsed_document(text: str, language: str | None,
                    uri: str | None = None) -> ParsedDocument | Validation:
    """The document parsed (from its previous version's tree, when `uri` was seen before).

    Returns an unchecked Validation instead when the language has no usable grammar.  A
    shell document's fills are confirmed by bash where it is bash's or sh's (its shebang,
    its file name) and bash is installed (bash_syntax.bash_for).
    """
    canonical, parser, why = canonical_language(language)
    if parser is None:
        return Validation(False, True, canonical, reason=why)
    if uri is None:
        return ParsedDocument(text, canonical, parser,
                              bash=bash_for(text, uri) if canonical == "bash" else None)
    with _LOCK:
        parsing = _PARSING.setdefault(uri, threading.Lock())
        _WAITING[uri] = _WAITING.get(uri, 0) + 1
    try:
        parsing.acquire()
    finally:
        with _LOCK:
            _WAITING[uri] -= 1
            if not _WAITING[uri]:
                del _WAITING[uri]
    try:
        return _parsed_and_kept(text, canonical, parser, uri)
    finally:
        parsing.release()


def _parsed_and_kept(text: str, canonical: str, parser: Parser, uri: str) -> ParsedDocument:
    """`parsed_document` of a document kept under `uri`; the caller holds its lock."""
    with _LOCK:
        previous = _DOCUMENTS.get(uri)
    if previous is not None and previous.text == text and previous.language == canonical:
        return previous
    document = ParsedDocument(text, canonical, parser, previous,
                              bash=bash_for(text, uri) if canonical == "bash" else None)
    with _LOCK:
        _DOCUMENTS[uri] = document
        _DOCUMENTS.move_to_end(uri)
        kept = _kept_characters()
        while len(_DOCUMENTS) > 1 and _over_the_limits(len(_DOCUMENTS), kept):
            dropped, gone = _DOCUMENTS.popitem(last=False)
            _PARSING.pop(dropped, None)
            kept -= len(gone.text)
    return document


def room_for(uri: str, characters: int) -> bool:
    """Whether a tree of `characters` for `uri` could be kept without dropping another
    document's: a document parsed ahead of its fills (passes.parse_ahead) must not push
    out the tree of the one being typed in, which its next keystroke's fill would then
    parse from nothing (an editor restoring many large tabs did that)."""
    with _LOCK:
        if uri in _DOCUMENTS or not _DOCUMENTS:  # alone, a tree is kept whatever its size
            return True
        return not _over_the_limits(len(_DOCUMENTS) + 1, _kept_characters() + characters)


def forget_document(uri: str) -> None:
    """Drop a closed document's parse tree (a large file's tree is large)."""
    with _LOCK:
        _DOCUMENTS.pop(uri, None)
        _PARSING.pop(uri, None)


def validate_fill(text: str, start: int, end: int, fill: str, language: str | None,
                  uri: str | None = None) -> Validation:
    """Parse text[:start] + fill + text[end:] and report error nodes that the fill introduced."""
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"span [{start}, {end}) is outside a document of {len(text)} characters")
    document = parsed_document(text, language, uri)
    if isinstance(document, Validation):
        return document
    return document.validate(start, end, fill)
