"""Notebook cells: what a fill in one cell is shown of the others (LSP 3.17 notebooks).

A client with notebook sync (VS Code) sends a notebook as one `notebookDocument/didOpen`
that lists its cells in order, each cell a text document of its own, and each later
edit as a `notebookDocument/didChange`; pygls keeps the notebooks, and the cells among
the text documents.  A fill asked for in a cell is the cell's: its range, its version,
its edit, its stale check.  What the notebook adds is context: the model is shown the
notebook's other code cells of the cell's language, those above it as its prefix and
those below as its suffix, one blank line between cells, as the notebook reads as one
script (`jupyter nbconvert --to script`); the line breaks a cell opens or ends with are
part of that blank line, not added to it.  A cell alone is often a line or two; the
imports and the definitions it uses sit in the cells above.  Markdown cells are prose,
not code, and a cell of another language (`%%sql` written as an SQL cell) is no code of
this one: both are left out.

The syntax check sees the cell alone, not the joined text: the cell is what a fill
changes, and it is what the kernel compiles, one cell at a time.  In the joined text
another cell's state decides the verdict: a bracket left open in a cell above (one being
typed) runs on into this cell, and a fill that is fine in it is rejected (`sum(x)` after
`total = `, under a cell `x = [`).  It also parses a cell, not the whole notebook.  The
plan and the shape read the cell too, but that a cell with no indentation unit of its
own (a header alone, the body the fill writes) is re-indented on the unit of the other
cells (`passes.shown_style`): alone it kept the model's four spaces in a notebook of two.

Without notebook sync (a client that sends cells as plain text documents, Neovim) no
notebook is known, the context is empty, and a cell is filled as a document of its own.
"""

from __future__ import annotations

import logging
import re

import attrs
from lsprotocol import types
from pygls.workspace import Workspace

from dlm_lsp.documents import apply_changes, document_key, find_document

log = logging.getLogger(__name__)

# Advertised at initialize: every notebook, every cell (the client may send fewer: the
# VS Code extension sends the code cells of `dlm.languages`); the server picks its own.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="*")], save=False)

CELL_BREAK = "\n\n"  # between cells: a blank line

# the blank lines (whitespace only) that open a text
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t\f]*(?:\r\n|\r|\n))+")


def cell_context(workspace: Workspace, uri: str, text: str) -> tuple[str, str]:
    """The code shown before and after `text`, the cell at `uri`: the notebook's other
    code cells of its language, in notebook order, exactly one blank line between cells;
    ("", "") for a document that is no known cell.  Run on the event loop at every fill
    (ghost text asks at each pause in typing), so each cell's uri is decoded once: decoded
    three times, it took 2.9 ms a fill in a notebook of 500 cells and 41 ms in one of
    5,000, now 1.1 and 15 ms (2-core VM at load 4)."""
    notebook = workspace.get_notebook_document(cell_uri=uri)
    doc = find_document(workspace, uri)
    if notebook is None or doc is None:
        return "", ""
    key, documents = document_key(uri), workspace.text_documents
    above: list[str] = []
    below: list[str] | None = None  # None until the cell itself is passed
    for cell in notebook.cells:
        cell_key = document_key(cell.document)
        if cell_key == key:
            below = []
            continue
        other = documents.get(cell_key)
        if (cell.kind != types.NotebookCellKind.Code or other is None
                or other.language_id != doc.language_id or not other.source.strip()):
            continue
        (above if below is None else below).append(_trimmed(other.source))
    if below is None:  # the notebook does not list it (a client's mistake): the cell alone
        return "", ""
    # the cell's own text is shown as it is: the line breaks it opens or ends with are
    # part of the blank line between it and its neighbours, not added to it
    opening = text[:len(text) - len(text.lstrip("\r\n"))]
    ending = text[len(text.rstrip("\r\n")):]
    before = CELL_BREAK.join(above) + _rest_of_break(opening) if above else ""
    after = _rest_of_break(ending) + CELL_BREAK.join(below) if below else ""
    return before, after


def _trimmed(source: str) -> str:
    """Another cell's code without the blank lines around it: the separator is the only
    blank line between cells."""
    return _LEADING_BLANK_LINES.sub("", source).rstrip()


def _rest_of_break(breaks: str) -> str:
    """What CELL_BREAK adds beside `breaks`, a cell's own run of line breaks."""
    count = len(re.findall(r"\r\n|\r|\n", breaks))
    return CELL_BREAK[:max(0, len(CELL_BREAK) - count)]


