/**
 * Timing of automatic requests.  VS Code asks for inline completions on every
 * keystroke; a diffusion fill costs a fixed number of forward passes whatever
 * its length, so sending each keystroke's request would queue work that is
 * stale before it starts.  `Debouncer` lets only the newest request of a burst
 * through, after a quiet period; `Superseder` cancels a request still in flight
 * once a newer one for the same document goes out; `InFlight` keeps ghost text's
 * requests and the user's commands apart.  None imports `vscode`, so all are
 * unit-tested with plain objects.
 */

/** The part of a CancellationToken that these helpers use. */
export interface CancelSignal {
  readonly isCancellationRequested: boolean;
  onCancellationRequested?(listener: () => void): { dispose(): void };
}

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export class Debouncer {
  private generation = 0;

  /** `delayMs` is read at each call, so a settings change applies to the next keystroke. */
  constructor(private readonly delayMs: () => number, private readonly timers: Timers = realTimers) {}

  /**
   * Resolves true when, after the delay, this call is still the newest one and
   * its token was not cancelled; false as soon as it is cancelled.  A delay of
   * 0 or less lets every call through at once.
   */
  wait(token?: CancelSignal): Promise<boolean> {
    const generation = ++this.generation;
    const delay = this.delayMs();
    if (token?.isCancellationRequested) return Promise.resolve(false);
    if (delay <= 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      let subscription: { dispose(): void } | undefined;
      const timer = this.timers.setTimeout(() => {
        subscription?.dispose();
        resolve(generation === this.generation && !token?.isCancellationRequested);
      }, delay);
      subscription = token?.onCancellationRequested?.(() => {
        this.timers.clearTimeout(timer);
        subscription?.dispose();
        resolve(false);
      });
    });
  }

  /** Make every call still waiting resolve false (e.g. when the user accepts a suggestion). */
  supersede(): void {
    this.generation++;
  }
}

/** Something that can be cancelled: a CancellationTokenSource, an AbortController... */
export interface Cancellable {
  cancel(): void;
}

/** At most one request in flight per key (a document URI): starting one cancels the previous. */
export class Superseder<T extends Cancellable> {
  private readonly inFlight = new Map<string, T>();

  /** Register `request` as the newest for `key`, cancelling the one it replaces. */
  begin(key: string, request: T): void {
    const previous = this.inFlight.get(key);
    if (previous !== undefined && previous !== request) previous.cancel();
    this.inFlight.set(key, request);
  }

  /** Forget `request` once it has finished (a newer request for the key is kept). */
  end(key: string, request: T): void {
    if (this.inFlight.get(key) === request) this.inFlight.delete(key);
  }

  /** Cancel whatever is in flight for `key` (the document changed or closed). */
  cancel(key: string): void {
    this.inFlight.get(key)?.cancel();
    this.inFlight.delete(key);
  }

  /** Cancel everything in flight (inline suggestions were turned off). */
  cancelAll(): void {
    for (const request of this.inFlight.values()) request.cancel();
    this.inFlight.clear();
  }

  get size(): number {
    return this.inFlight.size;
  }
}

/**
 * The requests in flight per document: the suggestions VS Code asks for on its own (ghost
 * text) and the commands the user ran (Fill selection, Rewrite block, Fill holes).  A
 * command supersedes the document's suggestion and its earlier command, and a suggestion
 * an earlier suggestion; a suggestion never cancels a command, nor does turning
 * suggestions off.  They once shared one `Superseder`: a keystroke's suggestion whose
 * debounce ended after a command began, or DLM: Toggle inline suggestions while Fill holes
 * ran, cancelled the command the user waited for, and nothing said so (a cancel is no
 * error).  The server keeps commands apart from suggestions likewise (jobs.py).
 */
export class InFlight<T extends Cancellable> {
  private readonly suggestions = new Superseder<T>();
  private readonly commands = new Superseder<T>();

  beginSuggestion(key: string, request: T): void {
    this.suggestions.begin(key, request);
  }

  beginCommand(key: string, request: T): void {
    this.suggestions.cancel(key);  // its fill would be stale once the command's edit lands
    this.commands.begin(key, request);
  }

  /** Forget `request` once it has finished (a newer request for the key is kept). */
  end(key: string, request: T): void {
    this.suggestions.end(key, request);
    this.commands.end(key, request);
  }

  /** Cancel every suggestion in flight (suggestions were turned off); commands go on. */
  cancelSuggestions(): void {
    this.suggestions.cancelAll();
  }

  get size(): number {
    return this.suggestions.size + this.commands.size;
  }
}
