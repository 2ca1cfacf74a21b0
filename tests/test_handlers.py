"""The LSP handlers' own decisions about a fill, on a stubbed server (no model)."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams
from pygls.workspace import Workspace

from dlm_lsp import jobs, protocol, server
from dlm_lsp.config import ServerConfig
from dlm_lsp.documents import Refused
from dlm_lsp.jobs import Kind
from dlm_lsp.offers import Offers
from dlm_lsp.policy import REWRITE, SpanPlan
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.results import Candidate, InfillResult

DOC = types.TextDocumentIdentifier(uri="file:///work/a.py")
TEXT = "def f(x):\n    retu\n"
AT = types.Position(line=1, character=8)  # `retu|`


class Filled:
    """A server whose every fill comes back as `text` (and `others`), each with the
    syntax check's verdict in `valid` (True: passed, False: rejected, None: unchecked),
    and each ended by the model before its span of 16 tokens, unless `whole` (it used
    them all); `fills` counts the fills made."""

    def __init__(self, text: str, *others: str, valid: tuple[bool | None, ...] = (),
                 at: types.Position = AT, whole: bool = False, **settings):
        self.texts = [text, *others]  # the candidates, best first
        self.at = at  # where the fills are asked for
        self.valid = list(valid) + [True] * (len(self.texts) - len(valid))
        self.used = 16 if whole else 3
        self.accepted = None
        self.fills = 0
        self.config = ServerConfig(**settings)
        self.workspace = Workspace(None)
        self.workspace.put_text_document(types.TextDocumentItem(DOC.uri, "python", 1, TEXT))
        self.refused = Refused()
        self.offers = Offers()
        self.jobs = SimpleNamespace(stop_document=lambda uri, why: None)  # none in flight

    document = server.DlmServer.document  # the server's own lookups, on this workspace
    at_version = server.DlmServer.at_version
    suggest = server.DlmServer.suggest
    edited = server.DlmServer.edited

    async def fill_range(self, uri, rng, options, version=None, token=None, accepted=None,
                         kind=Kind.FILL):
        assert uri == DOC.uri and rng.start == rng.end == self.at
        assert kind is Kind.SUGGESTION
        self.accepted = accepted
        self.fills += 1
        return None, SimpleNamespace(tokens=16, reused="", candidates=[
            SimpleNamespace(text=t, valid=v, used=self.used, ended=self.used < 16)
            for t, v in zip(self.texts, self.valid, strict=True)])


FILLS = [("x = 1", True), ("\n    y = 2\n", True), ("#", True), ("", False), ("   ", False),
         ("\n\n\n", False), ("\n    \n", False)]


def ghost(filled: Filled, selected: types.SelectedCompletionInfo | None = None):
    params = types.InlineCompletionParams(
        text_document=DOC, position=AT, context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic,
            selected_completion_info=selected))
    return asyncio.run(server.inline_completion(filled, params))


@pytest.mark.parametrize(("text", "offered"), FILLS)
def test_ghost_text_is_offered_only_for_a_fill_with_text(text, offered):
    answer = ghost(Filled(text))
    assert [item.insert_text for item in answer.items] == ([text] if offered else [])
    if offered:
        assert answer.items[0].range == types.Range(AT, AT)


@pytest.mark.parametrize(("text", "offered"), FILLS)
def test_a_completion_item_is_offered_only_for_a_fill_with_text(text, offered):
    params = types.CompletionParams(text_document=DOC, position=AT)
    answer = asyncio.run(server.completion(Filled(text), params))
    assert [item.text_edit.new_text for item in answer.items] == (
        ["retu" + text] if offered else [])
    assert answer.is_incomplete  # the next keystroke asks again


WORD = types.Range(types.Position(1, 4), AT)  # `retu` before the cursor


def test_a_completion_item_takes_in_the_word_typed_before_the_cursor():
    """Clients filter items by the word before the cursor: Emacs' eglot matches it against
    the label's start, Helix fuzzily against the label (VS Code against the text from the
    edit's start), so an item `rn x` inserted at `retu|` was never shown there.  It
    replaces the word with the word and the fill, and its label is the line as it will
    read."""
    params = types.CompletionParams(text_document=DOC, position=AT)
    [item] = asyncio.run(server.completion(Filled("rn x + 1"), params)).items
    assert item.label == "return x + 1"
    assert item.text_edit.range == WORD and item.text_edit.new_text == "return x + 1"


def test_a_completion_item_of_a_fill_that_starts_a_new_line_is_labelled_by_the_word():
    params = types.CompletionParams(text_document=DOC, position=AT)
    [item] = asyncio.run(server.completion(Filled("\n    y = 2"), params)).items
    assert item.label == "retu" and item.text_edit.range == WORD
    assert item.documentation == "retu\n    y = 2"  # shown whole


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_a_completion_item_of_a_file_with_other_line_endings_is_labelled_by_its_first_line(
        ending):
    """The fill comes with the document's line breaks: in a `\r` file a multi-line item
    was labelled with the whole fill, breaks and all, and had no documentation."""
    params = types.CompletionParams(text_document=DOC, position=AT)
    [item] = asyncio.run(server.completion(Filled(f"rn [{ending}    1]"), params)).items
    assert item.label == "return ["
    assert item.documentation == f"return [{ending}    1]"


def test_a_multi_line_completion_item_keeps_the_indentation_the_fill_was_given():
    """The fill's later lines carry their own columns in the document (the server
    re-indents them), so a client must not add the cursor line's indentation to them, as
    VS Code does to an item that does not say `asIs` (its `keepWhitespace`)."""
    params = types.CompletionParams(text_document=DOC, position=AT)
    [item] = asyncio.run(server.completion(Filled("rn [\n        1,\n    ]"), params)).items
    assert item.insert_text_mode == types.InsertTextMode.AsIs


@pytest.mark.parametrize("line, character", [(1, 4), (2, 0)])  # `    |retu`, the last line
def test_a_completion_item_with_no_word_before_the_cursor_inserts_there(line, character):
    at = types.Position(line, character)
    params = types.CompletionParams(text_document=DOC, position=at)
    [item] = asyncio.run(server.completion(Filled("  x = 1", at=at), params)).items
    assert item.label == "x = 1"  # its text, from the first character that shows
    assert item.text_edit.range == types.Range(at, at) and item.text_edit.new_text == "  x = 1"


def test_ghost_text_extends_the_completion_item_the_editor_has_selected():
    """The fill is asked for as if the item were applied (the server fills after it);
    the ghost text is the item's text and the fill, over the item's range."""
    word = types.Range(types.Position(1, 4), AT)  # `retu|` with `return` selected
    selected = types.SelectedCompletionInfo(range=word, text="return")
    filled = Filled(" x + 1")
    [item] = ghost(filled, selected).items
    assert filled.accepted == selected
    assert item.insert_text == "return x + 1" and item.range == word
    assert ghost(Filled("  "), selected).items == []  # nothing past the item: nothing to add


@pytest.mark.parametrize("start, end, why", [
    ((0, 0), (0, 3), "does not hold the cursor"),  # `def`, a line above
    ((1, 9), (1, 12), "past the end of its line"),
    ((1, 4), (5, 0), "outside the document"),
    ((1, 8), (1, 4), "before its start")])
def test_a_selected_item_whose_range_is_not_at_the_cursor_is_left_out_and_logged(
        caplog, start, end, why):
    """Its range is the text the item replaces, which holds the cursor; another is a
    client's mistake: the ghost text is made as if no item were selected, not spliced
    into the wrong place (or refused, for a range past the text)."""
    selected = types.SelectedCompletionInfo(
        range=types.Range(types.Position(*start), types.Position(*end)), text="return")
    filled = Filled(" x + 1")
    with caplog.at_level("WARNING", logger="dlm_lsp.server"):
        [item] = ghost(filled, selected).items
    assert filled.accepted is None
    assert item.insert_text == " x + 1" and item.range == types.Range(AT, AT)
    assert "selected completion item" in caplog.text and why in caplog.text


def test_each_distinct_candidate_is_a_ghost_text_to_cycle_through_best_first():
    answer = ghost(Filled("a + 1", "", "a + 1", "b", "\n\n"))
    assert [item.insert_text for item in answer.items] == ["a + 1", "b"]


def test_each_distinct_candidate_is_a_completion_item_best_first():
    params = types.CompletionParams(text_document=DOC, position=AT)
    answer = asyncio.run(server.completion(Filled("a + 1", "", "a + 1", "b\n    c", " "),
                                           params))
    assert [(i.label, i.text_edit.new_text, i.sort_text) for i in answer.items] == [
        ("retua + 1", "retua + 1", "00"), ("retub", "retub\n    c", "01")]
    assert [i.documentation for i in answer.items] == [None, "retub\n    c"]  # shown whole


def test_a_fill_the_syntax_check_rejected_is_no_suggestion():
    """Ghost text carries no verdict: the editor would show code known to break the file."""
    assert ghost(Filled("foo(", valid=(False,))).items == []
    params = types.CompletionParams(text_document=DOC, position=AT)
    assert asyncio.run(server.completion(Filled("foo(", valid=(False,)), params)).items == []


def test_a_valid_or_unchecked_candidate_is_offered_past_a_rejected_one():
    answer = ghost(Filled("foo(", "foo()", "bar", valid=(False, True, None)))
    assert [item.insert_text for item in answer.items] == ["foo()", "bar"]


def test_suggest_invalid_offers_rejected_fills_too():
    answer = ghost(Filled("foo(", "foo()", valid=(False, True), suggest_invalid=True))
    assert [item.insert_text for item in answer.items] == ["foo(", "foo()"]


@pytest.mark.parametrize("section", [None, [1], "fast"])
def test_a_dlm_section_that_is_not_an_object_is_said_to_be_so(section):
    """Not "unknown setting 'dlm'": the section is known, its value is what is wrong."""
    ls = server.build_server()
    problems, _ = ls.apply_settings({"dlm": section, "steps": 4})
    assert problems == [f"settings 'dlm' should be an object, got {json.dumps(section)}; ignored"]
    assert ls.config.steps == 4


def test_our_settings_beside_a_dlm_section_are_said_to_be_ignored_once():
    """They were ignored without a word, wrong values too; other servers' sections beside
    it (eglot sends every server the whole configuration) are not ours to name."""
    ls = server.build_server()
    sent = {"dlm": {"steps": 7}, "schedule": "bogus", "seed": 3, "pylsp": {"a": 1}}
    problems, _ = ls.apply_settings(sent)
    assert problems == ["settings 'schedule', 'seed' beside the 'dlm' section ignored: the "
                        "section's settings are used"]
    assert (ls.config.steps, ls.config.schedule, ls.config.seed) == (7, "linear", 0)
    assert ls.apply_settings(sent)[0] == []  # sent again unchanged
    assert ls.apply_settings({"dlm": {"steps": 7}, "pylsp": {"a": 2}})[0] == []


def test_a_dlm_section_that_is_not_an_object_is_told_once_as_a_wrong_value_is():
    """Editors send the section at every change: `"dlm": 5` was told at each of them.
    It is told again when it becomes another wrong section, or is mended and broken
    again; 1 and true are different sections, though Python finds them equal."""
    ls = server.build_server()
    told = "settings 'dlm' should be an object, got {}; ignored"
    assert ls.apply_settings({"dlm": None}, initial=True)[0] == [told.format("null")]
    assert ls.apply_settings({"dlm": None})[0] == []
    assert ls.apply_settings({"dlm": 1, "steps": 4})[0] == [told.format(1)]
    assert ls.apply_settings({"dlm": 1, "steps": 5})[0] == []
    assert ls.config.steps == 5  # the settings beside it are applied as ever
    assert ls.apply_settings({"dlm": True})[0] == [told.format("true")]
    assert ls.apply_settings({"dlm": [1]})[0] == [told.format([1])]
    assert ls.apply_settings({"dlm": {"steps": 6}})[0] == []
    assert ls.apply_settings({"dlm": [1]})[0] == [told.format([1])]


def test_a_wrong_value_at_initialize_keeps_the_default_and_a_later_one_the_value():
    """At initialize there is no value of the user's to keep: the message said "value kept"."""
    ls = server.build_server()
    server.initialize(ls, types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        initialization_options={"candidates": 3, "strategy": "sideways"}))
    assert ls.pending_problems == [
        "setting 'strategy' = \"sideways\" should be one of confidence, margin, entropy, random, "
        "left-to-right; default kept"]
    assert ls.apply_settings({"dlm": {"candidates": 17}})[0] == [
        "setting 'candidates' = 17 should be an integer from 1 to 16; previous value kept"]
    assert (ls.config.candidates, ls.config.strategy) == (3, "confidence")


