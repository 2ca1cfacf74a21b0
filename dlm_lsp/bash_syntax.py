"""bash's own parser (`bash -n`) as a second opinion on shell fills.

tree-sitter-bash is lenient: it accepts text bash cannot parse.  A heredoc whose
terminator is indented (`    EOF` under `cat <<EOF`; `<<-EOF` allows leading tabs
only) never ends for bash, so the `}` of the function around it and the rest of
the script become heredoc text; tree-sitter ends it anyway and calls the fill
valid.  It also passes `fi`, `done`, `esac`, `}` or `then` where nothing is open,
`;;` outside a `case`, `elif` after `else`, a `then` or `do` with no command in its
body, a redirection with no target, `[[ -n ]]`.  So a fill in a bash or POSIX sh
script that tree-sitter passes is parsed again by `bash -n`, which reads the
commands and runs none of them.

As with python_syntax, the text parsed ("the chunk") is whole lines: the
top-level commands that meet the span, with one either side, commands that
share a line kept together; when that is longer than CHUNK_CHARS, the commands
of the function body (`{ ... }`) or loop body (`do ... done`) that holds the
span, if any.  A script broken elsewhere thus leaves the check working (bash
stops at a file's first error), and the cost does not grow with the script but
for a rejection's second look: a fill the chunk fails is parsed once more, with
the lines below the chunk to the end of the script or of that body (up to
python_syntax.WIDER_CHARS); one that parses whole there, but for lines below the
chunk that tree-sitter finds broken in the script as it is (`parses_below`, the
second look both checks share), opened what a line further down closes (`if [ x ];
then` over the user's `fi`), and passes, unless its heredoc would end where one of
the user's does (`_takes_a_heredoc`).  The filled chunk is parsed first, and the
chunk as it is only when that fails, once per span and document version.  bash
reports a line and no column.  What counts
against the fill, with the chunk as it is (the span's old text) as baseline:

* the chunk parses as it is: the filled chunk must parse too;
* it does not: the fill is blamed only when bash now fails on an *earlier* line
  than it did, or when the old failure sat on the span's lines (or after them
  with only blank and comment lines between: bash notices an empty `then` body
  at its `fi`) and the new one sits on the fill's lines the same way, or when
  the fill wrote a line that would end a heredoc left open to the end (its
  delimiter with blanks around it).  Damage elsewhere in the chunk is the user's,
  and so is a line below the span that fails whatever the fill (a stray `fi`: see
  `BashSyntax._broken_on_its_own`); the fill is then judged as if it were blank.

A heredoc that runs to the end counts as a failure though bash only warns of it
(at the top level bash then feeds the rest of the script to the command as text);
it is placed at the heredoc's `<<` line, and reported at the line that was meant
to end it when there is one.

`bash -n` is run with extglob on (`-O extglob`): it changes how bash parses
`@(a|b)` patterns, and scripts that use them enable it in a line `bash -n` does
not run (or, like bash-completion's, are sourced by a shell that has it on);
without it their patterns are syntax errors.  Other options a script may set
(`set -o posix`) change little of what parses and are left as bash starts.

Safety: bash is the one found on PATH, given the text on its standard input (an
anonymous in-memory file, or an unlinked temporary file where there is none), a
cleared environment (no BASH_ENV, ENV, SHELLOPTS, BASHOPTS or exported
functions), `--norc --noprofile`, and TIMEOUT seconds.  If it cannot be run, or
says something this module does not understand, there is no verdict and
tree-sitter's stands.  Without bash on PATH (Windows, minimal containers) the
check is not made.

A script whose shebang names POSIX sh (`sh`, `dash`, `ash`) runs under dash on Debian
and Ubuntu, which rejects bash's own syntax: arrays, `function f {`, `<<<`, `select`,
`for ((...))`, `<(...)`.  bash parses all of them, so a fill written in bash passed
and broke the script where /bin/sh is dash.  Where `dash` is on PATH and the whole
script as it is parses with `dash -n` (a script that already uses bash's syntax is
run by a bash, whatever its shebang says), a fill bash passes is parsed again by
`dash -n`, on the same chunk and with the same baseline.  dash is given the same
cleared environment and timeout.

Only the request's whole document is checked this way (validation.parsed_document
decides, `bash_for`): the dialect is read from its shebang and file name, which
the lines around a span that units.py judges do not show, and a process per
prefix there would cost more than it tells.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import subprocess
import tempfile
from typing import BinaryIO, NamedTuple

from tree_sitter import Node

from dlm_lsp.python_syntax import Rejection, error_rows, parses_below
from dlm_lsp.trees import ancestors

# The commands handed to bash are cut at this size (characters); past it the check
# moves into the function or loop body that holds the span, where there is one.
CHUNK_CHARS = 20_000
TIMEOUT = 2.0  # seconds; past it, no verdict

# The shells a shebang may name for the check to apply: bash and the POSIX sh family
# (bash parses a superset of it).  zsh, ksh, fish, csh and others have grammars of
# their own that bash would reject.
_CHECKED_SHELLS = frozenset({"bash", "sh", "dash", "ash"})
# File names of other shells' scripts (and of bats tests: bash with `@test` blocks), where
# there is no shebang to say.
_OTHER_SUFFIXES = (".zsh", ".zsh-theme", ".ksh", ".mksh", ".csh", ".tcsh", ".fish", ".bats")
_OTHER_NAMES = frozenset({".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc",
                          ".mkshrc", ".cshrc", ".tcshrc", ".login", ".logout"})

# The POSIX sh family, whose scripts dash also checks (see the module's docstring).
_POSIX_SHELLS = frozenset({"sh", "dash", "ash"})

# bash's messages, as it writes them with argv[0] "bash" and no locale
_MESSAGE = re.compile(r"bash: line (\d+): (.*)")
# dash's, with argv[0] "dash": "dash: 3: Syntax error: "(" unexpected"
_DASH_MESSAGE = re.compile(r"dash: (\d+): (.*)")
_HEREDOC = re.compile(r"warning: here-document at line (\d+) delimited by end-of-file "
                      r"\(wanted `(.*)'\)")
_COMMENT_OR_BLANK = re.compile(r"[ \t]*(#.*)?")
# A heredoc's `<<` (not a here-string's `<<<`) and its delimiter, quoted or not (group 2)
_OPENS_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)[ \t]*\\?(['\"]?)([^\s'\"<>;&|()]+)\1")
_HEREDOC_PARTS = frozenset({"heredoc_redirect", "heredoc_body", "heredoc_end"})  # tree-sitter's

_NO_VERDICT = object()  # bash could not be run, or said something not understood


def interpreter(text: str) -> str | None:
    """The program a script's shebang names (through `env`), or None without one."""
    if not text.startswith("#!"):
        return None
    words = text[2:].split("\n", 1)[0].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return os.path.basename(words[0]) if words else None


