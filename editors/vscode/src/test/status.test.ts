import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  type ClientState, endedWithConnection, failurePopsUp, fillLatency, formatMs, loadFinding, modelLabel, stateSentence, statusShown,
  statusText, statusTooltip, suggestionLatency,
} from "../status";

describe("status bar", () => {
  const loaded = { model: "default", loaded: true, device: "cpu", p50Ms: 95.4, p95Ms: 140, fills: 3 };

  it("shows model, device and the last fill's latency", () => {
    assert.equal(statusText("running", loaded, 120), "$(sparkle) dlm: default · cpu · 120 ms");
  });

  it("falls back to the server's median before the extension has timed a fill", () => {
    assert.equal(statusText("running", loaded), "$(sparkle) dlm: default · cpu · 95 ms");
  });

  it("says a model that failed to load failed, with the reason in the tooltip", () => {
    const failed = { model: "/models/mine", loaded: false, loadError: "model '/models/mine' not found", device: "auto" };
    assert.equal(statusText("running", failed), "$(error) dlm: mine failed to load");
    assert.match(statusTooltip("running", failed), /load failed: model '\/models\/mine' not found/);
    // not "(not loaded yet)" beside it: nothing is loading
    assert.match(statusTooltip("running", failed), /model: \/models\/mine \(failed to load\)/);
  });

  it("counts a failed load down to its next try, and says how to try now", () => {
    const failed = { model: "/models/mine", loaded: false, loadError: "not found", loadRetryS: 12, device: "cpu" };
    assert.equal(statusText("running", failed, undefined, true, false, { retryInS: 12 }),
                 "$(error) dlm: mine failed to load · retry in 12 s");
    assert.equal(statusText("running", failed, undefined, true, false, { retryInS: 0 }),
                 "$(error) dlm: mine failed to load");
    const tooltip = statusTooltip("running", failed, undefined, true, { retryInS: 12 });
    assert.match(tooltip, /load failed: not found\ntried again at the next fill after 12 s; now: click, or DLM: Retry loading the model/);
    assert.match(statusTooltip("running", failed), /tried again at the next fill; now: click/);
  });

  it("says a failed load tried again is loading, not failed, with the last failure in the tooltip", () => {
    // dlm/status while dlm/retryLoad (or a fill after the wait) loads: loadError is kept until it succeeds
    const again = { model: "/models/mine", loaded: false, loadError: "not found", loadRetryS: 0, loading: true, device: "cpu" };
    assert.equal(statusText("running", again, undefined, true, false, { retryInS: 0 }), "$(loading~spin) dlm: loading mine");
    const tooltip = statusTooltip("running", again);
    assert.match(tooltip, /model: \/models\/mine \(loading\)/);
    assert.match(tooltip, /last load failed: not found/);
    assert.doesNotMatch(tooltip, /click/);
    assert.equal(loadFinding(again), "loading");  // followed until it ends
  });

  it("shows suggestions that time out or run out of memory as a warning in place of the latency", () => {
    const trouble = { cause: "timeout" as const, message: "infill timed out after 60000 ms" };
    assert.equal(statusText("running", loaded, 120, true, false, { trouble }), "$(warning) dlm: default · cpu · timed out");
    assert.equal(statusText("running", loaded, 120, true, true, { trouble }), "$(loading~spin) dlm: default · cpu · timed out");
    assert.equal(statusText("running", loaded, 120, true, false, { trouble: { cause: "memory", message: "oom" } }),
                 "$(warning) dlm: default · cpu · out of memory");
    assert.match(statusTooltip("running", loaded, 120, true, { trouble }),
                 /last suggestion failed: infill timed out after 60000 ms \(shown until a fill succeeds\)/);
    // a worse state, or suggestions turned off, is said instead
    assert.match(statusText("stopped", loaded, 120, true, false, { trouble }), /stopped/);
    assert.match(statusText("running", loaded, 120, false, false, { trouble }), /suggestions off/);
  });

  it("says a remote service that cannot be reached is unreachable, not that a model failed to load", () => {
    // dlm/status of `backend: remote` with nothing at remoteUrl (RemoteEngine.status())
    const down = {
      model: "remote engine at http://127.0.0.1:45989", loaded: false, loading: false, reachable: false,
      loadError: "cannot reach http://127.0.0.1:45989: Connection refused; fills will run on the local "
        + "engine until it answers (setting remoteFallback)", device: null, backend: "remote",
    };
    assert.equal(statusText("running", down), "$(error) dlm: 127.0.0.1:45989 unreachable");
    const tooltip = statusTooltip("running", down);
    assert.match(tooltip, /model: remote engine at http:\/\/127\.0\.0\.1:45989 \(unreachable\)/);
    assert.match(tooltip, /unreachable: cannot reach .*fills will run on the local engine/);
    assert.doesNotMatch(tooltip, /load failed|not loaded yet/);
    assert.equal(loadFinding(down), "down");  // polled until it answers (poll.ts)
    const up = { model: "default", loaded: true, loadError: null, reachable: true, device: "cuda:0" };
    assert.equal(statusText("running", up, 80), "$(sparkle) dlm: default · cuda:0 · 80 ms");
  });

  it("says the model is loading until the server has it", () => {
    assert.equal(statusText("running", { model: "/models/mine", loaded: false, device: "auto" }),
                 "$(loading~spin) dlm: loading mine");
  });

  it("says when the server is starting, stopped or failed", () => {
    assert.match(statusText("starting"), /starting/);
    assert.match(statusText("stopped", loaded), /stopped/);
    assert.match(statusText("failed", loaded), /failed/);
  });

  it("says a server never started is not started, without a spinner, and what starts it", () => {
    assert.equal(statusText("idle"), "$(circle-outline) dlm: not started");
    const tooltip = statusTooltip("idle");
    assert.match(tooltip, /not started/);
    assert.match(tooltip, /dlm\.languages/);
    assert.match(tooltip, /click/);
  });

  it("says how to start a stopped or failed server again, and shows no status of the server that is gone", () => {
    for (const state of ["stopped", "failed"] as const) {
      const tooltip = statusTooltip(state, loaded, 120);
      assert.match(tooltip, /DLM: Restart server/);
      assert.doesNotMatch(tooltip, /model: default \(loaded\)|last fill|fills: 3/);
    }
  });

  it("names a model directory by its last component", () => {
    assert.equal(modelLabel("/home/me/models/tiny/"), "tiny");
    assert.equal(modelLabel("C:\\models\\big"), "big");
    assert.equal(modelLabel(undefined), "?");
  });

  it("formats long latencies in seconds", () => {
    assert.equal(formatMs(1530), "1.5 s");
    assert.equal(formatMs(12.4), "12 ms");
  });

  it("puts the details in the tooltip", () => {
    const tooltip = statusTooltip("running", loaded, 120);
    assert.match(tooltip, /device: cpu/);
    assert.match(tooltip, /last fill: 120 ms/);
    assert.match(tooltip, /p50 \/ p95: 95 ms \/ 140 ms/);
  });

  it("spins its icon while a suggestion is being computed", () => {
    assert.equal(statusText("running", loaded, 120, true, true), "$(loading~spin) dlm: default · cpu · 120 ms");
    assert.match(statusText("running", loaded, 120, true, false), /^\$\(sparkle\)/);
  });

  it("says so when inline suggestions are turned off, instead of a latency", () => {
    assert.equal(statusText("running", loaded, 120, false),
                 "$(eye-closed) dlm: default · cpu · suggestions off");
    assert.match(statusTooltip("running", loaded, 120, false), /inline suggestions: off/);
    assert.doesNotMatch(statusTooltip("running", loaded, 120), /suggestions: off/);
    assert.match(statusText("stopped", loaded, 120, false), /stopped/);  // a worse state wins
  });

  it("spins its icon for a command run while suggestions are off, which it still says", () => {
    // DLM: Fill holes with ghost text paused: the paused eye stood still through the fill
    assert.equal(statusText("running", loaded, 120, false, true),
                 "$(loading~spin) dlm: default · cpu · suggestions off");
  });
});

