"""The oracle round trip in notebook cells: code a cell had, written back, unchanged.

benchmarks/shaping_round_trip.py and benchmarks/request_round_trip.py hold fills in a
file to one property: a model that writes exactly the code the document had at a span
gets it back unchanged.  A notebook cell's fill takes another path (dlm_lsp/notebooks.py):
the model is shown the notebook's other code cells around the cell, while its plan, its
shape and its check are the cell's, and a cell is often a few lines, with little
indentation of its own to go by.  Here Python files are made notebooks, their top-level
statements split into cells (a few a cell, a function or class often alone; a markdown
cell now and then, which the fill is not shown) and, as notebooks are often indented by
two or by tabs, the same files re-indented so (`reindented_by`).  Every kind of request
of the two round trips (`KINDS`: the blank line's three modes, then request_round_trip's)
is asked in cells, with the other cells as the server shows them
(`notebooks.cell_context` over a pygls workspace holding the notebook), and the cell,
the edit applied, must be the cell as it was.  The model writes the cell's code, and in
the two-space and tab notebooks also that code nested by four spaces
(`shaping_round_trip.in_fours`), as a model that read mostly PEP 8 code writes it: a
cell with no unit of its own (`bare`) must get the notebook's.  Counted as there: a
blank line's whitespace dropped and the default indentation of a cell with no indented
line, in a notebook with none either, are documented, and spans whose lines carry no
level (`shaping_round_trip.EXCEPTIONS`) are counted apart.

    python benchmarks/notebook_round_trip.py DIR_OR_FILE... [--per-kind 200] [--seed 0]
        [--max-cell-lines 10]

Sites are taken in cells of at most ten lines (`--max-cell-lines`): a notebook's cells
are short, and a long cell (a class) has the indentation evidence of a file.

Fills are made as the engine makes them, without a model (`shaping_round_trip.offered`,
the notebook's context in the request); tests/test_notebook_round_trip.py checks that
they are the engine's own.
"""

from __future__ import annotations

import argparse
import ast
import io
import random
import tokenize
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import request_round_trip as requests
import shaping_round_trip as shaping
from lsprotocol import types
from pygls.workspace import Workspace

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.notebooks import cell_context

KINDS = tuple(f"blank-line {mode}" for mode in shaping.MODES) + requests.KINDS
MAX_CELL_STATEMENTS = 3  # top-level statements a cell, at most
MARKDOWN = "Some prose about the code below."
# How a notebook is indented: its files' own way, or re-indented by a unit a level
INDENTS = {"as written": None, "two spaces": "  ", "tabs": "\t"}
# What the model writes: the code the cell had, or that code nested by four spaces a level
# from the cursor's line (`shaping_round_trip.in_fours`), as a model that read mostly PEP 8
# code writes it
CELLS, FOURS = "the cell's code", "in four spaces"
# The notebooks asked in, and how the model writes there (four spaces in a notebook of
# four spaces is the cell's code)
VARIANTS = (("as written", CELLS), ("two spaces", CELLS), ("two spaces", FOURS),
            ("tabs", FOURS))


# --- making notebooks --------------------------------------------------------------------


def two_spaces(text: str) -> str | None:
    """A Python file re-indented by two spaces a level (see `reindented_by`)."""
    return reindented_by(text, "  ")


