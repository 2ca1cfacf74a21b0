import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  applyEditFailure, applyIfFresh, blankHoleNote, commandDocument, notAppliedNote, droppedNote, EDITOR_REFUSED, primaryOnlyNote, rewriteRange, applyTextEdits, checkResult, checkVersion, holeNear, holesFilled, nothingApplied, offsetAt, positionAt, rangeContains, syntaxWarning,
  type Range,
} from "../edits";

const at = (line: number, character: number) => ({ line, character });
const range = (a: number, b: number, c: number, d: number): Range => ({ start: at(a, b), end: at(c, d) });

describe("checkVersion: a fill is applied only to the version it was computed for", () => {
  it("applies when request, answer and document agree", () => {
    assert.deepEqual(checkVersion(4, 4, 4), { apply: true });
  });

  it("refuses when the document changed while the server worked", () => {
    const verdict = checkVersion(4, 4, 5);
    assert.equal(verdict.apply, false);
    assert.match(!verdict.apply ? verdict.reason : "", /4 -> 5/);
  });

  it("refuses an answer for another version than the one asked about", () => {
    assert.equal(checkVersion(4, 3, 4).apply, false);
  });

  it("trusts the document version alone when the server names none", () => {
    assert.equal(checkVersion(4, null, 4).apply, true);
    assert.equal(checkVersion(4, undefined, 5).apply, false);
  });
});

describe("checkResult", () => {
  const requested = { version: 2, range: range(3, 4, 3, 10) };

  it("accepts edits inside the requested range", () => {
    const edits = [{ range: range(3, 4, 3, 10), newText: "x" }];
    assert.equal(checkResult(requested, { version: 2, edits }, 2).apply, true);
  });

  it("refuses an edit that reaches outside the requested range", () => {
    const edits = [{ range: range(3, 0, 3, 10), newText: "x" }];
    assert.equal(checkResult(requested, { version: 2, edits }, 2).apply, false);
  });

  it("checks the version before the ranges", () => {
    const verdict = checkResult(requested, { version: 2, edits: [] }, 3);
    assert.equal(verdict.apply, false);
  });

  it("applies nothing where the server gave no edit, saying the server's reason", () => {
    const message = "the model wrote only whitespace in place of the selected code";
    const verdict = checkResult(requested, { version: 2, edits: [], message }, 2);
    assert.deepEqual(verdict, { apply: false, reason: message, nothingWritten: true });
    // said as nothing applied, not as a fill dropped for a changed document
    assert.equal(notAppliedNote(verdict as { reason: string; nothingWritten?: true }),
                 `nothing applied (${message})`);
    const stale = checkResult(requested, { version: 2, edits: [] }, 3);
    assert.match(notAppliedNote(stale as { reason: string }), /^fill dropped: /);
  });
});

