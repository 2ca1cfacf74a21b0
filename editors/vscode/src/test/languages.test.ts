import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  CODE_CELL, documentSelector, idleReason, languageIds, restartsOnSettingsChange, sendsSettingChange, serves, startsNow, syncedCells, unservedReason,
} from "../languages";
import type { ClientState } from "../status";

const file = (languageId: string, scheme = "file") => ({ languageId, uri: { scheme } });
const defaults = ["python", "go", "rust"];

describe("languageIds: dlm.languages however it was written", () => {
  it("takes a list of ids as it is", () => {
    assert.deepEqual(languageIds(["python", "haskell"], defaults), { ids: ["python", "haskell"] });
  });
  it("reads a string as the list of that id, and says so (it stopped the server)", () => {
    const { ids, problem } = languageIds("python", defaults);
    assert.deepEqual(ids, ["python"]);
    assert.match(problem ?? "", /should be a list of language ids, got the string "python"/);
  });
  it("falls back to the default list for anything else, and keeps the string ids of a list", () => {
    assert.deepEqual(languageIds(3, defaults).ids, defaults);
    assert.match(languageIds(null, defaults).problem ?? "", /got null: the default list is used/);
    const mixed = languageIds(["python", 7], defaults);
    assert.deepEqual(mixed.ids, ["python"]);
    assert.match(mixed.problem ?? "", /strings\) only/);
  });
});

describe("documentSelector and serves: the documents the server is sent", () => {
  it("selects files, unsaved documents and notebook cells of every listed language", () => {
    assert.deepEqual(documentSelector(["python", "haskell"]), [
      { scheme: "file", language: "python" }, { scheme: "untitled", language: "python" },
      { scheme: "vscode-notebook-cell", language: "python" },
      { scheme: "file", language: "haskell" }, { scheme: "untitled", language: "haskell" },
      { scheme: "vscode-notebook-cell", language: "haskell" }]);
  });

  it("serves exactly what the selector selects", () => {
    assert.ok(serves(defaults, file("python")));
    assert.ok(serves(defaults, file("go", "untitled")));
    assert.ok(serves(defaults, file("python", "vscode-notebook-cell")));  // a notebook's cell
    assert.ok(!serves(defaults, file("haskell")));
    assert.ok(!serves(defaults, file("python", "git")));  // a diff's old side: never sent
  });
});

describe("syncedCells: the cells of a notebook the server is sent", () => {
  const cell = (kind: number, languageId: string) => ({ kind, document: { languageId } });

  it("sends the code cells of the listed languages, in notebook order", () => {
    const cells = [cell(CODE_CELL, "python"), cell(1, "markdown"), cell(CODE_CELL, "sql"),
      cell(CODE_CELL, "go"), cell(CODE_CELL, "python")];
    assert.deepEqual(syncedCells(defaults, cells), [cells[0], cells[3], cells[4]]);
  });

  it("sends no markdown cell, even where markdown is a listed language", () => {
    assert.deepEqual(syncedCells(["markdown"], [cell(1, "markdown")]), []);
  });
});

describe("startsNow: an idle server starts once an open document is its own", () => {
  it("starts for a document of a listed language", () => {
    assert.ok(startsNow("idle", defaults, [file("markdown"), file("python")]));
  });

  it("does not start in a window of other languages (onStartupFinished activates it everywhere)", () => {
    assert.ok(!startsNow("idle", defaults, [file("haskell"), file("markdown")]));
    assert.ok(!startsNow("idle", defaults, []));
  });

  it("does not start for a listed language that only another scheme shows", () => {
    assert.ok(!startsNow("idle", defaults, [file("python", "git"), file("python", "output")]));
  });

  it("starts for a language the user added to dlm.languages, which has no onLanguage event", () => {
    assert.ok(startsNow("idle", [...defaults, "haskell"], [file("haskell")]));
  });

  it("starts only a server never started: a failed or stopped one is not started again by a file", () => {
    for (const state of ["starting", "running", "stopped", "failed"] as ClientState[]) {
      assert.ok(!startsNow(state, defaults, [file("python")]), state);
    }
  });
});

describe("restartsOnSettingsChange: dlm.languages or dlm.server.* changed", () => {
  it("starts an idle server when the change makes an open document its own", () => {
    assert.ok(!startsNow("idle", defaults, [file("haskell")]));
    assert.ok(restartsOnSettingsChange("idle", [...defaults, "haskell"], [file("haskell")]));
  });

  it("leaves an idle server idle when still nothing open is its own", () => {
    assert.ok(!restartsOnSettingsChange("idle", [...defaults, "haskell"], [file("markdown")]));
  });

  it("restarts a server that was started, to apply the change, whatever is open", () => {
    for (const state of ["starting", "running", "stopped", "failed"] as ClientState[]) {
      assert.ok(restartsOnSettingsChange(state, defaults, []), state);
    }
  });
});

describe("idleReason: why the server is not started (a click on the status bar)", () => {
  it("names the open files' languages, dlm.languages, and what starts it", () => {
    const reason = idleReason(defaults, [file("haskell"), file("markdown", "untitled"), file("haskell"),
                                         file("python", "git")]);
    assert.match(reason, /not started/);
    assert.match(reason, /the open files are haskell, markdown,/);
    assert.match(reason, /dlm\.languages is python, go, rust/);
    assert.match(reason, /added to dlm\.languages/);
    assert.match(reason, /Restart server/);
  });

  it("says so when no file is open, or dlm.languages is empty", () => {
    assert.match(idleReason([], []), /no file is open, and dlm\.languages is empty/);
  });
});

describe("unservedReason: a fill command run from the palette outside the server's documents", () => {
  it("lets a file, unsaved document or notebook cell of a listed language through", () => {
    assert.equal(unservedReason(defaults, file("python")), undefined);
    assert.equal(unservedReason(defaults, file("rust", "untitled")), undefined);
    assert.equal(unservedReason(defaults, file("python", "vscode-notebook-cell")), undefined);
  });

  it("names the language and the setting to add it to, for a language not listed", () => {
    const why = unservedReason(defaults, file("haskell"));
    assert.match(why ?? "", /^haskell is not one of dlm\.languages \(python, go, rust\)/);
  });

  it("says there is no editor to fill, run with none active (the palette offers the commands)", () => {
    assert.match(unservedReason(defaults, undefined) ?? "", /^no text editor is active: click into a file or a notebook cell/);
  });

  it("says a view of another scheme is never filled, whatever its language", () => {
    assert.match(unservedReason(defaults, file("python", "git")) ?? "", /not a git view/);
  });

  it("agrees with serves on every case", () => {
    for (const doc of [file("python"), file("haskell"), file("go", "output"), file("rust", "untitled")]) {
      assert.equal(unservedReason(defaults, doc) === undefined, serves(defaults, doc));
    }
  });
});

describe("sendsSettingChange: a server setting (dlm.model, dlm.steps, ...) changed", () => {
  it("is sent to a running server, and to a starting one once it has started", () => {
    assert.equal(sendsSettingChange("running"), true);
    // its settings were taken at launch: the change must follow the start, not be dropped
    assert.equal(sendsSettingChange("starting"), true);
  });

  it("is sent to no idle, stopped or failed server: its next start takes the settings", () => {
    for (const state of ["idle", "stopped", "failed"] as ClientState[]) assert.equal(sendsSettingChange(state), false);
  });
});