def reindented_by(text: str, unit: str) -> str | None:
    """A Python file re-indented by `unit` (two spaces, a tab) a level, its code otherwise
    as it was (the lines inside strings untouched, a continuation line moved by its
    statement's change, what it has past its statement's level in spaces); None for a
    file that does not tokenize or whose code the move would change."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        tree = ast.dump(ast.parse(text))
    except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
        return None
    lines = text.split("\n")
    stack, levels, waiting = [0], {}, []  # levels: a row's indentation widths, outermost first
    inside: set[int] = set()  # rows that start inside a string
    for token in tokens:
        kind, (row, _), (end_row, _) = token.type, token.start, token.end
        if kind == tokenize.INDENT:
            stack.append(len(token.string.expandtabs(8)))
        elif kind == tokenize.DEDENT:
            stack.pop()
        elif kind == tokenize.STRING and end_row > row:
            inside.update(range(row + 1, end_row + 1))
        if kind == tokenize.COMMENT:
            waiting.append(row)  # a comment line takes the level of the code below it
        elif kind not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            for waited in [*waiting, row]:
                levels.setdefault(waited, list(stack))
            waiting = []
    out = []
    for row, line in enumerate(lines, 1):
        if row in inside or not line.strip() or row not in levels:
            out.append(line if line.strip() or row in inside else "")
            continue
        width = len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip(" \t"))
        stack = levels[row]
        level = max(k for k, at in enumerate(stack) if at <= width) if width else 0
        out.append(unit * level + " " * (width - stack[level]) + line.lstrip(" \t"))
    again = "\n".join(out)
    try:
        return again if ast.dump(ast.parse(again)) == tree else None
    except SyntaxError:
        return None


def split_cells(text: str, rng: random.Random, markdown: float = 0.15) -> list[tuple[str, str]]:
    """A Python file as a notebook's cells, (kind, text) in order: runs of 1 to
    MAX_CELL_STATEMENTS top-level statements (a function or class alone more often than
    not), each cell its lines without the blank lines around them, a markdown cell now and
    then between two; what comes before the first statement goes with it."""
    body = ast.parse(text).body
    starts = [min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
              for node in body]
    lines = text.split("\n")
    cells: list[tuple[str, str]] = []
    index = 0
    while index < len(body):
        alone = isinstance(body[index], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        count = 1 if alone and rng.random() < 0.6 else rng.randint(1, MAX_CELL_STATEMENTS)
        first = 1 if index == 0 else starts[index]
        index = min(index + count, len(body))
        last = starts[index] - 1 if index < len(body) else len(lines)
        code = "\n".join(lines[first - 1:last]).strip("\n")
        if cells and rng.random() < markdown:
            cells.append(("markdown", MARKDOWN))
        if code.strip():
            cells.append(("code", code))
    return cells


@dataclass
class Notebook:
    """A notebook as the server keeps it: its cells in a pygls workspace, by uri."""

    path: str
    cells: list[tuple[str, str]]  # (kind, text)
    workspace: Workspace
    uris: list[str]
    indent: str = "as written"  # how its cells are indented (INDENTS)

    @classmethod
    def open(cls, path: str, cells: list[tuple[str, str]],
             indent: str = "as written") -> Notebook:
        """The notebook opened as a client with notebook sync opens it (didOpen)."""
        uri = Path(path).absolute().as_uri() + ".ipynb"
        uris = [f"vscode-notebook-cell:{Path(path).absolute()}.ipynb#C{i}"
                for i in range(len(cells))]
        workspace = Workspace(None)
        kinds = {"code": types.NotebookCellKind.Code, "markdown": types.NotebookCellKind.Markup}
        workspace.put_notebook_document(types.DidOpenNotebookDocumentParams(
            types.NotebookDocument(uri, "jupyter-notebook", 1, [
                types.NotebookCell(kinds[kind], cell)
                for (kind, _), cell in zip(cells, uris, strict=True)]),
            [types.TextDocumentItem(cell, "python" if kind == "code" else "markdown", 1, text)
             for (kind, text), cell in zip(cells, uris, strict=True)]))
        return cls(path, cells, workspace, uris, indent)

    def code_cells(self) -> list[int]:
        return [i for i, (kind, _) in enumerate(self.cells) if kind == "code"]


# --- asking in a cell ----------------------------------------------------------------------


@dataclass(frozen=True)
class CellSite:
    """A request's site in cell `cell` of a notebook (its span's text is the cell's)."""

    notebook: Notebook
    cell: int
    kind: str
    site: requests.Site


def cell_sites(notebook: Notebook, cell: int) -> dict[str, list[requests.Site]]:
    """The sites of every kind in one cell, the cell read as a document of its own."""
    path, text = notebook.path, notebook.cells[cell][1]
    found: dict[str, list[requests.Site]] = defaultdict(list)
    for span in shaping.spans(Path(path), "python", text) or []:
        for mode in shaping.MODES:
            found[f"blank-line {mode}"].append(requests.Site(span, span.start, span.end))
    parsed = requests.sites(Path(path), "python", text)
    if parsed is not None:
        for kind in requests.KINDS:
            for start, end in parsed.found.get(requests._SITES.get(kind, kind), []):
                # counted apart as request_round_trip counts the kind whose sites it takes
                site = parsed.site(requests._SITES.get(kind, kind), start, end)
                if site is not None:
                    found[kind].append(site)
    return found


def ask(site: CellSite, writes: str = CELLS) -> shaping.Ask:
    """The cell as the request leaves it, and the fill the model writes (`writes`)."""
    if site.kind.startswith("blank-line "):
        asked = shaping.ask(site.site.span, site.kind.split(" ", 1)[1])
    else:
        asked = requests.ask(site.site, site.kind)
    unit = INDENTS[site.notebook.indent]
    if writes == FOURS and unit is not None:
        asked = replace(asked, fill=shaping.in_fours(asked.fill, asked.document, asked.start,
                                                     unit))
    return asked


def bare(site: CellSite) -> bool:
    """Whether the cell shows no indentation of its own: no line of it but the span's
    begins with whitespace (the notebook's other cells may)."""
    text = site.site.span.text
    outside = text[:site.site.start] + text[site.site.end:]
    return not any(line.strip() and line[:1] in " \t" for line in outside.split("\n"))


def request(site: CellSite, asked: shaping.Ask, length: int = shaping.SPAN_TOKENS):
    """The engine's request in the cell, with the other cells as the server shows them."""
    uri = site.notebook.uris[site.cell]
    before, after = cell_context(site.notebook.workspace, uri, asked.document)
    return replace(shaping.request(site.site.span, asked, length), uri=uri, before=before,
                   after=after)


