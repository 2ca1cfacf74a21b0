/**
 * Why suggestions stopped appearing, where the server's answers say why.
 *
 * A failed ghost text or completion request pops nothing up (status.failurePopsUp): VS Code
 * asks at every pause in typing, and the same error at each pause is noise.  A failed load
 * and a service that is down still show, in the status bar (dlm/status says so).  But a
 * fill that timed out (-32003, past the server's `timeoutMs`) or ran out of memory (-32002)
 * left only a line in the dlm-lsp output: the status bar said all was well, the model and
 * its latency, and no suggestion came.  Such a failure is now a state: the status bar shows
 * a warning with the reason until a fill succeeds, and each cause is said in one message,
 * with the setting to look at, the first time it happens; not again until the server
 * restarts or its settings change (the user did something about it, and may want to know
 * whether it helped).
 *
 * No `vscode` import: unit-tested with node.
 */

/** The server's error codes (README, "Error codes") that are a trouble of suggestions. */
export const OUT_OF_MEMORY = -32002;
export const TIMEOUT = -32003;
export const BUSY = -32004;

export type Cause = "timeout" | "memory" | "busy";

/** A suggestion's failure: its cause, and the server's own words for it. */
export interface Trouble {
  cause: Cause;
  message: string;
}

const CAUSES: ReadonlyMap<number, Cause> = new Map<number, Cause>([
  [TIMEOUT, "timeout"], [OUT_OF_MEMORY, "memory"], [BUSY, "busy"],
]);

/** What the status bar says in place of the latency. */
const LABELS: Record<Cause, string> = { timeout: "timed out", memory: "out of memory", busy: "busy" };

/** The setting a cause's message opens, and what it adds to the server's words (its words
 *  for running out of memory already say what to try). */
const ADVICE: Record<Cause, { setting: string; text?: string }> = {
  timeout: {
    setting: "dlm.timeoutMs",
    text: "fills take longer than dlm.timeoutMs here; fewer steps (dlm.steps, dlm.latencyMs) "
      + "or a smaller model make them faster",
  },
  memory: { setting: "dlm.device" },
  busy: { setting: "dlm.maxQueuedRequests", text: "too many fills are running or waiting" },
};

/** The trouble an error is, if any: a ResponseError (or anything with that `code`). */
export function troubleOf(error: unknown): Trouble | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  const cause = typeof code === "number" ? CAUSES.get(code) : undefined;
  if (!cause) return undefined;
  const message = (error as { message?: unknown }).message;
  return { cause, message: typeof message === "string" && message ? message : LABELS[cause] };
}

export function troubleLabel(trouble: Trouble): string {
  return LABELS[trouble.cause];
}

/** The one message of a cause: the server's words, what they mean, and the setting it opens. */
export function troubleMessage(trouble: Trouble): { text: string; setting: string } {
  const { setting, text } = ADVICE[trouble.cause];
  return {
    text: `dlm-lsp: suggestions fail: ${trouble.message}${text ? ` (${text})` : ""}. `
      + "The status bar says so until a fill succeeds.",
    setting,
  };
}

/** The tooltip's (and DLM: Show server status's) line for the trouble shown. */
export function troubleLine(trouble: Trouble): string {
  return `last suggestion failed: ${trouble.message} (shown until a fill succeeds)`;
}

/** The trouble shown, and the causes said already. */
export class Troubles {
  private shown: Trouble | undefined;
  private readonly told = new Set<Cause>();

  /** The trouble the status bar shows; undefined once a fill succeeded. */
  get current(): Trouble | undefined {
    return this.shown;
  }

  /**
   * A suggestion failed with `error`: the trouble it is (now shown), and whether to say it
   * (the first of its cause); undefined for any other failure, which changes nothing (a
   * failed load is the status bar's already, a cancel is no failure).
   */
  failed(error: unknown): { trouble: Trouble; tell: boolean } | undefined {
    const trouble = troubleOf(error);
    if (!trouble) return undefined;
    this.shown = trouble;
    const tell = !this.told.has(trouble.cause);
    this.told.add(trouble.cause);
    return { trouble, tell };
  }

  /** A fill succeeded: nothing to show any more; whether something was. */
  succeeded(): boolean {
    const was = this.shown !== undefined;
    this.shown = undefined;
    return was;
  }

  /** A new server, or new settings: shown and said are forgotten (each cause is said again). */
  reset(): void {
    this.shown = undefined;
    this.told.clear();
  }
}
