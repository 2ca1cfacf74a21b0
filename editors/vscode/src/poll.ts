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
 * No `vscode` import: unit-tested with fake timers.
 */

import { realTimers, type Timers } from "./debounce";

/** The wait before the second question (the first comes when the caller says). */
export const FIRST_INTERVAL_MS = 1000;
/** Each wait is this much longer than the one before ... */
export const GROWTH = 1.25;
/** ... up to this: how late, at most, the status bar sees a long load end. */
export const MAX_INTERVAL_MS = 10000;

/** The wait after the `asked`-th question (1, 2, ...) whose answer did not end the load. */
export function pollInterval(asked: number): number {
  return Math.min(MAX_INTERVAL_MS, FIRST_INTERVAL_MS * GROWTH ** Math.max(0, asked - 1));
}

/** Asks until it is told there is nothing more to follow; one series of questions at a time. */
export class Follower {
  private series = 0;
  private timer: unknown;

  /**
   * `ask` asks once and resolves true when there is nothing more to follow: the load
   * ended, or the server is gone (a restarted one is followed anew).  An `ask` that
   * fails is asked again, as an unsettled one.
   */
  constructor(private readonly ask: () => Promise<boolean>, private readonly timers: Timers = realTimers) {}

  /**
   * Ask after `firstMs`, then at growing intervals until `ask` says it is over.  A call
   * while following starts over (a new load began): the earlier series asks no more.
   */
  follow(firstMs: number): void {
    this.stop();
    const series = this.series;
    const next = (delayMs: number, asked: number): void => {
      this.timer = this.timers.setTimeout(async () => {
        this.timer = undefined;
        const over = await this.ask().catch(() => false);
        if (!over && series === this.series) next(pollInterval(asked + 1), asked + 1);
      }, delayMs);
    };
    next(firstMs, 0);
  }

  /** Ask no more (the server stopped, the extension is disposed). */
  stop(): void {
    this.series++;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
