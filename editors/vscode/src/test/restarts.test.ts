import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type Ending, Restarts } from "../restarts";

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
});