def test_a_wrong_setting_is_told_once_not_at_every_change_of_another_one():
    """VS Code and Neovim send the whole section at every change: `steps` = 0, told at
    initialize, was told again whenever the user changed any other setting."""
    ls = server.build_server()
    sent = {"steps": 0, "temperature": 0.0}
    server.initialize(ls, types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                 initialization_options=sent))
    assert ls.pending_problems == [
        "setting 'steps' = 0 should be an integer from 1 to 4096; default kept"]
    for temperature in (0.5, 0.7):
        sent = {**sent, "temperature": temperature}
        assert ls.apply_settings({"dlm": sent})[0] == []
        assert (ls.config.temperature, ls.config.steps) == (temperature, None)


def test_a_wrong_setting_is_told_again_when_the_user_changes_it():
    ls = server.build_server()
    ls.apply_settings({"steps": 0}, initial=True)
    told = "setting 'steps' = {!r} should be an integer from 1 to 4096; previous value kept"
    assert ls.apply_settings({"dlm": {"steps": -1}})[0] == [told.format(-1)]  # another wrong one
    assert ls.apply_settings({"dlm": {"steps": 4}})[0] == []
    assert ls.apply_settings({"dlm": {"steps": 0}})[0] == [told.format(0)]  # wrong again
    assert ls.config.steps == 4


