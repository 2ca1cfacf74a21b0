"""End-to-end: the real server over stdio, driven the way an editor drives it."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest
import pytest_lsp
import torch
from lsp_helpers import apply_edits, assert_only_inside, utf16_offset
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from dlm_lsp import __version__

# A message pytest-lsp's client finds against the specification ($/progress on a token
# it never accepted, a token created twice, a result beyond its capabilities) fails the
# test: as a warning it only stood in the summary, where nobody read it.
pytestmark = pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")

SERVER = [sys.executable, "-m", "dlm_lsp"]
URI = "file:///work/example.py"
SOURCE = (
    "def add(a, b):\n"
    "    return a + b\n"
    "\n"
    "def mul(a, b):\n"
    "    \n"
    "\n"
    "print(add(1, 2), mul(3, 4))\n"
)


async def start(client: LanguageClient, options: dict) -> None:
    client.init_result = await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        initialization_options=options))


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, model_dir):
    """A VS Code-like client whose server runs the random tiny test model.  Its fills are
    nonsense, so syntax repair and the left-to-right retry are off unless a test asks, and
    they are offered as ghost text even when the syntax check rejects them."""
    await start(lsp_client, {"model": str(model_dir), "drafts": True, "repairRounds": 0,
                             "fallback": False, "suggestInvalid": True})
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=SERVER, server_env={**os.environ, "DLM_LSP_FAULTS": "oom-once"}))
async def oom_client(lsp_client: LanguageClient, model_dir):
    """A client whose server runs out of memory on its first infill."""
    await start(lsp_client, {"model": str(model_dir)})
    yield
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, text: str = SOURCE, uri: str = URI, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def accept_applied_edits(client: LanguageClient) -> list:
    """Make the client accept every workspace/applyEdit; the edits land in the list."""
    applied: list = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams):
        applied.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)
    return applied


def rng(sl: int, sc: int, el: int, ec: int) -> dict:
    return {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}


def infill(client: LanguageClient, range_: dict, uri: str = URI, **extra):
    params = {"textDocument": {"uri": uri}, "range": range_, **extra}
    return client.protocol.send_request_async("dlm/infill", params)


async def wait_for(predicate, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


def slow_infill(client: LanguageClient, token: str, msg_id: str):
    """A long denoise (many steps) that reports progress, so tests can act mid-way."""
    client.progress_reports[token] = []
    params = {"textDocument": {"uri": URI}, "range": rng(4, 4, 4, 4), "workDoneToken": token,
              "options": {"length": 400, "steps": 400, "strategy": "confidence"}}
    return client.protocol.send_request("dlm/infill", params, msg_id=msg_id)


def reports(client: LanguageClient, token: str) -> list:
    return [r for r in client.progress_reports.get(token, [])
            if isinstance(r, types.WorkDoneProgressReport)]


async def test_initialize_advertises_the_features(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.completion_provider is not None
    assert caps.code_action_provider is not None
    assert {"dlm.fillHoles", "dlm.rewriteSelection"} <= set(caps.execute_command_provider.commands)
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert caps.position_encoding == types.PositionEncodingKind.Utf16


async def test_infill_at_cursor_returns_an_edit_inside_the_range(client: LanguageClient):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4))
    assert result.version == 1
    [edit] = result.edits
    assert (edit.range.start.line, edit.range.start.character) == (4, 4)
    assert (edit.range.end.line, edit.range.end.character) == (4, 4)
    assert edit.newText == result.candidates[0].text
    assert result.stats.steps >= 1 and result.stats.tokens >= 1 and result.stats.ms > 0
    at = utf16_offset(SOURCE, 4, 4)
    after = apply_edits(SOURCE, [{"range": rng(4, 4, 4, 4), "newText": edit.newText}])
    assert_only_inside(SOURCE, after, at, at)


async def test_infill_of_a_selection_replaces_only_the_selection(client: LanguageClient):
    open_doc(client)
    result = await infill(client, rng(1, 11, 1, 16), options={"length": 6, "steps": 3})
    [edit] = result.edits
    assert (edit.range.start.character, edit.range.end.character) == (11, 16)
    after = apply_edits(SOURCE, [{"range": rng(1, 11, 1, 16), "newText": edit.newText}])
    assert_only_inside(SOURCE, after, utf16_offset(SOURCE, 1, 11), utf16_offset(SOURCE, 1, 16))
    assert result.stats.steps == 3


async def test_a_selection_of_a_hole_marker_is_filled_as_a_hole_not_rewritten(
        client: LanguageClient):
    """VS Code's Fill selection on a `<FILL>` line sends the marker's range: a hole, with a
    hole's length policy, as dlm.fillHoles fills it, not a rewrite of the text `<FILL>`."""
    text = "def f(n):\n    <FILL>\n\nprint(f(2))\n"
    open_doc(client, text)
    hole = await infill(client, rng(1, 4, 1, 10), options={"steps": 2})
    assert hole.stats.kind == "multi-line"  # alone on its line, as the hole's policy has it
    assert [(e.range.start.character, e.range.end.character) for e in hole.edits] == [(4, 10)]
    code = await infill(client, rng(3, 0, 3, 5), options={"steps": 2})  # `print`
    assert code.stats.kind == "rewrite"


async def test_left_to_right_baseline_takes_one_step_per_token(client: LanguageClient):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4),
                          options={"length": 10, "strategy": "left-to-right"})
    # one forward pass per token; only the moved prefix edge (the head) commits at once
    assert result.stats.used <= result.stats.steps <= result.stats.tokens
    assert result.stats.steps >= 10


async def test_candidates_are_all_returned_with_scores(client: LanguageClient):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"candidates": 3, "length": 8})
    assert len(result.candidates) == 3
    assert all(isinstance(c.score, float) for c in result.candidates)
    assert result.edits[0].newText == result.candidates[0].text


async def test_same_seed_gives_the_same_fill(client: LanguageClient):
    open_doc(client)
    opts = {"seed": 7, "strategy": "random", "temperature": 1.0, "length": 8}
    first = await infill(client, rng(4, 4, 4, 4), options=opts)
    second = await infill(client, rng(4, 4, 4, 4), options=opts)
    assert first.candidates[0].text == second.candidates[0].text


async def test_inline_completion_inserts_at_the_cursor(client: LanguageClient):
    text = "import os\n\nname = os.path.jo\nprint(name)\n"
    open_doc(client, text)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(URI), position=types.Position(2, 17),
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked)))
    for item in result.items:
        assert item.range.start == item.range.end == types.Position(2, 17)
        assert "\n" not in item.insert_text  # a fill inside a line stays on that line
        after = apply_edits(text, [{"range": rng(2, 17, 2, 17), "newText": item.insert_text}])
        assert_only_inside(text, after, utf16_offset(text, 2, 17), utf16_offset(text, 2, 17))


async def test_ghost_text_with_a_selected_completion_is_the_fill_after_that_item(client):
    """The editor shows `join` selected in its completion list at `os.path.jo|`: the
    ghost text is `join` and then what the same fill gives with `join` typed out."""
    typed = "import os\n\nname = os.path.jo\nprint(name)\n"
    applied = typed.replace(".jo\n", ".join\n")
    other = "file:///work/applied.py"
    open_doc(client, typed)
    open_doc(client, applied, uri=other)

    async def ghost(uri: str, column: int, selected=None) -> list[types.InlineCompletionItem]:
        answer = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri),
                position=types.Position(2, column),
                context=types.InlineCompletionContext(
                    types.InlineCompletionTriggerKind.Automatic, selected)))
        return answer.items

    item_range = types.Range(types.Position(2, 15), types.Position(2, 17))
    extended = await ghost(URI, 17, types.SelectedCompletionInfo(item_range, "join"))
    after_join = await ghost(other, 19)
    assert after_join, "the test model wrote nothing after `join`"
    assert [(i.insert_text, i.range) for i in extended] == [
        ("join" + after_join[0].insert_text, item_range)]


