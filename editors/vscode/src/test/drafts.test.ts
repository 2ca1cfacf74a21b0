import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type DraftParams, DraftBoard, draftLabel, draftProgress } from "../drafts";

const draft = (step: number, version = 3, character = 4): DraftParams => ({
  textDocument: { uri: "file:///a.py", version },
  range: { start: { line: 4, character }, end: { line: 4, character: 10 } },
  text: `ret░rn n${step}`, step, steps: 8,
});

describe("draftLabel: a draft on one line", () => {
  it("shows line breaks as ⏎", () => {
    assert.equal(draftLabel("a = 1\nb = 2\n"), "a = 1 ⏎ b = 2 ⏎");
  });

  it("cuts long drafts with an ellipsis", () => {
    const label = draftLabel("x".repeat(200), 20);
    assert.equal(label.length, 20);
    assert.ok(label.endsWith("…"));
  });

  it("cuts between characters, never inside one written as two UTF-16 units", () => {
    const label = draftLabel("x".repeat(18) + "😀😀😀", 20);  // 😀 is a surrogate pair
    assert.equal(label, "x".repeat(18) + "😀…");
  });

  it("keeps the still-masked positions visible", () => {
    assert.equal(draftLabel("ret░░ n"), "ret░░ n");
    assert.equal(draftProgress(draft(3)), "3/8");
  });
});

describe("DraftBoard: which drafts to show", () => {
  it("shows each newer step of a fill", () => {
    const board = new DraftBoard();
    assert.equal(board.accept(draft(1), 3), true);
    assert.equal(board.accept(draft(2), 3), true);
    assert.equal(board.get("file:///a.py")?.step, 2);
  });

  it("ignores a step that arrives after a later one", () => {
    const board = new DraftBoard();
    board.accept(draft(5), 3);
    assert.equal(board.accept(draft(4), 3), false);
    assert.equal(board.get("file:///a.py")?.step, 5);
  });

  it("ignores drafts for a version the document has left", () => {
    assert.equal(new DraftBoard().accept(draft(1, 2), 3), false);
  });

  it("starts over for a new fill at another span", () => {
    const board = new DraftBoard();
    board.accept(draft(7), 3);
    assert.equal(board.accept(draft(1, 3, 0), 3), true);
  });

  it("forgets a document's draft when its fill ends", () => {
    const board = new DraftBoard();
    board.accept(draft(1), 3);
    assert.equal(board.clear("file:///a.py"), true);
    assert.equal(board.clear("file:///a.py"), false);
    assert.deepEqual(board.uris(), []);
  });
});