describe("statusShown: where the status bar item shows", () => {
  const languages = ["python", "go"];
  const file = (languageId: string, scheme = "file") => ({ languageId, uri: { scheme } });

  it("hides an idle server in a document it does not serve: a window of Markdown or JSON shows nothing", () => {
    assert.equal(statusShown("idle", languages, file("markdown")), false);
    assert.equal(statusShown("idle", languages, file("json", "untitled")), false);
    assert.equal(statusShown("idle", languages, file("python", "git")), false);  // a diff's old side: never sent
  });

  it("hides an idle server with no editor in front (a settings page, an empty window)", () => {
    assert.equal(statusShown("idle", languages, undefined), false);
    assert.equal(statusShown("idle", languages, undefined, true), false);
  });

  it("shows an idle server in a document it serves", () => {
    assert.equal(statusShown("idle", languages, file("python")), true);
    assert.equal(statusShown("idle", languages, file("go", "untitled")), true);
  });

  it("shows an idle server in a document a fill command was refused in, whose click says why", () => {
    assert.equal(statusShown("idle", languages, file("perl"), true), true);
  });

  it("shows a server that was started whatever the editor, or none: it holds a model, or says how to start again", () => {
    for (const state of ["starting", "running", "stopped", "failed"] as ClientState[]) {
      assert.equal(statusShown(state, languages, file("markdown")), true, state);
      assert.equal(statusShown(state, languages, undefined), true, state);
      assert.equal(statusShown(state, [], file("json")), true, state);
    }
  });
});