async def test_a_selected_completion_off_the_cursor_is_ghost_text_without_it(client):
    """A selected item's range that is not one of the document's around the cursor (here
    past its line's end) is a client's mistake: the request was refused for it (-32602),
    or the item spliced in elsewhere; it is answered as if no item were selected."""
    text = "import os\n\nname = os.path.jo\nprint(name)\n"
    open_doc(client, text)

    async def ghost(selected=None) -> list[tuple[str, types.Range]]:
        answer = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(URI), position=types.Position(2, 17),
                context=types.InlineCompletionContext(
                    types.InlineCompletionTriggerKind.Automatic, selected)))
        return [(item.insert_text, item.range) for item in answer.items]

    past_the_line = types.Range(types.Position(2, 15), types.Position(2, 40))
    assert await ghost(types.SelectedCompletionInfo(past_the_line, "join")) == await ghost()


async def test_a_fill_past_the_timeout_says_which_setting_gives_it_longer(client):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"timeoutMs": 1, "steps": 64}}))
    open_doc(client)
    with pytest.raises(JsonRpcException) as error:
        await infill(client, rng(4, 4, 4, 4))
    assert error.value.code == -32003
    assert error.value.message == "infill timed out after 1 ms (setting timeoutMs)"


async def test_with_several_candidates_each_distinct_one_is_a_ghost_text(client):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"candidates": 3}}))
    text = "import os\n\nname = os.path.jo\nprint(name)\n"
    open_doc(client, text)
    answer = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(URI), position=types.Position(2, 17),
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked)))
    texts = [item.insert_text for item in answer.items]
    assert 2 <= len(texts) <= 3 and len(set(texts)) == len(texts)
    assert all(item.range == rng_at(2, 17) for item in answer.items)
    fill = await infill(client, rng(2, 17, 2, 17), options={"candidates": 3})
    assert texts == list(dict.fromkeys(c.text for c in fill.candidates if c.text.strip()))


def rng_at(line: int, character: int) -> types.Range:
    return types.Range(types.Position(line, character), types.Position(line, character))


async def test_completion_offers_the_fill_as_one_item(client: LanguageClient):
    open_doc(client)
    result = await client.text_document_completion_async(types.CompletionParams(
        types.TextDocumentIdentifier(URI), types.Position(4, 4)))
    assert len(result.items) <= 1
    for item in result.items:
        assert item.text_edit.range == types.Range(types.Position(4, 4), types.Position(4, 4))
        assert item.text_edit.new_text.strip()


async def code_actions(client: LanguageClient, sl: int, sc: int, el: int, ec: int,
                       only: list[str] | None = None) -> list:
    """The code actions offered for a range of URI (of the kinds `only` names), as the
    raw JSON: lsprotocol's client-side decoding of `(Command | CodeAction)[]` mistakes a
    CodeAction for a Command."""
    msg_id = f"code-actions-{sl}-{sc}-{el}-{ec}-{only}"
    future = client.protocol.send_request("textDocument/codeAction", types.CodeActionParams(
        types.TextDocumentIdentifier(URI), types.Range(types.Position(sl, sc),
                                                       types.Position(el, ec)),
        types.CodeActionContext(diagnostics=[], only=only)), msg_id=msg_id)
    client.protocol._result_types.pop(msg_id, None)
    return await asyncio.wrap_future(future)


async def test_code_actions_offer_fill_holes_and_rewrite(client: LanguageClient):
    open_doc(client, "x = <FILL>\ny = 2\n")
    actions = await code_actions(client, 1, 0, 1, 5)
    assert [a["command"]["command"] for a in actions] == ["dlm.fillHoles", "dlm.rewriteSelection"]
    assert actions[0]["command"]["arguments"] == [{"uri": URI, "report": True}]
    assert actions[1]["command"]["arguments"] == [{"uri": URI, "range": rng(1, 0, 1, 5),
                                                   "version": 1, "report": True}]
    assert all(a["kind"] == "refactor.rewrite" for a in actions)
    # a client that asks for some kinds only gets ours where they are among them
    assert await code_actions(client, 1, 0, 1, 5, only=["quickfix"]) == []
    for kinds in (["refactor"], ["quickfix", "refactor.rewrite"]):
        assert len(await code_actions(client, 1, 0, 1, 5, only=kinds)) == 2


async def test_a_range_the_document_does_not_hold_is_offered_no_rewrite(client):
    """A selection past a line's end (a client counting in another encoding) was offered
    "Rewrite selection", which then failed with -32602, and from a menu said nothing."""
    open_doc(client, "x = <FILL>\ny = 2\n")
    actions = await code_actions(client, 1, 0, 1, 40)
    assert [a["command"]["command"] for a in actions] == ["dlm.fillHoles"]


LONG = "".join(f"value_{i} = compute({i}, {i + 1})\n" for i in range(300))


async def test_rewrite_of_a_selection_too_long_is_offered_disabled_with_the_reason(client):
    """Offered as any other, it would only be refused after the user chose it: a client
    that shows disabled actions (VS Code) gets it greyed, with the reason the command
    gives; a selection the model can rewrite is offered as before."""
    open_doc(client, LONG)
    await wait_for(lambda: any("ready on" in m.message for m in client.log_messages))
    [action] = await code_actions(client, 0, 0, 300, 0)
    assert action["command"]["command"] == "dlm.rewriteSelection"
    with pytest.raises(JsonRpcException) as refused:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dlm.rewriteSelection", action["command"]["arguments"]))
    assert "maxSpanTokens" in action["disabled"]["reason"]
    assert refused.value.message.endswith(action["disabled"]["reason"])
    [short] = await code_actions(client, 0, 0, 2, 0)
    assert short["command"]["command"] == "dlm.rewriteSelection" and "disabled" not in short


async def test_rewrite_of_a_selection_too_long_is_not_offered_where_disabled_is_not_shown(
        plain_client):
    open_doc(plain_client, LONG)
    await wait_for(lambda: any("ready on" in m.message for m in plain_client.log_messages))
    assert await code_actions(plain_client, 0, 0, 300, 0) == []
    [short] = await code_actions(plain_client, 0, 0, 2, 0)
    assert short["command"]["command"] == "dlm.rewriteSelection" and "disabled" not in short


async def test_a_rewrite_chosen_after_the_document_changed_is_refused_not_made_elsewhere(
        client: LanguageClient):
    """The action names the version its range is of: run from a menu still shown after an
    edit, the range may cover other text now, so the rewrite is refused (-32801) and
    nothing applied, and the user is told (editors drop a -32801 unshown); the same
    action run at its version is applied."""
    applied = accept_applied_edits(client)
    open_doc(client, "x = 1\ny = 2\n")
    [action] = await code_actions(client, 1, 0, 1, 5)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=2, uri=URI),
        [types.TextDocumentContentChangePartial(rng_at(0, 0), "z = 0\n")]))
    with pytest.raises(JsonRpcException) as stale:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dlm.rewriteSelection", action["command"]["arguments"]))
    assert stale.value.code == -32801 and "version 1" in stale.value.message
    assert applied == []
    [told] = [m for m in client.messages if m.type == types.MessageType.Warning]
    assert told.message == f"dlm-lsp: rewrite selection: {stale.value.message}"
    [fresh] = await code_actions(client, 1, 0, 1, 5)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", fresh["command"]["arguments"]))
    assert result["version"] == 2 and len(applied) == 1


