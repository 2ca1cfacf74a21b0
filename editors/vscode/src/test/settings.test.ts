import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import {
  MESSAGE_WRITE_ERROR, parseAddress, PENDING_RESPONSE_REJECTED, serverCommand, serverSettingKeys, serverSettings, SERVER_BUSY,
  hideSecrets, startFailureHint, toggleScope, UNAUTHORIZED, withToken,
} from "../settings";
import { StartTimeout } from "../lifecycle";

// Compiled to out/test/, so the manifest is two folders up.
const manifest = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
const properties = (id: string): Record<string, { default?: unknown }> =>
  manifest.contributes.configuration.find((s: { id: string }) => s.id === id).properties;

describe("serverSettingKeys: the manifest's server section", () => {
  const keys = serverSettingKeys(manifest);

  it("lists the server's settings by their wire names", () => {
    for (const key of ["model", "device", "steps", "drafts", "holeMarker", "stepsSingleLine"]) {
      assert.ok(keys.includes(key), key);
    }
  });

  it("leaves out everything that only the extension reads", () => {
    for (const key of Object.keys(properties("dlm.client"))) {
      assert.ok(!keys.includes(key.slice("dlm.".length)), key);
    }
  });

  it("gives every server setting a default (null: the server's own)", () => {
    for (const [key, prop] of Object.entries(properties("dlm.server"))) {
      assert.ok("default" in prop, key);
    }
  });

  it("is empty for a manifest without one", () => {
    assert.deepEqual(serverSettingKeys({}), []);
    assert.deepEqual(serverSettingKeys({ contributes: { configuration: { properties: { "dlm.x": {} } } } }), []);
  });
});

describe("serverSettings: what the server is sent", () => {
  it("sends every server key, defaults included, so a removed setting goes back to its default", () => {
    const values: Record<string, unknown> = { model: "default", steps: null, drafts: true };
    assert.deepEqual(serverSettings(["model", "steps", "drafts"], (k) => values[k]),
                     { model: "default", steps: null, drafts: true });
  });

  it("skips keys VS Code knows nothing about", () => {
    assert.deepEqual(serverSettings(["model", "unknown"], (k) => (k === "model" ? "m" : undefined)),
                     { model: "m" });
  });

  it("maps the manifest's defaults to the server defaults' JSON", () => {
    const server = properties("dlm.server");
    const sent = serverSettings(serverSettingKeys(manifest), (k) => server[`dlm.${k}`].default);
    assert.equal(sent.model, "default");
    assert.equal(sent.device, "auto");
    assert.equal(sent.steps, null);
    assert.equal(sent.drafts, false);
  });
});

describe("serverCommand: how the server is started", () => {
  it("defaults to dlm-lsp on PATH with no arguments", () => {
    assert.deepEqual(serverCommand("", []), { command: "dlm-lsp", args: [] });
  });

  it("expands ${workspaceFolder} and ~", () => {
    assert.deepEqual(serverCommand("${workspaceFolder}/.venv/bin/dlm-lsp", ["--log", "~/dlm.log"], "/w", "/h"),
                     { command: "/w/.venv/bin/dlm-lsp", args: ["--log", "/h/dlm.log"] });
  });

  it("leaves ${workspaceFolder} as written when no folder is open", () => {
    assert.equal(serverCommand("${workspaceFolder}/x", []).command, "${workspaceFolder}/x");
  });
});

describe("parseAddress: where a shared server listens", () => {
  it("reads HOST:PORT, IPv6 in brackets, around blanks", () => {
    assert.deepEqual(parseAddress("127.0.0.1:2087"), { host: "127.0.0.1", port: 2087 });
    assert.deepEqual(parseAddress(" gpu-box.lan:9000 "), { host: "gpu-box.lan", port: 9000 });
    assert.deepEqual(parseAddress("[::1]:2087"), { host: "::1", port: 2087 });
  });

  it("says why an address is not one", () => {
    for (const bad of ["localhost", "127.0.0.1:", ":2087", "host:70000", "host:0"]) {
      const parsed = parseAddress(bad);
      assert.ok("error" in parsed && parsed.error.includes("HOST:PORT"), bad);
    }
  });
});

