import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  HeldMessages, isLoadFailureMessage, loadFailureSentence, RETRY_COMMAND, retryOutcome, retrySetting, retryWaitS,
  statusClick,
} from "../retry";

// dlm/status after a failed load (engine.status)
const failed = { model: "/models/mine", loaded: false, loadError: "model '/models/mine' not found",
                 loadRetryS: 12.3, loading: false, device: "cpu" };
const loaded = { model: "/models/mine", loaded: true, loadError: null, loadRetryS: null, device: "cuda:0" };

describe("retryWaitS: when the server tries a failed load again", () => {
  it("counts down from the status's loadRetryS, in whole seconds, to 0", () => {
    assert.equal(retryWaitS(failed, 1000, 1000), 13);
    assert.equal(retryWaitS(failed, 1000, 6000), 8);
    assert.equal(retryWaitS(failed, 1000, 60000), 0);
  });

  it("is nothing where no load failed, a load is under way, or the server does not say (an older one)", () => {
    assert.equal(retryWaitS(loaded, 0, 0), undefined);
    assert.equal(retryWaitS({ ...failed, loading: true }, 0, 0), undefined);
    assert.equal(retryWaitS({ ...failed, loadRetryS: undefined }, 0, 0), undefined);
    assert.equal(retryWaitS({ ...failed, reachable: false }, 0, 0), undefined);  // a service down: polled
  });
});

describe("statusClick: the status bar item's click", () => {
  it("retries a failed load", () => {
    assert.equal(statusClick("running", failed), RETRY_COMMAND);
    assert.equal(RETRY_COMMAND, "dlm-lsp.retryLoad");
  });

  it("shows the status otherwise: loaded, loading, unreachable, or no server running", () => {
    assert.equal(statusClick("running", loaded), "dlm-lsp.showStatus");
    assert.equal(statusClick("running", { ...failed, loading: true }), "dlm-lsp.showStatus");
    assert.equal(statusClick("running", { ...failed, reachable: false }), "dlm-lsp.showStatus");
    assert.equal(statusClick("stopped", failed), "dlm-lsp.showStatus");
    assert.equal(statusClick("idle", undefined), "dlm-lsp.showStatus");
  });
});

describe("retryOutcome: what DLM: Retry loading the model says of the server's answer", () => {
  it("a model now loaded, and where", () => {
    assert.deepEqual(retryOutcome(loaded), { text: "dlm-lsp: model mine loaded on cuda:0", failed: false });
  });

  it("a load that failed again, with the server's reason", () => {
    assert.deepEqual(retryOutcome({ ...failed, loadRetryS: 24 }),
                     { text: "dlm-lsp: model mine failed to load again: model '/models/mine' not found", failed: true });
  });

  it("a remote service still unreachable", () => {
    const down = { model: "remote engine at http://h:8000", loaded: false, reachable: false,
                   loadError: "cannot reach http://h:8000: Connection refused" };
    assert.deepEqual(retryOutcome(down), {
      text: "dlm-lsp: h:8000 is still unreachable: cannot reach http://h:8000: Connection refused", failed: true });
  });
});

describe("retrySetting: what a failed retry's Open settings opens", () => {
  it("the model where it failed to load, the service's URL where the service does not answer", () => {
    assert.equal(retrySetting(failed), "dlm.model");
    assert.equal(retrySetting({ ...failed, reachable: false }), "dlm.remoteUrl");
  });

  it("the device where the server says CUDA is not there", () => {
    const cuda = "device 'cuda' was requested but CUDA is not available here; set device to 'auto' or 'cpu'";
    assert.equal(retrySetting({ ...failed, loadError: cuda }), "dlm.device");
  });
});

describe("loadFailureSentence: what DLM: Show server status adds for a failed load", () => {
  it("the reason, when the server tries again, and the command that tries now", () => {
    assert.equal(loadFailureSentence(failed, 13),
                 "the model failed to load: model '/models/mine' not found; it is tried again at the next fill "
                 + "after 13 s, or now with DLM: Retry loading the model");
    assert.match(loadFailureSentence(failed, 0), /tried again at the next fill, or now/);
  });
});

describe("the server's error message of a failed load", () => {
  it("is the one that says the status's loadError (server.py: `dlm-lsp: {exc}`)", () => {
    assert.equal(isLoadFailureMessage("dlm-lsp: model '/models/mine' not found", failed), true);
    assert.equal(isLoadFailureMessage("dlm-lsp keeps at most 200 open documents ...", failed), false);
    assert.equal(isLoadFailureMessage("dlm-lsp: model '/models/mine' not found", loaded), false);
    assert.equal(isLoadFailureMessage("dlm-lsp: model '/models/mine' not found", undefined), false);
  });

  it("is held back while a retry is out, which says the failure itself; any other is shown at its answer", () => {
    const held = new HeldMessages();
    assert.equal(held.offer("dlm-lsp: model '/models/mine' not found"), false);  // no retry out: shown now
    held.hold();
    assert.equal(held.offer("dlm-lsp: model '/models/mine' not found"), true);
    assert.equal(held.offer("dlm-lsp keeps at most 200 open documents"), true);
    assert.deepEqual(held.release(failed), ["dlm-lsp keeps at most 200 open documents"]);
    assert.equal(held.offer("dlm-lsp: later"), false);  // released: shown as they come
  });

  it("is held back too where the retry found the service still unreachable, which the answer says", () => {
    const down = { model: "remote engine at http://h:8000", loaded: false, reachable: false, loading: false,
                   loadError: "cannot reach http://h:8000: Connection refused" };
    const held = new HeldMessages();
    held.hold();
    held.offer("dlm-lsp: cannot reach http://h:8000: Connection refused");  // server.py's preload
    held.offer("dlm-lsp keeps at most 200 open documents");
    assert.deepEqual(held.release(down), ["dlm-lsp keeps at most 200 open documents"]);
    assert.match(retryOutcome(down).text, /still unreachable: cannot reach http:\/\/h:8000: Connection refused$/);
  });

  it("is shown after all when the retry got no answer (an older server has no dlm/retryLoad)", () => {
    const held = new HeldMessages();
    held.hold();
    held.offer("dlm-lsp: model '/models/mine' not found");
    assert.deepEqual(held.release(undefined), ["dlm-lsp: model '/models/mine' not found"]);
  });
});
