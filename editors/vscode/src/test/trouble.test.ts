import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { troubleLine, troubleMessage, troubleOf, Troubles } from "../trouble";

/** What the language client rejects a failed request with: a ResponseError's code and message. */
const answer = (code: number, message: string) => Object.assign(new Error(message), { code });
const timedOut = answer(-32003, "infill timed out after 60000 ms");
const outOfMemory = answer(-32002, "out of memory while denoising on cuda: try fewer candidates, a shorter span, or device 'cpu'");

describe("troubleOf: which failures of a suggestion are news the status does not say", () => {
  it("a fill past the server's timeoutMs, one out of memory, a server too busy", () => {
    assert.deepEqual(troubleOf(timedOut), { cause: "timeout", message: "infill timed out after 60000 ms" });
    assert.equal(troubleOf(outOfMemory)?.cause, "memory");
    assert.equal(troubleOf(answer(-32004, "server busy"))?.cause, "busy");
  });

  it("not a failed load nor a service down (the status bar says those), nor a cancel", () => {
    assert.equal(troubleOf(answer(-32001, "model unavailable: not found")), undefined);
    assert.equal(troubleOf(answer(-32005, "cannot reach http://h:30000")), undefined);
    assert.equal(troubleOf(answer(-32800, "fill stopped")), undefined);
    assert.equal(troubleOf(new Error("Canceled")), undefined);
    assert.equal(troubleOf(undefined), undefined);
  });
});

describe("Troubles: a warning until a fill succeeds, said once per cause", () => {
  it("shows a timeout until the next fill that succeeds", () => {
    const troubles = new Troubles();
    troubles.failed(timedOut);
    assert.equal(troubles.current?.cause, "timeout");
    assert.equal(troubles.succeeded(), true);
    assert.equal(troubles.current, undefined);
    assert.equal(troubles.succeeded(), false);  // nothing shown: nothing to render again
  });

  it("says a cause the first time only, not at every pause in typing, also after a success between", () => {
    const troubles = new Troubles();
    assert.equal(troubles.failed(timedOut)?.tell, true);
    assert.equal(troubles.failed(timedOut)?.tell, false);
    troubles.succeeded();
    assert.equal(troubles.failed(timedOut)?.tell, false);
    assert.equal(troubles.current?.cause, "timeout");  // shown again all the same
  });

  it("says each distinct cause once, and shows the latest", () => {
    const troubles = new Troubles();
    assert.equal(troubles.failed(timedOut)?.tell, true);
    assert.equal(troubles.failed(outOfMemory)?.tell, true);
    assert.equal(troubles.current?.cause, "memory");
    assert.equal(troubles.failed(outOfMemory)?.tell, false);
  });

  it("changes nothing for a failure that is no trouble", () => {
    const troubles = new Troubles();
    troubles.failed(timedOut);
    assert.equal(troubles.failed(answer(-32001, "model unavailable")), undefined);
    assert.equal(troubles.current?.cause, "timeout");
  });

  it("says a cause again after a new server or new settings (a longer timeoutMs may not be enough)", () => {
    const troubles = new Troubles();
    troubles.failed(timedOut);
    troubles.reset();
    assert.equal(troubles.current, undefined);
    assert.equal(troubles.failed(timedOut)?.tell, true);
  });
});

describe("what a trouble says", () => {
  it("the message gives the server's words and opens the setting to change", () => {
    const { text, setting } = troubleMessage(troubleOf(timedOut)!);
    assert.match(text, /^dlm-lsp: suggestions fail: infill timed out after 60000 ms \(.*dlm\.timeoutMs/);
    assert.match(text, /until a fill succeeds/);
    assert.equal(setting, "dlm.timeoutMs");
    assert.equal(troubleMessage(troubleOf(outOfMemory)!).text,
                 "dlm-lsp: suggestions fail: out of memory while denoising on cuda: try fewer candidates, a shorter "
                 + "span, or device 'cpu'. The status bar says so until a fill succeeds.");
  });

  it("the tooltip's line says the failure and when it goes", () => {
    assert.equal(troubleLine(troubleOf(timedOut)!),
                 "last suggestion failed: infill timed out after 60000 ms (shown until a fill succeeds)");
  });
});