def test_a_client_that_sends_only_what_changed_is_not_told_again_either():
    """Settings overlay the current ones: a value sent once stays what the client sent."""
    ls = server.build_server()
    assert len(ls.apply_settings({"dlm": {"strategy": "sideways"}})[0]) == 1
    assert ls.apply_settings({"dlm": {"temperature": 0.5}})[0] == []
    assert ls.apply_settings(None)[0] == []
    assert ls.apply_settings({"dlm": {"strategy": "sideways", "temperature": 0.7}})[0] == []


def complete_at(text: str, at: types.Position, fill: str, encoding=types.PositionEncodingKind.Utf16
                ) -> types.CompletionItem:
    """The one completion item for `fill` at `at` in a document of `text`, positions in
    `encoding`."""
    filled = Filled(fill, at=at)
    filled.workspace = Workspace(None, position_encoding=encoding)
    filled.workspace.put_text_document(types.TextDocumentItem(DOC.uri, "python", 1, text))
    params = types.CompletionParams(text_document=DOC, position=at)
    [item] = asyncio.run(server.completion(filled, params)).items
    return item


UTF8, UTF16 = types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16


@pytest.mark.parametrize(("word", "encoding", "width"), [
    ("café", UTF16, 6), ("café", UTF8, 7),  # é: one UTF-16 unit, two UTF-8 bytes
    ("变量", UTF16, 4), ("变量", UTF8, 8),  # three bytes each
    ("x𝑥", UTF16, 5), ("x𝑥", UTF8, 7),  # 𝑥: two UTF-16 units (a surrogate pair), four bytes
    ("cafe\u0301", UTF16, 7), ("cafe\u0301", UTF8, 8),  # e and a combining acute accent
])
def test_a_non_ascii_identifier_before_the_cursor_is_the_word_taken_in(word, encoding, width):
    """Python identifiers hold letters of any script and combining marks (XID_Continue), and
    editors count them in their words: the item replaces all of the word, its range counted
    in the client's position encoding.  A decomposed `é` (e + U+0301, as macOS writes
    names) ended the word at the mark: the item went in at the cursor, labelled by the fill
    alone, which eglot and Helix filter out."""
    at = types.Position(1, width)
    item = complete_at(f"def f(x):\n  {word}\n", at, " = x", encoding)
    assert item.text_edit.range == types.Range(types.Position(1, 2), at)
    assert item.text_edit.new_text == item.label == f"{word} = x"


