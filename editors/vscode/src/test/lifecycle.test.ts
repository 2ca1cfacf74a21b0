import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ABANDON_WAIT_MS, type Launch, Lifecycle, StartTimeout, type Timers } from "../lifecycle";

/** A language client whose start ends when the test says (or when it is abandoned). */
class FakeClient {
  started = false;
  stopped = false;
  abandoned = false;
  private end!: { resolve: () => void; reject: (error: unknown) => void };
  private readonly pending = new Promise<void>((resolve, reject) => { this.end = { resolve, reject }; });

  constructor(readonly name: string, private readonly servers: Set<string>) {}

  start(): Promise<void> {
    this.servers.add(this.name);  // its process runs from here on
    return this.pending.then(() => { this.started = true; });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.servers.delete(this.name);
  }

  answer(): void {
    this.end.resolve();
  }

  /** What killing its process does to a start in progress. */
  die(): void {
    this.servers.delete(this.name);
    this.end.reject(new Error("Pending response rejected since connection got disposed"));
  }
}

class FakeTimers implements Timers {
  private readonly due = new Map<number, { fn: () => void; ms: number }>();
  private next = 0;
  setTimeout(fn: () => void, ms: number): unknown {
    this.due.set(++this.next, { fn, ms });
    return this.next;
  }
  clearTimeout(handle: unknown): void {
    this.due.delete(handle as number);
  }
  /** Fire the timers set for `ms`. */
  fire(ms: number): void {
    for (const [handle, { fn, ms: at }] of [...this.due]) {
      if (at !== ms) continue;
      this.due.delete(handle);
      fn();
    }
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

function setup(options: { deadlineMs?: number; abandonKills?: boolean } = {}) {
  const servers = new Set<string>();
  const clients: FakeClient[] = [];
  const failures: unknown[] = [];
  const timers = new FakeTimers();
  const lifecycle = new Lifecycle<FakeClient>(() => {
    const client = new FakeClient(`server ${clients.length + 1}`, servers);
    clients.push(client);
    const launch: Launch<FakeClient> = {
      client,
      abandon: () => {
        client.abandoned = true;
        if (options.abandonKills ?? true) client.die();
      },
      deadlineMs: options.deadlineMs,
    };
    return launch;
  }, { failed: (error) => failures.push(error) }, timers);
  return { lifecycle, servers, clients, failures, timers };
}

describe("Lifecycle: one server at a time", () => {
  it("shares one start between concurrent callers", async () => {
    const { lifecycle, clients } = setup();
    const first = lifecycle.start();
    const second = lifecycle.start();
    clients[0].answer();
    assert.equal(await first, clients[0]);
    assert.equal(await second, clients[0]);
    assert.equal(clients.length, 1);
    assert.equal(lifecycle.client, clients[0]);
  });

  it("whenStarted: a setting changed while the server starts reaches it once started, and starts none", async () => {
    const { lifecycle, clients } = setup();
    assert.equal(lifecycle.whenStarted(), undefined);  // never started: nothing to send it to
    assert.equal(clients.length, 0);
    void lifecycle.start();
    const changed = lifecycle.whenStarted();            // dlm.model changed during the start
    assert.ok(changed);
    clients[0].answer();
    assert.equal(await changed, clients[0]);
    assert.equal(await lifecycle.whenStarted(), clients[0]);
    await lifecycle.stop();
    assert.equal(lifecycle.whenStarted(), undefined);  // stopped: the next start takes the settings
    assert.equal(clients.length, 1);
  });

  it("a restart while the server starts abandons that start: one server runs, not two", async () => {
    const { lifecycle, servers, clients, failures } = setup();
    void lifecycle.start();
    await tick();
    assert.deepEqual([...servers], ["server 1"]);
    await lifecycle.stop();                      // DLM: Restart server, or a dlm.server.* setting
    assert.equal(clients[0].abandoned, true);
    assert.equal(clients.length, 1, "the next server was started before the first one's start ended");
    const next = lifecycle.start();
    clients[1].answer();
    assert.equal(await next, clients[1]);
    assert.deepEqual([...servers], ["server 2"]);
    assert.equal(lifecycle.client, clients[1]);
    assert.deepEqual(failures, [], "an abandoned start is no failure to report");
  });

  it("a start that answered although it was abandoned is stopped, not left running unowned", async () => {
    const { lifecycle, servers, clients, timers } = setup({ abandonKills: false });
    void lifecycle.start();
    await tick();
    const stopping = lifecycle.stop();
    clients[0].answer();                         // its answer was already on the way
    await stopping;
    assert.equal(clients[0].stopped, true);
    assert.deepEqual([...servers], []);
    assert.equal(lifecycle.client, undefined);
    timers.fire(ABANDON_WAIT_MS);
  });

  it("a stop goes on after a while when an abandoned start never ends", async () => {
    const { lifecycle, clients, timers } = setup({ abandonKills: false });
    void lifecycle.start();
    await tick();
    let stopped = false;
    void lifecycle.stop().then(() => { stopped = true; });
    await tick();
    assert.equal(stopped, false);
    timers.fire(ABANDON_WAIT_MS);
    await tick();
    assert.equal(stopped, true);
    assert.equal(clients.length, 1);
  });

  it("a start with a deadline that gets no answer is abandoned and said, not 'starting' for ever", async () => {
    const { lifecycle, servers, clients, failures, timers } = setup({ deadlineMs: 20000 });
    const started = lifecycle.start();
    await tick();
    timers.fire(20000);
    assert.equal(await started, undefined);
    assert.equal(clients[0].abandoned, true);
    assert.deepEqual([...servers], []);
    assert.equal(failures.length, 1);
    assert.ok(failures[0] instanceof StartTimeout);
    assert.equal((failures[0] as Error).message, "no answer in 20 s");
  });

  it("a start that answers within its deadline keeps its client", async () => {
    const { lifecycle, clients, failures, timers } = setup({ deadlineMs: 20000 });
    const started = lifecycle.start();
    clients[0].answer();
    assert.equal(await started, clients[0]);
    timers.fire(20000);                          // cleared: nothing happens
    assert.equal(clients[0].abandoned, false);
    assert.deepEqual(failures, []);
  });

  it("a failed start is said once, and the next start tries again", async () => {
    const { lifecycle, clients, failures } = setup();
    const first = lifecycle.start();
    const again = lifecycle.start();
    clients[0].die();
    assert.equal(await first, undefined);
    assert.equal(await again, undefined);
    assert.equal(failures.length, 1);
    const retry = lifecycle.start();
    clients[1].answer();
    assert.equal(await retry, clients[1]);
  });

  it("a launch refused at once (no client made) is tried again by the next start", async () => {
    // a server address with no port: every later command got the first refusal, silently
    const clients: FakeClient[] = [];
    let launches = 0;
    const lifecycle = new Lifecycle<FakeClient>(() => {
      launches++;
      if (launches === 1) return undefined;
      const client = new FakeClient(`server ${launches}`, new Set());
      clients.push(client);
      return { client, abandon: () => client.die() };
    }, { failed: () => undefined }, new FakeTimers());
    assert.equal(await lifecycle.start(), undefined);
    const second = lifecycle.start();
    assert.equal(launches, 2);
    clients[0].answer();
    assert.equal(await second, clients[0]);
  });

  it("stops the running client", async () => {
    const { lifecycle, servers, clients } = setup();
    const started = lifecycle.start();
    clients[0].answer();
    await started;
    await lifecycle.stop();
    assert.equal(clients[0].stopped, true);
    assert.deepEqual([...servers], []);
    assert.equal(lifecycle.client, undefined);
  });
});