async def test_fill_holes_from_the_code_action_says_when_the_editor_did_not_apply_it(
        client: LanguageClient):
    """The editor runs the action's command and shows nothing of its result: where the
    edit was not applied (the client refused it), the server says so."""

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def refuse(params: types.ApplyWorkspaceEditParams):
        return types.ApplyWorkspaceEditResult(applied=False)

    open_doc(client, "x = <FILL>\n")
    [action] = await code_actions(client, 0, 0, 0, 0)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", action["command"]["arguments"]))
    assert result["applied"] is False
    await wait_for(lambda: client.messages)
    assert [(m.type, m.message) for m in client.messages] == [(
        types.MessageType.Warning, "dlm-lsp: fill holes: the editor did not apply the edit")]
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))  # an integration's own command: it shows the result itself
    assert len(client.messages) == 1


async def test_the_editor_s_reason_for_not_applying_an_edit_is_the_command_s_message(
        client: LanguageClient):
    """An editor that refuses the edit and says why (`failureReason`): the command's
    result and its warning say that, not a guess (a client said "the buffer changed
    meanwhile" where it could not tell which of two unnamed buffers the edit was for)."""
    why = "2 buffers share the URI file:// (unnamed buffers)"

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def refuse(params: types.ApplyWorkspaceEditParams):
        return types.ApplyWorkspaceEditResult(applied=False, failure_reason=why)

    open_doc(client, "x = <FILL>\n")
    [action] = await code_actions(client, 0, 0, 0, 0)
    holes = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", action["command"]["arguments"]))
    assert holes["applied"] is False and holes["message"] == why
    await wait_for(lambda: client.messages)
    assert client.messages[0].message == f"dlm-lsp: fill holes: {why}"
    rewrite = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [{"uri": URI, "range": rng(0, 0, 0, 1)}]))
    assert rewrite["applied"] is False and rewrite["message"] == why


async def test_an_editor_s_answer_to_an_edit_that_is_no_result_is_the_command_s_message(
        client: LanguageClient):
    """An applyEdit answered with `null` (no ApplyWorkspaceEditResult): the command failed
    with that as its own error, -32602 "unreadable response: TypeError: argument of type
    'NoneType' is not iterable", which reads as the command's arguments being wrong, and
    then said "answered the edit with an error (...TypeError...)" of a client that sent
    none.  It says the editor's answer, and that whether the edit landed is not known (an
    error answer takes the same way; pytest-lsp's client cannot send one)."""

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def nothing(params: types.ApplyWorkspaceEditParams):
        return None

    open_doc(client, "x = <FILL>\n")
    holes = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))
    assert holes["applied"] is False and holes["holes"] == 1
    assert holes["message"] == ("the editor's answer to the edit was unreadable (null, where "
                                "a result was due); whether it applied it is not known")


async def test_fill_holes_replaces_each_marker_through_apply_edit(client: LanguageClient):
    text = "def f(x):\n    y = <FILL>\n    <FILL>\n\nprint(f(1))  # <FILL> keeps the rest\n"
    applied = accept_applied_edits(client)
    drafts = []
    client.feature("dlm/draft")(lambda params: drafts.append(params))
    open_doc(client, text, version=3)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))
    assert result["applied"] is True and result["holes"] == 3
    assert result["blank"] == sum(not fill.strip() for fill in result["fills"])
    # each fill's syntax verdict (Python is checked), for the editor to warn of
    assert len(result["valid"]) == 3 and set(result["valid"]) <= {True, False}
    [change] = applied[0].document_changes
    assert change.text_document.version == 3
    starts = [text.index("<FILL>"), text.index("<FILL>", 20), text.rindex("<FILL>")]
    edits = [{"range": client.protocol._converter.unstructure(e.range), "newText": e.new_text}
             for e in change.edits]
    assert [utf16_offset(text, e["range"]["start"]["line"], e["range"]["start"]["character"])
            for e in edits] == starts
    # each hole's drafts (`drafts: true`) stand at its marker, as the editor's text has it
    drawn = [{end: {"line": getattr(d.range, end).line,
                    "character": getattr(d.range, end).character} for end in ("start", "end")}
             for d in drafts]
    assert [r for i, r in enumerate(drawn) if r not in drawn[:i]] == [e["range"] for e in edits]
    assert {d.textDocument.version for d in drafts} == {3}
    after = apply_edits(text, edits)
    assert "<FILL>" not in after
    # outside the holes, every byte is unchanged
    pieces = text.split("<FILL>")
    pos = 0
    for piece in pieces:
        found = after.index(piece, pos)
        pos = found + len(piece)
    assert after.startswith(pieces[0]) and after.endswith(pieces[-1])


def server_progress(client: LanguageClient, kind: str) -> dict[str, list]:
    """The server-initiated progress of one kind (tokens `dlm-lsp/<kind>/N`), by token, as
    the client received it."""
    return {token: reports for token, reports in client.progress_reports.items()
            if str(token).startswith(f"dlm-lsp/{kind}/")}


async def cancel_midway(client: LanguageClient, command: str, arguments: list, kind: str,
                        reports: int) -> str:
    """Run `command`, cancel its server-initiated progress (`dlm-lsp/<kind>/N`) once more
    than `reports` reports came, and check that the command ends cancelled; its token."""
    future = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND,
                                          types.ExecuteCommandParams(command, arguments))
    await wait_for(lambda: any(len(r) > reports for r in server_progress(client, kind).values()))
    [token] = server_progress(client, kind)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32800  # RequestCancelled
    return token


def holes_progress(client: LanguageClient) -> list:
    [reports] = server_progress(client, "holes").values()
    return reports


async def test_filling_holes_reports_progress_hole_by_hole(client: LanguageClient):
    accept_applied_edits(client)
    open_doc(client, "a = <FILL>\nb = <FILL>\nc = <FILL>\n")
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))
    assert result["applied"] is True
    begin, *reports, end = holes_progress(client)
    assert begin.title == "dlm-lsp: filling holes" and begin.cancellable
    assert [(r.message, r.percentage) for r in reports] == [
        ("1 of 3 holes", 33), ("2 of 3 holes", 66), ("3 of 3 holes", 100)]
    assert end.message == "done"


async def test_filling_holes_shows_no_progress_on_a_token_another_request_is_using(client):
    """The token `dlm.fillHoles` is given may be one a client's own request is showing
    progress on (a client that named its `workDoneToken` `dlm-lsp/holes/2`, and accepts
    the server's create of it): the command then shows none (`begin_progress` refuses
    it).  It reported its holes on that token anyway, and ended it "done" under the other
    request, whose later reports and own end then came on a token already ended."""
    accept_applied_edits(client)
    open_doc(client, "a = <FILL>\n", uri="file:///work/holes.py")
    first = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", ["file:///work/holes.py"]))
    assert first["applied"] is True
    [used] = server_progress(client, "holes")
    kind, number = used.rsplit("/", 1)
    taken = f"{kind}/{int(number) + 1}"  # the token the next progress_token gives
    client.protocol.fm.features.pop(types.WINDOW_WORK_DONE_PROGRESS_CREATE, None)

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def accept_even_a_token_in_use(params: types.WorkDoneProgressCreateParams) -> None:
        return None  # pytest-lsp's own handler refuses a token it has seen

    open_doc(client)
    slow = slow_infill(client, taken, "slow")
    await wait_for(lambda: reports(client, taken))
    open_doc(client, "b = <FILL>\n", uri="file:///work/more.py", version=1)
    second = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", ["file:///work/more.py"]))
    assert second["applied"] is True
    await asyncio.wrap_future(slow)
    shown = client.progress_reports[taken]
    assert [type(r).__name__ for r in shown if not isinstance(r, types.WorkDoneProgressReport)
            ] == ["WorkDoneProgressBegin", "WorkDoneProgressEnd"]
    assert all(r.message.startswith("step ") for r in reports(client, taken))


