import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Debouncer, Handover, InFlight, Superseder } from "../debounce";
import { FakeTimers } from "./fake_timers";

/** A cancellation token the test can cancel. */
function token() {
  const listeners: (() => void)[] = [];
  return {
    isCancellationRequested: false,
    onCancellationRequested(listener: () => void) {
      listeners.push(listener);
      return { dispose: () => listeners.splice(listeners.indexOf(listener), 1) };
    },
    cancel() {
      this.isCancellationRequested = true;
      for (const l of [...listeners]) l();
    },
  };
}

describe("Debouncer", () => {
  it("lets a lone request through once the delay has passed, not before", async () => {
    const timers = new FakeTimers();
    const debouncer = new Debouncer(() => 250, timers);
    let settled: boolean | undefined;
    void debouncer.wait().then((go) => (settled = go));
    await timers.advance(249);
    assert.equal(settled, undefined);
    await timers.advance(1);
    assert.equal(settled, true);
  });

  it("of a burst of keystrokes sends only the last", async () => {
    const timers = new FakeTimers();
    const debouncer = new Debouncer(() => 100, timers);
    const results = [debouncer.wait(), debouncer.wait(), debouncer.wait()];
    await timers.advance(100);
    assert.deepEqual(await Promise.all(results), [false, false, true]);
  });

  it("drops a request whose token is cancelled while it waits, at once", async () => {
    const timers = new FakeTimers();
    const debouncer = new Debouncer(() => 100, timers);
    const t = token();
    const result = debouncer.wait(t);
    t.cancel();
    assert.equal(await result, false);
  });

  it("never sends a request that was cancelled before it asked", async () => {
    const t = token();
    t.cancel();
    assert.equal(await new Debouncer(() => 100, new FakeTimers()).wait(t), false);
  });

  it("with a delay of 0 sends every request immediately", async () => {
    const debouncer = new Debouncer(() => 0, new FakeTimers());
    assert.deepEqual(await Promise.all([debouncer.wait(), debouncer.wait()]), [true, true]);
  });

  it("reads the delay at each request, so a settings change applies to the next one", async () => {
    const timers = new FakeTimers();
    let delay = 100;
    const debouncer = new Debouncer(() => delay, timers);
    delay = 10;
    let settled: boolean | undefined;
    void debouncer.wait().then((go) => (settled = go));
    await timers.advance(10);
    assert.equal(settled, true);
  });

  it("supersede() drops every request still waiting", async () => {
    const timers = new FakeTimers();
    const debouncer = new Debouncer(() => 50, timers);
    const result = debouncer.wait();
    debouncer.supersede();
    await timers.advance(50);
    assert.equal(await result, false);
  });
});

describe("Superseder", () => {
  const request = () => ({ cancelled: false, cancel() { this.cancelled = true; } });

  it("cancels the request in flight for a document when a newer one starts", () => {
    const inFlight = new Superseder<ReturnType<typeof request>>();
    const first = request();
    const second = request();
    inFlight.begin("file:///a.py", first);
    inFlight.begin("file:///a.py", second);
    assert.equal(first.cancelled, true);
    assert.equal(second.cancelled, false);
  });

  it("leaves other documents' requests alone", () => {
    const inFlight = new Superseder<ReturnType<typeof request>>();
    const a = request();
    inFlight.begin("file:///a.py", a);
    inFlight.begin("file:///b.py", request());
    assert.equal(a.cancelled, false);
    assert.equal(inFlight.size, 2);
  });

  it("forgets a finished request but keeps a newer one", () => {
    const inFlight = new Superseder<ReturnType<typeof request>>();
    const first = request();
    const second = request();
    inFlight.begin("u", first);
    inFlight.begin("u", second);
    inFlight.end("u", first); // the superseded one finishing late must not drop the newer one
    assert.equal(inFlight.size, 1);
    inFlight.cancel("u");
    assert.equal(second.cancelled, true);
    assert.equal(inFlight.size, 0);
  });

  it("cancels every document's request when suggestions are turned off", () => {
    const inFlight = new Superseder<ReturnType<typeof request>>();
    const a = request();
    const b = request();
    inFlight.begin("file:///a.py", a);
    inFlight.begin("file:///b.py", b);
    inFlight.cancelAll();
    assert.deepEqual([a.cancelled, b.cancelled, inFlight.size], [true, true, 0]);
  });
});