@pytest.mark.parametrize(("line", "word"), [("self.", ""), ("self.ab", "ab")])
def test_after_a_dot_the_word_is_the_attribute_typed_so_far(line, word):
    """`.` ends no word: after `self.` the item goes in at the cursor, after `self.ab` it
    replaces `ab` (what editors filter member completions by), never `self.`."""
    at = types.Position(1, 2 + len(line))
    item = complete_at(f"def f(self):\n  {line}\n", at, "cd")
    assert item.text_edit.range == types.Range(types.Position(1, at.character - len(word)), at)
    assert item.text_edit.new_text == item.label == word + "cd"


def test_a_word_the_cursor_is_inside_is_replaced_only_up_to_the_cursor():
    """At `re|turn` the fill is made for the gap between `re` and `turn` (the model is
    shown `turn` after it), so the item replaces `re` and leaves `turn` where it is."""
    at = types.Position(1, 4)
    item = complete_at("def f(x):\n  return\n", at, "ally_re")
    assert item.text_edit.range == types.Range(types.Position(1, 2), at)
    assert item.text_edit.new_text == "really_re"


def test_a_fill_that_starts_a_new_line_is_labelled_by_its_first_line_with_text():
    at = types.Position(1, 0)
    item = complete_at("def f(x):\n\n", at, "\n    y = 2")
    assert item.label == "y = 2" and item.text_edit.new_text == "\n    y = 2"
    assert item.text_edit.range == types.Range(at, at)


def test_a_long_fill_is_labelled_by_its_first_80_characters_and_inserted_whole():
    fill = "rn " + " + ".join(f"x{i}" for i in range(40))
    item = complete_at(TEXT, AT, fill)
    assert item.label == ("retu" + fill)[:80] and item.text_edit.new_text == "retu" + fill


def test_a_fill_is_plain_text_so_dollars_and_braces_go_in_as_written():
    """Not a snippet: `$1`, `${1}` and `\\` in a fill (a shell script, a template string)
    are the code's own, and a client expanding a snippet would take them for tab stops."""
    item = complete_at(TEXT, AT, 'rn f"${1}" + "$1\\\\"')
    assert item.insert_text_format == types.InsertTextFormat.PlainText
    assert item.text_edit.new_text == 'return f"${1}" + "$1\\\\"'


class Rewritten(Filled):
    """A server whose rewrite of `SELECTION` comes back as the given candidates, and
    which records the edits it would ask the editor to apply."""

    SELECTION = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 8}}

    def __init__(self, text: str, *others: str, selected: str = "retu"):
        super().__init__(text, *others)
        self.selection = {"start": {"line": 1, "character": 4},
                          "end": {"line": 1, "character": 4 + len(selected)}}
        self.workspace.put_text_document(types.TextDocumentItem(
            DOC.uri, "python", 2, f"def f(x):\n    {selected}\n"))
        self.applied: list[list[types.TextEdit]] = []

    async def fill_range(self, uri, rng, options, version=None, token=None, accepted=None,
                         kind=Kind.FILL, progress=None):
        assert rng == types.Range(types.Position(1, 4),
                                  types.Position(1, self.selection["end"]["character"]))
        # the best from the model's own path, the others from repair's
        candidates = [Candidate(t, v, 0.0, path=DIFFUSION if i == 0 else REPAIR) for i, (t, v)
                      in enumerate(zip(self.texts, self.valid, strict=True))]
        return SimpleNamespace(uri=uri, version=2), InfillResult(
            candidates, SpanPlan(REWRITE, 8, 8, False), steps=8, tokens=8, ms=1.0)

    async def apply_edits(self, job, edits, label):
        self.applied.append(edits)
        return True, None  # applied, and no reason not to


def rewrite(filled: Rewritten) -> dict:
    return asyncio.run(server.rewrite_selection(filled, DOC.uri, filled.selection))


@pytest.mark.parametrize(("text", "offered"), FILLS)
def test_a_rewrite_of_only_whitespace_is_not_applied_in_place_of_code(text, offered):
    """The model ended the span at once: applied, the selection would only be deleted,
    which no one asks a rewrite for (a fill the syntax check rejected is still applied,
    as a draft worth editing, and the editor warns)."""
    rewritten = Rewritten(text)
    result = rewrite(rewritten)
    assert result["applied"] is offered and result["text"] == text
    assert [[edit.new_text for edit in edits] for edits in rewritten.applied] == (
        [[text]] if offered else [])
    if not offered:
        assert "only whitespace" in result["message"] and "nothing applied" in result["message"]


def test_a_rewrite_run_from_the_code_action_says_why_nothing_was_applied():
    """The code action's command asks (`report`): editors show nothing of its result."""
    rewritten = Rewritten("  \n")
    told: list[types.ShowMessageParams] = []
    rewritten.window_show_message = told.append
    asked = {"uri": DOC.uri, "range": rewritten.selection}
    asyncio.run(server.rewrite_selection(rewritten, asked))
    assert told == []  # an editor integration's own command shows the result itself
    result = asyncio.run(server.rewrite_selection(rewritten, {**asked, "report": True}))
    [said] = told
    assert said.type == types.MessageType.Warning
    assert said.message == f"dlm-lsp: rewrite selection: {result['message']}"
    assert rewritten.applied == []


def test_a_rewrite_applies_the_best_candidate_that_writes_something():
    rewritten = Rewritten("  \n", "return x", "x")
    assert rewrite(rewritten)["text"] == "return x"
    assert [edit.new_text for edit in rewritten.applied[0]] == ["return x"]


