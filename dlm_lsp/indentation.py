"""Indentation: the document's unit (tabs or spaces, width) and a fill put on it.

A model writes a block at whatever indentation it likes; the document decides.
`reindent` moves a multi-line fill's lines (all but the first, which continues
the cursor's line) onto the document's unit and level, changing only leading
whitespace, and writes that whitespace as the block around the span does (its
tabs or spaces, the enclosing lines' own whitespace: Python rejects a block
whose lines begin with other characters, TabError).  It needs no grammar:
brackets and Python block words are read from the text, roughly.  The text
helpers here are shared with `dlm_lsp.span_hints` and `dlm_lsp.units`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from dlm_lsp.validation import language_for

_PAIRS = {"{": "}", "(": ")", "[": "]", "${": "}"}
_CLOSERS = frozenset(_PAIRS.values())
_OPENERS = (":", "{", "(", "[")  # a line ending so opens a block (or a bracket) below it
# A line ending so opens a block whose body sits one indentation unit deeper (after '(' or
# '[' the next line may be a continuation, which styles indent by other amounts).
_BLOCK_OPENERS = (":", "{")
# Languages whose blocks open with a line ending in ':' (None: not known, it may be one)
_COLON_BLOCKS = ("python", None)
# Python dedents that continue a statement rather than leave the block.
_PY_CONTINUATIONS = ("else", "elif", "except", "finally", "case")
# Keywords that close a block at the block's own indentation, by canonical language.
_KEYWORD_CLOSERS = {"ruby": ("end",), "lua": ("end",), "bash": ("fi", "done", "esac")}
# Keywords that start a block's next clause at the block's own indentation, ending the
# clause above (as Python's continuations do): Ruby's `else` of an `if`, `when` of a
# `case`, `rescue` of a `def`; shell's `;;` that ends a case arm.
_KEYWORD_CONTINUATIONS = {"ruby": ("else", "elsif", "when", "in", "rescue", "ensure"),
                          "lua": ("else", "elseif"),
                          "bash": ("else", "elif", ";;", ";&", ";;&")}
# What a line that opens a keyword block starts with, or ends with (after its comment is
# taken off), by canonical language: Ruby's `def`, `if`, `x = case y`, a block `do |x|`;
# Lua's `then`, `do`, `function f(a)`; shell's `; then`, `; do`, `case $x in` (a clause's
# `else`, `when 1` opens its body too).
_KEYWORD_HEADS = {"ruby": re.compile(r"(def|class|module|for)\b|(.*\s=\s*)?(if|unless|while"
                                     r"|until|case|begin)\b|.*\bdo(\s*\|[^|]*\|)?$"),
                  "lua": re.compile(r".*(\b(then|do)|\bfunction\b[\w.: ]*\([^()]*\))$"),
                  "bash": re.compile(r"((.*;)?\s*(then|do)|case\b.*\bin)$")}

# The step the shipped model (trained on Python) and most published models nest by: the
# only one read below a keyword head (`_on_document_unit`), where files vary the most
_MODEL_STEP = 4

_STATEMENT_LINES = 200  # lines above a header read for the statement it continues
# What a line that leaves its statement open ends with, and what one that goes on with the
# statement above starts with (a leading `.`, `->`, `&&`: Swift's, Kotlin's, JavaScript's)
# (not `=` nor `?`, which end a shell line of its own: `X=`, `RESULT=$?`)
_CONTINUED = (",", "(", "[", "&&", "||", "+", "->", "=>", "\\")
_CONTINUING = (".", "->", "&&", "||", "?")
# A switch's label, `case 1:` or `default:`, at the start of a line
_SWITCH_LABEL = re.compile(r"\s*(case\b|default\s*:)")
# A C++ class's access label, `public:` (Qt's `public slots:`, `signals:`), likewise
_ACCESS_LABEL = re.compile(r"\s*((public|protected|private)(\s+(slots|Q_SLOTS))?|signals"
                           r"|Q_SIGNALS)\s*:(?!:)")
# A shell case arm's pattern, `a)` or `*.md|*.txt)`, at the start of a line
_CASE_LABEL = re.compile(r"\s*[^\s()#][^()]*\)")
# A line that opens a namespace or a linkage block (`namespace a::b {`, `inline namespace
# v1`, `extern "C" {`), whose `{` may be on the line below; a namespace alias is none
_NAMESPACE_HEAD = re.compile(r'\s*((inline\s+)?namespace\b[^;{}()=]*|extern\s+"C(\+\+)?"\s*)'
                             r"\{?\s*$")
# A shell `case ... in`, whose arms' patterns some scripts write at its column (ncurses's)
_CASE_HEAD = re.compile(r"\s*case\b.*\bin\s*$")


@dataclass(frozen=True)
class IndentStyle:
    """A document's indentation unit: one tab, or `width` spaces; with `gnu`, `width`
    columns, each 8 columns of a line's indentation written as a tab (GNU style)."""

    tabs: bool
    width: int
    # whether the document showed it (False: the default for a text with no indented line)
    measured: bool = field(default=True, compare=False)
    # GNU style (GNU Emacs's default, libstdc++, GNU C and shell): levels of `width` (2 or 4)
    # spaces, a tab standing for 8 columns, so `\t    x` is 12 columns in, 3 levels of 4
    gnu: bool = False

    @property
    def unit(self) -> str:
        return "\t" if self.tabs else " " * self.width


@dataclass(frozen=True)
class FreeLines:
    """Lines of a fill whose leading whitespace is no indentation level (indexes into
    `fill.split("\\n")`; line 0 continues the cursor's line), found in a parse of the
    document with the fill (`dlm_lsp.syntax.free_lines`): the text rules here cannot tell.

    No level is read from them (`read`): a model writes a heredoc's `EOF`, a SQL string's
    lines, a Go raw string's at column 0, and C its `#if` in a function; read as code, such
    a line said the whole fill was written from column 0 and moved every code line a level
    deeper.  `literal` lines start inside a string or a heredoc: their whitespace is the
    string's content, so `place_literals` gives each back as the model wrote it, moved
    only with the line its string opens on (the value in `literal`; None for a heredoc,
    whose terminator must stay where it was written).  `passive` lines (comments, a block
    comment's inner lines, preprocessor directives) move with the code around them."""

    literal: dict[int, int | None] = field(default_factory=dict)
    passive: frozenset[int] = frozenset()
    # line -> where on it a string begins that goes on below it (`s = [[`, `R"(`: read as
    # code, that line ended in an opening bracket, a block's header)
    opens: dict[int, int] = field(default_factory=dict)

    def read(self, lines: list[str]) -> list[str]:
        """The fill's `lines` as a level is read from them: the free ones blank, a line
        that opens a string cut where the string begins."""
        return ["" if index in self.literal or index in self.passive
                else line[:self.opens[index]] if index in self.opens else line
                for index, line in enumerate(lines)]


def place_literals(raw: str, shaped: str, text: str, start: int, end: int,
                   free: FreeLines) -> str:
    """The shaped fill with each literal line (`free.literal`) as the model wrote it in
    `raw`, moved as the line its string opens on was moved: the whitespace they share
    (that line's indentation) rewritten as that line's is now, the rest kept, so a
    docstring's lines stay under its quotes, and a line left of its opening line (a SQL
    query at column 0) or of a heredoc stays where it was.  Line 0 is read with the
    cursor's line before the span [start, end) of `text`."""
    if not free.literal:
        return shaped
    before, _ = _line_bounds(text, start, end)
    old, new = raw.split("\n"), shaped.split("\n")
    if len(old) != len(new):
        return shaped
    for index, opener in free.literal.items():
        if index == 0 or index >= len(old):
            continue
        new[index] = old[index]
        if opener is None:
            continue
        was = _leading(before + old[0] if opener == 0 else old[opener])
        now = _leading(before + new[0] if opener == 0 else new[opener])
        if old[index].startswith(was) and (old[index].strip() or was):
            new[index] = now + old[index][len(was):]
    return "\n".join(new)


# --- text helpers ---------------------------------------------------------------------------