async def test_cancelling_the_holes_progress_stops_the_fill_and_applies_nothing(client):
    applied = accept_applied_edits(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"stepsMultiLine": 48}}))
    open_doc(client, "".join(f"v{i} = <FILL>\n" for i in range(40)))
    await cancel_midway(client, "dlm.fillHoles", [URI], "holes", reports=1)
    assert applied == []
    await wait_for(lambda: isinstance(holes_progress(client)[-1], types.WorkDoneProgressEnd))
    assert holes_progress(client)[-1].message == "cancelled by the client"
    assert len(holes_progress(client)) < 40 + 2  # it stopped before the last hole


async def test_cancel_request_of_a_command_stops_it_and_applies_nothing(client):
    """`$/cancelRequest` for `workspace/executeCommand` reaches the command itself (pygls
    ran commands in a task of their own: the fill went on and its edit was applied)."""
    applied = accept_applied_edits(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"stepsMultiLine": 48}}))
    open_doc(client, "".join(f"v{i} = <FILL>\n" for i in range(40)))
    future = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND,
                                          types.ExecuteCommandParams("dlm.fillHoles", [URI]),
                                          msg_id="holes-1")
    await wait_for(lambda: any(len(r) > 1 for r in server_progress(client, "holes").values()))
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="holes-1"))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32800
    await wait_for(lambda: isinstance(holes_progress(client)[-1], types.WorkDoneProgressEnd))
    assert holes_progress(client)[-1].message == "cancelled by the client"
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.jobsInFlight == 0
    await asyncio.sleep(0.5)  # an edit sent after the answer would have come by now
    assert applied == []


async def test_a_command_cancelled_once_its_edit_was_sent_says_what_the_editor_did(client):
    """A `$/cancelRequest` that comes while the editor answers the command's applyEdit
    cannot take the edit back: the command says the editor applied it (it was answered
    "cancelled", and an integration showed nothing applied over a file just filled)."""
    applied = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def cancel_then_apply(params: types.ApplyWorkspaceEditParams):
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="holes-late"))
        applied.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    open_doc(client, "x = <FILL>\n")
    future = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND,
                                          types.ExecuteCommandParams("dlm.fillHoles", [URI]),
                                          msg_id="holes-late")
    result = await asyncio.wrap_future(future)
    assert len(applied) == 1 and result["applied"] is True and result["holes"] == 1


async def _holes_refused(client, msg_id: str) -> JsonRpcException:
    """`dlm.fillHoles` of a one-hole document sent as `msg_id`, and the error it is
    answered with within 8 s (none: the test fails)."""
    open_doc(client, "x = <FILL>\n")
    future = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND,
                                          types.ExecuteCommandParams("dlm.fillHoles", [URI]),
                                          msg_id=msg_id)
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wait_for(asyncio.wrap_future(future), 8)
    return err.value


async def test_a_command_cancelled_while_its_edit_goes_unanswered_ends_cancelled(client):
    """A client that cancels the command and does not answer its applyEdit gets the
    cancel once the server stops waiting for that answer, and the command's job ends."""

    answer = asyncio.Event()
    answered = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    async def cancel_and_stall(params: types.ApplyWorkspaceEditParams):
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="holes-stalled"))
        await answer.wait()  # past the server's wait: the answer comes too late
        answered.append(True)
        return types.ApplyWorkspaceEditResult(applied=False)

    err = await _holes_refused(client, "holes-stalled")
    assert err.code == -32800
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.jobsInFlight == 0
    # its progress said "failed (see the error message)" beside the cancel
    await wait_for(lambda: isinstance(holes_progress(client)[-1], types.WorkDoneProgressEnd))
    assert holes_progress(client)[-1].message == "cancelled by the client"
    answer.set()  # the client's handler ends before the session does
    await wait_for(lambda: answered)


async def test_a_command_whose_progress_is_cancelled_while_its_edit_goes_unanswered_ends(
        client):
    """Cancelling the progress stopped the command's job, which nothing looked at while
    the edit was out: a command whose editor never answered the edit hung, its progress
    shown, for good.  It ends as a `$/cancelRequest` does, once the server has waited
    for the edit's answer as long."""
    answer = asyncio.Event()

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    async def cancel_progress_and_stall(params: types.ApplyWorkspaceEditParams):
        [token] = server_progress(client, "holes")
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token))
        await answer.wait()  # past the server's wait: the answer comes too late
        return types.ApplyWorkspaceEditResult(applied=False)

    err = await _holes_refused(client, "holes-progress-stalled")
    assert (err.code, err.message) == (-32800, "fill stopped: cancelled by the client")
    await wait_for(lambda: isinstance(holes_progress(client)[-1], types.WorkDoneProgressEnd))
    assert holes_progress(client)[-1].message == "cancelled by the client"
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.jobsInFlight == 0
    answer.set()


async def test_holes_progress_cancelled_once_the_edit_was_sent_ends_done(client):
    """The user cancels the progress as the editor applies the holes' edit: the edit is
    applied all the same, and the progress says so (it ended "cancelled by the client")."""

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def cancel_then_apply(params: types.ApplyWorkspaceEditParams):
        [token] = server_progress(client, "holes")
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token))
        return types.ApplyWorkspaceEditResult(applied=True)

    open_doc(client, "x = <FILL>\n")
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))
    assert result["applied"] is True
    await wait_for(lambda: isinstance(holes_progress(client)[-1], types.WorkDoneProgressEnd))
    assert holes_progress(client)[-1].message == "done"


async def test_ghost_text_asked_for_meanwhile_does_not_stop_a_command(client):
    """An editor asks for ghost text on its own; the holes the user asked to fill go on."""
    accept_applied_edits(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"stepsMultiLine": 48}}))
    open_doc(client, "".join(f"v{i} = <FILL>\n" for i in range(24)) + "\n")
    future = asyncio.ensure_future(client.workspace_execute_command_async(
        types.ExecuteCommandParams("dlm.fillHoles", [URI])))
    await wait_for(lambda: any(len(r) > 1 for r in server_progress(client, "holes").values()))
    await client.text_document_inline_completion_async(types.InlineCompletionParams(
        types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
        types.TextDocumentIdentifier(URI), types.Position(24, 0)))
    assert not future.done()  # the ghost text came while the holes were being filled
    result = await future
    assert result["applied"] is True and result["holes"] == 24


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def mute_client(lsp_client: LanguageClient, model_dir):
    """A client that declares work-done progress but never answers the server's
    window/workDoneProgress/create."""
    lsp_client.protocol.fm.features.pop(types.WINDOW_WORK_DONE_PROGRESS_CREATE, None)
    done = asyncio.Event()
    lsp_client.tokens_asked = []  # the tokens the server asked to create, in order
    lsp_client.answer_progress = done  # set: the client answers (null) at last

    @lsp_client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    async def not_until_the_test_is_over(params: types.WorkDoneProgressCreateParams) -> None:
        lsp_client.tokens_asked.append(params.token)
        await done.wait()
        # accepted, as pytest-lsp's own handler accepts a token: answered within the
        # server's 2 s (the model load's token, asked at start-up, where a test lets the
        # client answer early), the token's progress follows
        lsp_client.progress_reports.setdefault(params.token, [])

    await start(lsp_client, {"model": str(model_dir), "repairRounds": 0, "fallback": False})
    yield
    done.set()
    await asyncio.sleep(0.1)
    await lsp_client.shutdown_session()


async def test_a_client_that_never_accepts_progress_still_gets_its_holes_filled(mute_client):
    accept_applied_edits(mute_client)
    open_doc(mute_client, "a = <FILL>\nb = <FILL>\n")
    began = time.monotonic()
    result = await mute_client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.fillHoles", [URI]))
    assert result["applied"] is True and time.monotonic() - began < 10
    assert not any(reports for reports in mute_client.progress_reports.values())