def test_a_rewrite_of_whitespace_may_write_whitespace():
    rewritten = Rewritten("  ", selected="    ")
    assert rewrite(rewritten)["applied"] is True and rewritten.applied


def infill_selection(rewritten: Rewritten) -> dict:
    params = {"textDocument": {"uri": DOC.uri}, "range": rewritten.selection}
    return asyncio.run(server.infill(rewritten, params))


def test_a_fill_of_a_selection_puts_whitespace_candidates_last_and_edits_with_the_first():
    result = infill_selection(Rewritten("  \n", "return x", "", "x"))
    assert [c["text"] for c in result["candidates"]] == ["return x", "x", "  \n", ""]
    assert [e["newText"] for e in result["edits"]] == ["return x"] and "message" not in result
    assert result["stats"]["path"] == result["candidates"][0]["path"] == REPAIR


def test_a_fill_of_a_selection_of_only_whitespace_candidates_has_no_edit_and_says_why():
    result = infill_selection(Rewritten("  \n", ""))
    assert result["edits"] == [] and "nothing applied" in result["message"]
    assert [c["text"] for c in result["candidates"]] == ["  \n", ""]


@pytest.mark.parametrize(("arguments", "version"), [
    ([DOC.uri, Rewritten.SELECTION], None),
    ([{"uri": DOC.uri, "range": Rewritten.SELECTION}], None),
    ([{"uri": DOC.uri, "range": Rewritten.SELECTION, "version": 7}], 7),
])
def test_a_command_s_version_is_the_one_its_object_form_names(arguments, version):
    assert protocol.command_version(tuple(arguments), "dlm.rewriteSelection") == version


@pytest.mark.parametrize("version", ["7", 7.5, True])
def test_a_command_s_version_that_is_no_integer_is_refused(version):
    with pytest.raises(JsonRpcInvalidParams, match="'version' should be an integer"):
        protocol.command_version(({"uri": DOC.uri, "version": version},), "dlm.rewriteSelection")


def test_a_rewrite_for_another_version_of_the_document_is_refused_and_nothing_applied():
    rewritten = Rewritten("return x")
    with pytest.raises(JsonRpcContentModified, match="version 1 but the document is at 2"):
        asyncio.run(server.rewrite_selection(rewritten, {
            "uri": DOC.uri, "range": Rewritten.SELECTION, "version": 1}))
    assert rewritten.applied == []


def test_a_superseded_fill_of_a_document_opened_anew_at_its_version_is_not_returned():
    """A fill superseded, whose result came all the same (its last step was taken, or it
    was answered from recent fills), while its document was closed and opened again at
    the same version with other text: the version matches, the text does not."""
    ls = parsing_server()
    opened(ls, TEXT)
    old = ls.start_job(DOC.uri, 1)
    ls.start_job(DOC.uri, 1)  # a newer dlm/infill of the document supersedes it
    server.did_close(ls, types.DidCloseTextDocumentParams(DOC))
    opened(ls, "def g(y):\n    pass\n")
    with pytest.raises(JsonRpcContentModified, match="the document was closed"):
        ls.check_fresh(old)


def test_a_fill_of_a_hole_marker_may_be_only_whitespace():
    """Nothing may be what goes in a hole (`f(<FILL>)`), as dlm.fillHoles fills it: the
    marker is no code that an empty fill would delete."""
    result = infill_selection(Rewritten("", selected="<FILL>"))
    assert [e["newText"] for e in result["edits"]] == [""] and "message" not in result


def edit(filled: Filled, text: str, version: int = 2) -> None:
    """The document becomes `text` (the user accepted a suggestion, or typed), as the
    workspace takes a didChange before the server's handler sees it."""
    filled.workspace.put_text_document(types.TextDocumentItem(DOC.uri, "python", version, text))
    server.did_change(filled, types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version, DOC.uri),
        [types.TextDocumentContentChangeWholeDocument(text)]))


def ghost_at(filled: Filled, at: types.Position, selected=None,
             trigger=types.InlineCompletionTriggerKind.Automatic):
    filled.at = at
    params = types.InlineCompletionParams(
        text_document=DOC, position=at, context=types.InlineCompletionContext(
            trigger_kind=trigger, selected_completion_info=selected))
    return asyncio.run(server.inline_completion(filled, params))


ACCEPTED = "def f(x):\n    return x\n"  # TEXT with `rn x` inserted at `retu|`
END = types.Position(1, 12)  # `return x|`


def test_ghost_text_accepted_whole_asks_for_no_fill_at_its_end():
    """Tab inserts the ghost text and VS Code asks again at its end: the model ended that
    fill before its span, so it has said what goes there, and a fill would only ask again."""
    filled = Filled("rn x")
    assert [item.insert_text for item in ghost(filled).items] == ["rn x"]
    edit(filled, ACCEPTED)
    assert ghost_at(filled, END).items == []
    assert filled.fills == 1


def test_a_completion_item_accepted_asks_for_no_fill_at_its_end():
    filled = Filled("rn x")
    params = types.CompletionParams(text_document=DOC, position=AT)
    [item] = asyncio.run(server.completion(filled, params)).items
    edit(filled, ACCEPTED)  # the item's edit: `retu` replaced by `return x`
    assert item.text_edit.new_text == "return x"
    assert ghost_at(filled, END).items == []
    completion = types.CompletionParams(text_document=DOC, position=END)
    assert asyncio.run(server.completion(filled, completion)).items == []
    assert filled.fills == 1


