import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type Ending, MAX_EXITS_UNLOADED, Restarts } from "../restarts";

function setup() {
  const said: Ending[] = [];
  return { said, restarts: new Restarts((ending) => said.push(ending)) };
}

describe("Restarts: the client's own restarts of a server that exited, said once", () => {
  it("a restart that fails is said once, with its error, though two starts saw it fail", () => {
    const { said, restarts } = setup();
    restarts.closed(true);                       // the server exited; the client restarts it
    const error = new Error("spawn dlm-lsp ENOENT");
    restarts.startFailed(error);                 // the client's restart ...
    restarts.startFailed(error);                 // ... and a request that waited on it
    assert.deepEqual(said, [{ kind: "restartFailed", error }]);
  });

  it("a restart that succeeds says nothing; a later one that fails is said", () => {
    const { said, restarts } = setup();
    restarts.closed(true);
    restarts.running();
    assert.equal(said.length, 0);
    restarts.closed(true);
    restarts.startFailed("the server exited before it answered");
    assert.deepEqual(said, [{ kind: "restartFailed", error: "the server exited before it answered" }]);
  });

  it("giving up after too many crashes is said, once", () => {
    const { said, restarts } = setup();
    for (let crash = 0; crash < 4; crash++) {
      restarts.closed(true);
      restarts.running();
      restarts.loaded();
    }
    restarts.closed(false);
    assert.deepEqual(said, [{ kind: "gaveUp" }]);
  });

  it("a failed start that is no restart of the client's (the extension's own) is not said here", () => {
    const { said, restarts } = setup();
    restarts.startFailed(new Error("spawn dlm-lsp ENOENT"));  // Lifecycle says this one
    assert.deepEqual(said, []);
  });

  it("a restart that fails because the extension stopped the client is not said", () => {
    const { said, restarts } = setup();
    restarts.closed(true);
    restarts.stopped();                          // DLM: Restart server meanwhile
    restarts.startFailed(new Error("Client is currently stopping"));
    assert.deepEqual(said, []);
  });

  it("a server that exits again and again before its model loads is not restarted for ever", () => {
    // the client's own handler restarts one that exits less than 5 times in 3 minutes: killed
    // at each load (out of memory), a load of 40 s or more, it was restarted for good
    const { said, restarts } = setup();
    const decisions = [];
    for (let exit = 1; exit <= MAX_EXITS_UNLOADED; exit++) {
      decisions.push(restarts.closed(true));      // the client's handler says: restart
      restarts.running();                          // ... and it runs, loading its model
    }
    assert.deepEqual(decisions, [...Array(MAX_EXITS_UNLOADED - 1).fill(true), false]);
    assert.deepEqual(said, [{ kind: "neverLoaded", exits: MAX_EXITS_UNLOADED }]);
  });

  it("a server that had its model loaded between exits is restarted as the client decides", () => {
    const { said, restarts } = setup();
    for (let exit = 0; exit < 3 * MAX_EXITS_UNLOADED; exit++) {
      assert.equal(restarts.closed(true), true);
      restarts.running();
      restarts.loaded();                           // dlm/status said loaded before the next exit
    }
    assert.deepEqual(said, []);
    assert.equal(restarts.closed(false), false);  // the client's own limit still holds
    assert.deepEqual(said, [{ kind: "gaveUp" }]);
  });
});