def cells_of(params: types.DidOpenNotebookDocumentParams | types.DidCloseNotebookDocumentParams
             ) -> list[str]:
    """The uris of the cells a notebook's didOpen or didClose carries."""
    return [cell.uri for cell in params.cell_text_documents]


def with_all_cells(workspace: Workspace, params: types.DidCloseNotebookDocumentParams
                   ) -> types.DidCloseNotebookDocumentParams:
    """A notebook's didClose with every cell it holds here, not only those it names.
    vscode-languageclient closes a notebook whose last synced cells were deleted with the
    cells it still shows, which are not those: pygls closed only the cells named, and each
    deleted cell stayed open for good (a document counted against maxOpenDocuments, its
    caches kept, no later close to come)."""
    notebook = workspace.get_notebook_document(notebook_uri=params.notebook_document.uri)
    if notebook is None:
        return params
    named = {document_key(cell.uri) for cell in params.cell_text_documents}
    left = [types.TextDocumentIdentifier(cell.document) for cell in notebook.cells
            if document_key(cell.document) not in named]
    if not left:
        return params
    return attrs.evolve(params, cell_text_documents=[*params.cell_text_documents, *left])


def left_out_on_reopening(workspace: Workspace, params: types.DidOpenNotebookDocumentParams
                          ) -> types.DidCloseNotebookDocumentParams | None:
    """For a didOpen of a notebook already open (no didClose between): a didClose of the
    cells it holds here that the new open does not list, or None.  pygls put the new
    cells over the old ones and left the others be, each an open document for good
    (counted against maxOpenDocuments, its caches kept, no later close to come)."""
    uri = params.notebook_document.uri
    if workspace.get_notebook_document(notebook_uri=uri) is None:
        return None
    listed = {document_key(cell.uri) for cell in params.cell_text_documents}
    closing = with_all_cells(workspace, types.DidCloseNotebookDocumentParams(
        types.NotebookDocumentIdentifier(uri), []))
    left = [cell for cell in closing.cell_text_documents if document_key(cell.uri) not in listed]
    return attrs.evolve(closing, cell_text_documents=left)


def changed_cells(params: types.DidChangeNotebookDocumentParams
                  ) -> tuple[list[str], list[str], list[str]]:
    """The cells a notebook change (re)opened, those it edited, and those it closed."""
    cells = params.change.cells
    if cells is None:
        return [], [], []
    structure = cells.structure
    opened = [cell.uri for cell in structure.did_open or []] if structure else []
    closed = [cell.uri for cell in structure.did_close or []] if structure else []
    edited = [change.document.uri for change in cells.text_content or []]
    return opened, edited, closed


def apply_notebook_change(workspace: Workspace,
                          params: types.DidChangeNotebookDocumentParams) -> None:
    """Apply a notebook change: pygls updates the cells' order, kinds and open cells;
    the cells' text edits go through `documents.apply_changes`, on LSP lines, as a text
    document's do (pygls splits lines as `str.splitlines` does: a form feed in a cell
    would move every later edit of it).  A cell a change both closes and opens (its uri
    given to a new document) is closed first, then opened, as a text document's didClose
    and didOpen would be: pygls opens before it closes, and the new cell was left closed,
    its fills refused as "not open" and its code shown to no other cell.  A change to a
    notebook that is not kept (one opened past maxOpenDocuments) is dropped, as a text
    document's is."""
    uri = params.notebook_document.uri
    if workspace.get_notebook_document(notebook_uri=uri) is None:
        log.warning("notebookDocument/didChange for %s, which is not open", uri)
        return
    cells = params.change.cells
    texts = (cells.text_content or []) if cells is not None else []
    if cells is not None:
        structure = cells.structure
        if structure is not None and structure.did_close:
            opened = {document_key(cell.uri) for cell in structure.did_open or []}
            structure = attrs.evolve(structure, did_close=[
                cell for cell in structure.did_close if document_key(cell.uri) not in opened])
        params = attrs.evolve(params, change=attrs.evolve(
            params.change, cells=attrs.evolve(cells, structure=structure, text_content=None)))
    workspace.update_notebook_document(params)
    for text in texts:
        if not apply_changes(workspace, text.document, text.changes):
            log.warning("a notebook change edits cell %s, which is not open", text.document.uri)