describe("applyIfFresh: a fill is applied to the version it was computed for, or not at all", () => {
  const requested = { version: 2, range: range(3, 4, 3, 10) };
  const answer = { version: 2, edits: [{ range: range(3, 4, 3, 10), newText: "x" }] };
  /** A document whose version a test moves, and the edits `apply` was called with. */
  const fake = () => {
    const doc = { version: 2, applied: [] as unknown[] };
    return { doc, current: () => doc.version, apply: async (edits: unknown) => (doc.applied.push(edits), true) };
  };

  it("applies the converted edits to a document still at the requested version", async () => {
    const { doc, current, apply } = fake();
    const verdict = await applyIfFresh(requested, answer, current, (edits) => edits.map((e) => e.newText), apply);
    assert.deepEqual(verdict, { apply: true });
    assert.deepEqual(doc.applied, [["x"]]);
  });

  it("applies nothing when the document changes while the edits are converted", async () => {
    const { doc, current, apply } = fake();
    const converting = async (edits: typeof answer.edits) => {
      await Promise.resolve();
      doc.version = 3;  // a keystroke reached the extension host during the conversion's await
      return edits;
    };
    const verdict = await applyIfFresh(requested, answer, current, converting, apply);
    assert.deepEqual(doc.applied, []);
    assert.match(!verdict.apply ? verdict.reason : "", /the document changed \(version 2 -> 3\)/);
  });

  it("says the document changed when VS Code refuses the edit of a document that moved on", async () => {
    const { doc, current } = fake();
    // the keystroke VS Code refused the edit for reaches the extension host before the answer
    const verdict = await applyIfFresh(requested, answer, current, (edits) => edits,
                                       async () => { doc.version = 3; return false; });
    assert.deepEqual(verdict, { apply: false, reason: "the document changed (version 2 -> 3)" });
  });

  it("does not say the document changed when VS Code refuses the edit of one that did not", async () => {
    const verdict = await applyIfFresh(requested, answer, () => 2, (edits) => edits, async () => false);
    assert.deepEqual(verdict, { apply: false, reason: EDITOR_REFUSED });
    assert.doesNotMatch(EDITOR_REFUSED, /document changed/);
    // nor guesses read-only: VS Code applies an edit to a read-only document (e2e/run.sh --readonly)
    assert.doesNotMatch(EDITOR_REFUSED, /read-only/);
  });

  it("neither converts nor applies an answer that was stale on arrival", async () => {
    let converted = false;
    const { doc, apply } = fake();
    const verdict = await applyIfFresh(requested, answer, () => 3, (edits) => { converted = true; return edits; }, apply);
    assert.equal(verdict.apply, false);
    assert.equal(converted, false);
    assert.deepEqual(doc.applied, []);
  });
});

describe("applyEditFailure: the failureReason of a workspace/applyEdit VS Code did not apply", () => {
  const edit = (uri: string, version: number | null) =>
    ({ documentChanges: [{ textDocument: { uri, version }, edits: [] }] });
  const open = (versions: Record<string, number>) => (uri: string) => versions[uri];

  it("says the document changed where it is at another version than the edit's", () => {
    assert.equal(applyEditFailure(edit("file:///a.py", 4), open({ "file:///a.py": 5 })),
                 "the document changed (version 4 -> 5)");
  });

  it("says VS Code refused it where the document is at the edit's version, or unversioned", () => {
    assert.equal(applyEditFailure(edit("file:///a.py", 4), open({ "file:///a.py": 4 })), EDITOR_REFUSED);
    assert.equal(applyEditFailure(edit("file:///a.py", null), open({ "file:///a.py": 9 })), EDITOR_REFUSED);
    assert.equal(applyEditFailure({ changes: { "file:///a.py": [] } }, open({ "file:///a.py": 9 })), EDITOR_REFUSED);
  });

  it("does not blame a document that is not open (VS Code opens it to edit it)", () => {
    assert.equal(applyEditFailure(edit("file:///b.py", 4), open({})), EDITOR_REFUSED);
  });

  it("names the document that changed among several", () => {
    const both = { documentChanges: [...edit("file:///a.py", 1).documentChanges,
                                     ...edit("file:///b.py", 2).documentChanges] };
    assert.equal(applyEditFailure(both, open({ "file:///a.py": 1, "file:///b.py": 7 })),
                 "the document changed (version 2 -> 7)");
  });
});

describe("rewriteRange: what Rewrite block rewrites", () => {
  const lines = ["def total(xs):", "    result = 0", "    for x in xs:", "        result += x", "    return result"];
  const lineLength = (line: number) => lines[line].length;

  it("rewrites a selection as it is, and a cursor's whole line", () => {
    assert.deepEqual(rewriteRange([range(1, 4, 1, 10)], lineLength), range(1, 4, 1, 10));
    assert.deepEqual(rewriteRange([range(2, 6, 2, 6)], lineLength), range(2, 0, 2, 16));
  });

  it("rewrites the whole lines of a column selection, not a few columns of its primary line", () => {
    // Alt+Shift+drag from line 1 column 4 to line 3 column 8: one selection a line
    const column = [range(1, 4, 1, 8), range(2, 4, 2, 8), range(3, 4, 3, 8)];
    assert.deepEqual(rewriteRange(column, lineLength), range(1, 0, 3, 19));
    // the primary one may be any of them: the last line the user dragged to, say
    assert.deepEqual(rewriteRange([column[2], column[0], column[1]], lineLength), range(1, 0, 3, 19));
  });

  it("rewrites the lines from the first cursor's to the last one's with a cursor on each", () => {
    assert.deepEqual(rewriteRange([range(3, 2, 3, 2), range(1, 0, 1, 0)], lineLength), range(1, 0, 3, 19));
  });
});