def test_ghost_text_after_a_selected_completion_item_of_the_fill_makes_no_fill():
    """VS Code asks for ghost text after the item its suggest widget has selected, as soon
    as it is selected: the item is the fill, so that is a fill after the fill."""
    filled = Filled("rn x")
    asyncio.run(server.completion(filled, types.CompletionParams(text_document=DOC, position=AT)))
    selected = types.SelectedCompletionInfo(range=WORD, text="return x")
    assert ghost_at(filled, AT, selected).items == []
    assert filled.fills == 1


def test_a_fill_that_used_its_whole_span_is_continued_after_it_is_accepted():
    """Cut short by its span, the fill may not be all of the middle: the next fill is the rest."""
    filled = Filled("rn x", whole=True)
    ghost(filled)
    edit(filled, ACCEPTED)
    assert [item.insert_text for item in ghost_at(filled, END).items] == ["rn x"]
    assert filled.fills == 2


def test_typing_after_an_accepted_fill_asks_for_a_fill_again():
    filled = Filled("rn x")
    ghost(filled)
    edit(filled, "def f(x):\n    return x \n")  # a space typed after it
    assert [item.insert_text for item in ghost_at(filled, types.Position(1, 13)).items] == ["rn x"]
    assert filled.fills == 2


def test_an_edit_undone_after_an_accepted_fill_asks_for_a_fill_again():
    """A space typed and deleted leaves the text as the acceptance did, but the place was
    left: it got nothing, and no fill, until the text itself differed."""
    filled = Filled("rn x")
    ghost(filled)
    edit(filled, ACCEPTED)
    assert ghost_at(filled, END).items == []
    edit(filled, "def f(x):\n    return x \n", version=3)
    edit(filled, ACCEPTED, version=4)
    assert [item.insert_text for item in ghost_at(filled, END).items] == ["rn x"]
    assert filled.fills == 2


def test_ghost_text_asked_for_on_purpose_after_an_accepted_fill_is_filled():
    """Alt+\\ (`Invoked`) at the end of the fill just accepted: the user asks for more."""
    filled = Filled("rn x")
    ghost(filled)
    edit(filled, ACCEPTED)
    invoked = ghost_at(filled, END, trigger=types.InlineCompletionTriggerKind.Invoked)
    assert [item.insert_text for item in invoked.items] == ["rn x"]
    assert filled.fills == 2


def test_typing_a_fill_s_start_keeps_its_offer_for_the_rest():
    """The user types `r` of ghost text `rn x` (a didChange), is offered `n x` (from
    recent fills) and accepts it: that is the end of the fill the model ended."""
    filled = Filled("rn x")
    ghost(filled)
    edit(filled, "def f(x):\n    retur\n")
    filled.texts, filled.used = ["n x"], 0
    filled.offers.offered(DOC.uri, "def f(x):\n    retur\n", len("def f(x):\n    retur"),
                          SimpleNamespace(tokens=0, reused="typed", candidates=[
                              SimpleNamespace(text="n x", used=0, ended=None)]), ["n x"])
    edit(filled, ACCEPTED, version=3)
    assert ghost_at(filled, END).items == []


def test_a_fill_only_partly_accepted_asks_for_a_fill_at_the_cursor():
    """Ctrl+Right takes a word of the ghost text: the rest is asked for (the engine's recent
    fills answer that, without the model)."""
    filled = Filled("rn x + 1")
    ghost(filled)
    edit(filled, "def f(x):\n    return x\n")  # `rn x` of `rn x + 1`
    assert ghost_at(filled, END).items != []
    assert filled.fills == 2


def test_ghost_text_after_another_selected_item_is_filled():
    """An item of another provider selected at the place of the dlm item is no fill of ours."""
    filled = Filled("rn x")
    asyncio.run(server.completion(filled, types.CompletionParams(text_document=DOC, position=AT)))
    selected = types.SelectedCompletionInfo(range=WORD, text="return")
    assert [item.insert_text for item in ghost_at(filled, AT, selected).items] == ["returnrn x"]
    assert filled.fills == 2


# --- a large document is parsed when it is opened, off its first fill's path ----------------

LARGE = "".join(f"def f{k}(x):\n    return x + {k}\n\n\n" for k in range(4000))  # 124 K chars


def parsing_server() -> server.DlmServer:
    """A server with a workspace, as after `initialize`; no model is loaded."""
    ls = server.build_server()
    ls.protocol._workspace = Workspace(None)
    return ls


def opened(ls: server.DlmServer, text: str, uri: str = DOC.uri) -> None:
    """`text` opened at `uri` as the editor opens it (pygls keeps it, then our handler)."""
    item = types.TextDocumentItem(uri, "python", 1, text)
    ls.workspace.put_text_document(item)
    server.did_open(ls, types.DidOpenTextDocumentParams(item))


@pytest.fixture
def kept_parses(monkeypatch):
    """The parse trees validation keeps, empty for this test."""
    from collections import OrderedDict

    from dlm_lsp import validation

    monkeypatch.setattr(validation, "_DOCUMENTS", OrderedDict())
    monkeypatch.setattr(validation, "_PARSING", {})
    return validation._DOCUMENTS


def test_a_large_document_is_parsed_when_it_is_opened(kept_parses):
    ls = parsing_server()
    opened(ls, LARGE)
    ls.parser.shutdown(wait=True)
    assert kept_parses[DOC.uri].text == LARGE


def test_a_document_is_parsed_ahead_with_the_line_breaks_its_fills_are_parsed_with(
        kept_parses):
    """The model, and so validation, sees a `\\r\\n` file with `\\n` (line_endings): a tree
    of the text with `\\r\\n` would be reparsed nearly whole by the first fill."""
    ls = parsing_server()
    opened(ls, LARGE.replace("\n", "\r\n"))
    ls.parser.shutdown(wait=True)
    assert kept_parses[DOC.uri].text == LARGE


