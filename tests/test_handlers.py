"""The LSP handlers' own decisions about a fill, on a stubbed server (no model)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from lsprotocol import types

from dlm_lsp import server

DOC = types.TextDocumentIdentifier(uri="file:///work/a.py")
AT = types.Position(line=1, character=4)


class Filled:
    """A server whose every fill comes back as `text`."""

    def __init__(self, text: str):
        self.text = text

    async def fill_range(self, uri, rng, options, version=None, token=None):
        assert uri == DOC.uri and rng.start == rng.end == AT
        return None, SimpleNamespace(candidates=[SimpleNamespace(text=self.text)])


FILLS = [("x = 1", True), ("\n    y = 2\n", True), ("#", True), ("", False), ("   ", False),
         ("\n\n\n", False), ("\n    \n", False)]


@pytest.mark.parametrize(("text", "offered"), FILLS)
def test_ghost_text_is_offered_only_for_a_fill_with_text(text, offered):
    params = types.InlineCompletionParams(
        text_document=DOC, position=AT, context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic))
    answer = asyncio.run(server.inline_completion(Filled(text), params))
    assert [item.insert_text for item in answer.items] == ([text] if offered else [])
    if offered:
        assert answer.items[0].range == types.Range(AT, AT)


@pytest.mark.parametrize(("text", "offered"), FILLS)
def test_a_completion_item_is_offered_only_for_a_fill_with_text(text, offered):
    params = types.CompletionParams(text_document=DOC, position=AT)
    answer = asyncio.run(server.completion(Filled(text), params))
    assert [item.text_edit.new_text for item in answer.items] == ([text] if offered else [])
    assert answer.is_incomplete  # the next keystroke asks again