def bash_for(text: str, uri: str | None) -> str | None:
    """The bash to check a shell document with: None when it is another shell's
    script (by its shebang, else its file name) or no bash is on PATH."""
    named = interpreter(text)
    if named is not None:
        if named not in _CHECKED_SHELLS:
            return None
    elif uri:
        name = uri.split("?", 1)[0].split("#", 1)[0].replace("\\", "/").rsplit("/", 1)[-1]
        if name.lower() in _OTHER_NAMES or name.lower().endswith(_OTHER_SUFFIXES):
            return None
    return shutil.which("bash")


class _Failure(NamedTuple):
    """bash's first objection to a text, rows counted from its first line (0-based)."""

    row: int  # where the damage starts, for comparing failures
    shown: int  # where to report it (a heredoc's would-be terminator, else `row`)
    message: str  # bash's, for all but a heredoc left open
    delimiter: str | None = None  # a heredoc left open: the line that would end it

    def said(self, top: int) -> str:
        """The message, on the lines of a document whose row `top` is the text's first."""
        if self.delimiter is None:
            return self.message
        return (f"here-document at line {top + self.row + 1} delimited by end-of-file "
                f"(wanted `{self.delimiter}')")


def _stdin(data: bytes) -> BinaryIO:
    """`data` in a file bash reads as its standard input: in memory where the system
    allows, else a temporary file only this user can read, unlinked at once.  A pipe
    would do, but bash reads a pipe a byte at a time (9x slower on an 11,000-line script)."""
    if hasattr(os, "memfd_create"):
        handle: BinaryIO = os.fdopen(os.memfd_create("dlm-lsp-bash-check", os.MFD_CLOEXEC),
                                     "w+b")
    else:
        handle = tempfile.TemporaryFile()
    handle.write(data)
    handle.seek(0)
    return handle


