import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { FIRST_INTERVAL_MS, Follower, MAX_INTERVAL_MS } from "../poll";
import { FakeTimers } from "./fake_timers";

const MINUTE = 60000;

/** A server loading its model for `loadMs`: each question is answered at once. */
function loading(timers: FakeTimers, loadMs: number) {
  const asked: number[] = [];
  const follower = new Follower(async () => {
    asked.push(timers.now);
    return timers.now >= loadMs;
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
    const follower = new Follower(async () => {
      asked++;
      if (asked === 1) throw new Error("dlm/status failed");
      return true;
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
      const answers: ((over: boolean) => void)[] = [];
      const follower = new Follower(() => new Promise<boolean>((resolve) => answers.push(resolve)), timers);
      follower.follow(100);
      await timers.run(100);                    // a question is out, unanswered
      if (after === "follow") follower.follow(500);
      else follower.stop();
      answers[0](false);                        // the old answer: still loading
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
