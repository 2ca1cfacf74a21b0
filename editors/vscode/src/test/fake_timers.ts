import { type Timers } from "../debounce";

/** A clock that only moves when the test says so (shared by the debounce and poll tests). */
export class FakeTimers implements Timers {
  now = 0;
  private pending: { at: number; fn: () => void; id: number }[] = [];
  private nextId = 0;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.pending.push({ at: this.now + ms, fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending = this.pending.filter((t) => t.id !== handle);
  }
  get waiting(): number {
    return this.pending.length;
  }
  /** Jump `ms` ahead and fire, together, the timers due by then (not those they set). */
  async advance(ms: number): Promise<void> {
    this.now += ms;
    const due = this.pending.filter((t) => t.at <= this.now);
    this.pending = this.pending.filter((t) => t.at > this.now);
    for (const t of due) t.fn();
    await new Promise((resolve) => setImmediate(resolve));
  }
  /** Let `ms` pass, firing each timer when its time comes and settling what it started. */
  async run(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      const next = this.pending.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.now = next.at;
      this.pending = this.pending.filter((t) => t !== next);
      next.fn();
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.now = end;
  }
}