@pytest.mark.parametrize("expand", [False, True])
async def test_a_rewrite_is_of_the_version_it_was_asked_at_even_when_it_names_none(
        mute_client, expand):
    """The command waits for its progress token (up to 2 s, where the client does not
    answer) before the fill starts: an edit that comes meanwhile moves the text under
    its range (the range grown by `expand` was found in the text as it was), so the
    rewrite is refused (-32801) rather than made of whatever the range covers by then,
    as with a version named."""
    applied = accept_applied_edits(mute_client)
    open_doc(mute_client, "x = 1\ny = 2\n")
    asked = mute_client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [{"uri": URI, "range": rng(1, 0, 1, 5), "expand": expand}]))
    rewrite = asyncio.ensure_future(asked)
    # the command is in, waiting for its progress token
    await wait_for(lambda: any("rewrite" in t for t in mute_client.tokens_asked))
    mute_client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=2, uri=URI),
        [types.TextDocumentContentChangePartial(rng_at(0, 0), "z = 0\n")]))
    with pytest.raises(JsonRpcException) as stale:
        await rewrite
    assert stale.value.code == -32801 and "document changed" in stale.value.message
    assert applied == []


async def test_a_rewrite_of_a_document_closed_while_it_waits_for_its_progress_says_so(
        mute_client):
    """Closed while the command waits for its progress token, the document was open when
    the command came: the rewrite is dropped as any fill of a closed document is (-32801,
    "closed"), not refused as if the client had never sent didOpen."""
    open_doc(mute_client, "x = 1\ny = 2\n")
    rewrite = asyncio.ensure_future(mute_client.workspace_execute_command_async(
        types.ExecuteCommandParams("dlm.rewriteSelection", [URI, rng(1, 0, 1, 5)])))
    await wait_for(lambda: any("rewrite" in t for t in mute_client.tokens_asked))
    mute_client.text_document_did_close(types.DidCloseTextDocumentParams(
        types.TextDocumentIdentifier(URI)))
    with pytest.raises(JsonRpcException) as dropped:
        await rewrite
    assert dropped.value.code == -32801 and "closed" in dropped.value.message
    assert "didOpen" not in dropped.value.message


async def cancel_while_asking_for_progress(client: LanguageClient, command: str,
                                           arguments: list, kind: str) -> dict:
    """Send `command`, cancel it (`$/cancelRequest`) while the server waits for the client
    to accept its progress token (`dlm-lsp/<kind>/N`), then accept that token: the
    server's dlm/status once the late answer is in."""
    future = client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND,
                                          types.ExecuteCommandParams(command, arguments),
                                          msg_id=f"{kind}-cancelled")
    await wait_for(lambda: any(kind in str(t) for t in client.tokens_asked))
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=f"{kind}-cancelled"))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32800
    client.answer_progress.set()
    await asyncio.sleep(0.5)  # the client's answer has reached the server by now
    return await client.protocol.send_request_async("dlm/status", {})


async def test_a_rewrite_cancelled_while_its_progress_token_is_asked_for_keeps_no_token(
        mute_client):
    """A token the client accepts after the command asking for it was cancelled is let
    go of: pygls registered it on the late answer and kept it for as long as the server
    ran, as no progress of the cancelled command ever ended it."""
    open_doc(mute_client, "x = 1\ny = 2\n")
    status = await cancel_while_asking_for_progress(
        mute_client, "dlm.rewriteSelection", [URI, rng(1, 0, 1, 5)], "rewrite")
    assert status.progressTokens == 0 and status.jobsInFlight == 0


async def test_filling_holes_cancelled_while_its_progress_token_is_asked_for_ends_its_job(
        mute_client):
    """Cancelled while it waits for its progress token, `dlm.fillHoles` lets go of its
    job (it counted against maxQueuedRequests for good) and of the token."""
    open_doc(mute_client, "a = <FILL>\n")
    status = await cancel_while_asking_for_progress(mute_client, "dlm.fillHoles", [URI],
                                                    "holes")
    assert status.jobsInFlight == 0 and status.progressTokens == 0


async def test_a_rewrite_refused_before_its_fill_ends_the_progress_it_asked_for(client):
    """A progress token the client was asked to create is ended, whatever stops the
    rewrite: one refused after it was created (a range past its line's end, the server
    busy) left the client's progress waiting for good, and pygls' entry for it."""
    open_doc(client, "x = 1\n")
    with pytest.raises(JsonRpcException) as refused:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dlm.rewriteSelection", [URI, rng(0, 0, 0, 40)]))
    assert refused.value.code == -32602 and "past the end of its line" in refused.value.message
    for token, progress in server_progress(client, "rewrite").items():
        assert progress and isinstance(progress[-1], types.WorkDoneProgressEnd), token


async def test_rewrite_selection_applies_an_edit_within_the_selection(client: LanguageClient):
    applied = accept_applied_edits(client)
    open_doc(client)
    selection = rng(1, 4, 1, 16)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [URI, selection]))
    assert result["applied"] is True and result["valid"] in (True, False)
    [edit] = applied[0].document_changes[0].edits
    assert client.protocol._converter.unstructure(edit.range) == selection
    after = apply_edits(SOURCE, [{"range": selection, "newText": edit.new_text}])
    assert_only_inside(SOURCE, after, utf16_offset(SOURCE, 1, 4), utf16_offset(SOURCE, 1, 16))
    [progress] = server_progress(client, "rewrite").values()
    begin, *steps, end = progress
    assert begin.title == "dlm-lsp: denoising" and begin.cancellable and end.message == "done"
    assert steps and steps[-1].message.startswith(f"step {len(steps)} of ")


async def test_cancelling_a_rewrite_s_progress_stops_it_and_applies_nothing(client):
    applied = accept_applied_edits(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"stepsRewrite": 400, "maxSpanTokens": 1024}}))
    text = "x = [" + ", ".join(str(i) for i in range(300)) + "]\n"
    open_doc(client, text)
    token = await cancel_midway(client, "dlm.rewriteSelection", [URI, rng(0, 4, 0, 900)],
                                "rewrite", reports=2)
    assert applied == []
    steps = client.progress_reports[token][1:-1]
    total = int(steps[0].message.rsplit(" ", 1)[1])
    assert len(steps) < total  # stopped before its last step


async def _rewrite_too_long(client: LanguageClient) -> JsonRpcException:
    """The error of a rewrite of a line of 40 numbers at maxSpanTokens 12."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"maxSpanTokens": 12}}))
    text = "x = [" + ", ".join(str(i) for i in range(40)) + "]\n"
    open_doc(client, text)
    with pytest.raises(JsonRpcException) as err:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dlm.rewriteSelection", [URI, rng(0, 0, 0, len(text) - 1)]))
    return err.value


async def test_a_selection_longer_than_a_rewrite_may_write_is_refused_and_nothing_applied(
        client: LanguageClient):
    """A rewrite writes at most maxSpanTokens tokens: a longer selection could only come
    back shorter (a selected file became 128 tokens of code), so the command refuses it
    and says which setting to raise."""
    applied = accept_applied_edits(client)
    err = await _rewrite_too_long(client)
    assert err.code == -32602 and "maxSpanTokens" in err.message
    assert applied == []
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [URI, rng(0, 4, 0, 8)]))  # "[0, " is within the cap
    assert result["applied"] is True and len(applied) == 1


async def test_a_rewrite_refused_as_too_long_does_not_end_its_progress_as_done(client):
    """The progress the editor shows ends with what happened: a rewrite the server
    refused ended its progress "done" while the command failed."""
    assert "maxSpanTokens" in (await _rewrite_too_long(client)).message
    [progress] = server_progress(client, "rewrite").values()
    end = progress[-1]
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message != "done"
    assert "failed" in end.message


async def test_a_hole_filling_that_failed_does_not_end_its_progress_as_done(client, tmp_path):
    """As a fill's progress: the holes' ended "done" where the model could not be loaded."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": str(tmp_path / "no-such-model")}}))
    open_doc(client, "a = <FILL>\n")
    with pytest.raises(JsonRpcException) as failed:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dlm.fillHoles", [URI]))
    assert "model unavailable" in failed.value.message
    [progress] = server_progress(client, "holes").values()
    assert isinstance(progress[-1], types.WorkDoneProgressEnd)
    assert progress[-1].message == "failed (see the error message)"