@dataclass(frozen=True)
class CellOutcome(shaping.Outcome):
    """A fill's outcome in a cell: the shaping round trip's, except that the default
    indentation of a document with no indented line is documented only where the
    notebook shows none either (`shown`: the other cells as the fill is shown them)."""

    shown: str = ""

    @property
    def documented(self) -> bool:
        if shaping._bare_blank_lines(self.got) == shaping._bare_blank_lines(self.span.text):
            return True
        return super().documented and not any(
            line.strip() and line[:1] in " \t" for line in self.shown.split("\n"))


def outcome(site: CellSite, fill: str, asked: shaping.Ask, shown: str = "") -> CellOutcome:
    """The cell the user gets with the offered `fill`."""
    if site.kind.startswith("blank-line "):
        got = asked.document[:asked.start] + fill + asked.document[asked.end:]
    else:
        got = requests.applied(asked, site.site, fill)
    return CellOutcome(site.site.span, asked, got, shown)


def round_trip(site: CellSite, writes: str = CELLS) -> CellOutcome:
    asked = ask(site, writes)
    req = request(site, asked)
    return outcome(site, shaping.offered(req, asked.fill), asked, req.before + req.after)


def notebooks(paths: list[Path], rng: random.Random, indent: str) -> list[Notebook]:
    """The files as notebooks (`indent`: one of INDENTS), those that parse."""
    found = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(text) > shaping.MAX_FILE or "\r" in text or shaping.HOLE in text:
            continue
        if INDENTS[indent] is not None:
            text = reindented_by(text, INDENTS[indent])
            if text is None or not any(line.startswith(INDENTS[indent])
                                       for line in text.split("\n")):
                continue
        try:
            cells = split_cells(text, rng)
        except (SyntaxError, ValueError):
            continue
        if len(cells) > 1:
            found.append(Notebook.open(str(path), cells, indent))
    return found


def sample(paths: list[Path], indent: str, count: int, rng: random.Random, max_lines: int,
           per_cell: int = 2) -> dict[str, list[CellSite]]:
    """`count` sites a kind, at most `per_cell` a cell, in cells of at most `max_lines`
    lines (three a notebook), files and cells in a seeded order."""
    order = list(paths)
    rng.shuffle(order)
    chosen: dict[str, list[CellSite]] = {kind: [] for kind in KINDS}
    for start in range(0, len(order), 20):
        if all(len(found) >= count for found in chosen.values()):
            break
        for notebook in notebooks(order[start:start + 20], rng, indent):
            cells = [i for i in notebook.code_cells()
                     if notebook.cells[i][1].count("\n") < max_lines]
            for cell in rng.sample(cells, min(3, len(cells))):
                for kind, options in cell_sites(notebook, cell).items():
                    have = chosen[kind]
                    for site in rng.sample(options, min(per_cell, len(options),
                                                        max(0, count - len(have)))):
                        have.append(CellSite(notebook, cell, kind, site))
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="directories or files of Python")
    parser.add_argument("--per-kind", type=int, default=200, help="sites a kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=2, help="diffs shown per kind")
    parser.add_argument("--kinds", nargs="*", choices=KINDS, default=list(KINDS))
    parser.add_argument("--max-cell-lines", type=positive, default=10,
                        help="only cells this short (a notebook's cells are a few lines)")
    args = parser.parse_args(argv)
    # a root not there gave a table of zeros and status 0, which read as a run with
    # nothing to report: refused as shaping_round_trip refuses it
    missing = [root for root in args.roots if not Path(root).exists()]
    if missing:
        parser.error(f"no such file or directory: {', '.join(missing)}")
    if args.per_kind < 1:
        parser.error(f"--per-kind {args.per_kind}: a whole number of sites, 1 or more")
    paths = shaping.corpus(args.roots).get("python", [])
    print("| notebook | model writes | kind | fills | identical | documented | differing "
          "| excepted | in bare cells | bare differing |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    examples: dict[str, list[shaping.Outcome]] = defaultdict(list)
    chosen = {}
    for indent, writes in VARIANTS:
        if indent not in chosen:
            chosen[indent] = sample(paths, indent, args.per_kind,
                                    random.Random(f"{args.seed}:{indent}"), args.max_cell_lines)
        for kind in args.kinds:
            sites = chosen[indent][kind]
            outcomes = [round_trip(site, writes) for site in sites]
            differing = [not found.documented and found.span.exception is None
                         for found in outcomes]
            for found, wrong in zip(outcomes, differing, strict=True):
                if wrong:
                    examples[f"{indent}, {writes}, {kind}"].append(found)
            n = requests.tally(outcomes)
            in_bare = [bare(site) and site.site.span.exception is None for site in sites]
            bare_wrong = sum(a and b for a, b in zip(in_bare, differing, strict=True))
            print(f"| {indent} | {writes} | {kind} | {n['asked']} | {n['identical']} "
                  f"| {n['documented']} | {n['differing']} | {n['excepted']} "
                  f"| {sum(in_bare)} | {bare_wrong} |", flush=True)
    for key, found in sorted(examples.items(), key=lambda item: -len(item[1])):
        print(f"\n### {key}: {len(found)} fills\n")
        for one in found[:args.examples]:
            print(f"{one.span.path}:{one.span.line} (of the cell)")
            print(shaping.diff(one), end="\n\n")
    return 0


if __name__ == "__main__":
    run_script(main)