def run_bash(bash: str, source: str) -> subprocess.CompletedProcess[bytes] | None:
    """`bash -n` over `source` (see the module's Safety), or None when it cannot run."""
    return _run(["bash", "--norc", "--noprofile", "-O", "extglob", "-n"], bash, source)


def run_dash(dash: str, source: str) -> subprocess.CompletedProcess[bytes] | None:
    """`dash -n` over `source`, as bash is run, or None when it cannot run."""
    return _run(["dash", "-n"], dash, source)


def _run(args: list[str], program: str, source: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        with _stdin(source.encode("utf-8", "surrogatepass")) as script:
            return subprocess.run(args, executable=program, stdin=script,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env={"LC_ALL": "C"}, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def _failure(bash: str, source: str) -> _Failure | None | object:
    """bash's first objection to `source`, None when it parses, or _NO_VERDICT."""
    done = run_bash(bash, source)
    if done is None:
        return _NO_VERDICT
    for line in done.stderr.decode("utf-8", "replace").splitlines():
        said = _MESSAGE.fullmatch(line)
        if said is None:
            continue
        message = said.group(2)
        heredoc = _HEREDOC.fullmatch(message)
        if heredoc is not None:
            row, delimiter = int(heredoc.group(1)) - 1, heredoc.group(2)
            return _Failure(row, _terminator(source, row, delimiter), message, delimiter)
        if not message.startswith("warning:"):
            return _Failure(int(said.group(1)) - 1, int(said.group(1)) - 1, message)
    # bash -n goes on after some errors (a `[[ ]]` it cannot parse) and exits 0: the message
    # decides; a failing exit with none understood (not a script, no such shell) says nothing
    return None if done.returncode == 0 else _NO_VERDICT


def _dash_failure(dash: str, source: str) -> _Failure | None | object:
    """dash's first objection to `source`, None when it parses, or _NO_VERDICT.  dash
    reads a heredoc left open to the end as text and says nothing (bash's check finds
    those), and names a line past the last for an end of file it did not expect."""
    done = run_dash(dash, source)
    if done is None:
        return _NO_VERDICT
    for line in done.stderr.decode("utf-8", "replace").splitlines():
        said = _DASH_MESSAGE.fullmatch(line)
        if said is not None:
            row = int(said.group(1)) - 1
            return _Failure(row, row, said.group(2))
    return None if done.returncode == 0 else _NO_VERDICT


def _terminator(source: str, opener: int, delimiter: str) -> int:
    """The first line below a heredoc's `<<` line that was meant to end it (its delimiter
    with blanks around it), else the `<<` line."""
    for row, line in enumerate(source.split("\n")[opener + 1:], opener + 1):
        if line.strip() == delimiter:
            return row
    return opener


def _groups(body: Node) -> list[tuple[int, int]]:
    """The rows of the commands in `body`, commands that share a row taken together."""
    groups: list[tuple[int, int]] = []
    for child in body.named_children:
        first, last = child.start_point[0], child.end_point[0]
        if child.end_point[1] == 0 and last > first:
            last -= 1  # it ends with its line break
        if groups and first <= groups[-1][1]:
            groups[-1] = (groups[-1][0], max(last, groups[-1][1]))
        else:
            groups.append((first, last))
    return groups


def _around(body: Node, first: int, last: int) -> tuple[int, int]:
    """The rows of the commands of `body` that meet rows [first, last], one either side
    (with the span's own rows); all of it when tree-sitter found no commands in it (the
    whole script one ERROR node)."""
    groups = _groups(body)
    if not groups:
        return first, last
    if body.is_error:
        return min(first, groups[0][0]), max(last, groups[-1][1])
    hit = [i for i, (a, b) in enumerate(groups) if a <= last and b >= first]
    if hit:
        low, high = max(0, hit[0] - 1), min(len(groups) - 1, hit[-1] + 1)
    else:  # blank lines or comments between commands: their neighbours
        after = next((i for i, (a, _) in enumerate(groups) if a > last), len(groups))
        low, high = max(0, after - 1), min(len(groups) - 1, after)
    return min(first, groups[low][0]), max(last, groups[high][1])


def _inner_body(body: Node, first: int, last: int) -> Node | None:
    """The function or loop body (`{ ... }`, `do ... done`) below `body`'s command that
    holds rows [first, last] strictly inside its braces, nearest first."""
    holders = [c for c in body.named_children
               if c.start_point[0] < first and last < c.end_point[0]]
    stack = holders[:1]
    while stack:
        node = stack.pop()
        if node.type in ("compound_statement", "do_group"):
            if node.start_point[0] < first and last < node.end_point[0]:
                return node
            continue
        stack.extend(c for c in node.named_children
                     if c.start_point[0] <= first and last <= c.end_point[0])
    return None


class BashSyntax:
    """bash's verdict on fills of one version of a shell document."""

    def __init__(self, text: str, root: Node, line_starts: list[int], bash: str):
        self.text, self.root, self.lines, self.bash = text, root, line_starts, bash
        # dash checks a POSIX sh script too, once it is known to parse whole with dash
        self.dash = shutil.which("dash") if interpreter(text) in _POSIX_SHELLS else None
        self._posix: bool | None = None
        self._chunks: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._as_it_is: dict[tuple[str, int, int], _Failure | None | object] = {}
        self._probes: dict[tuple[str, int, int], _Failure | None | object] = {}
        self._broken: set[int] | None = None

    def _row(self, offset: int) -> int:
        return bisect.bisect_right(self.lines, offset) - 1

    def _line_end(self, row: int) -> int:
        return self.lines[row + 1] if row + 1 < len(self.lines) else len(self.text)

    def _chunk(self, start: int, end: int) -> tuple[int, int, int]:
        """The whole lines [low, high) of the commands around [start, end), and where the
        lines of the script or body they were cut from end."""
        key = (start, end)
        if key not in self._chunks:
            self._chunks[key] = self._find_chunk(start, end)
        return self._chunks[key]

    def _find_chunk(self, start: int, end: int) -> tuple[int, int, int]:
        first, last = self._row(start), self._row(end)
        body = self.root
        limit = len(self.text)
        top, bottom = _around(body, first, last)
        while self._line_end(bottom) - self.lines[top] > CHUNK_CHARS:
            inner = _inner_body(body, first, last)
            if inner is None:
                break
            body = inner
            rows = _around(body, first, last)
            if rows[0] <= body.start_point[0] or rows[1] >= body.end_point[0]:
                break  # a command shares a line with the braces: keep the outer chunk
            top, bottom = rows
            limit = self.lines[body.end_point[0]]  # up to the line of its `}` or `done`
        return self.lines[top], self._line_end(bottom), limit

    def _verdict(self, parser: str, source: str) -> _Failure | None | object:
        """`parser`'s ("bash" or "dash") first objection to `source`."""
        return _failure(self.bash, source) if parser == "bash" else _dash_failure(
            self.dash or "dash", source)

    def _failure_as_it_is(self, parser: str, low: int, high: int) -> _Failure | None | object:
        """`parser`'s verdict on lines [low, high) as they are, asked once per chunk."""
        key = (parser, low, high)
        if key not in self._as_it_is:
            self._as_it_is[key] = self._verdict(parser, self.text[low:high])
        return self._as_it_is[key]

    def _held_to_posix(self) -> bool:
        """Whether fills are checked by dash too: a POSIX sh script, dash on PATH, and the
        whole script parsing with it as it is (asked once, at the first fill bash passes)."""
        if self.dash is None:
            return False
        if self._posix is None:
            self._posix = _dash_failure(self.dash, self.text) is None
        return self._posix

    def rejects(self, start: int, end: int, fill: str) -> tuple[Rejection | None, int | None]:
        """bash's objection to `fill` written over [start, end), else dash's where the
        script is held to POSIX sh, or None; and the line (0-based, of the document as
        it is) below the span that the fill was judged without, as blank, for it is
        broken on its own (`_broken_on_its_own`), or None: a verdict that passes says so,
        as tree-sitter's does for such a line."""
        rejected, ignored = self._rejects("bash", start, end, fill)
        if rejected is None and self._held_to_posix():
            rejected, also = self._rejects("dash", start, end, fill)
            ignored = ignored if ignored is not None else also
        return rejected, ignored

    def _rejects(self, parser: str, start: int, end: int,
                 fill: str) -> tuple[Rejection | None, int | None]:
        """`parser`'s objection over the chunk, unless the fill parses whole over the
        chunk's lines to the end of the script (or of the body the chunk was cut from).

        The chunk is cut from the document as it is, so it ends one command below the
        span: a fill that opens what a line further down closes (`if [ x ]; then` over
        `echo y` and the user's `fi`, `cat <<EOF` over the heredoc's text and `EOF`)
        failed at the chunk's end, "unexpected end of file", whatever it was.  Only a
        rejection is judged again, and only a parse that is whole but for lines below the
        chunk the user left broken overturns it (`parses_below`): where the lines below
        fail as they are, bash's first error there would hide the fill's."""
        low, high, limit = self._chunk(start, end)
        verdict = self._rejects_in(parser, start, end, fill, low, high)
        if verdict[0] is None:
            return verdict

        def first_error(source: str) -> int | None:
            failure = self._verdict(parser, source)
            return None if failure is None else failure.row if isinstance(
                failure, _Failure) else 0

        below = parses_below(self.text, low, start, end, fill, high, limit, self._row,
                             first_error, self._users_broken)
        return (None, None) if below and not self._takes_a_heredoc(end, limit, fill) \
            else verdict

    def _users_broken(self) -> set[int]:
        """The rows tree-sitter finds broken in the script as it is (found once)."""
        if self._broken is None:
            self._broken = error_rows(self.root)
        return self._broken

    def _takes_a_heredoc(self, end: int, limit: int, fill: str) -> bool:
        """Whether a heredoc the fill opens would end at a line below the span that is
        text or the end of a heredoc of the user's in the script as it is.  The wider
        parse passes then, but the fill's heredoc took the user's commands down to there
        as its text, and their heredoc's `<<` line with them (`cat <<EOF` over `ls -l`
        and `cat > f <<EOF`, `hello`, `EOF`): the chunk's rejection stands."""
        below = self.text.find("\n", end) + 1
        for match in _OPENS_HEREDOC.finditer(fill):
            delimiter = match.group(2)
            if re.search(rf"^\t*{re.escape(delimiter)}$", fill[match.end():], re.MULTILINE):
                continue  # the fill ends it itself
            at = below
            while 0 < at < limit:
                line_end = self.text.find("\n", at)
                line = self.text[at:limit if line_end == -1 else min(line_end, limit)]
                if line.lstrip("\t") == delimiter:
                    point = (self._row(at), len(line) - len(delimiter))
                    leaf = self.root.descendant_for_point_range(point, point)
                    if leaf is not None and any(node.type in _HEREDOC_PARTS
                                                for node in ancestors(self.root, leaf)):
                        return True
                    break
                at = line_end + 1
        return False

    def _rejects_in(self, parser: str, start: int, end: int, fill: str, low: int,
                    high: int) -> tuple[Rejection | None, int | None]:
        """`parser`'s objection to the fill over the chunk, lines [low, high)."""
        source = self.text[low:start] + fill + self.text[end:high]
        failure = self._verdict(parser, source)
        if not isinstance(failure, _Failure):  # it parses, or the shell said nothing clear
            return None, None
        old = self._failure_as_it_is(parser, low, high)
        if old is _NO_VERDICT:
            return None, None
        ignored = None
        if isinstance(old, _Failure):
            as_it_is = self.text[low:high]
            if not self._blamed(old, as_it_is, low, failure, source, start, end, fill):
                return None, None
            if self._broken_on_its_own(parser, old, failure, low, high, start, end, fill):
                # judged as if the line below were blank: it is the user's to mend
                ignored = self._row(low) + old.row
                source, as_it_is = _blank(source, failure.row), _blank(as_it_is, old.row)
                failure = self._verdict(parser, source)
                if not isinstance(failure, _Failure):
                    return None, ignored
                old = self._verdict(parser, as_it_is)
                if old is _NO_VERDICT or (isinstance(old, _Failure) and not self._blamed(
                        old, as_it_is, low, failure, source, start, end, fill)):
                    return None, ignored
        return self._rejection(parser, failure, source, low), ignored

    def _rejection(self, parser: str, failure: _Failure, source: str, low: int) -> Rejection:
        """`parser`'s `failure`, of the filled lines `source` that start at `low`."""
        lines = source.split("\n")
        row = min(failure.shown, len(lines) - 1)  # bash's end of file can be a line further
        line = lines[row]
        column = len(line) - len(line.lstrip(" \t"))
        at = low + sum(len(text) + 1 for text in lines[:row])
        top = self._row(low)
        return Rejection(top + row, column, at + column, at + max(column, len(line.rstrip())),
                         failure.said(top), parser)

    def _blamed(self, old: _Failure, as_it_is: str, low: int, new: _Failure, source: str,
                start: int, end: int, fill: str) -> bool:
        """With the lines from `low` failing as they are (`old`, of `as_it_is`): whether
        `new`, the failure of the filled lines `source`, is the fill's doing (rows count
        from `low`'s line)."""
        top = self._row(low)
        first, last = self._row(start) - top, self._row(end) - top
        fill_last = first + fill.count("\n")
        if (new.shown != new.row and first <= new.shown <= fill_last
                and not (old.shown != old.row and first <= old.shown <= last)):
            return True  # the fill wrote a heredoc's end where it ends nothing
        moved = (old.row if old.row < first else first if old.row <= last
                 else old.row + fill_last - last)
        if new.row < moved:  # bash now stops earlier than it did
            return True
        return (_beside(as_it_is.split("\n"), first, last, old.row)
                and _beside(source.split("\n"), first, fill_last, new.row))

    def _broken_on_its_own(self, parser: str, old: _Failure, new: _Failure, low: int,
                           high: int, start: int, end: int, fill: str) -> bool:
        """Whether the line where the shell fails with the fill and without it, the first
        code line below the span's, is broken on its own: a command of its own there
        (tree-sitter's, in a tree without errors around it: not the `fi` or `done` of a
        construct above), on which the shell still fails with the null command `:`
        written over the span.

        A stray `fi` below `local x=|` made bash fail there for every fill, and the
        failure sat beside the span as an empty `then` body's does at its `fi`, so each
        fill was blamed for it; tree-sitter reads such a `fi` as a command and saw no
        error.  `:` is a whole command, and a word where one is wanted: an empty `then`
        body is one no longer, a pipeline left open at the cursor (`then echo a |` over
        `fi`, which tree-sitter reads as the pipeline's next command) is closed, and the
        span's lines keep what they open.  A line that fails even so fails whatever the
        fill, and is the user's to mend."""
        top = self._row(low)
        first, last = self._row(start) - top, self._row(end) - top
        fill_last = first + fill.count("\n")
        if not (old.row > last and new.row > fill_last and old.shown == old.row
                and new.shown == new.row and new.row - fill_last == old.row - last):
            return False
        row = top + old.row
        line = self.text[self.lines[row]:self._line_end(row)]
        column = len(line) - len(line.lstrip(" \t"))
        point = (row, len(line[:column].encode("utf-8", "surrogatepass")))
        node = self.root.descendant_for_point_range(point, point)
        if node is None or node.start_point != point:
            return False
        while node.parent is not None and node.parent.start_byte == node.start_byte:
            node = node.parent
        if not node.is_named or any(n.type == "ERROR" for n in ancestors(self.root, node)):
            return False  # a keyword of a construct, or a reading tree-sitter is unsure of
        key = (parser, start, end)
        if key not in self._probes:  # asked once per span, whatever the fills
            self._probes[key] = self._verdict(
                parser, self.text[low:start] + ":" + self.text[end:high])
        probe = self._probes[key]
        return isinstance(probe, _Failure) and probe.row == old.row


def _blank(text: str, row: int) -> str:
    """`text` with line `row` written as blanks (its rows, and all others, kept)."""
    lines = text.split("\n")
    lines[row] = " " * len(lines[row])
    return "\n".join(lines)


def _beside(lines: list[str], first: int, last: int, row: int) -> bool:
    """Whether `row` is one of rows [first, last], or below them with only blank and
    comment lines between (bash notices an empty body, or the end of the text, there)."""
    if first <= row <= last:
        return True
    return row > last and all(_COMMENT_OR_BLANK.fullmatch(line)
                              for line in lines[last + 1:row])