def test_a_large_document_opened_when_the_kept_trees_are_full_pushes_none_out(
        kept_parses, monkeypatch):
    """The trees kept are those of documents being filled: one parsed ahead of its fills
    took the place of the least recent, and an editor restoring its large tabs pushed
    out the tree of the file being typed in."""
    from dlm_lsp import validation

    monkeypatch.setattr(validation, "_KEEP_DOCUMENTS", 2)
    for k in range(2):
        validation.parsed_document("x = 1\n", "python", f"file:///work/typed{k}.py")
    ls = parsing_server()
    opened(ls, LARGE)
    ls.parser.shutdown(wait=True)
    assert list(kept_parses) == ["file:///work/typed0.py", "file:///work/typed1.py"]


def test_a_small_document_is_left_to_its_first_fill(kept_parses):
    ls = parsing_server()
    opened(ls, TEXT)
    ls.parser.shutdown(wait=True)
    assert DOC.uri not in kept_parses


def test_a_large_document_is_left_alone_where_a_remote_server_makes_the_fills(kept_parses):
    """The remote dlm-lsp server parses the documents it fills; a tree here is waste."""
    ls = parsing_server()
    ls.config.backend = "remote"
    opened(ls, LARGE)
    ls.parser.shutdown(wait=True)
    assert DOC.uri not in kept_parses


@pytest.fixture
def parse_ahead_held(monkeypatch):
    """Parses at open wait until the returned event is set."""
    import threading

    go, real = threading.Event(), server.parse_ahead

    def held(*args):
        go.wait(30)
        real(*args)

    monkeypatch.setattr(server, "parse_ahead", held)
    yield go
    go.set()


def test_large_documents_parsed_at_open_leave_the_fills_threads_free(kept_parses,
                                                                      parse_ahead_held):
    """A workspace of large files opened at once (an editor restoring its tabs) is
    parsed on a thread of its own: on the fills' eight threads, nine parses held every
    one of them, and a fill asked for meanwhile waited for them."""
    go = parse_ahead_held
    ls = parsing_server()
    try:
        for k in range(9):
            opened(ls, LARGE, f"file:///work/large{k}.py")
        assert ls.worker.submit(lambda: "filled").result(timeout=10) == "filled"
    finally:
        go.set()
    ls.parser.shutdown(wait=True)


def test_a_large_document_is_parsed_ahead_behind_the_fills_in_flight(kept_parses):
    """A parse made when a document is opened is work ahead of need: while a fill of
    another document is under way it waits between chunks (tree-sitter holds the GIL for
    each, and the fill's Python waited for it), and goes on once the fill is done."""
    ls = parsing_server()
    filling = ls.jobs.start("file:///work/small.py", 1)
    opened(ls, LARGE)
    time.sleep(0.5)
    assert DOC.uri not in kept_parses
    ls.jobs.finish(filling)
    ls.parser.shutdown(wait=True)
    assert kept_parses[DOC.uri].text == LARGE


def test_a_document_closed_while_it_is_parsed_ahead_keeps_no_tree(kept_parses,
                                                                   parse_ahead_held):
    closed = parse_ahead_held
    ls = parsing_server()
    opened(ls, LARGE)
    ls.workspace.remove_text_document(DOC.uri)
    server.did_close(ls, types.DidCloseTextDocumentParams(DOC))
    closed.set()
    ls.parser.shutdown(wait=True)
    assert DOC.uri not in kept_parses


@pytest.mark.parametrize(("texts", "edit"), [
    (["       "], None), (["\t\t", "\n"], None),  # every fill blank: none, said why
    (["   ", "x = 1"], "x = 1"),  # a fill with code goes first
    (["x = 1", "  "], "x = 1"),
])
def test_dlm_infill_at_a_cursor_offers_no_fill_of_only_whitespace(texts, edit):
    """At a cursor the model's blanks were the edit (`       ` on an empty line, kept as
    trailing blanks, and Neovim said "filled 1 tokens"); ghost text there offers none.
    As in place of code, a fill with code goes first, and where there is none, no edit and
    a message say so (Neovim's `nothing applied: ...`, VS Code's status bar)."""
    rng = types.Range(AT, AT)
    result = InfillResult([Candidate(t, True, 0.0) for t in texts],
                          SpanPlan("multi-line", 8, 5, True), steps=5, tokens=8, ms=1.0)
    answer = protocol.infill_result(1, rng, result)
    assert [e["newText"] for e in answer["edits"]] == ([] if edit is None else [edit])
    assert answer["candidates"][0]["text"] == (texts[0] if edit is None else edit)
    assert ("message" in answer) is (edit is None)
    if edit is None:
        assert answer["message"] == protocol.ONLY_BLANKS
    hole = types.Range(AT, types.Position(AT.line, AT.character + 6))  # `<FILL>`: nothing
    assert protocol.infill_result(1, hole, result)["edits"][0]["newText"] == texts[0]  # may go


