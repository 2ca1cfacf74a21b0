/**
 * Retrying a failed model load: **DLM: Retry loading the model** (`dlm/retryLoad`).
 *
 * After a failed load the server fails each fill at once, with the same error, until a
 * wait is over (`loadRetryS` of `dlm/status`, doubling at each failure up to a minute);
 * the next fill after it loads again.  A user who has mended the checkpoint or freed
 * memory had to wait for that, or restart the server (a new process importing torch).
 * Now the failed load says when it is tried again, and offers the retry wherever it
 * shows: the status bar (its click), DLM: Show server status, the server's error message
 * of the failure (a Retry button), and the command's own answer.
 *
 * The retry shows as the first load does: the server's `$/progress` and the status bar's
 * "loading" (no progress notification of its own beside them).  The server also says the
 * failure again, in an error message, before it answers; the command's own answer says it
 * too, with Retry on it, so that one is held back (`HeldMessages`).
 *
 * No `vscode` import: unit-tested with node.
 */

import { type ClientState, loadFailed, modelLabel, RETRY_TITLE, retryWhen, type ServerStatus } from "./status";

export const RETRY_LOAD = "dlm/retryLoad";
/** The command (package.json), the status bar's click on a failed load. */
export const RETRY_COMMAND = "dlm-lsp.retryLoad";

/**
 * Whole seconds until the server tries the failed load again (at the next fill after
 * that), `nowMs - askedAtMs` after `status` was answered; 0 once the wait is over;
 * undefined where no load failed or the server did not say (an older server).
 */
export function retryWaitS(status: ServerStatus | undefined, askedAtMs: number, nowMs: number): number | undefined {
  if (!loadFailed(status) || typeof status.loadRetryS !== "number") return undefined;
  return Math.max(0, Math.ceil(status.loadRetryS - (nowMs - askedAtMs) / 1000));
}

/** What DLM: Show server status says of a failed load, under the status it prints. */
export function loadFailureSentence(status: ServerStatus & { loadError: string }, waitS: number | undefined): string {
  return `the model failed to load: ${status.loadError}; it is tried again ${retryWhen(waitS)}, `
    + `or now with ${RETRY_TITLE}`;
}

/** What the command says of the status `dlm/retryLoad` answered, and whether that is a failure. */
export function retryOutcome(status: ServerStatus): { text: string; failed: boolean } {
  const model = modelLabel(status.model);
  if (status.loaded) return { text: `dlm-lsp: model ${model} loaded on ${status.device ?? "?"}`, failed: false };
  if (status.reachable === false) {
    return { text: `dlm-lsp: ${model} is still unreachable: ${status.loadError ?? "no answer"}`, failed: true };
  }
  if (status.loadError) return { text: `dlm-lsp: model ${model} failed to load again: ${status.loadError}`, failed: true };
  return { text: `dlm-lsp: model ${model} is not loaded yet`, failed: false };
}

/** Whether the server's error message `message` is its notice of the failed load `status` says. */
export function isLoadFailureMessage(message: string, status: ServerStatus | undefined): boolean {
  return loadFailed(status) && message === `dlm-lsp: ${status.loadError}`;
}

/** The setting a failed load's "Open settings" opens: the service's URL where it does not
 *  answer (`backend: remote` or `sglang`, whose model is the service's), the device where
 *  the server says to set it (CUDA asked for where there is none: a Retry alone could only
 *  fail again), else the model. */
export function retrySetting(status: ServerStatus): string {
  if (status.reachable === false) return "dlm.remoteUrl";
  return /\bset device to\b/.test(status.loadError ?? "") ? "dlm.device" : "dlm.model";
}

/** Whether `message` is the server's error message of what `status` says in `loadError`:
 *  a failed load, or a service that does not answer (`backend: remote`, whose `preload`
 *  says "dlm-lsp: cannot reach ..." as the status's loadError does). */
function saysLoadError(message: string, status: ServerStatus | undefined): boolean {
  return !!status && !status.loaded && !!status.loadError && message === `dlm-lsp: ${status.loadError}`;
}

/**
 * The server's error messages while a retry is out: said at the answer, except the one
 * the answer says itself (its load failure, or the service still unreachable, which the
 * command says with Retry on it).
 */
export class HeldMessages {
  private held: string[] | undefined;

  /** A retry is out: hold the error messages from now on. */
  hold(): void {
    this.held ??= [];
  }

  /** Whether `message` was held (else it is to be shown now). */
  offer(message: string): boolean {
    if (!this.held) return false;
    this.held.push(message);
    return true;
  }

  /** The retry answered `status` (undefined: it failed): the messages still to show. */
  release(status: ServerStatus | undefined): string[] {
    const held = this.held ?? [];
    this.held = undefined;
    return held.filter((message) => !saysLoadError(message, status));
  }
}

/** The status bar item's click: the retry where the load failed, else DLM: Show server status. */
export function statusClick(state: ClientState, status: ServerStatus | undefined): string {
  return state === "running" && loadFailed(status) ? RETRY_COMMAND : "dlm-lsp.showStatus";
}
