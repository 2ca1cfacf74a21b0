"""Notebook cells (LSP 3.17 notebook sync): a fill in a cell is shown the notebook's other
code cells, and stays the cell's: its range, its version, its edit.  The server runs in
this process, fed the JSON a VS Code client sends; its model is a fake that records what
it is shown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from types import SimpleNamespace
from urllib.parse import unquote

import pytest
import torch
from fakes import FakeModel, Planted

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.results import InfillRequest
from dlm_lsp.server import build_server

NOTEBOOK = "file:///work/analysis%20one.ipynb"


def cell(n: int) -> str:
    """A cell's uri as VS Code writes it (its fragment percent-encoded)."""
    return f"vscode-notebook-cell:/work/analysis%20one.ipynb#W{n}sZmlsZQ%3D%3D"


CELLS = [  # (kind: 2 code, 1 markup; language; text), in notebook order
    (2, "python", "import math"),
    (1, "markdown", "## Areas of circles"),
    (2, "python", "def area(r):\n    return HOLE"),
    (2, "sql", "SELECT radius FROM circles"),
    (2, "python", ""),
    (2, "python", "print(area(2))\n"),
]
TARGET = cell(2)
# what VS Code's client says of notebooks (pygls advertises notebook sync only to a
# client that has it)
CAPABILITIES = {"notebookDocument": {"synchronization": {}}}


def did_open(cells=CELLS) -> dict:
    return {"method": "notebookDocument/didOpen", "params": {
        "notebookDocument": {"uri": NOTEBOOK, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": kind, "document": cell(n)}
                                       for n, (kind, _, _) in enumerate(cells)]},
        "cellTextDocuments": [{"uri": cell(n), "languageId": language, "version": 1,
                               "text": text} for n, (_, language, text) in enumerate(cells)]}}


def edit_cell(n: int, version: int, line: int, character: int, text: str) -> dict:
    """A notebook change typing `text` into cell `n` at line:character."""
    at = {"line": line, "character": character}
    return {"method": "notebookDocument/didChange", "params": {
        "notebookDocument": {"uri": NOTEBOOK, "version": version},
        "change": {"cells": {"textContent": [{
            "document": {"uri": cell(n), "version": version},
            "changes": [{"range": {"start": at, "end": at}, "text": text}]}]}}}}


