/**
 * Timing of automatic requests.  VS Code asks for inline completions on every
 * keystroke; a diffusion fill costs a fixed number of forward passes whatever
 * its length, so sending each keystroke's request would queue work that is
 * stale before it starts.  `Debouncer` lets only the newest request of a burst
 * through, after a quiet period; `Superseder` cancels a request still in flight
 * once a newer one for the same document goes out; `InFlight` keeps ghost text's
 * requests and the user's commands apart; `Handover` lets a ghost text and a
 * completion request of the same place share one fill; `Keystrokes` tells the
 * completion requests VS Code makes as the user types from those the user asks for,
 * and `CompletionGate` holds back the former for the quiet period.
 * None imports `vscode`, so all are unit-tested with plain objects.
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

/**
 * An action run once its calls have stopped for `ms`, the last call's: a restart for a
 * changed `dlm.server.*` setting.  VS Code's Settings UI writes a text setting at each
 * pause in typing, and each value on the way (`127.0.0.1:20` of `127.0.0.1:2087`, a
 * path half typed) restarted the server and popped up "could not start".
 */
export class AfterQuiet {
  private timer: unknown;
  constructor(private readonly ms: number, private readonly timers: Timers = realTimers) {}

  call(action: () => void): void {
    this.cancel();
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      action();
    }, this.ms);
  }

  /** Drop the action waiting, if any (the extension is going away). */
  cancel(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
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

/**
 * The suggestion request in flight per document (ghost text's or completion items'), for a
 * request of the other kind at the same place (document version and cursor) to wait for:
 * both ask the server for the same fill there, and the server answers the second from the
 * first's, finished (its recent fills, recent.py), at once.  Sent side by side, the second
 * began a fill of the same text from scratch and stopped the first (the server keeps one
 * suggestion per document).  Measured in a real VS Code 1.139 (e2e/run.sh --typing, `total`
 * typed with the fills held 1.5 s):
 *  - its default `editor.quickSuggestions` (`offWhenInlineCompletions`) waits 750 ms for
 *    ghost text after a word is typed, then gives up on it and asks for completion items at
 *    the same place: the ghost text's fill was stopped, its work thrown away;
 *  - with `"on"` (VS Code's default before), completion items are asked for at a keystroke,
 *    before the ghost text's debounce ends: each such request still begins a fill, which the
 *    next keystroke stops (3 fills began for the word, 2 stopped; 2 and 1 with the handover,
 *    one run each).
 * VS Code's cancellation of a request is passed on to the server once nobody waits for its
 * fill: the waiting requests' own cancellations count (a completion request VS Code gave up
 * on while it waited left the ghost text's fill running to its end, for no one), and a
 * waiting request VS Code cancels stops waiting at once.  VS Code 1.139 asks for completion
 * items and then cancels the ghost text's request in one go (its suggest model's
 * `_waitForInlineCompletionsAndTrigger`); should the cancel reach the extension first, the
 * fill was stopped and begun again by the completion request: a cancel nobody waits for is
 * passed on `graceMs` later, unless a request of the place comes to wait meanwhile.  The
 * fill runs that much longer for nothing when none comes; a keystroke's change stops it at
 * the server anyway.
 */
export class Handover<T extends Cancellable> {
  private readonly requests = new Map<string, {
    place: string; request: T; ended: Promise<void>; end: () => void;
    waiters: number; givenUp: boolean; grace: unknown;
  }>();

  constructor(private readonly graceMs: number, private readonly timers: Timers = realTimers) {}

  /** A suggestion request for `place` in `key` (a document URI) is sent.  One it replaces
   *  (the user typed on while it ran) lets whoever waited for it go on: its end is no
   *  longer watched (`end` goes by the newest), and a completion request waiting for it
   *  hung until VS Code cancelled it. */
  begin(key: string, place: string, request: T): void {
    const before = this.requests.get(key);
    if (before !== undefined) {
      if (before.grace !== undefined) this.timers.clearTimeout(before.grace);
      before.end();
    }
    let end = () => {};
    const ended = new Promise<void>((resolve) => { end = resolve; });
    this.requests.set(key, { place, request, ended, end, waiters: 0, givenUp: false, grace: undefined });
  }

  /** It has ended (answered, failed or cancelled): whoever waits for it goes on. */
  end(key: string, request: T): void {
    const entry = this.requests.get(key);
    if (entry?.request !== request) return;
    this.requests.delete(key);
    if (entry.grace !== undefined) this.timers.clearTimeout(entry.grace);
    entry.end();
  }

  /** VS Code no longer wants it: cancelled once no other request waits for its fill (after
   *  `graceMs`, for one about to). */
  cancel(key: string, request: T): void {
    const entry = this.requests.get(key);
    if (entry?.request !== request) {
      request.cancel();
      return;
    }
    if (entry.givenUp) return;
    entry.givenUp = true;
    entry.grace = this.timers.setTimeout(() => {
      entry.grace = undefined;
      this.release(key, request);
    }, this.graceMs);
  }

  /**
   * For a request of `place` about to be sent: when the one in flight for that place ends,
   * or when `token` (the waiting request's) is cancelled, whichever comes first; undefined
   * where none of that place is in flight (send it at once).
   */
  waitFor(key: string, place: string, token?: CancelSignal): Promise<void> | undefined {
    const entry = this.requests.get(key);
    if (entry?.place !== place) return undefined;
    if (token?.isCancellationRequested) return Promise.resolve();
    entry.waiters++;
    return new Promise<void>((resolve) => {
      let waiting = true;
      const leave = () => {
        if (!waiting) return;
        waiting = false;
        subscription?.dispose();
        entry.waiters--;
        resolve();
      };
      const subscription = token?.onCancellationRequested?.(() => {
        leave();
        this.release(key, entry.request);
      });
      void entry.ended.then(leave);
    });
  }

  /** Cancel `request` if VS Code gave up on it, its grace is over and nobody waits for it. */
  private release(key: string, request: T): void {
    const entry = this.requests.get(key);
    if (entry?.request === request && entry.givenUp && entry.grace === undefined && entry.waiters === 0) {
      request.cancel();
    }
  }
}

/** VS Code's CompletionTriggerKind.TriggerCharacter: a request for completion items made
 *  as a trigger character was typed. */
export const TRIGGER_CHARACTER = 1;

/**
 * Which completion requests come from typing, to wait out the ghost text's quiet period
 * (`Debouncer`) before they are sent.  With `editor.quickSuggestions: "on"` VS Code asks
 * for completion items `editor.quickSuggestionsDelay` (10 ms) after a keystroke, long
 * before the ghost text's debounce ends: each such request began a fill, which the next
 * keystroke's stopped (3 fills began for one typed word, 2 stopped).  A trigger character's
 * request is typing's by its kind; a quick suggestion and Ctrl+Space both come as Invoke,
 * and only timing tells them apart: a quick suggestion follows a change of its document by
 * the quick suggestions' delay, as seen in the extension host too (the change reaches it
 * first, on the same channel), while Ctrl+Space comes when the user asks.  An Invoke within
 * `windowMs` of a change counts as typing; one that is the user's but that quick (a key,
 * then Ctrl+Space at once) only waits the quiet period.  So does a retrigger of an
 * incomplete list (the server's lists are): VS Code makes one at a keystroke, and one when
 * an answer comes after the cursor moved on from where it was asked, as the answer to a
 * request typed past does (`CompletionGate`), once typing has paused; counted as typing,
 * that one waited a quiet period more (100 ms in e2e/run.sh --typing-quick) to be answered
 * from the fill just made.
 */
export class Keystrokes {
  private readonly last = new Map<string, number>();

  /** `windowMs` is read at each request, so a change of the delay applies at once. */
  constructor(private readonly windowMs: () => number, private readonly now: () => number = Date.now) {}

  /** Document `key` (a URI) changed. */
  typed(key: string): void {
    this.last.set(key, this.now());
  }

  /** Document `key` closed. */
  forget(key: string): void {
    this.last.delete(key);
  }

  /** Whether a completion request in `key` of `triggerKind` (VS Code's
   *  CompletionTriggerKind) was made for typing, not asked for by the user. */
  fromTyping(key: string, triggerKind: number): boolean {
    if (triggerKind === TRIGGER_CHARACTER) return true;
    const at = this.last.get(key);
    return at !== undefined && this.now() - at <= this.windowMs();
  }
}

/** What a completion request made for typing is to do once it has waited (`CompletionGate`):
 *  go as asked, go at the cursor (the user typed on while it waited, and has paused), or
 *  not go (VS Code cancelled it, or asked again meanwhile). */
export type Admission = "asked" | "typedPast" | false;

/**
 * When a completion request goes to the server: one made for typing (`Keystrokes`) once
 * the document has been quiet for the ghost text's quiet period, the newest of its burst
 * only (`Debouncer`, the completion requests' own: sharing the ghost text's, each kind
 * would drop the other's request); one the user asked for at once.  VS Code (1.139) asks
 * for nothing more while its request waits, so with `editor.quickSuggestions: "on"` the
 * request it makes at a word's first key is typed past; answered with nothing there, it
 * was not asked again at the word's end (an empty list is not retriggered: it holds no
 * item of an incomplete list), and the dlm item showed in 1 of 8 runs of e2e/run.sh
 * --typing-quick (where VS Code's next ask happened to fall at the word's end).  So such
 * a request waits on until typing pauses, and is then answered for the cursor
 * (`typedPast`; reach.ts says how the items' ranges reach back to where it was asked).
 */
export class CompletionGate {
  constructor(private readonly keystrokes: Keystrokes, private readonly debouncer: Debouncer) {}

  /**
   * Whether and where to send the request for `key` of `triggerKind`; `version` reads the
   * document's version.  The user's request is answered `true` (as asked) at once, not as
   * a promise: giving up on ghost text, VS Code asks for completion items and cancels the
   * ghost text's request in one batch of messages, and the completion request must tell the
   * `Handover` that it waits for that fill before the cancel is seen (awaited, the cancel
   * came first: the fill was stopped, and a second one began).
   */
  admit(key: string, triggerKind: number, version: () => number, token?: CancelSignal): true | Promise<Admission> {
    if (!this.keystrokes.fromTyping(key, triggerKind)) return true;
    return this.quiet(version, token);
  }

  /**
   * Whether a request answered with `items` items, sent at document version `sent`, is to
   * be asked again (once typing pauses: `quiet`) now that the document is at `now`: an
   * answer with no item for text since typed over is the server's stopped fill (it stops a
   * fill at a change), not the model's; VS Code would end its request with it, and not ask
   * again at the word's end.
   */
  static askAgain(items: number, sent: number, now: number): boolean {
    return items === 0 && sent !== now;
  }

  /** Once `version` has stayed the same through a quiet period (waited out whole, so
   *  within two of the last change): whether it moved since the call. */
  async quiet(version: () => number, token?: CancelSignal): Promise<Admission> {
    const asked = version();
    for (let seen = asked; ; seen = version()) {
      if (!(await this.debouncer.wait(token))) return false;
      if (version() === seen) return seen === asked ? "asked" : "typedPast";
    }
  }
}