async def test_rewrite_selection_can_expand_to_the_enclosing_statement(client: LanguageClient):
    applied = accept_applied_edits(client)
    open_doc(client)
    inside = rng(1, 11, 1, 16)  # "a + b" of "    return a + b"
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [{"uri": URI, "range": inside, "expand": True}]))
    statement = rng(1, 0, 1, 16)  # the whole return statement, its indentation included
    assert result["range"] == statement
    [edit] = applied[0].document_changes[0].edits
    assert client.protocol._converter.unstructure(edit.range) == statement


async def test_a_selection_in_a_line_of_megabytes_is_not_grown(client: LanguageClient):
    """A minified bundle is one line, and its statement around a selection the whole
    bundle: grown to it, the rewrite replaced all of it (and parsing it for that, every
    time, took seconds).  The selection is rewritten as it is."""
    applied = accept_applied_edits(client)
    bundle = "".join(f"function a{k}(t){{return t+{k}}}" for k in range(8_000)) + "\n"
    open_doc(client, bundle)
    at = bundle.index("return", len(bundle) // 2)
    selected = rng(0, at, 0, at + 6)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "dlm.rewriteSelection", [{"uri": URI, "range": selected, "expand": True}]))
    assert result["range"] == selected
    [edit] = applied[0].document_changes[0].edits
    assert client.protocol._converter.unstructure(edit.range) == selected


async def test_cancel_mid_denoise_stops_the_loop_and_server_stays_healthy(client):
    open_doc(client)
    future = slow_infill(client, "cancel-me", "req-cancel")
    await wait_for(lambda: len(reports(client, "cancel-me")) >= 2)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="req-cancel"))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32800  # RequestCancelled
    await wait_for(lambda: any(isinstance(r, types.WorkDoneProgressEnd)
                               for r in client.progress_reports["cancel-me"]))
    assert len(reports(client, "cancel-me")) < 400  # stopped long before the last step
    await assert_engine_idle(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 4})
    assert len(result.edits) == 1


async def test_cancelling_ghost_text_or_completion_items_stops_their_fill(client):
    """`$/cancelRequest` of a suggestion (the editor's own requests, sent at every pause)
    stops its denoising loop as a `dlm/infill`'s, and the engine serves the next fill."""
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={
        "dlm": {"stepsMultiLine": 400, "multiLineTokens": 400, "maxSpanTokens": 400,
                "earlyStop": False, "stopWhenSettled": False}}))
    open_doc(client)
    doc, cursor = types.TextDocumentIdentifier(URI), types.Position(4, 4)
    for method, params in [
            (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionParams(
                text_document=doc, position=cursor, work_done_token="ghost",
                context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked))),
            (types.TEXT_DOCUMENT_COMPLETION, types.CompletionParams(
                text_document=doc, position=cursor, work_done_token="items"))]:
        token = params.work_done_token
        client.progress_reports[token] = []
        future = client.protocol.send_request(method, params, msg_id=token)
        await wait_for(lambda token=token: len(reports(client, token)) >= 2)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=token))
        with pytest.raises(JsonRpcException) as err:
            await asyncio.wrap_future(future)
        assert err.value.code == -32800
        await assert_engine_idle(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 4})
    assert len(result.edits) == 1


async def assert_engine_idle(client: LanguageClient) -> None:
    """No fill runs on: the engine's forward passes stop growing (a fill stopped at its
    next step takes at most that one more).  Its answer and the end of its progress come
    from the server's side at once, whether or not the denoising loop was stopped."""
    await asyncio.sleep(0.1)
    before = (await client.protocol.send_request_async("dlm/status", {})).forwardPasses
    await asyncio.sleep(0.5)
    after = (await client.protocol.send_request_async("dlm/status", {})).forwardPasses
    assert after - before <= 1


async def test_newer_request_for_the_document_supersedes_the_older(client):
    open_doc(client)
    older = slow_infill(client, "old", "req-old")
    await wait_for(lambda: len(reports(client, "old")) >= 1)
    newer = await infill(client, rng(4, 4, 4, 4), options={"length": 4})
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(older)
    assert err.value.code == -32800 and "superseded" in err.value.message
    assert len(newer.edits) == 1


async def test_ghost_text_asked_after_a_fill_the_user_asked_for_does_not_stop_it(client):
    """Fill selection (`dlm/infill`) given within the debounce after a keystroke: the ghost
    text that keystroke asks for is a suggestion, and stops only suggestions."""
    open_doc(client)
    client.progress_reports["asked"] = []
    asked = client.protocol.send_request("dlm/infill", {
        "textDocument": {"uri": URI}, "range": rng(4, 4, 4, 4), "workDoneToken": "asked",
        "options": {"length": 24, "steps": 24, "strategy": "confidence"}}, msg_id="asked")
    await wait_for(lambda: len(reports(client, "asked")) >= 1)
    ghost = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(URI), position=types.Position(4, 4),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
    assert ghost is not None
    result = await asyncio.wrap_future(asked)
    assert len(result["edits"] if isinstance(result, dict) else result.edits) == 1


async def test_document_edited_during_infill_gets_no_stale_edit(client):
    open_doc(client)
    future = slow_infill(client, "stale", "req-stale")
    await wait_for(lambda: len(reports(client, "stale")) >= 1)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="# edited\n")]))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32801  # ContentModified: nothing to apply
    result = await infill(client, rng(5, 4, 5, 4), options={"length": 4})
    assert result.version == 2


async def test_a_document_opened_again_during_infill_gets_no_stale_edit(client):
    """A client may send didOpen again (a reloaded file) with the same version: the text
    is new all the same."""
    open_doc(client)
    future = slow_infill(client, "reopened", "req-reopened")
    await wait_for(lambda: len(reports(client, "reopened")) >= 1)
    open_doc(client, "import sys\nsys.exit(0)\n")
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wrap_future(future)
    assert err.value.code == -32801


async def test_a_crlf_document_gets_crlf_line_breaks_back(client):
    open_doc(client, SOURCE.replace("\n", "\r\n"))
    result = await infill(client, rng(2, 0, 2, 0),
                          options={"length": 48, "kind": "multi-line", "candidates": 3})
    texts = [c.text for c in result.candidates]
    assert any("\r\n" in text for text in texts)  # the random model writes a few breaks
    assert not any("\n" in text.replace("\r\n", "") for text in texts)  # all of them \r\n


async def test_request_for_an_old_version_is_refused(client):
    open_doc(client, version=5)
    with pytest.raises(JsonRpcException) as err:
        await infill(client, rng(4, 4, 4, 4), textDocument={"uri": URI, "version": 4})
    assert err.value.code == -32801 and "version 4" in err.value.message


