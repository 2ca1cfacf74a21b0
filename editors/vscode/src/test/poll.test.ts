import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DOWN_MAX_INTERVAL_MS, FIRST_INTERVAL_MS, type Finding, Follower, MAX_INTERVAL_MS } from "../poll";
import { loadFinding, type ServerStatus, statusText } from "../status";
import { FakeTimers } from "./fake_timers";

const MINUTE = 60000;

/** A server loading its model for `loadMs`: each question is answered at once. */
function loading(timers: FakeTimers, loadMs: number) {
  const asked: number[] = [];
  const follower = new Follower(async (): Promise<Finding> => {
    asked.push(timers.now);
    return timers.now >= loadMs ? "over" : "loading";
  }, timers);
  return { asked, follower };
}

describe("Follower: the status bar follows a model load to its end", () => {
  it("follows a load that takes 10 minutes to its end (it gave up after 3), then asks no more", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = loading(timers, 10 * MINUTE);
    follower.follow(100);
    await timers.run(10 * MINUTE + MAX_INTERVAL_MS);
    const last = asked[asked.length - 1];
    assert.ok(last >= 10 * MINUTE, `the last question was at ${last / 1000} s, before the load ended`);
    assert.ok(last - 10 * MINUTE <= MAX_INTERVAL_MS, "the end was seen late");
    await timers.run(60 * MINUTE);
    assert.equal(asked[asked.length - 1], last, "it went on asking after the load ended");
    assert.equal(timers.waiting, 0);
  });

  it("asks every second at first, then less often, never more than MAX_INTERVAL_MS apart", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = loading(timers, 10 * MINUTE);
    follower.follow(100);
    await timers.run(10 * MINUTE);
    const gaps = asked.slice(1).map((at, i) => at - asked[i]);
    assert.equal(gaps[0], FIRST_INTERVAL_MS);  // a small model is seen within a second or so
    assert.ok(gaps.every((gap, i) => i === 0 || gap >= gaps[i - 1]), `gaps shrank: ${gaps}`);
    assert.ok(Math.max(...gaps) <= MAX_INTERVAL_MS, `a gap of ${Math.max(...gaps)} ms`);
    assert.ok(asked.length < 70, `${asked.length} questions in 10 minutes`);  // 1 a second: 600
  });

  it("stops at once when the first answer says the load has ended", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = loading(timers, 0);
    follower.follow(500);
    await timers.run(MINUTE);
    assert.deepEqual(asked, [500]);
  });

  it("asks again after a question that failed", async () => {
    const timers = new FakeTimers();
    let asked = 0;
    const follower = new Follower(async (): Promise<Finding> => {
      asked++;
      if (asked === 1) throw new Error("dlm/status failed");
      return "over";
    }, timers);
    follower.follow(100);
    await timers.run(MINUTE);
    assert.equal(asked, 2);
  });

  it("a new load starts over: one series of questions, from the first interval again", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = loading(timers, 60 * MINUTE);
    follower.follow(100);
    await timers.run(5 * MINUTE);               // asking every 10 s by now
    follower.follow(500);                       // a model setting changed
    const from = asked.length;
    await timers.run(5000);
    assert.deepEqual(asked.slice(from).map((at) => at - 5 * MINUTE),
                     [500, 1500, 2750, 4312.5], "not one series from the start, or two at once");
  });

  it("an answer that comes after a new load began or a stop asks no more", async () => {
    for (const after of ["follow", "stop"] as const) {
      const timers = new FakeTimers();
      const answers: ((found: Finding) => void)[] = [];
      const follower = new Follower(() => new Promise<Finding>((resolve) => answers.push(resolve)), timers);
      follower.follow(100);
      await timers.run(100);                    // a question is out, unanswered
      if (after === "follow") follower.follow(500);
      else follower.stop();
      answers[0]("loading");                    // the old answer: still loading
      await timers.run(MINUTE);
      assert.equal(answers.length, after === "follow" ? 2 : 1, `after ${after}`);
    }
  });

  it("asks no more once stopped (the server stopped)", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = loading(timers, 60 * MINUTE);
    follower.follow(100);
    await timers.run(3000);
    const before = asked.length;
    follower.stop();
    await timers.run(MINUTE);
    assert.equal(asked.length, before);
    assert.equal(timers.waiting, 0);
  });
});