@pytest.mark.parametrize("start, end, expected", [
    ((0, -1), (0, 0), "Qx = 1\ny = 2\n"),
    ((-5, -5), (0, 1), "Q = 1\ny = 2\n"),
    ((1, 2**40), (2**40, 0), "x = 1\ny = 2Q"),
    ((0, True), (0, 0), None),  # not a number: left for pygls to refuse
])
def test_a_did_change_s_positions_out_of_range_are_clamped_to_the_text(start, end, expected):
    """A line or character outside LSP's 0 to 2**31-1 failed to be read, and the edit was
    dropped whole (the server's text fell behind the editor's); clamped to that, the
    range is clamped to the text as any other outside it."""
    from lsprotocol import converters
    from pygls.workspace import TextDocument

    from dlm_lsp.documents import apply_change

    message = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": "file:///a.py", "version": 2},
        "contentChanges": [{"range": {"start": {"line": start[0], "character": start[1]},
                                      "end": {"line": end[0], "character": end[1]}},
                            "text": "Q"}]}}
    clamped = protocol.clamped_change(message)
    if expected is None:
        assert clamped["params"]["contentChanges"][0]["range"]["start"]["character"] is True
        return
    params = converters.get_converter().structure(clamped["params"],
                                                  types.DidChangeTextDocumentParams)
    doc = TextDocument("file:///a.py", "x = 1\ny = 2\n")
    assert apply_change(doc, params.content_changes[0]) == expected


def test_a_command_that_takes_no_range_reads_none_from_its_arguments():
    """dlm.fillHoles given `[uri, "extra"]` was refused as "'range' is not a valid Range":
    the second argument was read as the rewrite's range.  A rewrite still needs one."""
    uri = "file:///a.py"
    assert protocol.command_target((uri, "extra"), "dlm.fillHoles", False) == (uri, None)
    assert protocol.command_target(({"uri": uri, "range": 5},), "dlm.fillHoles",
                                   False) == (uri, None)
    with pytest.raises(JsonRpcInvalidParams, match="needs a range"):
        protocol.command_target((uri,), "dlm.rewriteSelection", True)
    with pytest.raises(JsonRpcInvalidParams, match="not a valid Range"):
        protocol.command_target((uri, "extra"), "dlm.rewriteSelection", True)


def test_dlm_infill_candidates_are_distinct_in_rank_order():
    """Four candidates of one text (greedy and sampled rows often agree) came back four
    times: a client stepping through them showed the same fill again and again."""
    rng = types.Range(AT, AT)
    ranked = [Candidate("return n", True, -0.5), Candidate("return 0", False, -0.1),
              Candidate("return n", True, -0.9), Candidate("return 0", False, -0.2),
              Candidate("pass", True, -1.0)]
    result = InfillResult(ranked, SpanPlan("single-line", 8, 5, True), steps=5, tokens=8,
                          ms=1.0)
    answer = protocol.infill_result(1, rng, result)
    assert [(c["text"], c["score"]) for c in answer["candidates"]] == [
        ("return n", -0.5), ("return 0", -0.1), ("pass", -1.0)]
    assert answer["edits"][0]["newText"] == "return n"


@pytest.mark.parametrize(("repair_steps", "hint_steps"), [(0, 0), (4, 0), (3, 1), (None, None)])
def test_dlm_infill_stats_say_how_many_of_the_steps_went_to_repair_and_hints(repair_steps,
                                                                              hint_steps):
    """`steps` counts the forward passes of every path; `repairSteps` says how many of
    them repair and the left-to-right retry took, `hintSteps` the hint passes (null where
    an older remote service did not say), as `dlm-lsp fill` says "9 steps (5 + 4 in
    repair)"."""
    rng = types.Range(AT, AT)
    result = InfillResult([Candidate("rn x", True, 0.0, path=REPAIR)],
                          SpanPlan("single-line", 8, 5, True), steps=9, tokens=8, ms=1.0,
                          path=REPAIR, repair_rounds=1, repair_steps=repair_steps,
                          hint_steps=hint_steps)
    stats = protocol.infill_result(1, rng, result)["stats"]
    assert (stats["steps"], stats["repairRounds"], stats["repairSteps"], stats["hintSteps"]) \
        == (9, 1, repair_steps, hint_steps)


@pytest.mark.parametrize(("valid", "rejected"), [
    (False, "the fill"), ([True, False, False], "2 of 3 fills"), (True, None), ([None], None)])
def test_a_command_from_a_code_action_applied_over_a_rejected_fill_says_so(valid, rejected):
    """A rewrite chosen from the code-action menu was applied as `def h(x)` over a working
    function without a word: an editor shows nothing of a code action's result, so the
    server tells (`report`), as it tells an edit not applied."""
    shown = []
    ls = SimpleNamespace(window_show_message=lambda params: shown.append(params.message))

    async def work(ls, *args):
        return {"applied": True, "valid": valid}

    for report in (True, False):  # the editors' own commands say it themselves
        asyncio.run(server.told(ls, ({"uri": DOC.uri, "report": report},), "rewrite selection",
                                work))
    assert shown == ([] if rejected is None else [
        f"dlm-lsp: rewrite selection: applied, but the check rejected {rejected} (it does "
        "not parse, or would fail when run); undo restores the code"])


def test_a_fill_the_user_cancelled_is_not_applied_though_it_came_back():
    """A progress's cancel stops the fill at its next step; one that came after the last
    step (during validation, a reused fill, a hole filled from recent fills) was applied
    all the same, the progress ending "cancelled by the client" (Fill holes': "done")."""
    from pygls.exceptions import JsonRpcRequestCancelled

    filled = Filled("x")
    job = jobs.Jobs().start(DOC.uri, 1, Kind.COMMAND)
    server.DlmServer.check_fresh(filled, job)  # at its version: fresh
    job.stop(jobs.CLIENT_CANCELLED)
    with pytest.raises(JsonRpcRequestCancelled, match="fill stopped: cancelled by the client"):
        server.DlmServer.check_fresh(filled, job)