async def test_progress_reports_each_step(client):
    open_doc(client)
    client.progress_reports["p"] = []
    result = await infill(client, rng(4, 4, 4, 4), workDoneToken="p",
                          options={"length": 8, "steps": 4})
    kinds = [type(r).__name__ for r in client.progress_reports["p"]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert kinds.count("WorkDoneProgressReport") == result.stats.steps


async def test_one_work_done_token_sent_with_two_fills_at_once_shows_one_progress(client):
    """A client that sends one `workDoneToken` with two requests in flight got both fills'
    progress on it: "begin" twice, then, once the shorter fill ended it, the longer one's
    reports and a second "end" on a token already ended.  The second request shows none;
    both are answered, and the first's progress is whole: a begin, its steps, an end."""
    open_doc(client)
    open_doc(client, uri="file:///work/other.py")
    client.progress_reports["shared"] = []
    first = infill(client, rng(4, 4, 4, 4), workDoneToken="shared",
                   options={"length": 8, "steps": 8})
    second = infill(client, rng(4, 4, 4, 4), uri="file:///work/other.py",
                    workDoneToken="shared", options={"length": 64, "steps": 64})
    answers = await asyncio.gather(first, second)
    kinds = [type(r).__name__ for r in client.progress_reports["shared"]]
    assert kinds == (["WorkDoneProgressBegin"]
                     + ["WorkDoneProgressReport"] * answers[0].stats.steps
                     + ["WorkDoneProgressEnd"])


async def test_drafts_show_the_span_taking_shape(client):
    open_doc(client)
    drafts = []
    client.feature("dlm/draft")(lambda params: drafts.append(params))
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 8, "steps": 4})
    await wait_for(lambda: len(drafts) == result.stats.steps)
    assert "\u2591" in drafts[0].text  # still-masked positions show as placeholders
    assert drafts[-1].step == drafts[-1].steps


async def test_positions_are_utf16_code_units(client):
    text = "s = '\U0001f600' + \n"  # the emoji takes two UTF-16 units
    open_doc(client, text)
    col = 11  # just after "+ " in UTF-16 units
    result = await infill(client, rng(0, col, 0, col), options={"length": 4})
    after = apply_edits(text, [{"range": rng(0, col, 0, col), "newText": result.edits[0].newText}])
    at = text.index("+ ") + 2
    assert_only_inside(text, after, at, at)


async def test_incremental_changes_are_applied_before_filling(client):
    open_doc(client, "a = 1\n")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(1, 0), types.Position(1, 0)), text="b = \n")]))
    result = await infill(client, rng(1, 4, 1, 4), options={"length": 3})
    assert result.version == 2


@pytest.mark.parametrize("params, expected", [
    ({"textDocument": {"uri": "file:///nope.py"}, "range": rng(0, 0, 0, 0)}, "not open"),
    ({"textDocument": {"uri": URI}, "range": rng(99, 0, 99, 0)}, "outside the document"),
    ({"textDocument": {"uri": URI}, "range": rng(0, 80, 0, 80)}, "past the end of its line"),
    ({"textDocument": {"uri": URI}, "range": rng(1, 4, 0, 2)}, "before its start"),
    ({"textDocument": {"uri": URI}, "range": {"start": 3}}, "not a valid Range"),
    # taken for 1 by cattrs: a fill at a place the client never named
    ({"textDocument": {"uri": URI}, "range": {"start": {"line": "1", "character": 0},
                                              "end": {"line": 1, "character": 0}}},
     "must be integers, got '1'"),
    ({"textDocument": {"uri": URI}, "range": {"start": {"line": 1, "character": 1.9},
                                              "end": {"line": 1, "character": True}}},
     "must be integers, got 1.9"),
    ({"textDocument": {"uri": URI}, "range": rng(0, 0, 0, 0),
      "options": {"strategy": "sideways"}}, "strategy"),
])
async def test_bad_requests_get_a_clear_error_and_the_next_one_works(client, params, expected):
    open_doc(client)
    with pytest.raises(JsonRpcException) as err:
        await client.protocol.send_request_async("dlm/infill", params)
    assert err.value.code == -32602 and expected in err.value.message
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 2})
    assert len(result.edits) == 1


@pytest.mark.parametrize("line, character, expected", [
    (99, 0, "position line 99 is outside the document"),
    (0, 80, "position 0:80 is past the end of its line"),
])
async def test_a_bad_inline_completion_position_is_named_as_the_position_sent(
        client, line, character, expected):
    """Inline completion sends a position: it was refused as a "range start", which the
    client never sent."""
    open_doc(client)
    with pytest.raises(JsonRpcException) as err:
        await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(URI),
            position=types.Position(line, character), context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
    assert err.value.code == -32602 and expected in err.value.message
    assert "range" not in err.value.message


async def test_model_that_fails_to_load_is_a_clear_error_and_recoverable(client, model_dir):
    open_doc(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": "/no/such/model"}}))
    with pytest.raises(JsonRpcException) as err:
        await infill(client, rng(4, 4, 4, 4))
    assert err.value.code == -32001 and "/no/such/model" in err.value.message
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": str(model_dir)}}))
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 2})
    assert len(result.edits) == 1


async def test_a_load_retried_on_request_loads_a_mended_checkpoint_without_the_wait(
        client, model_dir, tmp_path):
    """`dlm/retryLoad`: after a failed load, requests with the same settings fail at once
    until a wait is over.  A user who mends the checkpoint asks for the load: it runs at
    once, shown as progress, and the answer is the status once it is done, failed or
    not."""
    import shutil

    broken = tmp_path / "model"
    shutil.copytree(model_dir, broken)
    weights = next(broken.glob("*.safetensors"))
    weights.rename(tmp_path / "aside")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": str(broken)}}))
    await wait_for(lambda: any(m.type == types.MessageType.Error for m in client.messages))
    status = await client.protocol.send_request_async("dlm/retryLoad", {})
    assert status.loaded is False and str(broken) in status.loadError
    assert status.loadRetryS > 0  # the failed retry waits again
    (tmp_path / "aside").rename(weights)
    status = await client.protocol.send_request_async("dlm/retryLoad", {})
    assert status.loaded is True and status.loadError is None and status.model == str(broken)
    # the `dlm/status` answer, whole: it left out the server's own part (`version`, ...)
    asked = await client.protocol.send_request_async("dlm/status", {})
    assert set(status._fields) == set(asked._fields)
    assert "ready on cpu" in list(loads(client).values())[-1][-1].message
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 2})
    assert len(result.edits) == 1


def loads(client: LanguageClient) -> dict[str, list]:
    """The server's model-loading progress, by token."""
    return server_progress(client, "load")


def ended(reports: list) -> bool:
    return bool(reports) and isinstance(reports[-1], types.WorkDoneProgressEnd)


async def test_loading_the_model_is_shown_as_progress_that_ends_with_where_it_runs(
        client, model_dir):
    await wait_for(lambda: any(ended(r) for r in loads(client).values()))
    [reports] = loads(client).values()
    begin, end = reports
    assert begin.title == "dlm-lsp: loading the model" and begin.message == str(model_dir)
    assert "ready on cpu" in end.message and end.message.endswith(" s)")
    await wait_for(lambda: any(m.message == f"dlm-lsp: {end.message}"
                               for m in client.log_messages))  # sent right after the end


async def test_a_new_model_setting_is_loaded_at_once_and_a_wrong_one_reported_at_once(
        client, model_dir):
    await wait_for(lambda: len(loads(client)) == 1 and all(map(ended, loads(client).values())))
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"steps": 3}}))  # nothing to load
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": "/no/such/model"}}))
    await wait_for(lambda: any(m.type == types.MessageType.Error for m in client.messages))
    [error] = [m for m in client.messages if m.type == types.MessageType.Error]
    assert "/no/such/model" in error.message  # before any fill asked for it
    assert len(loads(client)) == 2 and "failed" in loads(client)["dlm-lsp/load/2"][-1].message
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"model": str(model_dir)}}))
    await wait_for(lambda: ended(loads(client).get("dlm-lsp/load/3", [])))
    assert "ready on cpu" in loads(client)["dlm-lsp/load/3"][-1].message