describe("loadFinding: when polling dlm/status can stop", () => {
  it("stops once the model has loaded, or its load has failed", () => {
    assert.equal(loadFinding({ model: "default", loaded: true, device: "cpu" }), "over");
    assert.equal(loadFinding({ model: "/m", loaded: false, loadError: "not found", device: "auto" }), "over");
  });

  it("keeps asking while the model is loading, or before any answer", () => {
    assert.equal(loadFinding({ model: "default", loaded: false, device: "auto" }), "loading");
    assert.equal(loadFinding({ model: "default", loaded: false, loadError: null, device: "auto" }), "loading");
    assert.equal(loadFinding(undefined), "loading");
  });

  it("keeps asking while a remote service does not answer, until it does", () => {
    const down = { model: "sglang server at http://h:30000", loaded: false, reachable: false,
                   loadError: "cannot reach http://h:30000: timed out", device: null };
    assert.equal(loadFinding(down), "down");
    assert.equal(loadFinding({ ...down, loaded: true, reachable: true, loadError: null }), "over");
  });
});

describe("fillLatency: which commands set \"last fill\"", () => {
  it("a Fill holes that found no holes leaves it as it was: no fill ran", () => {
    assert.equal(fillLatency({ holes: 0 }, 4), undefined);
  });

  it("a cancelled or failed request (no answer) leaves it as it was", () => {
    assert.equal(fillLatency(undefined, 900), undefined);
  });

  it("a fill that ran sets it: the server's own timing where it gave one, else the command's", () => {
    assert.equal(fillLatency({ stats: { ms: 312.5 } }, 340), 312.5);
    assert.equal(fillLatency({ holes: 2 }, 1800), 1800);
    assert.equal(fillLatency({}, 950), 950);  // Rewrite block: a fill ran whether applied or not
  });
});

describe("suggestionLatency: which ghost text answers set \"last fill\"", () => {
  it("one with suggestions sets it to the time it took", () => {
    assert.equal(suggestionLatency(2, 340), 340);
  });

  it("one with none leaves it as it was: the server answers at an accepted fill's end with no fill", () => {
    assert.equal(suggestionLatency(0, 3), undefined);
  });
});

describe("endedWithConnection: a request the server's end cut short is no warning", () => {
  it("the connection disposed (a restart) or inactive", () => {
    assert.equal(endedWithConnection(-32097), true);  // "Pending response rejected since connection got disposed"
    assert.equal(endedWithConnection(-32096), true);
  });

  it("not the server's own errors, nor a cancel or a stale fill, said otherwise", () => {
    for (const code of [-32800, -32801, -32602, -32603, -32001]) assert.equal(endedWithConnection(code), false);
  });
});

describe("failurePopsUp: which failed requests are a notification", () => {
  it("not ghost text's nor completion items': VS Code asks at every pause in typing", () => {
    // with dlm.model naming no model, each pause popped up "Request
    // textDocument/inlineCompletion failed." (e2e/run.sh --model-missing), beside the
    // server's notification of the failed load and the status bar's "failed to load"
    assert.equal(failurePopsUp("textDocument/inlineCompletion"), false);
    assert.equal(failurePopsUp("textDocument/completion"), false);
  });

  it("every other request's, as the language client shows them", () => {
    assert.equal(failurePopsUp("textDocument/codeAction"), true);
    assert.equal(failurePopsUp("workspace/executeCommand"), true);
  });
});

describe("stateSentence: what DLM: Show server status says of a server not running", () => {
  it("says a failed start failed to start, where its error is, and the way back", () => {
    // dlm.server.path naming no file (e2e, spawn ENOENT): it read "the dlm-lsp server is failed"
    assert.equal(stateSentence("failed"),
                 "the dlm-lsp server failed to start (the error above says why): DLM: Restart server starts it again");
  });

  it("says a server that exited has stopped, and a start under way is starting", () => {
    assert.match(stateSentence("stopped"), /^the dlm-lsp server has stopped .*DLM: Restart server starts it again$/);
    assert.equal(stateSentence("starting"), "the dlm-lsp server is starting");
  });
});