describe("InFlight: ghost text's suggestions and the commands the user ran", () => {
  const request = () => ({ cancelled: false, cancel() { this.cancelled = true; } });

  it("a suggestion asked for while a command runs in the document leaves the command running", () => {
    const inFlight = new InFlight<ReturnType<typeof request>>();
    const command = request();
    inFlight.beginCommand("file:///a.py", command);  // Fill holes, seconds on a CPU
    inFlight.beginSuggestion("file:///a.py", request());  // a keystroke's, its debounce over
    assert.equal(command.cancelled, false);
    assert.equal(inFlight.size, 2);
  });

  it("a command cancels the document's suggestion in flight, and its earlier command", () => {
    const inFlight = new InFlight<ReturnType<typeof request>>();
    const suggestion = request();
    const first = request();
    inFlight.beginSuggestion("u", suggestion);
    inFlight.beginCommand("u", first);
    const second = request();
    inFlight.beginCommand("u", second);
    assert.deepEqual([suggestion.cancelled, first.cancelled, second.cancelled], [true, true, false]);
  });

  it("a newer suggestion supersedes the one in flight", () => {
    const inFlight = new InFlight<ReturnType<typeof request>>();
    const first = request();
    inFlight.beginSuggestion("u", first);
    inFlight.beginSuggestion("u", request());
    assert.equal(first.cancelled, true);
  });

  it("turning suggestions off cancels the suggestions, not the commands", () => {
    const inFlight = new InFlight<ReturnType<typeof request>>();
    const command = request();
    const suggestion = request();
    inFlight.beginCommand("file:///a.py", command);
    inFlight.beginSuggestion("file:///b.py", suggestion);
    inFlight.cancelSuggestions();
    assert.deepEqual([command.cancelled, suggestion.cancelled, inFlight.size], [false, true, 1]);
  });

  it("forgets each request once it ends", () => {
    const inFlight = new InFlight<ReturnType<typeof request>>();
    const command = request();
    const suggestion = request();
    inFlight.beginCommand("u", command);
    inFlight.beginSuggestion("u", suggestion);
    inFlight.end("u", suggestion);
    inFlight.end("u", command);
    assert.equal(inFlight.size, 0);
  });
});

describe("Handover: a ghost text and a completion request of one place share one fill", () => {
  const request = () => ({ cancelled: false, cancel() { this.cancelled = true; } });
  const settled = async (promise: Promise<void> | undefined) => {
    let done = false;
    void promise?.then(() => { done = true; });
    await new Promise((resolve) => setImmediate(resolve));
    return done;
  };

  it("keeps the first request running when VS Code gives up on it for the other kind's of its place", async () => {
    const handover = new Handover<ReturnType<typeof request>>();
    const ghost = request();
    handover.begin("a.py", "6:2:9", ghost);
    const waiting = handover.waitFor("a.py", "6:2:9");
    handover.cancel("a.py", ghost);  // VS Code: 750 ms without ghost text, suggestions instead
    assert.equal(ghost.cancelled, false);
    assert.equal(await settled(waiting), false);
    handover.end("a.py", ghost);
    assert.equal(await settled(waiting), true);  // the second request goes now, answered from the fill
  });

  it("passes VS Code's cancellation on when no completion request waits", () => {
    const handover = new Handover<ReturnType<typeof request>>();
    const ghost = request();
    handover.begin("a.py", "6:2:9", ghost);
    handover.cancel("a.py", ghost);
    assert.equal(ghost.cancelled, true);
  });

  it("lets a completion request of another place, version or document go at once", () => {
    const handover = new Handover<ReturnType<typeof request>>();
    const ghost = request();
    handover.begin("a.py", "6:2:9", ghost);
    assert.equal(handover.waitFor("a.py", "7:2:10"), undefined);
    assert.equal(handover.waitFor("b.py", "6:2:9"), undefined);
    handover.cancel("a.py", ghost);
    assert.equal(ghost.cancelled, true);  // nobody waited for it
  });

  it("lets it go at once once the ghost text's request has ended", () => {
    const handover = new Handover<ReturnType<typeof request>>();
    const ghost = request();
    handover.begin("a.py", "6:2:9", ghost);
    handover.end("a.py", ghost);
    assert.equal(handover.waitFor("a.py", "6:2:9"), undefined);
  });

  it("waits for the newest request of a document, not an older one ending", async () => {
    const handover = new Handover<ReturnType<typeof request>>();
    const old = request();
    const newer = request();
    handover.begin("a.py", "5:2:8", old);
    handover.begin("a.py", "6:2:9", newer);
    const waiting = handover.waitFor("a.py", "6:2:9");
    handover.end("a.py", old);
    assert.equal(await settled(waiting), false);
    handover.end("a.py", newer);
    assert.equal(await settled(waiting), true);
  });
});