async def test_remote_settings_under_the_local_backend_keep_the_loaded_model(client):
    """A user filling in the service's address before switching `backend` to it: the local
    engine was replaced at each such change, its model loaded again (seconds to minutes
    for a large one) and its figures in dlm/status lost."""
    await wait_for(lambda: len(loads(client)) == 1 and all(map(ended, loads(client).values())))
    open_doc(client)
    await infill(client, rng(4, 4, 4, 4), options={"length": 2})
    for wrong, change in enumerate(({"remoteUrl": "http://127.0.0.1:9"}, {"remoteToken": "t"},
                                    {"remoteCaFile": "/no/ca.pem"})):
        told = len(client.messages)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            # the warning about a new wrong value each time: the change was handled
            settings={"dlm": {**change, "steps": -wrong}}))
        await wait_for(lambda: len(client.messages) > told)  # noqa: B023 - awaited here
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.loaded and status.fills == 1
    await asyncio.sleep(0.3)  # a load would have begun by now
    assert len(loads(client)) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason='"auto" is the CPU only without CUDA')
async def test_settings_that_load_the_same_model_keep_it_and_show_no_load(client):
    """Without CUDA, "auto" is the CPU, where steps do not replay as CUDA graphs: saying
    "cpu", or switching cudaGraphs off, showed a load and loaded the same model again
    (seconds to minutes for a big checkpoint), its step cost timed anew."""
    await wait_for(lambda: len(loads(client)) == 1 and all(map(ended, loads(client).values())))
    open_doc(client)
    await infill(client, rng(4, 4, 4, 4), options={"length": 2, "latencyMs": 60_000})
    for wrong, change in enumerate(({"device": "cpu"}, {"cudaGraphs": False})):
        told = len(client.messages)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            # a new wrong value's warning (each is told once): the change was handled
            settings={"dlm": {**change, "steps": -wrong}}))
        await wait_for(lambda: len(client.messages) > told)  # noqa: B023 - awaited here
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.loaded and status.stepMs is not None
    await asyncio.sleep(0.3)  # a load would have begun by now
    assert len(loads(client)) == 1


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def plain_client(lsp_client: LanguageClient, model_dir):
    """A client that declares no capabilities at all (no work-done progress)."""
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options={"model": str(model_dir)}))
    yield
    await lsp_client.shutdown_session()


async def test_a_client_without_progress_gets_the_load_as_a_log_line_only(plain_client):
    await wait_for(lambda: any("ready on cpu" in m.message for m in plain_client.log_messages))
    assert plain_client.progress_reports == {}


async def test_out_of_memory_is_a_clear_error_and_the_server_keeps_serving(oom_client):
    open_doc(oom_client)
    with pytest.raises(JsonRpcException) as err:
        await infill(oom_client, rng(4, 4, 4, 4))
    assert err.value.code == -32002 and "out of memory" in err.value.message
    result = await infill(oom_client, rng(4, 4, 4, 4), options={"length": 2})
    assert len(result.edits) == 1


async def test_bad_configuration_is_reported_and_defaults_are_kept(client):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dlm": {"steps": "many", "strategy": "sideways"}}))
    await wait_for(lambda: any("steps" in m.message for m in client.messages))
    [message] = [m for m in client.messages if "steps" in m.message]
    assert message.type == types.MessageType.Warning and "sideways" in message.message
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 4})
    assert result.stats.steps == 4  # multi-line default (16) clamped to the 4 tokens + head


async def test_a_wrong_setting_is_told_once_though_every_change_sends_it_again(client):
    """As VS Code and Neovim do: the whole section at every change, the wrong `steps`
    with it; it was told again at each change of another setting."""
    section = {"steps": 0, "temperature": 0.0}
    for temperature in (0.0, 0.5, 0.7):
        section = {**section, "temperature": temperature}
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"dlm": section}))
    status = await client.protocol.send_request_async("dlm/status", {})  # all handled by now
    assert status is not None
    assert [m.message for m in client.messages if "steps" in m.message] == [
        "dlm-lsp settings: setting 'steps' = 0 should be an integer from 1 to 4096; "
        "previous value kept"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def utf8_client(lsp_client: LanguageClient, model_dir):
    """A client that prefers UTF-8 positions."""
    caps = client_capabilities("neovim")
    caps.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16])
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=caps, initialization_options={"model": str(model_dir)}))
    yield
    await lsp_client.shutdown_session()


async def test_utf8_position_encoding_is_negotiated_and_honoured(utf8_client):
    assert utf8_client.init_result.capabilities.position_encoding == "utf-8"
    text = "s = 'é' + \n"  # é is two UTF-8 bytes
    open_doc(utf8_client, text)
    col = len("s = 'é' + ".encode())  # 11 bytes: past the line's end if read as UTF-16 (10)
    result = await infill(utf8_client, rng(0, col, 0, col), options={"length": 3})
    fill = result.edits[0].newText
    at = text.index("+ ") + 2
    assert (text[:at] + fill + text[at:]).startswith("s = 'é' + ")
    assert result.edits[0].range.start.character == col


async def test_denoising_controls_pass_through_the_protocol(client):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={
        "length": 8, "steps": 6, "threshold": 0.5, "maxPerStep": 2, "blockSize": 4,
        "spacing": 1, "remask": 0.2, "schedule": "cosine", "topP": 0.9, "temperature": 0.5})
    assert result.stats.steps <= 6 and result.stats.used <= result.stats.tokens
    refined = await infill(client, rng(1, 4, 1, 16), options={"strength": 0.5, "steps": 3})
    assert refined.stats.kind == "rewrite" and refined.stats.steps <= 4


async def test_the_result_says_which_path_produced_the_fill_and_where_it_is_broken(client):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={
        "length": 6, "steps": 3, "repairRounds": 1, "fallback": True})
    best = result.candidates[0]
    assert result.stats.path == best.path
    assert best.path in ("diffusion", "repair", "left-to-right")
    assert result.stats.repairRounds <= 1
    assert result.stats.repairSteps >= 0 and result.stats.hintSteps >= 0
    assert result.stats.repairSteps + result.stats.hintSteps <= result.stats.steps
    if result.stats.repairRounds == 0 and result.stats.path == "diffusion":
        assert result.stats.repairSteps == 0  # every step was the first run's
    if best.valid is False:  # never silently: an invalid fill says where it breaks the code
        assert best.errors
    if result.stats.path != "diffusion":
        assert result.stats.repairRounds == 1  # repair came before the fallback


async def test_a_latency_target_picks_the_steps_and_reports_the_forecast(client):
    open_doc(client)
    result = await infill(client, rng(4, 4, 4, 4), options={"length": 8, "latencyMs": 100000})
    assert 0 < result.stats.predictedMs <= 100000
    # room for one step per token: the same as asking for that budget outright
    plain = await infill(client, rng(4, 4, 4, 4), options={"length": 8,
                                                           "steps": result.stats.tokens})
    assert plain.stats.steps == result.stats.steps
    assert plain.stats.predictedMs is None


async def test_status_reports_the_fills_served(client):
    open_doc(client)
    await infill(client, rng(4, 4, 4, 4), options={"length": 4, "steps": 2})
    await infill(client, rng(4, 4, 4, 4), options={"length": 4, "steps": 2})  # the same again
    status = await client.protocol.send_request_async("dlm/status", {})
    assert status.fills == 2 and status.p50Ms is not None and status.p95Ms >= status.p50Ms
    assert status.forwardPasses >= 1 and status.batchOccupancy >= 1
    assert status.cacheHitRate > 0  # the second fill was answered from recent fills
    assert status.openDocuments == 1 and status.jobsInFlight == 0
    assert status.version == __version__


async def test_bad_control_values_are_refused_with_the_expected_range(client):
    open_doc(client)
    with pytest.raises(JsonRpcException) as err:
        await infill(client, rng(4, 4, 4, 4), options={"topP": 0, "spacing": 99})
    assert err.value.code == -32602
    assert "topP" in err.value.message and "spacing" in err.value.message