describe("hideSecrets: a trace of the messages shows no token", () => {
  it("hides the shared server's token and remoteToken, and nothing else", () => {
    const traced = "Sending request 'initialize - (0)'.\n"
      + 'Params: {\n    "initializationOptions": {\n        "token": "s3 \\"q\\"",\n'
      + '        "remoteToken":"abc",\n        "model": "default"\n    }\n}';
    const shown = hideSecrets(traced);
    assert.ok(!shown.includes("s3") && !shown.includes("abc"), shown);
    assert.match(shown, /"token": "\(hidden\)",/);
    assert.match(shown, /"remoteToken":"\(hidden\)",/);
    assert.match(shown, /"model": "default"/);
    const changed = "Sending notification 'workspace/didChangeConfiguration'.\n"
      + 'Params: {"settings": {"dlm": {"remoteToken": "abc", "steps": 4}}}';
    assert.equal(hideSecrets(changed), changed.replace('"abc"', '"(hidden)"'));
  });

  it("leaves a progress message's token as it is: it names the progress, and is no secret", () => {
    const progress = "Received notification '$/progress'.\nParams: {\"token\": \"dlm-lsp-holes-3\"}";
    assert.equal(hideSecrets(progress), progress);
  });
});

describe("withToken: a shared server's token rides on initializationOptions", () => {
  const settings = { model: "default" };

  it("adds the setting's token, else the environment's, for a shared server", () => {
    assert.deepEqual(withToken(settings, "gpu:2087", " s3 ", {}), { model: "default", token: "s3" });
    assert.deepEqual(withToken(settings, "gpu:2087", "", { DLM_LSP_TCP_TOKEN: "env" }),
                     { model: "default", token: "env" });
    assert.deepEqual(withToken(settings, "gpu:2087", "mine", { DLM_LSP_TCP_TOKEN: "env" }),
                     { model: "default", token: "mine" });
  });

  it("sends no token to a server of its own, or when there is none", () => {
    assert.deepEqual(withToken(settings, "", "s3", { DLM_LSP_TCP_TOKEN: "env" }), settings);
    assert.deepEqual(withToken(settings, "gpu:2087", "", {}), settings);
  });
});


describe("toggling a setting", () => {
  it("writes where the setting is defined, so the change shows", () => {
    assert.equal(toggleScope({ globalValue: true, workspaceValue: false }), "workspace");
    assert.equal(toggleScope({ workspaceValue: false, workspaceFolderValue: true }), "folder");
  });

  it("writes the user settings when nothing more specific defines it", () => {
    assert.equal(toggleScope({ globalValue: false }), "user");
    assert.equal(toggleScope({}), "user");
    assert.equal(toggleScope(undefined), "user");
  });
});

describe("startFailureHint: what to do when the server cannot be reached or refuses", () => {
  it("names the token setting when a shared server refuses the token", () => {
    const refused = Object.assign(new Error("wrong token for this dlm-lsp server"), { code: UNAUTHORIZED });
    assert.match(startFailureHint("gpu:2087", refused), /dlm\.server\.token/);
  });

  it("says to wait when a shared server is at its --max-clients", () => {
    const busy = Object.assign(new Error("serving 64 clients"), { code: SERVER_BUSY });
    assert.match(startFailureHint("gpu:2087", busy), /try again later/);
  });

  it("says a server that exited before it answered exited, instead of 'set dlm.server.path' to the executable it ran", () => {
    // e.g. dlm.server.path a Python without the server's packages: ModuleNotFoundError at import
    const exited = Object.assign(new Error("Pending response rejected since connection got disposed"),
                                 { code: PENDING_RESPONSE_REJECTED });
    const hint = startFailureHint("", exited);
    assert.match(hint, /exited before it answered/);
    assert.match(hint, /dlm-lsp output/);
    assert.doesNotMatch(hint, /dlm\.server\.path/);
    assert.match(startFailureHint("gpu:2087", exited), /closed the connection before it answered/);
  });

  it("says so too when the server exited before initialize could even be sent to it", () => {
    // a process that exits at once: which error comes depends on which the client sees first
    const gone = Object.assign(new Error("Cannot call write after a stream was destroyed"),
                               { code: MESSAGE_WRITE_ERROR });
    assert.match(startFailureHint("", gone), /exited before it answered/);
    assert.doesNotMatch(startFailureHint("", gone), /dlm\.server\.path/);
    assert.match(startFailureHint("gpu:2087", gone), /closed the connection before it answered/);
  });

  it("asks whether the shared server is running and not stuck when nothing answered in time", () => {
    const hint = startFailureHint("gpu:2087", new StartTimeout(20000));
    assert.match(hint, /not stuck/);
    assert.match(hint, /dlm\.server\.address/);
  });

  it("says to start the server, or to set the executable, otherwise", () => {
    assert.match(startFailureHint("gpu:2087", new Error("connect ECONNREFUSED")), /Start `dlm-lsp --tcp` there/);
    assert.match(startFailureHint("", Object.assign(new Error("spawn ENOENT"), { code: "ENOENT" })),
                 /dlm\.server\.path/);
  });
});
