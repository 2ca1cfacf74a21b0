import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type Admission, AfterQuiet, CompletionGate, Debouncer, Handover, InFlight, Keystrokes, Superseder } from "../debounce";
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

describe("AfterQuiet: a restart once a setting has stopped changing", () => {
  it("runs the last call's action once, after the calls stop for its time", async () => {
    const timers = new FakeTimers();
    const quiet = new AfterQuiet(1000, timers);
    const ran: string[] = [];
    for (const value of ["127.0.0.1:2", "127.0.0.1:20", "127.0.0.1:2087"]) {
      quiet.call(() => ran.push(value));
      await timers.advance(600);  // the Settings UI writes at each pause in typing
    }
    assert.deepEqual(ran, []);
    await timers.advance(400);
    assert.deepEqual(ran, ["127.0.0.1:2087"]);
    await timers.run(5000);
    assert.deepEqual(ran, ["127.0.0.1:2087"]);
  });

  it("runs nothing once cancelled", async () => {
    const timers = new FakeTimers();
    const quiet = new AfterQuiet(1000, timers);
    let ran = false;
    quiet.call(() => { ran = true; });
    quiet.cancel();
    await timers.run(5000);
    assert.equal(ran, false);
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
  const GRACE = 50;
  function handover() {
    const timers = new FakeTimers();
    return { timers, handover: new Handover<ReturnType<typeof request>>(GRACE, timers) };
  }

  it("keeps the first request running when VS Code gives up on it for the other kind's of its place", async () => {
    const { timers, handover: h } = handover();
    const ghost = request();
    h.begin("a.py", "6:2:9", ghost);
    const waiting = h.waitFor("a.py", "6:2:9", token());
    h.cancel("a.py", ghost);  // VS Code: 750 ms without ghost text, suggestions instead
    await timers.run(1000);
    assert.equal(ghost.cancelled, false);
    assert.equal(await settled(waiting), false);
    h.end("a.py", ghost);
    assert.equal(await settled(waiting), true);  // the second request goes now, answered from the fill
  });

  /** A ghost text's request of 6:2:9 that VS Code cancelled just under `GRACE` ago. */
  async function givenUp() {
    const { timers, handover: h } = handover();
    const ghost = request();
    h.begin("a.py", "6:2:9", ghost);
    h.cancel("a.py", ghost);
    await timers.run(GRACE - 1);
    return { timers, h, ghost };
  }

  it("keeps it running for a request of its place that comes just after VS Code's cancel", async () => {
    const { timers, h, ghost } = await givenUp();
    const waiting = h.waitFor("a.py", "6:2:9", token());
    await timers.run(1000);
    assert.equal(ghost.cancelled, false);
    h.end("a.py", ghost);
    assert.equal(await settled(waiting), true);
  });

  it("passes VS Code's cancellation on once the grace is over and no request waits", async () => {
    const { timers, ghost } = await givenUp();
    assert.equal(ghost.cancelled, false);
    await timers.run(1);
    assert.equal(ghost.cancelled, true);
  });

  it("passes VS Code's cancellation on once the request waiting for the fill is cancelled too", async () => {
    const { timers, handover: h } = handover();
    const ghost = request();
    const completion = token();
    h.begin("a.py", "6:2:9", ghost);
    const waiting = h.waitFor("a.py", "6:2:9", completion);
    h.cancel("a.py", ghost);
    await timers.run(1000);
    completion.cancel();  // VS Code gave up on the completion request too: nobody wants the fill
    assert.equal(ghost.cancelled, true);
    assert.equal(await settled(waiting), true);
  });

  it("stops a request waiting for the fill as soon as it is cancelled, the fill going on for VS Code", async () => {
    const { handover: h } = handover();
    const ghost = request();
    const completion = token();
    h.begin("a.py", "6:2:9", ghost);
    const waiting = h.waitFor("a.py", "6:2:9", completion);
    completion.cancel();
    assert.equal(await settled(waiting), true);
    assert.equal(ghost.cancelled, false);  // VS Code still wants the ghost text
  });

  it("keeps the fill while one of two waiting requests is still wanted", async () => {
    const { timers, handover: h } = handover();
    const ghost = request();
    const first = token();
    h.begin("a.py", "6:2:9", ghost);
    void h.waitFor("a.py", "6:2:9", first);
    void h.waitFor("a.py", "6:2:9", token());
    h.cancel("a.py", ghost);
    first.cancel();
    await timers.run(1000);
    assert.equal(ghost.cancelled, false);
  });

  it("lets a completion request of another place, version or document go at once", async () => {
    const { timers, handover: h } = handover();
    const ghost = request();
    h.begin("a.py", "6:2:9", ghost);
    assert.equal(h.waitFor("a.py", "7:2:10"), undefined);
    assert.equal(h.waitFor("b.py", "6:2:9"), undefined);
    h.cancel("a.py", ghost);
    await timers.run(GRACE);
    assert.equal(ghost.cancelled, true);  // nobody waited for it
  });

  it("passes on at once the cancel of a request it does not hold (one of no place)", () => {
    const { handover: h } = handover();
    const ghost = request();
    h.cancel("a.py", ghost);
    assert.equal(ghost.cancelled, true);
  });

  it("lets it go at once once the ghost text's request has ended", () => {
    const { handover: h } = handover();
    const ghost = request();
    h.begin("a.py", "6:2:9", ghost);
    h.end("a.py", ghost);
    assert.equal(h.waitFor("a.py", "6:2:9"), undefined);
  });

  it("waits for the newest request of a document, not an older one ending", async () => {
    const { handover: h } = handover();
    const old = request();
    const newer = request();
    h.begin("a.py", "5:2:8", old);
    h.begin("a.py", "6:2:9", newer);
    const waiting = h.waitFor("a.py", "6:2:9");
    h.end("a.py", old);
    assert.equal(await settled(waiting), false);
    h.end("a.py", newer);
    assert.equal(await settled(waiting), true);
  });

  it("lets a request waiting for a fill go on when a newer one of the document replaces it", async () => {
    const { handover: h } = handover();
    const old = request();
    h.begin("a.py", "6:2:9", old);
    const waiting = h.waitFor("a.py", "6:2:9", token());
    h.begin("a.py", "7:2:10", request());  // the user typed on: its end is not watched
    assert.equal(await settled(waiting), true);
    h.end("a.py", old);  // and ends nothing of the newer one's
    assert.notEqual(h.waitFor("a.py", "7:2:10"), undefined);
  });
});

const INVOKE = 0, TRIGGER_CHARACTER = 1, INCOMPLETE = 2;  // VS Code's CompletionTriggerKind

describe("Keystrokes", () => {
  const doc = "file:///a.py";
  function clocked() {
    const timers = new FakeTimers();
    return { timers, keystrokes: new Keystrokes(() => 110, () => timers.now) };
  }

  it("counts an Invoke right after a change of its document as typing's (a quick suggestion)", () => {
    const { timers, keystrokes } = clocked();
    keystrokes.typed(doc);
    timers.now += 10;
    assert.equal(keystrokes.fromTyping(doc, INVOKE), true);
  });

  it("counts an Invoke past the window after a change as the user's (Ctrl+Space)", () => {
    const { timers, keystrokes } = clocked();
    keystrokes.typed(doc);
    timers.now += 111;
    assert.equal(keystrokes.fromTyping(doc, INVOKE), false);
  });

  it("counts an Invoke in a document not changed as the user's", () => {
    assert.equal(new Keystrokes(() => 110).fromTyping(doc, INVOKE), false);
  });

  it("does not count a change of another document", () => {
    const { keystrokes } = clocked();
    keystrokes.typed("file:///b.py");
    assert.equal(keystrokes.fromTyping(doc, INVOKE), false);
  });

  it("forgets a closed document's last change", () => {
    const { keystrokes } = clocked();
    keystrokes.typed(doc);
    keystrokes.forget(doc);
    assert.equal(keystrokes.fromTyping(doc, INVOKE), false);
  });

  it("counts a trigger character's request as typing's at any time", () => {
    assert.equal(new Keystrokes(() => 110).fromTyping(doc, TRIGGER_CHARACTER), true);
  });

  it("counts an incomplete list's retrigger as typing's right after a change, not once typing paused", () => {
    // VS Code re-asks at a keystroke, and when an answer comes after the cursor moved on
    const { timers, keystrokes } = clocked();
    keystrokes.typed(doc);
    timers.now += 5;
    assert.equal(keystrokes.fromTyping(doc, INCOMPLETE), true);
    timers.now += 250;
    assert.equal(keystrokes.fromTyping(doc, INCOMPLETE), false);
  });
});

describe("CompletionGate", () => {
  const doc = "file:///a.py";
  function gate(timers: FakeTimers) {
    const keystrokes = new Keystrokes(() => 110, () => timers.now);
    return { keystrokes, gate: new CompletionGate(keystrokes, new Debouncer(() => 250, timers)) };
  }

  it("sends one completion request for a burst of quick suggestions, the last, after the quiet period", async () => {
    // VS Code's quick suggestion 10 ms after each keystroke, a key every 40 ms, each request
    // at the document's version then (as when the previous was answered before the next key)
    const timers = new FakeTimers();
    const { keystrokes, gate: g } = gate(timers);
    const sent: (Admission | true)[] = [];
    let settled = 0;
    for (let version = 1; version <= 3; version++) {
      keystrokes.typed(doc);
      await timers.run(10);
      const at = version;
      void Promise.resolve(g.admit(doc, INVOKE, () => at)).then((go) => { sent[at - 1] = go; settled++; });
      await timers.run(30);
    }
    await timers.run(249 - 30);
    assert.equal(settled, 2);  // the last is still waiting out its quiet period
    await timers.run(1);
    assert.deepEqual(sent, [false, false, "asked"]);
  });

  it("sends the user's request (Ctrl+Space) at once", async () => {
    const timers = new FakeTimers();
    const { keystrokes, gate: g } = gate(timers);
    keystrokes.typed(doc);
    await timers.run(1000);
    assert.equal(await g.admit(doc, INVOKE, () => 1), true);
    assert.equal(timers.waiting, 0);
  });

  it("decides on the user's request before anything else runs, not as a promise", () => {
    // VS Code cancels the ghost text's request in the same batch of messages as it asks for
    // completion items, which must first say that they wait for its fill
    const timers = new FakeTimers();
    const { gate: g } = gate(timers);
    assert.equal(g.admit(doc, INVOKE, () => 1), true);
  });

  it("holds back a trigger character's request for the quiet period", async () => {
    const timers = new FakeTimers();
    const { gate: g } = gate(timers);
    let go: Admission | true | undefined;
    void Promise.resolve(g.admit(doc, TRIGGER_CHARACTER, () => 1)).then((v) => (go = v));
    await timers.run(249);
    assert.equal(go, undefined);
    await timers.run(1);
    assert.equal(go, "asked");
  });

  it("holds a request the user types past until the document stays unchanged a quiet period, then sends it for the cursor", async () => {
    // VS Code asks at a word's first key, and nothing more while its request waits
    const timers = new FakeTimers();
    const { keystrokes, gate: g } = gate(timers);
    let version = 1;
    keystrokes.typed(doc);
    let go: Admission | true | undefined;
    void Promise.resolve(g.admit(doc, INVOKE, () => version)).then((v) => (go = v));
    for (let key = 0; key < 10; key++) {  // a key every 100 ms, for a second
      await timers.run(100);
      version++;
      keystrokes.typed(doc);
    }
    await timers.run(249);
    assert.equal(go, undefined);  // a quiet period after the last key has not passed
    await timers.run(251);  // one waited through with no change: within two of the last key
    assert.equal(go, "typedPast");
  });

  it("drops a request VS Code cancels while it waits", async () => {
    const timers = new FakeTimers();
    const { keystrokes, gate: g } = gate(timers);
    keystrokes.typed(doc);
    const t = token();
    const result = g.admit(doc, INVOKE, () => 1, t);
    t.cancel();
    assert.equal(await result, false);
  });

  it("drops a request typed past when VS Code cancels it while typing goes on", async () => {
    const timers = new FakeTimers();
    const { keystrokes, gate: g } = gate(timers);
    let version = 1;
    keystrokes.typed(doc);
    const t = token();
    const result = g.admit(doc, INVOKE, () => version, t);
    await timers.run(200);
    version++;
    await timers.run(100);  // waiting again, for the pause after that key
    t.cancel();
    assert.equal(await result, false);
  });

  it("asks again for an answer with no item to text since typed over, not for one of the text asked", () => {
    assert.equal(CompletionGate.askAgain(0, 4, 6), true);   // the server stopped its fill at the change
    assert.equal(CompletionGate.askAgain(0, 4, 4), false);  // the model had nothing to offer there
    assert.equal(CompletionGate.askAgain(1, 4, 6), false);  // items VS Code filters by the word typed on
  });
});