describe("ranges and offsets", () => {
  it("rangeContains includes the edges", () => {
    assert.equal(rangeContains(range(1, 0, 1, 5), range(1, 0, 1, 5)), true);
    assert.equal(rangeContains(range(1, 0, 1, 5), range(1, 5, 1, 5)), true);
    assert.equal(rangeContains(range(1, 1, 1, 5), range(1, 0, 1, 2)), false);
  });

  it("offsetAt counts UTF-16 code units, as LSP does by default", () => {
    const text = "a😀b\ncd";
    assert.equal(offsetAt(text, at(0, 3)), 3); // the emoji is two units
    assert.equal(text.slice(offsetAt(text, at(0, 3))), "b\ncd");
    assert.equal(offsetAt(text, at(1, 1)), 6);
  });

  it("offsetAt clamps a column past the line's end to it", () => {
    assert.equal(offsetAt("ab\ncd", at(0, 99)), 2);
    assert.equal(offsetAt("ab", at(5, 0)), 2);
  });

  it("positionAt inverts offsetAt", () => {
    const text = "def f():\n    <FILL>\n";
    for (let offset = 0; offset <= text.length; offset++) {
      assert.equal(offsetAt(text, positionAt(text, offset)), offset);
    }
  });
});

describe("applyTextEdits", () => {
  it("replaces a hole and leaves every other byte alone", () => {
    const before = "def f(n):\n    <FILL>\n\nprint(f(2))\n";
    const after = applyTextEdits(before, [{ range: range(1, 4, 1, 10), newText: "return n * 2" }]);
    assert.equal(after, "def f(n):\n    return n * 2\n\nprint(f(2))\n");
  });

  it("inserts at an empty range", () => {
    assert.equal(applyTextEdits("ab", [{ range: range(0, 1, 0, 1), newText: "X" }]), "aXb");
  });

  it("applies several edits against the original text, whatever their order", () => {
    const text = "<FILL> = <FILL>";
    const edits = [{ range: range(0, 9, 0, 15), newText: "1" }, { range: range(0, 0, 0, 6), newText: "x" }];
    assert.equal(applyTextEdits(text, edits), "x = 1");
  });
});

describe("holeNear: which hole a cursor means", () => {
  const line = "    x = <FILL> + <FILL>";

  it("is the one the cursor is in", () => {
    assert.deepEqual(holeNear(line, 10, "<FILL>"), [8, 14]);
  });

  it("is the one the cursor touches, at either edge", () => {
    assert.deepEqual(holeNear(line, 8, "<FILL>"), [8, 14]);
    assert.deepEqual(holeNear(line, 23, "<FILL>"), [17, 23]);
  });

  it("is otherwise the nearest on the line", () => {
    assert.deepEqual(holeNear(line, 0, "<FILL>"), [8, 14]);
    assert.deepEqual(holeNear(line, 16, "<FILL>"), [17, 23]);
  });

  it("is none on a line without markers", () => {
    assert.equal(holeNear("    return n", 4, "<FILL>"), undefined);
    assert.equal(holeNear("anything", 0, ""), undefined);
  });
});