describe("Follower: the status bar follows a remote service found down until it answers", () => {
  // dlm/status of `backend: remote` while the service is down (RemoteEngine.status()), and once it answers
  const down: ServerStatus = {
    model: "remote engine at http://127.0.0.1:8000", loaded: false, reachable: false, device: null,
    loadError: "cannot reach http://127.0.0.1:8000: Connection refused",
  };
  const up: ServerStatus = { model: "default", loaded: true, reachable: true, loadError: null, device: "cuda:0" };

  /** The extension's status bar over a service down until `backMs`: `shown` is the last status asked. */
  function service(timers: FakeTimers, backMs: number) {
    const asked: number[] = [];
    const bar = { shown: undefined as ServerStatus | undefined };
    const follower = new Follower(async () => {
      asked.push(timers.now);
      bar.shown = timers.now >= backMs ? up : down;
      return loadFinding(bar.shown);
    }, timers);
    return { asked, bar, follower };
  }

  it("says unreachable while the service is down, and loaded by itself once it is back", async () => {
    const timers = new FakeTimers();
    const { asked, bar, follower } = service(timers, 7 * MINUTE);
    follower.follow(100);
    await timers.run(5 * MINUTE);
    assert.equal(statusText("running", bar.shown), "$(error) dlm: 127.0.0.1:8000 unreachable");
    await timers.run(2 * MINUTE + DOWN_MAX_INTERVAL_MS);
    // it stopped at the first "unreachable" and said so until the next fill or click
    assert.equal(statusText("running", bar.shown), "$(sparkle) dlm: default · cuda:0");
    const last = asked[asked.length - 1];
    assert.ok(last >= 7 * MINUTE && last - 7 * MINUTE <= DOWN_MAX_INTERVAL_MS, `seen back at ${last / 1000} s`);
    await timers.run(60 * MINUTE);
    assert.equal(asked[asked.length - 1], last, "it went on asking after the service answered");
    assert.equal(timers.waiting, 0);
  });

  it("asks a service that is down at growing intervals, never more than DOWN_MAX_INTERVAL_MS apart", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = service(timers, Infinity);
    follower.follow(100);
    await timers.run(60 * MINUTE);
    const gaps = asked.slice(1).map((at, i) => at - asked[i]);
    assert.equal(gaps[0], FIRST_INTERVAL_MS);
    assert.ok(gaps.every((gap, i) => i === 0 || gap >= gaps[i - 1]), `gaps shrank: ${gaps}`);
    assert.equal(Math.max(...gaps), DOWN_MAX_INTERVAL_MS);
    assert.ok(asked.length < 140, `${asked.length} questions in an hour`);  // every 10 s: 360
  });

  it("keepUp starts a series where none is under way, and leaves one under way as it is", async () => {
    const timers = new FakeTimers();
    const { asked, follower } = service(timers, Infinity);
    follower.keepUp(1000);                      // a fill's status found the service down
    await timers.run(1000);
    assert.deepEqual(asked, [1000]);
    follower.keepUp(1000);                      // found down again, while following
    await timers.run(1000);                     // the series' next question, not a new one
    assert.deepEqual(asked, [1000, 2000]);
    follower.stop();
    follower.keepUp(500);
    await timers.run(500);
    assert.deepEqual(asked, [1000, 2000, 2500]);
    const loaded = new Follower(async (): Promise<Finding> => "over", timers);
    loaded.follow(100);
    await timers.run(100);
    loaded.keepUp(100);                         // a series that ended: a new one
    assert.equal(timers.waiting, 2);            // its question, and `follower`'s next
  });
});