class Session:
    """The server in this process, fed JSON messages as from a client; what it writes
    back is kept in `sent`, and its requests (progress, applyEdit) are accepted."""

    def __init__(self, model_dir, **settings) -> None:
        self.ls = build_server()
        self.sent: list[dict] = []
        self.ls.protocol.set_writer(SimpleNamespace(write=self._written), include_headers=False)
        self.receive({"id": 0, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": CAPABILITIES,
            "initializationOptions": {"model": str(model_dir), "repairRounds": 0,
                                      "fallback": False, "reuseFills": False,
                                      "holeMarker": "HOLE", **settings}}})
        self.shown: list[str] = []  # what the model was shown, pass by pass
        self.hold = threading.Event()
        self.hold.set()
        tok = self.ls.engine.model.tokenizer

        def record(ids: torch.Tensor) -> torch.Tensor:
            self.shown.append(tok.decode(ids[0].tolist()))
            self.hold.wait(30)
            return torch.zeros(*ids.shape, tok.vocab_size)
        self.ls.engine._model = FakeModel(tok, record)

    def _written(self, body: bytes) -> None:
        message = json.loads(body)
        self.sent.append(message)
        if "method" in message and "id" in message:
            applied = {"applied": True} if message["method"] == "workspace/applyEdit" else None
            asyncio.get_running_loop().call_soon(
                self.receive, {"id": message["id"], "result": applied})

    def receive(self, message: dict) -> None:
        protocol = self.ls.protocol
        protocol.handle_message(json.loads(json.dumps({"jsonrpc": "2.0", **message}),
                                           object_hook=protocol.structure_message))

    async def answer(self, msg_id: int, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.sent:
                if message.get("id") == msg_id and "method" not in message:
                    return message
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no answer to {msg_id} in {timeout} s")

    def requests(self, method: str) -> list[dict]:
        return [m["params"] for m in self.sent if m.get("method") == method]

    def cell_text(self, n: int) -> str:
        return self.ls.workspace.get_text_document(cell(n)).source


@pytest.fixture
def session(model_dir):
    session = Session(model_dir)
    yield session
    session.hold.set()
    session.ls.release()


def infill(msg_id: int, uri: str, line: int, character: int, version: int | None = None):
    at = {"line": line, "character": character}
    document = {"uri": uri} if version is None else {"uri": uri, "version": version}
    return {"id": msg_id, "method": "dlm/infill", "params": {
        "textDocument": document, "range": {"start": at, "end": at},
        "options": {"length": 4, "steps": 1}}}


def test_the_server_advertises_notebook_sync_for_every_notebook(session):
    [init] = [m for m in session.sent if m.get("id") == 0]
    sync = init["result"]["capabilities"]["notebookDocumentSync"]
    assert sync["notebookSelector"] == [{"notebook": "*"}]


def test_a_cell_s_fill_is_shown_the_code_cells_of_its_language_above_and_below(session):
    """The cells above are the prefix, those below the suffix, a blank line between; the
    markdown cell, the SQL cell and the empty cell are left out."""
    async def run() -> dict:
        session.receive(did_open())
        session.receive(infill(1, TARGET, 1, 11))
        return await session.answer(1)

    reply = asyncio.run(run())
    assert reply["result"]["version"] == 1
    shown = session.shown[0]
    assert "import math\n\ndef area(r):\n    return" in shown
    assert "HOLE\n\nprint(area(2))" in shown
    assert "Areas of circles" not in shown and "SELECT" not in shown


@pytest.mark.parametrize("target", [
    "def area(r):\n    return HOLE\n",
    "\n\ndef area(r):\n    return HOLE\n\n",
    "\r\ndef area(r):\r\n    return HOLE\r\n",
])
def test_a_cell_s_own_line_breaks_at_its_ends_are_part_of_the_one_blank_line(session, target):
    """They were added to the blank line between cells: two or three blank lines."""
    cells = [(2, "python", "import math"), (2, "python", target), (2, "python", "print(area(2))")]

    async def run() -> dict:
        session.receive(did_open(cells))
        line = target.replace("\r\n", "\n").split("\n").index("    return HOLE")
        session.receive(infill(1, cell(1), line, 11))
        return await session.answer(1)

    assert "result" in asyncio.run(run())
    assert "import math\n\ndef area(r):\n    return" in session.shown[0]
    assert "HOLE\n\nprint(area(2))" in session.shown[0]


def test_blank_lines_around_another_cell_s_code_are_left_out(session):
    cells = [(2, "python", "\n  \nimport math\n\n   \n"),
             (2, "python", "def area(r):\n    return HOLE"),
             (2, "python", "\n\nprint(area(2))\n\n"), (2, "python", "area(3)")]

    async def run() -> dict:
        session.receive(did_open(cells))
        session.receive(infill(1, cell(1), 1, 11))
        return await session.answer(1)

    assert "result" in asyncio.run(run())
    assert "import math\n\ndef area(r):\n    return" in session.shown[0]
    assert "HOLE\n\nprint(area(2))\n\narea(3)" in session.shown[0]


def test_a_markdown_cell_of_a_notebook_kept_as_a_py_file_is_not_checked_as_python(session):
    """The cell's uri holds its notebook's path (Databricks, Jupytext keep notebooks as .py
    files): its prose was checked as Python, and a fill there rejected as broken code."""
    notebook, prose = "file:///work/etl.py", "vscode-notebook-cell:/work/etl.py#W1sZmlsZQ%3D%3D"

    async def run() -> dict:
        session.receive({"method": "notebookDocument/didOpen", "params": {
            "notebookDocument": {"uri": notebook, "notebookType": "jupyter-notebook",
                                 "version": 1, "cells": [{"kind": 1, "document": prose}]},
            "cellTextDocuments": [{"uri": prose, "languageId": "markdown", "version": 1,
                                   "text": "The area is "}]}})
        session.receive(infill(1, prose, 0, 12))
        return await session.answer(1)

    stats = asyncio.run(run())["result"]["stats"]
    assert stats["syntax"] == "not checked: no grammar for language 'markdown'"


def test_a_document_outside_any_notebook_is_shown_alone(session):
    """A client without notebook sync sends a cell as a plain text document: unchanged."""
    async def run() -> dict:
        session.receive({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": TARGET, "languageId": "python", "version": 1, "text": CELLS[2][2]}}})
        session.receive(infill(1, TARGET, 1, 11))
        return await session.answer(1)

    assert "result" in asyncio.run(run())
    assert "import math" not in session.shown[0] and "print(area" not in session.shown[0]


def test_holes_filled_in_a_cell_are_applied_to_that_cell_at_its_version(session):
    async def run() -> dict:
        session.receive(did_open())
        session.receive(edit_cell(2, 2, 0, 0, "# radius r\n"))
        session.receive({"id": 1, "method": "workspace/executeCommand", "params": {
            "command": "dlm.fillHoles", "arguments": [TARGET]}})
        return await session.answer(1)

    reply = asyncio.run(run())
    assert reply["result"]["applied"] is True and reply["result"]["version"] == 2
    [params] = session.requests("workspace/applyEdit")
    [change] = params["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": TARGET, "version": 2}
    [edit] = change["edits"]
    assert edit["range"] == {"start": {"line": 2, "character": 11},
                             "end": {"line": 2, "character": 15}}  # the marker, in the cell
    assert "import math\n\n# radius r\ndef area(r):" in session.shown[0]


def test_a_command_that_names_the_notebook_is_told_to_name_a_cell(session):
    """It was told to send textDocument/didOpen, which no notebook client can do."""
    async def run() -> dict:
        session.receive(did_open())
        session.receive({"id": 1, "method": "workspace/executeCommand", "params": {
            "command": "dlm.fillHoles", "arguments": [NOTEBOOK]}})
        return await session.answer(1)

    reply = asyncio.run(run())
    assert reply["error"]["code"] == -32602
    assert "is a notebook: name one of its cells" in reply["error"]["message"]
    assert "didOpen" not in reply["error"]["message"]


def fill_while(session, edit: dict) -> dict:
    """The answer to a fill of TARGET's hole during which the client sends `edit`."""
    async def run() -> dict:
        session.receive(did_open())
        session.hold.clear()
        session.receive(infill(1, TARGET, 1, 11))
        while not session.shown:
            await asyncio.sleep(0.01)
        session.receive(edit)
        session.hold.set()
        return await session.answer(1)

    return asyncio.run(run())


def test_a_cell_edited_while_its_fill_runs_drops_the_fill(session):
    """The version check of text documents holds for cells: the fill is for version 1,
    and the cell is at 2 when it ends."""
    reply = fill_while(session, edit_cell(2, 2, 1, 11, "r"))
    assert reply["error"]["code"] == -32801  # content modified: nothing to apply
    assert session.cell_text(2) == "def area(r):\n    return rHOLE"


def test_another_cell_s_edit_leaves_a_cell_s_fill_be(session):
    """Its edit is still of the cell's version; the context it saw was the notebook's then."""
    assert fill_while(session, edit_cell(0, 2, 0, 11, ", cmath"))["result"]["version"] == 1
    assert session.cell_text(0) == "import math, cmath"


def test_a_cell_s_edits_count_lines_as_lsp_does(session):
    """A form feed is no line break in LSP (pygls' own notebook update split lines at it,
    and put the edit a line too low)."""
    cells = [(2, "python", "x = 1\f\ny = 2\n")]

    async def run() -> None:
        session.receive(did_open(cells))
        session.receive(edit_cell(0, 2, 1, 0, "z = 3\n"))

    asyncio.run(run())
    assert session.cell_text(0) == "x = 1\f\nz = 3\ny = 2\n"


def test_a_cell_closed_and_opened_again_in_one_change_is_the_new_cell(session):
    """Its uri given to a new document (a client may reuse a cell's uri): closed, then
    opened, as the change reads; pygls opened it first and then closed it, so the new cell
    was "not open" and its code shown to no other cell."""
    replaced = {"method": "notebookDocument/didChange", "params": {
        "notebookDocument": {"uri": NOTEBOOK, "version": 2},
        "change": {"cells": {"structure": {
            "array": {"start": 0, "deleteCount": 1, "cells": [{"kind": 2, "document": cell(0)}]},
            "didOpen": [{"uri": cell(0), "languageId": "python", "version": 1,
                         "text": "import cmath"}],
            "didClose": [{"uri": cell(0)}]}}}}}

    async def run() -> tuple[dict, dict]:
        session.receive(did_open())
        session.receive(replaced)
        session.receive(infill(1, cell(0), 0, 12))
        first = await session.answer(1)
        session.receive(infill(2, TARGET, 1, 11))
        return first, await session.answer(2)

    in_it, below = asyncio.run(run())
    assert in_it["result"]["version"] == 1 and "result" in below
    assert session.cell_text(0) == "import cmath"
    assert "import cmath\n\ndef area(r):" in session.shown[-1]


def test_a_closed_notebook_s_cells_are_closed_documents(session):
    async def run() -> dict:
        session.receive(did_open())
        session.receive({"method": "notebookDocument/didClose", "params": {
            "notebookDocument": {"uri": NOTEBOOK},
            "cellTextDocuments": [{"uri": cell(n)} for n in range(len(CELLS))]}})
        session.receive(infill(1, TARGET, 1, 11))
        return await session.answer(1)

    reply = asyncio.run(run())
    assert reply["error"]["code"] == -32602 and "is not open" in reply["error"]["message"]
    assert session.ls.workspace.notebook_documents == {}


def test_a_notebook_closed_without_naming_its_cells_closes_them_all(session):
    """vscode-languageclient closes a notebook whose last synced cells were deleted naming
    the cells it still shows, not those: they stayed open for good, each a document
    counted against maxOpenDocuments."""
    async def run() -> dict:
        session.receive(did_open())
        session.receive({"method": "notebookDocument/didClose", "params": {
            "notebookDocument": {"uri": NOTEBOOK}, "cellTextDocuments": [{"uri": cell(0)}]}})
        session.receive({"id": 1, "method": "dlm/status", "params": {}})
        return await session.answer(1)

    assert asyncio.run(run())["result"]["openDocuments"] == 0
    assert session.ls.workspace.text_documents == {}
    assert session.ls.workspace.get_notebook_document(cell_uri=TARGET) is None


def test_a_notebook_opened_again_without_a_close_closes_the_cells_it_no_longer_lists(session):
    """A didOpen of a notebook already open put its cells over the old ones and left
    those it does not list open for good, each a document counted against
    maxOpenDocuments; those it lists again are open, as sent."""
    async def run() -> dict:
        session.receive(did_open())
        session.receive(did_open(CELLS[:2]))
        session.receive({"id": 1, "method": "dlm/status", "params": {}})
        return await session.answer(1)

    assert asyncio.run(run())["result"]["openDocuments"] == 2
    assert set(session.ls.workspace.text_documents) == {unquote(cell(0)), unquote(cell(1))}
    assert session.ls.workspace.get_notebook_document(cell_uri=TARGET) is None
    notebook = session.ls.workspace.get_notebook_document(notebook_uri=NOTEBOOK)
    assert [c.document for c in notebook.cells] == [cell(0), cell(1)]


def dropped_whole(session) -> str:
    """What the user was told of a notebook dropped past maxOpenDocuments (told once),
    nothing of it, cells included, being kept."""
    assert session.ls.workspace.notebook_documents == {}
    assert session.ls.workspace.text_documents == {}
    [told] = [m["message"] for m in session.requests("window/showMessage")
              if "maxOpenDocuments" in m["message"]]
    return told


def test_a_notebook_past_max_open_documents_is_not_kept_and_the_user_told(model_dir):
    session = Session(model_dir, maxOpenDocuments=4)
    try:
        async def run() -> dict:
            session.receive(did_open())
            session.receive(infill(1, TARGET, 1, 11))
            return await session.answer(1)

        told = asyncio.run(run())["error"]["message"]
        assert f"notebook {NOTEBOOK} was not opened" in told and "maxOpenDocuments" in told
        assert "6 cells were not opened" in dropped_whole(session)
    finally:
        session.ls.release()


def test_a_cell_is_checked_alone_not_with_the_cells_above(model_dir):
    """The kernel compiles each cell alone: a bracket left open in a cell above (one being
    typed) does not make a fill below it broken (checked in the joined text, this fill
    was rejected: the list ran on into it)."""
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0,
                                 fallback=False, reuse_fills=False))
    text = "total = "
    request = InfillRequest(text, len(text), len(text), "python", TARGET,
                            InfillOptions(length=12, steps=12), before="x = [\n\n")
    Planted(engine, request, broken="sum(x)")
    [best] = engine.infill(request).candidates
    assert (best.text, best.valid) == ("sum(x)", True)


def add_cell(n: int, version: int, at: int, text: str) -> dict:
    """A notebook change inserting code cell `n` (python, `text`) at index `at`."""
    return {"method": "notebookDocument/didChange", "params": {
        "notebookDocument": {"uri": NOTEBOOK, "version": version},
        "change": {"cells": {"structure": {
            "array": {"start": at, "deleteCount": 0, "cells": [{"kind": 2, "document": cell(n)}]},
            "didOpen": [{"uri": cell(n), "languageId": "python", "version": 1, "text": text}]}}}}}


def test_cells_added_past_max_open_documents_close_the_notebook_and_the_user_told(model_dir):
    """A cell added is a document kept, as one opened with the notebook: the notebook
    opened at the limit, the cell added passes it, and the notebook is dropped whole as
    at its opening (its cells would be filled without the new one)."""
    session = Session(model_dir, maxOpenDocuments=len(CELLS))
    try:
        async def run() -> dict:
            session.receive(did_open())
            session.receive(add_cell(len(CELLS), 2, 3, "r = 2"))
            session.receive(infill(1, TARGET, 1, 11))
            return await session.answer(1)

        reply = asyncio.run(run())
        told = reply["error"]["message"]  # the editor did open the cell: not "not open"
        assert reply["error"]["code"] == -32602 and "is not open" not in told
        assert f"notebook {NOTEBOOK} was closed" in told and "maxOpenDocuments" in told
        assert "7 cells were closed" in dropped_whole(session)
    finally:
        session.ls.release()


def test_a_cell_added_to_a_notebook_not_kept_is_refused_as_its_other_cells(model_dir):
    """It was "not open: send didOpen" (the editor did send it), and its ghost text an
    error at every keystroke, where the cells opened with the notebook get none."""
    session = Session(model_dir, maxOpenDocuments=4)
    try:
        added = cell(len(CELLS))
        at = {"line": 0, "character": 4}

        async def run() -> tuple[dict, dict]:
            session.receive(did_open())
            session.receive(add_cell(len(CELLS), 2, 0, "r = "))
            session.receive(infill(1, added, 0, 4))
            session.receive({"id": 2, "method": "textDocument/inlineCompletion", "params": {
                "textDocument": {"uri": added}, "position": at, "context": {"triggerKind": 2}}})
            return await session.answer(1), await session.answer(2)

        fill, ghost = asyncio.run(run())
        told = fill["error"]["message"]
        assert f"this cell's notebook {NOTEBOOK} was not opened" in told
        assert "maxOpenDocuments" in told and "is not open" not in told
        assert ghost["result"] == {"items": []}
        assert session.ls.workspace.text_documents == {}
    finally:
        session.ls.release()


def test_cells_added_within_max_open_documents_are_shown_to_the_fills(model_dir):
    session = Session(model_dir, maxOpenDocuments=len(CELLS) + 1)
    try:
        async def run() -> dict:
            session.receive(did_open())
            session.receive(add_cell(len(CELLS), 2, 2, "r = 2"))
            session.receive(infill(1, TARGET, 1, 11))
            return await session.answer(1)

        assert "result" in asyncio.run(run())
        assert "import math\n\nr = 2\n\ndef area(r):" in session.shown[0]
        assert not [m for m in session.requests("window/showMessage")
                    if "maxOpenDocuments" in m["message"]]
    finally:
        session.ls.release()


# cells above a cell, as the server shows them: a notebook nesting by two spaces, by tabs
TWO_SPACES = "def sign(x):\n  if x < 0:\n    return -1\n  return 1\n\n"
TABS = "def sign(x):\n\tif x < 0:\n\t\treturn -1\n\treturn 1\n\n"
BODY_IN_FOURS = "\n    for x in xs:\n        print(x)"  # what a model of PEP 8 code writes


def body_after_header(model_dir, cell: str, before: str) -> str:
    """The best fill at the end of `cell` (a header) with `before` shown above it, when the
    model writes BODY_IN_FOURS."""
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0,
                                 fallback=False, reuse_fills=False))
    request = InfillRequest(cell, len(cell), len(cell), "python", TARGET,
                            InfillOptions(length=24, steps=24), before=before)
    Planted(engine, request, broken=BODY_IN_FOURS)
    return engine.infill(request).candidates[0].text