def _leading(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _width(whitespace: str, tab: int = 8) -> int:
    """Columns taken by leading whitespace, tabs to the next stop."""
    column = 0
    for ch in whitespace:
        column = (column // tab + 1) * tab if ch == "\t" else column + 1
    return column


def _line_bounds(text: str, start: int, end: int) -> tuple[str, str]:
    """The cursor line's text before `start` and after `end`."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    return text[line_start:start], text[end:line_end]


def shown_indent(shown: str, language: str | None) -> IndentStyle | None:
    """The indentation of the code shown around a document (a notebook cell's other
    cells), which a fill in a document that shows none of its own is shaped on; None
    where nothing is shown or the language is not known (`passes.shown_style`)."""
    if language is None or not shown.strip():
        return None
    return detect_indent(shown, language)


def detect_indent(text: str, language: str | None = None) -> IndentStyle:
    """The document's indentation: tabs if most indented lines start with one, else the most
    common step from a line that opens a block to the line below it.  A block comment's
    ` * ` lines are not counted: a tab-indented C header's doc comments start with a
    space, and outnumbered its code's tabs.

    Only below a block's opener: a statement's continuation is indented by its own amount
    (Google's Java style nests blocks by two and continues four in, and its continuations
    can outnumber its blocks).  A document whose only steps are other lines' shows no step
    (`measured` False): its widest evidence is a continuation's.  A document whose tabs
    are 8 columns beside levels of two or four is GNU style (`gnu`, `_gnu_step`).  The
    lines inside a Go raw string are text, not the code's (`_go_raw_after`): cobra's shell
    and PowerShell completion scripts, 200 lines in spaces, outnumbered the file's tabs."""
    tab_lines = space_lines = wide_tabs = 0
    raw_strings, raw = language == "go", False  # a raw string's lines: not counted
    steps: Counter[int] = Counter()
    opened: Counter[int] = Counter()  # the steps below a line that opens a block
    tabbed: list[tuple[int, str]] = []  # (step, the line above) of lines led by tabs
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    # a Python line ending in `{` opens a dict or set, whose lines are a continuation
    openers = (":",) if language == "python" else _block_openers(language)
    previous, above = 0, ""
    for line in text.split("\n", 5000)[:5000]:
        if raw_strings and "`" in line:  # opens or closes a raw string, or both
            raw, inside = _go_raw_after(line, raw), raw
            if inside:
                continue
        elif raw:
            continue
        if not line.strip() or line.lstrip(" \t")[:1] == "*":  # `_counted`, inlined: every line
            continue  # a block comment's ` * ` lines say nothing of the code's indentation
        lead = _leading(line)
        if lead[:1] == "\t":
            tab_lines += 1
        elif lead[:1] == " ":
            space_lines += 1
        spaces = "\t" not in lead
        width = len(lead) if spaces else _width(lead)
        step = width - previous
        if 1 < step <= 8 and spaces:
            steps[step] += 1
            code = above[:_code_end(above, comments, lifetimes)].rstrip()
            if code.endswith(openers) or _opens_keyword_block(code, language):
                opened[step] += 1
        elif not spaces and lead[:1] == "\t":
            after = lead.lstrip("\t")  # led by tabs, then spaces only:
            if "\t" not in after and len(after) >= 8:
                wide_tabs += 1  # a tab that is not every 8 columns of the line's
            elif "\t" not in after and 1 < step <= 8:
                tabbed.append((step, above))
        previous, above = width, line
    gnu = _gnu_step(tabbed, wide_tabs, opened, steps, language)
    if gnu is not None:
        return IndentStyle(False, gnu, gnu=True)
    if tab_lines > space_lines or (tab_lines == space_lines == 0 and language == "go"):
        return IndentStyle(True, 4, measured=tab_lines > 0)
    wide = opened or steps
    if not wide:
        return IndentStyle(False, 4, measured=False)
    return IndentStyle(False, max(sorted(wide), key=lambda step: wide[step]),
                       measured=bool(opened))


def _or_shown(style: IndentStyle, shown: IndentStyle | None, text: str) -> IndentStyle:
    """A document's indentation (`style`, `detect_indent`'s of `text`), or where the
    document shows no unit (not `measured`) that of the code shown around it (`shown`: a
    notebook cell's other cells, `dlm_lsp.notebooks`), where that shows one; but not
    its tabs or spaces where a line of the document is led by the others.

    A notebook's cell is a document of a few lines, often a header and the body a fill
    writes (`def f(x):`, the cursor below it): alone it says nothing of the notebook's
    unit, and a fill kept the model's four spaces in a notebook whose every other cell
    nests by two (or by tabs).  A cell that shows a unit of its own keeps it: the cell is
    what the kernel compiles (reading the whole notebook's unit instead made a two-space
    notebook with a cell of a long four-space dict a four-space one).  A cell whose only
    indented line is a continuation shows no unit but does show its characters: one
    aligned with spaces in a notebook of tabs stays one of spaces (taken as tabs, a
    `from x import \\` whose next line sat five spaces in came back a tab and a space).
    Only `reindent` reads it: the unit cut's span hint, in a document with no unit, only
    guesses one and takes the block's column from the fill as re-indented
    (`units._python_base`), so it follows `reindent` whichever unit that wrote."""
    if style.measured or shown is None or not shown.measured:
        return style
    if shown.tabs != style.tabs and any(_leading(line) for line in text.split("\n")
                                        if _counted(line)):
        return style
    return shown


def _go_raw_after(line: str, raw: bool) -> bool:
    """Whether a Go raw string (backquoted) is open after `line`, one being open before it
    or not: a backquote opens or closes one outside quotes and comments (a struct tag's
    pair opens none; a PowerShell script's backquotes inside `+"..."+` are its text)."""
    index, quote = 0, ""
    while index < len(line):
        ch = line[index]
        if raw:
            raw = ch != "`"
        elif quote:
            if ch == "\\":
                index += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "`":
            raw = True
        elif line.startswith("//", index):
            break
        index += 1
    return raw


def _gnu_step(tabbed: list[tuple[int, str]], wide_tabs: int, opened: Counter[int],
              steps: Counter[int], language: str | None) -> int | None:
    """The step of a GNU-style document, levels two or four columns apart with every 8
    columns of a line's indentation written as a tab (as GNU Emacs writes C and shell);
    None for any other.  `detect_indent` gives: `tabbed`, (step, the line above) of the
    lines led by tabs, then spaces, 2 to 8 columns right of the line above (a tab 8
    columns); `wide_tabs`, how many lines have 8 spaces or more after their tabs; the
    steps of its lines of spaces, below a block's opener (`opened`) and all (`steps`).

    GNU style when more of the `tabbed` lines sit 2 to 6 columns right of a line that
    opens their block (`\tif x; then` above `\t    y`, `      {` above `\tz;`) than a tab
    right of one (a tab document's levels) and than the `wide_tabs` (a bundle's modules
    one tab in, their levels in spaces after it); where none is below an opener, the
    same of those below other lines (libstdc++'s declarations go on a tab in below a line
    six columns in); and when the step the blocks show, lines of spaces and of tabs
    together, is 2 or 4.  A file of tabs whose continuations are aligned with spaces
    (`\t\t    b)`, the Linux kernel) stays one of tabs, and so does a tab-indented function
    in a file of spaces.  Not Python, whose tokenizer rejects blocks that mix them so
    (TabError).  Most documents have no line led by tabs less than a tab right of the
    line above, and are answered before a line is read again."""
    if language == "python" or all(step == 8 for step, _ in tabbed):
        return None
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    openers = _block_openers(language)
    counts = {True: [0, 0], False: [0, 0]}  # [GNU steps, a tab's], below an opener or not
    gnu: Counter[int] = Counter()  # the GNU steps below an opener
    for step, above in tabbed:
        code = above[:_code_end(above, comments, lifetimes)].rstrip()
        opens = code.endswith(openers) or _opens_keyword_block(code, language)
        counts[opens][step == 8] += 1
        if opens and step < 8:
            gnu[step] += 1
    shown, against = counts[True] if any(counts[True]) else counts[False]
    both = (opened + gnu) or steps
    if shown <= against + wide_tabs or not both:
        return None
    step = max(sorted(both), key=lambda step: both[step])
    return step if step in (2, 4) else None


def _counted(line: str) -> bool:
    """Whether a line says anything of the document's indentation: not a blank one, nor a
    block comment's ` * ` line (a tab-indented C file's comments start with a space)."""
    return bool(line.strip()) and line.lstrip(" \t")[:1] != "*"


def _enclosing(text: str, start: int, end: int, language: str | None) -> list[str]:
    """The leading whitespace of the lines that enclose the span, innermost first.

    The innermost is the span's own line (unless it is blank with the cursor at column
    0: blank lines are often left unindented), else the code line above it; then each
    code line above that sits left of all those below it (the block headers), down
    to column 0.  Comment lines are passed over (Python does not check their indentation).
    Widths are compared with tabs of 8 columns, as Python's tokenizer does."""
    before, after = _line_bounds(text, start, end)
    comments = _line_comments(language)
    if (before + after).strip():
        own = [before + after]  # the span's line: its indentation
    else:  # a blank line: where the cursor stands on it, unless at column 0
        own = [before] if before else []
    above = text[:start - len(before)].split("\n")[-2::-1][:5000]  # nearest first
    levels: list[str] = []
    code_above = (ln for ln in above if ln[:_code_end(ln, comments)].strip())  # lazily:
    for code in itertools.chain(own, code_above):  # most walks end a few lines up
        lead = _leading(code)
        if not levels or _width(lead) < _width(levels[-1]):
            levels.append(lead)
            if not lead:
                break
    return levels


def _block_style(document: IndentStyle, levels: list[str]) -> IndentStyle:
    """The indentation of the block the span is in (`levels`: `_enclosing`'s): the
    document's, unless that block is written in the other characters (a tab-indented
    function in a file of spaces, or the other way round; in a GNU-style document, a
    block 8 columns in or more written in spaces, where GNU style starts with a tab)."""
    block = levels[0] if levels else ""
    if document.gnu:
        if "\t" in block or _width(block) < 8:
            return document
        return IndentStyle(False, _block_step(levels) or document.width)
    if not block or ("\t" in block) == document.tabs:
        return document
    if "\t" in block:
        return IndentStyle(True, 4)
    return IndentStyle(False, _block_step(levels) or 4)


def _block_step(levels: list[str]) -> int | None:
    """How far the block the span is in sits right of the line that encloses it
    (`levels`: `_enclosing`'s), in spaces; None unless a step of 2 to 8."""
    block = levels[0] if levels else ""
    outer = next((level for level in levels[1:] if block.startswith(level)), "")
    step = len(block) - len(outer)
    return step if 1 < step <= 8 else None


def _unshown_style(style: IndentStyle, levels: list[str]) -> IndentStyle:
    """The unit of a document of spaces that shows none (`style` not measured: no line
    of it is indented by a step): the step of the cursor's own line, if it shows one.

    An editor indents a new line in a block by its step, so `function t.f()` with the
    cursor two spaces in on the line below is a two-space file, and a fill's block
    there nests by two more: the default four put a fill's `return` four past its
    `if`, in a file whose every other level is two apart.  The editor's step, not the
    fill's: it is what the user's file goes on with (the span hint reads it too,
    `span_hints._deeper`).  With the cursor at column 0 (a new file's first block opened
    on the cursor's line) the default stays, where the span hint puts that block's body,
    not the fill's own step; a fill whose body is right of the header keeps its depth
    there, which Python's dedent cut in `dlm_lsp.units` then reads as the block's.  Tabs
    are the document's unit already (`_block_style`)."""
    if style.tabs or style.measured:
        return style
    step = _block_step(levels)
    return style if step is None else IndentStyle(False, step)


def _unindented_style(style: IndentStyle, document: str, fill: list[str]) -> IndentStyle:
    """The tabs of a fill whose indented lines all start with one, in a document with no
    indented line (`style` the default: not measured, spaces).

    Nothing in the document says tabs or spaces, and the fill's tabs are evidence where
    the default is none: a C header whose only indented lines were the fill's (a struct's
    members, the document's comment lines ` * `) had its tabs rewritten as four spaces.
    A fill in spaces keeps its own already (no step of the document's to put it on); the
    cursor's own line's whitespace, the editor's, still decides (`_block_style`)."""
    if style.tabs or style.measured:
        return style
    leads = {_leading(line)[:1] for line in fill if line.strip()} - {""}
    if leads != {"\t"} or any(_leading(line) for line in document.split("\n")
                               if _counted(line)):
        return style
    return IndentStyle(True, style.width, measured=False)


def _line_comments(language: str | None) -> tuple[str, ...]:
    """What starts a line comment in `language` (a canonical name; None: unknown).

    `#` is code in the brace languages (JavaScript's private fields `this.#x`, C's
    preprocessor, Rust's attributes), `//` in Python (floor division), and Lua's
    comments start with `--`; a language not known here gets both `#` and `//`.
    """
    if language in ("python", "ruby", "bash"):
        return ("#",)
    if language == "lua":
        return ("--",)
    if language == "php":
        return ("#", "//")
    return ("#", "//") if language is None else ("//",)


def _block_openers(language: str | None) -> tuple[str, ...]:
    """What a line of `language` (canonical; None: unknown) ends with to open a block below
    it: `{`, and `:` where a colon opens one (Python; an unknown language may be one).
    Elsewhere a line ending in `:` opens none: a `case 1:` with `case 2:` below it at its
    column, C++'s `public:` beside its members."""
    return _BLOCK_OPENERS if language in _COLON_BLOCKS else ("{",)


def _openers(language: str | None) -> tuple[str, ...]:
    """What a line of `language` ends with to open a block or a bracket below it."""
    return (*_block_openers(language), "(", "[")


def _lifetimes(language: str | None) -> bool:
    """Whether a `'` that quotes no single character is a name's mark in `language`: Rust's
    lifetimes and loop labels (`<'a>`, `&'static str`, `'outer: loop {`), which never close."""
    return language == "rust"


def _char_literal(line: str, index: int) -> bool:
    """Whether the `'` at `index` starts a character literal: `'x'` or an escape (`'\\''`)."""
    return line[index + 1:index + 2] == "\\" or line[index + 2:index + 3] == "'"


def _unquoted(line: str, comments: tuple[str, ...],
              lifetimes: bool = False) -> Iterator[tuple[int, str | None]]:
    """(index, character) of each character of `line` outside quotes; at the line comment
    (`comments`: what starts one) (index, None), and no more.

    A rough lexer for any language: strings end at their quote or the line's end.  With
    `lifetimes` (see _lifetimes) a `'` quotes only a character literal: read as a
    string's quote, `&'a str {` would hide its brace.
    """
    index, quote = 0, ""
    while index < len(line):
        ch = line[index]
        if quote:
            if ch == "\\":
                index += 1
            elif ch == quote:
                quote = ""
        elif ch == "'" and lifetimes and not _char_literal(line, index):
            yield index, ch
        elif ch in "\"'`":
            quote = ch
        elif line.startswith(comments, index):
            yield index, None
            return
        else:
            yield index, ch
        index += 1


def _code_end(line: str, comments: tuple[str, ...], lifetimes: bool = False) -> int:
    """Where the line comment of `line` starts (its length if none), outside quotes."""
    if not any(mark in line for mark in comments):
        return len(line)  # most lines: no need to lex them
    return next((index for index, ch in _unquoted(line, comments, lifetimes) if ch is None),
                len(line))


def _opens_keyword_block(line: str, language: str | None) -> bool:
    """Whether a `line` (its comment is not read) opens a block that `language` closes
    with a keyword (see _KEYWORD_HEADS): not a block closed on its own line
    (`def f; 1; end`, `if x; then y; fi`), nor Ruby's endless method (`def f(x) = x`)."""
    heads = _KEYWORD_HEADS.get(language or "")
    if heads is None:
        return False
    code = line[:_code_end(line, _line_comments(language))].strip()
    clause = _keyword(code) in _KEYWORD_CONTINUATIONS.get(language or "", ())
    if not (heads.match(code) or (clause and code[:1].isalpha())):
        return False
    if re.search(rf"\b({'|'.join(_KEYWORD_CLOSERS[language or ''])})$", code):
        return False
    return not re.match(r"def\s+[\w.]+[?!]?(\([^)]*\))?\s*=\s", code)


def _block_steps(text: str, language: str | None) -> frozenset[int]:
    """The steps by which the blocks of `text` in a language with keyword blocks
    (`_KEYWORD_HEADS`) nest, below a keyword head or a `{`: how far the first code line
    below each line that opens one sits right of it (a tab 8 columns, as
    `_on_document_unit` reads a fill's); none for another language.  Every step shown,
    not the most common: one block the writer nested otherwise is enough to say that a
    fill nested so may be the writer's (`_on_document_unit`).  A shell function's `{`
    counts: sensible-editor's `then` / a tab shows its step only in its functions'."""
    if language not in _KEYWORD_HEADS:
        return frozenset()
    return frozenset(step for code, step in _steps_right(text, language, str.strip)
                     if code.endswith("{") or _opens_keyword_block(code, language))


def _steps_right(text: str, language: str | None,
                 counted: Callable[[str], object]) -> Iterator[tuple[str, int]]:
    """(the code of a line, how far right of it the next line sits) for each line of
    `text` (its first 5,000) that the next sits right of; lines `counted` refuses and
    comment lines are passed over (a tab 8 columns).  The walk `_block_steps` and
    `_continuation_steps` read the document's steps from."""
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    above, width = "", 0
    for line in text.split("\n", 5000)[:5000]:
        if not counted(line) or comments and line.lstrip().startswith(comments):
            continue
        now = _width(_leading(line))
        if now > width:
            yield above[:_code_end(above, comments, lifetimes)].rstrip(), now - width
        above, width = line, now


def _keyword(line: str) -> str:
    """The word (or shell's case-arm end, `;;`) a line starts with."""
    return re.match(r";;&?|;&|\w*", line.lstrip())[0]


# --- the cursor's column ----------------------------------------------------------------------


def to_cursor_column(fill: str, text: str, start: int, end: int,
                     language: str | None = None, free: FreeLines | None = None) -> str:
    """A fill whose first line starts deeper than the cursor, moved back to the cursor's
    column together with the lines below it that share the deeper base.

    A cursor (or a hole) after the indentation of its line says where the code goes:
    editors put it at the block's level, and a user who moves it left is leaving a
    block.  A model that goes on at a deeper level (continuing the block above, as the
    shipped model does after `return n` in fixtures/hello.py) writes where it was not
    asked to.  Left alone: after a line that opens a block (`if x:`, `{`; its body
    belongs deeper) where the cursor is not right of that line's indentation, before
    code that goes on at the deeper level (the span replaced a block's header, say), with
    the cursor at column 0 (blank lines are often left unindented, so that column says
    nothing), and when a later line of the fill comes back left of the deeper base but
    not of the cursor (the fill means both levels).  A line left of the cursor's column
    has left its block (a Python dedent to module code, a closer) and stays where the
    model wrote it: `    return ys` then `x = 1` at column 0 is `return ys` at the
    cursor, `x = 1` still at column 0 (which `dlm_lsp.units` cuts off).  A cursor right
    of the opening line's indentation already stands in the body, as an editor puts it
    after `function f() {`: a model that indents once more there writes the body a
    level too deep (the shipped model does after the `{` of fixtures/hello.js, .scala,
    .swift and .sh), and in Python a fill below `def f(xs):` that returns to the body's
    level (`return t`) would dedent to no level at all.  A language not known here keeps
    the earlier rule (any opening line above leaves the fill alone).  `language` (an LSP
    id or canonical name) says what starts a comment on the line above.  Depths are
    compared in columns, not characters: a model may indent in spaces a block written in
    tabs (or the reverse), a tab counting as one of the fill's own steps (8 columns in a
    GNU-style document, `detect_indent`: `\t    x` is 12 columns in), or, below a cursor
    in its line's tabs, as the columns that put the first line's level on a column the
    fill comes back to, with the fill's own step past it (`_step_past`); a moved line's
    whitespace past the cursor's is written in the cursor's tabs or spaces.  No depth is
    read from the `free` lines (see FreeLines); they move with the others.
    """
    before, _ = _line_bounds(text, start, end)
    first, *rest = fill.split("\n")
    extra = _leading(first)
    free = free or FreeLines()
    if not before or before.strip() or not extra or not first.strip() or 0 in free.literal:
        return fill
    above = text[:start - len(before)].rstrip().rsplit("\n", 1)[-1]
    canonical = language_for(language) if language else None
    comments = _line_comments(canonical)
    header = above[:_code_end(above, comments, _lifetimes(canonical))].rstrip()
    in_body = canonical is not None and _width(before) > _width(_leading(header))
    if header.endswith(_OPENERS) and not in_body:
        return fill
    read = free.read([first, *rest])[1:]
    # a tab is one of the fill's steps (`extra` is one), or a GNU-style document's 8 columns
    gnu = detect_indent(text[:start] + text[end:], canonical).gnu
    tab = 8 if gnu else _fill_unit([first, *read], 4)
    step = None if gnu or before.strip("\t") else _step_past(before, extra, read, tab)
    tab = tab if step is None else step[0]
    deeper = _width(before + extra, tab)
    below = next((line for line in text[end:].split("\n")[1:] if line.strip()), "")
    if _width(_leading(below), tab) >= deeper:
        return fill  # the code after the span goes on at the deeper level too
    widths = [_width(_leading(line), tab) for line in rest]
    column = _width(before, tab)
    if any(line.strip() and column <= width < deeper
           for line, width in zip(read, widths, strict=True)):
        return fill
    tabs = before.endswith("\t")  # the rest in the cursor's characters, from a tab stop
    moved = [before + _blanks(width - deeper, tabs, tab if step is None else step[1])
             + line.lstrip(" \t")
             if line.strip() and width >= deeper else line
             for line, width in zip(rest, widths, strict=True)]
    return "\n".join([first[len(extra):], *moved])


def _space_columns(lines: list[str]) -> set[int]:
    """The columns of `lines` indented in spaces alone (blank and unindented lines, and
    those with a tab in their indentation, left out): where a fill in spaces below a
    cursor in tabs puts its levels."""
    return {_width(_leading(line)) for line in lines
            if line.strip() and _leading(line) and "\t" not in _leading(line)}


def _step_past(before: str, extra: str, lines: list[str],
               tab: int) -> tuple[int, int] | None:
    """For `to_cursor_column`, below a cursor in its line's tabs (`before`) whose fill
    starts `extra` spaces deeper: the columns a tab of the cursor's stands for in the
    fill (`tab`, else four, else eight: the first whose deeper base, the cursor's tabs
    and `extra`, is a column the fill's `lines` come back to, none of them between the
    cursor's level and it), and the fill's step past that base; None where none is.

    Both were one step, read from column 0: 4 spaces and then 20 and 12 below two tabs
    (four a tab, a block of eight past the base of 12) read as steps of four, and the
    block's line went two tabs past the cursor's, not one; 8, then 24 and 16 read as
    eight a tab, with a line (16) between the cursor's level and the base (24), and the
    fill was left as written, two tabs too deep."""
    if "\t" in extra:
        return None
    widths = _space_columns(lines)
    for width in dict.fromkeys((tab, 4, 8)):
        level = len(before) * width
        base = level + len(extra)
        if base in widths and not any(level <= w < base for w in widths):
            return width, _fill_unit(lines, width, base=base)
    return None


# --- reindent -------------------------------------------------------------------------------


def _fill_unit(lines: list[str], default: int, tab: int | None = None, base: int = 0) -> int:
    """The step the fill's own space indentation moves in; with `tab` (a GNU-style
    document's 8 columns a tab), its lines with tabs too.  Steps are read from `base`
    (the fill's own level, where it is known), not from column 0: a class's members four
    past a `public:` two in are a step of four, not two."""
    widths = sorted({width for line in lines
                     if line.strip() and (tab or "\t" not in _leading(line))
                     and (width := _width(_leading(line), tab or 8)) >= base})
    steps = [b - a for a, b in zip([base, *widths], widths, strict=False) if b > a]
    return min((step for step in steps if step in (2, 4, 8)), default=default)


def _tab_width(lines: list[str], before: str) -> int:
    """How many columns of a fill's own spaces one of a tab document's tabs stands for:
    the fill's step (`_fill_unit`), or, where its indented lines all sit at one column,
    that column over the cursor's level in tabs (`before`: the cursor's line up to it),
    where that is a model's step, four or eight.

    A model shown two tabs writes the lines that go on at the cursor's level eight
    spaces in: read as one step of eight, that was one tab, the fill left the block at
    its second line, and a Python fill was cut to its first.  A fill at one column shows
    no step of its own; the cursor's level is the likeliest level of its lines, as its
    first line's is.  A quotient of two is left alone: four spaces below two tabs is
    more likely a model's dedent, in its own step of four, than a step of two.  Only
    with the cursor in its line's indentation (`before` all tabs): below code the fill's
    lines are a body or a continuation (`g(a,` above `b)` 16 spaces in, two levels of
    the model's four right of two tabs), not at the cursor's level."""
    unit = _fill_unit(lines, _MODEL_STEP)
    widths = _space_columns(lines)
    if len(widths) != 1 or not before or before.strip("\t"):
        return unit
    (width,) = widths
    levels = len(before)
    return width // levels if width % levels == 0 and width // levels in (4, 8) else unit


def _cursor_level(lines: list[str], before: str) -> _Frame | None:
    """Where a fill in spaces below a cursor two tabs in or more (`before`, all tabs)
    has its indented lines at two columns or more, the smallest of them a model's step
    (four or eight) for each of the cursor's tabs, and steps of another size past it:
    that column is the cursor's level and the steps past it the fill's own, so its
    levels move onto the tabs from there (the lines of `lines` after the first; a tab
    is then one of the fill's steps).  None otherwise.

    One tab stood for one step of the fill read from column 0: 8 and 16 spaces below
    two tabs (four spaces a tab, a block of eight) came out one and two tabs, and 16
    and 20 (eight a tab, a block of four) four and five; a Python fill left its block at
    its second line and was cut to its first, and Go's went two tabs too deep.  A fill
    at one column is `_tab_width`'s; where the smallest column over the tabs is the
    fill's step too, a tab of that step already reads it.  Below one tab the smallest
    column is the cursor's level in one reading and a level deeper in the other, so
    the columns are read as before."""
    if len(before) < 2 or before.strip("\t") or any(
            "\t" in _leading(line) for line in lines if line.strip()):
        return None
    widths = _space_columns(lines)
    if len(widths) < 2:
        return None
    base = min(widths)
    per_tab, rest = divmod(base, len(before))
    unit = _fill_unit(lines, 0, base=base)
    if rest or per_tab not in (4, 8) or not unit or unit == per_tab:
        return None
    return _Frame(base, len(before) * unit, unit, len(lines))


def _bracket_depths(line: str, comments: tuple[str, ...],
                    lifetimes: bool = False) -> tuple[int, int]:
    """(closers leading the line, net bracket change), skipping quoted text and the line
    comment (`comments`: what starts one, see _line_comments; `lifetimes`: _lifetimes)."""
    leading = len(line.lstrip()) - len(line.lstrip().lstrip(")]}"))
    code = [ch for _, ch in _unquoted(line, comments, lifetimes) if ch is not None]
    return leading, sum(ch in "([{" for ch in code) - sum(ch in ")]}" for ch in code)


@dataclass(frozen=True)
class _Frame:
    """The fill's own indentation base `base`, to be moved to document column `target`."""

    base: int
    target: int
    unit: int  # the fill's indentation step
    stop: int  # lines from this index on (of the lines after the first) keep their level


def _closer_column(rest: list[str], code: list[int], widths: dict[int, int],
                   language: str | None) -> int | None:
    """The column of the keyword that closes the block the fill's first line opens (the
    first closer with no block opened below that line still open), if the fill has one.

    Ruby, Lua and shell close the innermost open block whatever a closer's column, so
    this one is that block's own, wherever the model wrote it."""
    closers = _KEYWORD_CLOSERS.get(language or "", ())
    depth = 1
    for i in code:
        keyword = _keyword(rest[i])
        if keyword in closers:
            depth -= 1
            if depth == 0:
                return widths[i]
        elif keyword not in _KEYWORD_CONTINUATIONS.get(language or "", ()) and (
                _opens_keyword_block(rest[i], language)):
            depth += 1  # a next clause (`else`) goes on in the block it is in
    return None


def _bracket_closer_column(rest: list[str], code: list[int], widths: dict[int, int],
                           language: str | None) -> int | None:
    """The column of the line whose leading closer closes the innermost bracket the fill's
    first line leaves open (`{` of `if (x) {`), if a line starts so.

    A bracket closes its match whatever the closer's column, so this closer is that
    block's own, wherever the model wrote it (as _closer_column's keyword is)."""
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    depth = 0  # brackets opened below the first line, still open
    for i in code:
        leading, net = _bracket_depths(rest[i], comments, lifetimes)
        if leading > depth:
            return widths[i]
        depth += net
        if depth < 0:
            return None  # closed inside a line: no column shows it
    return None


def _frame(before: str, first: str, rest: list[str], tab: int, language: str | None,
           unit: int | None = None, statement: str | None = None,
           flush: bool = False) -> _Frame | None:
    """Whether the fill was written against another base, and which of its lines move.

    Columns are read with a tab `tab` wide; the fill's step is `unit`, else that of its
    lines of spaces, a tab one step (`_fill_unit`).  A header's level is that of the line
    its statement begins on (`statement`, see `_statement_indent`; else the cursor's
    line's own): the body of `def f(a,` / `      b):` sits a step right of the `def`,
    not of the line that ends in `:`.

    Two signs of a foreign base: the cursor's line ends in a header (Python's ':' or an
    opening bracket, or opens a block its language closes with a keyword: Ruby's `def g`, Lua's
    `function g()`, shell's `if ...; then`, or a clause's body: `else`, `when 1`, whose
    closer and next clause are the cursor's block's) and the next line is not indented
    past it, so the header sat one fill step above that line (or at its column, when
    that line is the header's own closer or next clause, or the first label of a switch
    the header opens with a brace: gofmt, the Linux kernel and Swift write `case 1:` at
    the column of its `switch`, as LLVM, Qt and GNU write C++'s `public:` at its
    class's; or the header opens a block its document writes at the header's column,
    `flush`: a namespace, a shell case's arms, see `_flush_body`), or, where the fill's
    first line
    opens a keyword block on the cursor's blank line and its body sits deeper, the block's
    own closer sits left of the cursor's column (`if x then`, `    return 2`, `end` at
    column 0 below a cursor two in: the `end` closes the `if`, whatever its column, so
    the fill was written from column 0; read as written from the cursor's column, that
    `end` was the cursor's block's, cut, and the `if` left open), or where the fill's
    first line on the cursor's blank line leaves a bracket open and its closer sits left
    of the cursor's column (`if (x) {`, `    return 2;`, `}` at column 0: that `}` closes
    the `if` whatever its column; it stayed left of the block it closes, and a Python
    `)` there was cut as a dedent); or the lines right after the first sit left of the
    cursor's column.
    Not that second sign in Python, outside brackets: there a line left of the cursor's
    column is a dedent (the model was shown the cursor's indentation), and leaves the
    block (`x = 1` at column 0 after `return xs` is module code, which `dlm_lsp.units`
    cuts off); moved into the block it would mean other code.  The moved stretch ends at
    the first line that belongs to an outer block: one that dedents past the base,
    closes a bracket opened before the fill, is a Python `else`/`elif`/`except`/
    `finally`/`case` with no header of the fill at its level, or is a closing keyword
    (Ruby's and Lua's `end`, shell's `fi`/`done`/`esac`) or a next clause's (Ruby's
    `else`/`elsif`/`when`/`rescue`/`ensure`, Lua's `else`/`elseif`, shell's `else`/`elif`
    and a case arm's `;;`) at the base with no block of the fill open there: that closes
    the cursor's block (or its clause), whose closer the suffix already holds, and kept
    where the model wrote it (left of the cursor) `dlm_lsp.units` ends the fill before
    it; moved onto the cursor's column it would be a second closer, or an `else` in the
    body of the `if` it belongs to.
    """
    code = [i for i, line in enumerate(rest) if line.strip()]
    if not code:
        return None
    widths = {i: _width(_leading(rest[i]), tab) for i in code}
    line_base = _width(_leading(before), tab)
    cursor = line_base if before.strip() else _width(before, tab)
    header_base = line_base if statement is None else _width(statement, tab)
    given, unit = unit, unit or _fill_unit(rest, tab)
    comments, python = _line_comments(language), language in ("python", None)
    lifetimes = _lifetimes(language)
    head = before + first
    head = head[:_code_end(head, comments, lifetimes)].rstrip()  # a header's comment is not its end
    nested = widths[code[0]]
    if rest[code[0]].lstrip()[:1] in _CLOSERS:
        return None
    closers = _KEYWORD_CLOSERS.get(language or "", ())
    continuations = _KEYWORD_CONTINUATIONS.get(language or "", ())
    depth = max(0, _bracket_depths(head, comments, lifetimes)[1])
    keyword_head = _opens_keyword_block(head, language)
    # a clause the cursor's line starts (`else`) is the cursor's block's, its closer too
    clause = keyword_head and _keyword(head) in continuations
    openers = _openers(language)
    colon = ":" in openers  # whether a line ending in ':' opens a block
    if head.endswith(openers) or keyword_head:
        if nested > header_base:  # the body is deeper: written from the cursor's column,
            own = None  # unless the fill's block's own closer shows another
            if keyword_head and not clause and not before.strip():
                own = _closer_column(rest, code, widths, language)
            elif depth > 0 and not before.strip():
                own = _bracket_closer_column(rest, code, widths, language)
            if own is None or own >= header_base:
                return None
            base, target = own, header_base
        else:
            # the header's own closer (or next clause) right below it sits at its column,
            # and so may the first label of a switch's braces (gofmt, the Linux kernel,
            # Swift) or of a C++ class's (`public:` where LLVM, Qt and GNU put it)
            labels = (_SWITCH_LABEL, _ACCESS_LABEL) if language == "cpp" else (_SWITCH_LABEL,)
            own_line = flush or _keyword(rest[code[0]]) in closers + continuations or (
                head.endswith("{") and any(label.match(rest[code[0]]) for label in labels))
            if own_line and given is None:  # the fill's step, read from that line's column
                unit = _fill_unit(rest, tab, base=nested)
            base, target = nested if own_line else nested - unit, header_base
    elif nested < cursor and (language != "python" or depth > 0):
        if python and _statement_column(rest, code, depth, comments) >= cursor:
            return None  # a continuation at column 0, then code at the cursor's column
        base, target = nested, cursor
    else:
        return None
    headers = {base} if (colon and head.endswith(":")) or (keyword_head and not clause) else set()
    opened = head.endswith(openers) or keyword_head  # the line above opened a block at the base
    for i in code:
        leading, net = _bracket_depths(rest[i], comments, lifetimes)
        if language == "bash" and _CASE_LABEL.match(rest[i]):
            net += 1  # `a)` labels a case arm: its `)` closes no bracket
        word = rest[i].split(maxsplit=1)[0].rstrip(":")
        dedent = python and word in _PY_CONTINUATIONS and widths[i] not in headers
        keyword = _keyword(rest[i])
        # a closer or next clause at the base, of no block the fill opened there
        leaves = (keyword in closers + continuations and widths[i] <= base
                  and (clause or not opened) and widths[i] not in headers)
        if widths[i] < base or leading > depth or dedent or leaves:
            return _Frame(base, target, unit, i)
        if keyword in closers:
            headers.discard(widths[i])
        opened = widths[i] > base  # a closer right after the block's body is its own
        depth += net
        if (colon and rest[i].rstrip().endswith(":")) or _opens_keyword_block(rest[i], language):
            headers.add(widths[i])
    return _Frame(base, target, unit, len(rest))


def _statement_indent(text: str, line_start: int, line: str, language: str | None) -> str:
    """The indentation of the line that the statement of `line` (the line of `text` from
    `line_start`, up to the cursor) begins on: its own, unless it continues a statement
    begun above, as far up as that goes.

    A line continues the one above it where it closes a bracket left open there (`def
    f(a,` above `      b):`, a Swift or PHP parameter list aligned under its `(`), where
    that line ends in a comma or an operator (Swift's `if` conditions, one a line), where
    it starts with one (Swift's `        -> Self {` below its parameters), or where it
    sits right of a code line that opens no block (gofmt's `if a &&` above `\t\tb {`,
    TypeScript's `interface A` above `    extends B {`): a step right of a line that opens
    no block is a continuation, as `detect_indent` reads a document.  No grammar is
    read: a line right of a `#if` or a C++ `public:` reads as a continuation too, which
    only leaves a fill's level where the model wrote it."""
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    openers = _block_openers(language)
    lead = _leading(line)
    code = line[:_code_end(line, comments, lifetimes)].strip()
    owed = _owed(code, comments, lifetimes)
    above = text[:line_start].rsplit("\n", _STATEMENT_LINES + 1)[-2::-1][:_STATEMENT_LINES]
    for previous in above:
        previous_code = previous[:_code_end(previous, comments, lifetimes)].rstrip()
        if not previous_code.strip():
            continue
        if owed > 0:  # inside the bracket: the line that opened it begins the statement
            owed -= _bracket_depths(previous_code, comments, lifetimes)[1]
        elif not (previous_code.endswith(_CONTINUED) or code.startswith(_CONTINUING) or (
                _width(_leading(previous)) < _width(lead) and not (
                    previous_code.endswith(openers)
                    or _opens_keyword_block(previous_code, language)))):
            break
        else:
            owed = _owed(previous_code.strip(), comments, lifetimes)
        lead, code = _leading(previous), previous_code.strip()
    return lead


def _owed(code: str, comments: tuple[str, ...], lifetimes: bool) -> int:
    """How many brackets opened on lines above a line of `code` closes."""
    owed = depth = 0
    for ch in (ch for _, ch in _unquoted(code, comments, lifetimes) if ch is not None):
        depth += (ch in "([{") - (ch in ")]}")
        owed = max(owed, -depth)
    return owed


def _statement_column(rest: list[str], code: list[int], depth: int,
                      comments: tuple[str, ...]) -> int:
    """The column of the first line (of `rest`, after a first line that leaves `depth`
    brackets open) that starts outside brackets: -1 if none does.

    Inside brackets a Python line's column is free: one written at column 0 below a
    cursor four in says the fill came from column 0 only if the next statement does too
    (`1)` then `return ys`, both at 0); with the statement at the cursor's column the
    model wrote there, and moving it a level deeper broke the fill."""
    for i in code:
        if depth <= 0:
            return _width(_leading(rest[i]))
        depth += _bracket_depths(rest[i], comments)[1]
    return -1


def _on_document_unit(head: str, rest: list[str], unit: int, language: str | None,
                      remarks: frozenset[int] = frozenset(), text: str = "") -> list[int] | None:
    """The columns of the lines after the fill's first (`head`: the cursor's line with that
    first line) with the fill's own block step made the document's `unit`; None where the
    fill shows no other step.

    The fill's step is how far the line after one that opens a block (`{`, `:`, a keyword
    head: Lua's `then`, Ruby's `do`, shell's `then`) sits right of it; a fill with no
    such line, or with two different steps, says nothing.  Each line right of the head's
    indentation moves with its enclosing line: as many document steps right of where
    that one went as it sat fill steps right of it (what is left over, a continuation's
    alignment, kept).  Lines at or left of the head's indentation are on the
    document's levels (the fill back in the cursor's block or an outer one) and stay.

    The `remarks` (indexes into `rest`: lines that start a comment) are moved as the code
    at their column is, and a comment first below a header shows the step as a code line
    does (a block's first statement taken out leaves a comment alone in the fill); but
    they open no level and a code line below one reads its step from the line above the
    comment: a comment at column 0 (JetBrains') under a header says nothing of the step.
    A line after a backslash continues its statement at the column its writer chose, no
    level: it moves as far as its statement's first line did.

    A step below a keyword head that the document's own blocks nest by somewhere
    (`_block_steps` of its `text`) says nothing either.  Scripts often write a block
    unlike the rest of the file (perf's tests `then` / eight in, fakeroot's `do` / four
    in, ripgrep's brew formula `if` and `elsif` four in, all in files of two): that block
    rewritten, or its twin clause, is the writer's step, and re-stepping it to the
    file's changed the file.  Nor does one other than four, the step the shipped model
    and most published ones nest by (`_MODEL_STEP`): a keyword block two in in a script
    of four (bzdiff's case arms) or a tab in in one of two (exim4-base's) is no model's
    but the writer's, and the fill is kept.  A fill nested by four in a file whose blocks
    nest by two alone still shows its step and goes on the file's.

    A fill that opens no block may still nest its continuations (a call's arguments one
    a line, a value below its `=`): where the document's continuations nest by that step
    written four spaces a level, and not by the step itself, it is read as the fill's,
    and one step of it becomes the document's continuation step (`_continued_in_fours`).
    """
    comments, lifetimes = _line_comments(language), _lifetimes(language)
    widths = [_width(_leading(line)) for line in rest]  # a tab 8 columns (GNU style)
    anchor = _width(_leading(head))
    code = [i for i, line in enumerate(rest) if line.strip()]
    steps: set[int] = set()
    keyword_steps: set[int] = set()  # below a keyword head (`then`, `do`, `def g`)
    continuation_steps: set[int] = set()  # below a line that opens no block
    above, width = head, anchor
    continued: set[int] = set()  # lines after a backslash
    for i in code:
        code_of = above[:_code_end(above, comments, lifetimes)].rstrip()
        braced = code_of.endswith(_BLOCK_OPENERS)
        opens = braced or _opens_keyword_block(code_of, language)
        if opens and widths[i] > width and i not in continued:  # not an empty block's closer
            (steps if braced else keyword_steps).add(widths[i] - width)
        elif widths[i] > width and i not in continued and i not in remarks:
            continuation_steps.add(widths[i] - width)
        if i not in remarks:
            above, width = rest[i], widths[i]
            if rest[i].rstrip().endswith("\\"):
                continued.add(next((j for j in code if j > i), -1))
    if keyword_steps:
        shown = keyword_steps - _block_steps(text, language)
        if shown - {_MODEL_STEP}:  # no model's step: the writer's own
            return None
        steps |= shown
    if not steps and not keyword_steps:
        unit_and_step = _continued_in_fours(continuation_steps, unit, language, text)
        if unit_and_step is None:
            return None
        unit, steps = unit_and_step[0], {unit_and_step[1]}
    if len(steps) != 1 or (step := steps.pop()) == unit or step not in (2, 4, 8):
        return None
    levels = [(anchor, anchor)]  # (the fill's column, the document's) of the open levels
    moved = 0  # how far the last line that began a statement moved
    for i in code:
        if i in continued:
            widths[i] = max(0, widths[i] + moved)
            continue
        if widths[i] <= anchor:
            if i not in remarks:
                levels, moved = [(widths[i], widths[i])], 0
            continue
        open_levels = levels if i not in remarks else list(levels)
        while open_levels[-1][0] > widths[i]:
            open_levels.pop()
        old, new = open_levels[-1]
        if old < widths[i]:
            count, extra = divmod(widths[i] - old, step)
            new = new + count * unit + extra
            if i not in remarks:
                levels.append((widths[i], new))
        if i not in remarks:
            moved = new - widths[i]
        widths[i] = new
    return widths


def _continued_in_fours(shown: set[int], unit: int, language: str | None,
                        text: str) -> tuple[int, int] | None:
    """(the document's step, the fill's) for a fill that shows no block step but nests
    its continuations (`shown`: how far a line sits right of one that opens no block) by
    one step, where that step is the document's own continuation step written four
    spaces a level: the step, times `unit` over four (`_MODEL_STEP`), is one the
    document's continuations nest by somewhere, the step itself none (`_continuation_steps`
    of `text`).  None otherwise, and in Python (its bracketed lines are aligned, no level).

    A continuation is nested by the file's own rule (prettier's and ktfmt's one unit,
    Google Java's two), which a model that nests by four writes in its own: a call's
    arguments one a line four in, a chained `.then()` eight, in files of two (lodash,
    okio, gson).  A fill of one such statement shows no block step, and was kept.  A
    fill nested as the document nests it is one of its steps already and stays; one
    whose step is shown neither scaled nor as written is no evidence either way."""
    if language in _COLON_BLOCKS or len(shown) != 1 or unit == _MODEL_STEP:
        return None
    (step,) = shown
    if step not in (_MODEL_STEP, 2 * _MODEL_STEP) or step * unit % _MODEL_STEP:
        return None
    scaled = step * unit // _MODEL_STEP
    found = _continuation_steps(text, language)
    return (scaled, step) if scaled in found and step not in found else None


def _continuation_steps(text: str, language: str | None) -> frozenset[int]:
    """The steps by which the lines of `text` continue a line that opens no block: how far
    each code line sits right of the code line above it, where that line does not end in
    `{` nor open a keyword block (a tab 8 columns).  Every step shown, not the most
    common, as `_block_steps` reads a block's."""
    return frozenset(step for code, step in _steps_right(text, language, _counted)
                     if not (code.endswith(_block_openers(language))
                             or _opens_keyword_block(code, language)))


def reindent(fill: str, text: str, start: int, end: int, language: str | None = None,
             free: FreeLines | None = None, shown: IndentStyle | None = None) -> str:
    """Put the fill's lines after the first on the document's indentation.

    The first line continues the cursor's line and keeps its level; nothing but leading
    whitespace is touched.  Tabs or spaces follow the block the span is in, else the
    document, the span's text in it: a rewrite's old code is the user's indentation as
    much as any other line, and the caller takes a hole's marker out (`_block_style`,
    `detect_indent`; a document whose blocks show no step has
    that of the cursor's blank line, `_unshown_style`, else `language`'s default; one
    with no indented line, the tabs of a fill indented with tabs, `_unindented_style`),
    and each line begins with the whitespace of the enclosing line it sits under,
    character for character (`_indentation`: a tab-indented Python function in a file of
    spaces gets tabs, not a TabError).  In a GNU-style document a tab is 8 columns, the
    fill's and the document's, and a line's whitespace is its column alone, a tab for
    each 8 and spaces for the rest (`\t    x` for 12).  The level moves only on
    clear evidence that the fill was written against another base (see `_frame`); the
    moved lines keep their structure, one fill step becoming one document step.  Where the
    level stays, a document indented with spaces gets its own step too: a fill that opens
    its blocks four spaces deeper is put on a two-space document's two (see
    `_on_document_unit`; a tab document's tab already stands for the fill's step), or,
    at the end of a header whose block has lines below it, on the step those lines show.  A blank
    line's whitespace is dropped, as formatters do (a line of spaces is noise, and a
    linter's warning); the last line's too when no code follows the span on its line (it
    would indent nothing).  No grammar is read here: the lines inside strings, heredocs
    and block comments come in `free`, from a parse.  Where the cursor stands in its
    line's indentation, the first line's own leading whitespace is indentation too,
    written in the block's tabs or spaces at its width: kept as the model wrote it, four
    spaces after a Go file's tabs made a line of both.  The `free` lines (see FreeLines)
    say nothing of the fill's base or step: they are moved by the rules the others set,
    and re-stepped not at all.  A document that shows no unit of its own takes that of
    the code shown around it (`shown`, see `_or_shown`: a notebook cell's other cells).
    """
    if "\n" not in fill:
        return fill
    first, *rest = fill.split("\n")
    free = free or FreeLines()
    head, *read = free.read([first, *rest])
    canonical = language_for(language) if language else None
    levels = _enclosing(text, start, end, canonical)
    before, after = _line_bounds(text, start, end)
    body = _body_below(text, end, before, after)
    if body is not None:  # the block the fill opens has lines already: it goes among them
        levels = [body, *levels]
    document = text  # the span's text in it (see above)
    style = _or_shown(detect_indent(document, canonical), shown, document)
    style = _unindented_style(style, document, [head, *read])
    style = _block_style(style, levels)
    style = _unshown_style(style, levels if before else [])  # the cursor's own line's step
    # the columns of a tab (a tab document's: one of the fill's steps) and of a level
    tab = 8 if style.gnu else style.width if not style.tabs else _tab_width(read, before)
    step = style.width if style.gnu else tab
    statement = None
    if before.strip():  # the cursor's line holds code: the statement it is part of
        statement = _statement_indent(text, start - len(before), before, canonical)
    flush = bool(before.strip()) and _flush_body(text, start - len(before), canonical)
    frame = _frame(before, head, read, tab, canonical,
                   _fill_unit(read, step, tab) if style.gnu else None, statement, flush)
    if frame is None and style.tabs and not style.gnu:
        level = _cursor_level(read, before)
        if level is not None:
            frame, tab = level, level.unit
            step = tab
    spaced = style.measured and (style.gnu or not style.tabs and not any(
        "\t" in _leading(line) for line in [before + first, *read]))
    unit = style.width  # the document's step, unless the block's lines below show its own
    if body is not None:
        shown = _width(body) - _width(_leading(before))  # as the fill's step is read
        unit = shown if shown in (2, 4, 8) else unit
    # the comment lines (free, and read blank) are moved with the code at their column
    remarks = frozenset(i for i, line in enumerate(rest) if i + 1 in free.passive
                        and line.lstrip().startswith(("/*", *_line_comments(canonical))))
    columns = None
    if frame is None and spaced:
        columns = _on_document_unit(before + head, [rest[i] if i in remarks else line for
                                                    i, line in enumerate(read)],
                                    unit, canonical, remarks, document)
    # the enclosing lines whose whitespace a line begins with: none for a GNU-style line,
    # written by its column alone (the lines' characters are Python's rule, TabError, and
    # a GNU file's line of 8 spaces is a slip)
    tabs, copied = (True, []) if style.gnu else (style.tabs, levels)
    lead = _leading(first)
    if not before.strip() and lead and first.strip() and 0 not in free.literal:
        blanks = _indentation(_width(before + lead, tab), copied, tabs, tab)
        if not blanks.startswith(before):
            blanks = before + _blanks(_width(lead, tab), tabs, tab)
        first = blanks[len(before):] + first[len(lead):]
    out = [first]
    for i, line in enumerate(rest):
        if not line.strip() and (i < len(rest) - 1 or not after.strip()):
            out.append("")  # a blank line carries no indentation (the last one indents
            continue  # the suffix that follows it on its line, if any)
        blanks = _leading(line)
        column = _width(blanks, tab)
        if frame is not None and i < frame.stop and line.strip() and column >= frame.base:
            steps, extra = divmod(column - frame.base, frame.unit)
            column = frame.target + steps * step + extra
        elif columns is not None and (read[i].strip() or i in remarks):
            column = columns[i]
        out.append(_indentation(column, copied, tabs, tab) + line[len(blanks):])
    return "\n".join(out)


def _body_below(text: str, end: int, before: str, after: str) -> str | None:
    """The leading whitespace of the first line below a span at the end of a code line,
    where that line sits right of the span's: the body the line opens (or its
    continuation), which the fill's lines join.  A struct whose members are written with
    tabs in a file of spaces (X11's headers, perf's scripts) got its new first members
    in spaces, above the tab-indented rest.  None where code follows the span on its
    line, the line is blank, or the line below is not deeper."""
    if after.strip() or not before.strip():
        return None
    at = text.find("\n", end)
    while at != -1:
        line_end = text.find("\n", at + 1)
        line = text[at + 1:len(text) if line_end == -1 else line_end]
        if line.strip():
            lead = _leading(line)
            return lead if _width(lead) > _width(_leading(before)) else None
        at = line_end
    return None


def _flush_body(text: str, line_start: int, language: str | None) -> bool:
    """Whether the line of `text` at `line_start` (or the line above it, where it is a
    lone `{`) opens a namespace or an `extern "C"` block (`_NAMESPACE_HEAD`), or a shell
    `case` (`_CASE_HEAD`), whose body the document writes at the header's column: that
    block's first line below the header does, or, where it has none (the fill is all
    of it), more of the window's other such blocks do than do not.

    Google's and LLVM's styles, and C headers' `extern "C" {`, do not indent these
    bodies, nor ncurses's and autoconf's scripts their case arms' patterns: a fill
    written there at the header's column is no body a step too far left, and moving it
    (and all below it) a step right broke the file's style (KDE kate's `namespace dap` /
    `{` / `Bus::Bus(...)` at column 0).  Read from the text alone: a comment or a
    preprocessor line says nothing of a level and is passed over."""
    heads = _CASE_HEAD if language == "bash" else _NAMESPACE_HEAD
    line = text[line_start:].split("\n", 1)[0]  # most lines are no header: read no more
    if language == "python" or (line.strip() != "{" and not heads.match(line)):
        return False
    lines = text.split("\n")
    header = at = text.count("\n", 0, line_start)
    if lines[at].strip() == "{":
        header = next((i for i in range(at - 1, -1, -1) if lines[i].strip()), at)
    if not heads.match(lines[header]) or _opened(lines, header) is None:
        return False
    own = _body_at_header(lines, header)
    if own is not None:
        return own
    votes = Counter(_body_at_header(lines, i) for i, line in enumerate(lines)
                    if i != header and heads.match(line))
    return votes[True] > votes[False]


def _opened(lines: list[str], header: int) -> int | None:
    """The index of the first line below a header `lines[header]`, where it opens a block
    (its `{` on it or alone on the next line, a shell `case`'s `in`); None where none."""
    if lines[header].rstrip().endswith("{") or _CASE_HEAD.match(lines[header]):
        return header + 1
    below = next((i for i in range(header + 1, len(lines)) if lines[i].strip()), None)
    return below + 1 if below is not None and lines[below].strip() == "{" else None


def _body_at_header(lines: list[str], header: int) -> bool | None:
    """Whether the first line of the block that `lines[header]` opens sits at the header's
    column (or left of it); None where the header opens no block or the block shows no
    line (its closer, `}` or `esac`, comes first, or the window ends)."""
    first = _opened(lines, header)
    if first is None:
        return None
    for line in lines[first:]:
        code = line.strip()
        if not code or code.startswith(("#", "//", "/*", "*")):
            continue
        if code.startswith("}") or _keyword(code) == "esac":
            return None
        return _width(_leading(line)) <= _width(_leading(lines[header]))
    return None


def _indentation(column: int, levels: list[str], tabs: bool, tab: int) -> str:
    """Leading whitespace `column` wide: the whitespace of the deepest enclosing line
    (`levels`, innermost first) not right of it, as the document wrote it, and the rest in
    the block's tabs (`tab` columns wide) or spaces.  A line of a Python block must
    begin as the lines around it do, character for character: four spaces where they
    have a tab (or the reverse) is a TabError whatever the widths."""
    for level in levels:
        width = _width(level, tab)
        if width <= column and not (tabs and width % tab and column > width):
            return level + _blanks(column - width, tabs, tab)
    return _blanks(column, tabs, tab)


def _blanks(column: int, tabs: bool, tab: int) -> str:
    """Leading whitespace `column` wide, in tabs (`tab` columns wide) or spaces."""
    return "\t" * (column // tab) + " " * (column % tab) if tabs else " " * column