describe("syntaxWarning", () => {
  it("says nothing of fills that parse or were not checked", () => {
    assert.equal(syntaxWarning(true), undefined);
    assert.equal(syntaxWarning(null), undefined);
    assert.equal(syntaxWarning(undefined), undefined);
    assert.equal(syntaxWarning([true, null, true]), undefined);
  });

  it("warns of one fill the check rejected", () => {
    assert.match(syntaxWarning(false) ?? "", /^the check rejected the fill \(it does not parse, or would fail when run\)/);
    assert.match(syntaxWarning([false]) ?? "", /^the check rejected the fill /);
  });

  it("counts the holes whose fills the check rejected", () => {
    assert.match(syntaxWarning([true, false, null, false]) ?? "", /^the check rejected 2 of 4 fills /);
  });
});

describe("primaryOnlyNote: Fill selection says it filled the primary selection only", () => {
  it("says nothing of a single selection or cursor", () => {
    assert.equal(primaryOnlyNote(1), undefined);
  });

  it("names the selections it left as they were", () => {
    assert.equal(primaryOnlyNote(2), "dlm: filled the primary selection only (1 other selection left as it was)");
    assert.equal(primaryOnlyNote(4), "dlm: filled the primary selection only (3 other selections left as they were)");
  });
});

describe("nothingApplied: a command that applied nothing says so once", () => {
  it("puts the server's reason in brackets", () => {
    assert.equal(nothingApplied("no <FILL> holes in hello.py"), "nothing applied (no <FILL> holes in hello.py)");
  });

  it("leaves a reason that says it alone", () => {
    const why = "the model wrote only whitespace in place of the selected code, which would delete it; nothing applied";
    assert.equal(nothingApplied(why), why);
  });
});

describe("blankHoleNote: Fill selection on a hole the model left blank says so", () => {
  it("says it of edits that only take the marker away, as Fill holes says it", () => {
    assert.equal(blankHoleNote([{ newText: "" }]), "filled 1 hole (blank: the model wrote no code there)");
    assert.equal(blankHoleNote([{ newText: "\n  " }]), "filled 1 hole (blank: the model wrote no code there)");
  });
  it("says nothing of a fill that wrote code, or of no edit at all", () => {
    assert.equal(blankHoleNote([{ newText: "return n" }]), undefined);
    assert.equal(blankHoleNote([]), undefined);
  });
});

describe("commandDocument: the document a code action's command is for", () => {
  it("reads both shapes of the server's arguments", () => {
    assert.equal(commandDocument(["file:///a.py"]), "file:///a.py");
    assert.equal(commandDocument(["file:///a.py", range(0, 0, 1, 0)]), "file:///a.py");
    assert.equal(commandDocument([{ uri: "file:///b.py", range: range(0, 0, 1, 0) }]), "file:///b.py");
  });

  it("names none for arguments of another shape", () => {
    for (const args of [[], [null], [3], [{ range: range(0, 0, 0, 1) }], [{ uri: 5 }]]) {
      assert.equal(commandDocument(args), undefined);
    }
  });
});

describe("holesFilled: Fill holes says which holes the model left blank", () => {
  it("counts the holes filled, with no note where each fill has code", () => {
    assert.equal(holesFilled(1), "filled 1 hole");
    assert.equal(holesFilled(3, 0), "filled 3 holes");
  });

  it("says how many fills were blank, or that all were", () => {
    assert.equal(holesFilled(3, 1), "filled 3 holes (1 blank: the model wrote no code there)");
    assert.equal(holesFilled(1, 1), "filled 1 hole (blank: the model wrote no code there)");
    assert.equal(holesFilled(2, 2), "filled 2 holes (all blank: the model wrote no code there)");
  });
});

describe("droppedNote: a fill not applied reads as the server's own drop", () => {
  it("says the extension's reason in the server's words around it", () => {
    // the server's -32801 message for the same event: "fill dropped: the document changed ..."
    const verdict = checkVersion(3, 3, 4);
    assert.equal(verdict.apply, false);
    if (!verdict.apply) {
      assert.equal(droppedNote(verdict.reason), "fill dropped: the document changed (version 3 -> 4)");
    }
  });
});