@pytest.mark.parametrize(("before", "unit"), [(TWO_SPACES, "  "), (TABS, "\t")],
                         ids=["two spaces", "tabs"])
def test_a_cell_with_no_indentation_of_its_own_is_indented_as_its_notebook(
        model_dir, before, unit):
    """A cell that is a header alone (`def show(xs):`, the cursor at its end) says nothing
    of the notebook's unit; the notebook's other cells do, and the body the model writes
    four spaces a level goes on the notebook's two, or its tabs (it kept the model's
    four, a cell unlike every other)."""
    fill = body_after_header(model_dir, "def show(xs):", before)
    assert fill == f"\n{unit}for x in xs:\n{unit * 2}print(x)"


def test_a_cell_with_indentation_of_its_own_keeps_it_in_any_notebook(model_dir):
    """The cell is what the kernel compiles: its own unit (four here) wins over the
    notebook's two."""
    cell = "def first(xs):\n    return xs[0]\n\ndef show(xs):"
    assert body_after_header(model_dir, cell, TWO_SPACES) == BODY_IN_FOURS


def test_a_continuation_is_no_unit_of_the_cell_s_own(model_dir):
    """A line aligned under its bracket shows the cell's alignment, not a block's step: a
    cell whose only indented line is one goes on the notebook's unit too."""
    cell = "total = sum(a,\n            b)\ndef show(xs):"
    assert body_after_header(model_dir, cell, TWO_SPACES) == "\n  for x in xs:\n    print(x)"


