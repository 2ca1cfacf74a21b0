/**
 * Following a model load in the status bar.
 *
 * The server loads its model after `initialized` (and again when a model setting
 * changes) and tells no one when the load ends: `dlm/status` says whether it has
 * (loaded, or failed with `loadError`), so the status bar asks until it has.  It
 * asked every second for 3 minutes and then stopped, and a load that took longer (a
 * 7B model on a CPU takes minutes) left "dlm: loading" for ever, the model long
 * loaded.  Now it asks until the load has ended, however long that takes, at
 * growing intervals: every second at first, when a small model is about to be
 * ready, then less and less often, at least every `MAX_INTERVAL_MS` (a 10-minute
 * load costs under 70 requests, not 600).
 *
 * With `backend: remote` or `sglang`, `dlm/status` asks the service, and one that does not
 * answer is "unreachable" until it does.  Polling stopped there, as at a failed load, and
 * the status bar said "unreachable" until the next fill or click, long after the service
 * was back.  A service found down is followed too, until it answers, at intervals growing
 * to `DOWN_MAX_INTERVAL_MS`: each question costs the server a connection attempt (up to
 * 2 s, on its event loop, where the service's host does not answer at all).
 *
 * No `vscode` import: unit-tested with fake timers.
 */

import { realTimers, type Timers } from "./debounce";

/** The wait before the second question (the first comes when the caller says). */
export const FIRST_INTERVAL_MS = 1000;
/** Each wait is this much longer than the one before ... */
export const GROWTH = 1.25;
/** ... up to this: how late, at most, the status bar sees a long load end. */
export const MAX_INTERVAL_MS = 10000;
/** How late, at most, it sees a service that was down answer again. */
export const DOWN_MAX_INTERVAL_MS = 30000;

/**
 * What one question found: `over` (nothing more to follow: the load ended, loaded or
 * failed, or the server is gone; a restarted one is followed anew), `loading` (asked again,
 * at most `MAX_INTERVAL_MS` later) or `down` (a service that does not answer: asked again,
 * at most `DOWN_MAX_INTERVAL_MS` later, until it does).
 */
export type Finding = "over" | "loading" | "down";

/** The wait after the `asked`-th question (1, 2, ...) whose answer did not end the series. */
export function pollInterval(asked: number, maxMs = MAX_INTERVAL_MS): number {
  return Math.min(maxMs, FIRST_INTERVAL_MS * GROWTH ** Math.max(0, asked - 1));
}

/** Asks until it is told there is nothing more to follow; one series of questions at a time. */
export class Follower {
  private series = 0;
  private timer: unknown;
  /** Whether a series is under way: a question waiting for its time, or out. */
  private active = false;

  /**
   * `ask` asks once and resolves to what it found (`Finding`).  An `ask` that fails is
   * asked again, as a load under way.
   */
  constructor(private readonly ask: () => Promise<Finding>, private readonly timers: Timers = realTimers) {}

  /**
   * Ask after `firstMs`, then at growing intervals until `ask` says it is over.  A call
   * while following starts over (a new load began): the earlier series asks no more.
   */
  follow(firstMs: number): void {
    this.stop();
    const series = this.series;
    this.active = true;
    const next = (delayMs: number, asked: number): void => {
      this.timer = this.timers.setTimeout(async () => {
        this.timer = undefined;
        const found = await this.ask().catch((): Finding => "loading");
        if (series !== this.series) return;
        if (found === "over") this.active = false;
        else next(pollInterval(asked + 1, found === "down" ? DOWN_MAX_INTERVAL_MS : MAX_INTERVAL_MS), asked + 1);
      }, delayMs);
    };
    next(firstMs, 0);
  }

  /**
   * `follow`, unless a series is under way: a status asked for once (after a fill, or on a
   * click) that found the service down starts one, and leaves one under way as it is.
   */
  keepUp(firstMs: number): void {
    if (!this.active) this.follow(firstMs);
  }

  /** Ask no more (the server stopped, the extension is disposed). */
  stop(): void {
    this.series++;
    this.active = false;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