def test_a_cell_led_by_spaces_in_a_notebook_of_tabs_stays_in_spaces(model_dir):
    """Its continuation shows no unit, but it shows the cell's characters, which win over
    the notebook's as its unit would."""
    cell = "total = sum(a,\n            b)\ndef show(xs):"
    assert body_after_header(model_dir, cell, TABS) == BODY_IN_FOURS


def test_a_document_outside_a_notebook_reads_its_own_indentation_alone(model_dir):
    """Nothing shown around it, a header alone keeps the model's own unit, as before
    notebooks were read."""
    assert body_after_header(model_dir, "def show(xs):", "") == BODY_IN_FOURS


def test_a_fill_is_not_reused_for_a_cell_opened_again_as_another_language(model_dir):
    """With reuseFills, a cell filled as Python, its notebook closed and opened again with
    the same text in a cell of another language, got the Python fill back (checked again,
    but written for Python) instead of one of its own."""
    session = Session(model_dir, reuseFills=True)
    as_javascript = [(kind, "javascript" if language == "python" else language, text)
                     for kind, language, text in CELLS]
    try:
        async def run() -> tuple[dict, dict, dict]:
            answers = []
            for n, cells in enumerate((CELLS, CELLS, as_javascript), start=1):
                session.receive(did_open(cells))
                session.receive(infill(n, TARGET, 1, 11))
                answers.append(await session.answer(n))
                session.receive({"method": "notebookDocument/didClose", "params": {
                    "notebookDocument": {"uri": NOTEBOOK},
                    "cellTextDocuments": [{"uri": cell(i)} for i in range(len(cells))]}})
            return tuple(answers)

        first, again, other = asyncio.run(run())
        passes = len(session.shown)
        assert first["result"]["stats"]["reused"] == ""
        assert again["result"]["stats"]["reused"] == "exact"
        assert other["result"]["stats"]["reused"] == "", other
        assert passes == 2  # the first fill's and the other language's, one step each
    finally:
        session.ls.release()
