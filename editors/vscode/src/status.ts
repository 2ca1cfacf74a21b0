/**
 * What the status bar says: the model, the device it runs on, and how long the
 * last fill took (from a `dlm/infill` result's stats) or the server's median
 * (`p50Ms` of `dlm/status`) when the extension has not timed one itself.
 */

import { type OpenDocument, serves } from "./languages";
import { type Finding } from "./poll";
import { type Trouble, troubleLabel, troubleLine } from "./trouble";

/** The fields of a `dlm/status` result that the status bar shows. */
export interface ServerStatus {
  model?: string;
  loaded?: boolean;
  /** Why the model last failed to load; null once a load succeeds or the settings change. */
  loadError?: string | null;
  /** After a failed load: the seconds until the next fill loads again (0: the next fill does). */
  loadRetryS?: number | null;
  /** A load is under way (also one tried again after a failure, with `loadError` still set). */
  loading?: boolean;
  /** With `backend: remote` or `sglang`: whether the service answered (false: `loadError` says why). */
  reachable?: boolean;
  device?: string | null;
  fills?: number;
  p50Ms?: number | null;
  p95Ms?: number | null;
  tokensPerSecond?: number | null;
  queueDepth?: number;
}

/** `idle`: not started yet, no open document being the server's (languages.ts). */
export type ClientState = "idle" | "starting" | "running" | "stopped" | "failed";

/** The way back from a server that stopped or failed: said wherever that shows. */
export const RESTART_HINT = "DLM: Restart server starts it again";

/** What DLM: Show server status says of a server that is not running (nor idle): it read
 *  "the dlm-lsp server is failed", and did not point at the error logged just above it. */
export function stateSentence(state: "starting" | "stopped" | "failed"): string {
  if (state === "starting") return "the dlm-lsp server is starting";
  if (state === "failed") return `the dlm-lsp server failed to start (the error above says why): ${RESTART_HINT}`;
  return `the dlm-lsp server has stopped (the lines above say why): ${RESTART_HINT}`;
}

/** The way to load a model that failed to, now: said wherever a failed load shows (retry.ts). */
export const RETRY_TITLE = "DLM: Retry loading the model";

/** A failed load, not one tried again now (`loading`), nor a service that does not answer
 *  (followed until it does). */
export function loadFailed(status: ServerStatus | undefined): status is ServerStatus & { loadError: string } {
  return !!status && !status.loaded && !!status.loadError && status.reachable !== false && !status.loading;
}

/** When the server loads a failed model again, `waitS` seconds from now (retry.retryWaitS). */
export function retryWhen(waitS: number | undefined): string {
  return waitS ? `at the next fill after ${waitS} s` : "at the next fill";
}

/** What starts a server that was never started: said in the idle status bar's tooltip. */
export const IDLE_HINT = "it starts when a file of dlm.languages is open, or a DLM command needs it (click: why)";

/**
 * Whether the status bar item shows, with `active` the document of the editor the user is
 * looking at (none: a settings page, an empty window) and `asked` whether a fill command
 * was refused in it (languages.unservedReason).  The extension activates in every window
 * (onStartupFinished), and an idle item read "dlm: not started" in windows of Markdown or
 * JSON that dlm will never serve: noise, where language extensions show their status only
 * in their languages.  So an idle server shows only where it has something to say: in a
 * document it serves (it is about to start there), or one a fill command was refused in,
 * whose user wants dlm there and can click it to learn why not.  A server that was started
 * shows everywhere: it holds a model (~300 MB with the shipped one) whatever the user
 * looks at, and a failed or stopped one says how to start it again.  DLM: Show server
 * status says why the server is idle whether the item shows or not.
 */
export function statusShown(state: ClientState, languages: readonly string[], active: OpenDocument | undefined,
                            asked = false): boolean {
  if (state !== "idle") return true;
  return active !== undefined && (asked || serves(languages, active));
}

/**
 * What polling dlm/status makes of an answer (poll.ts): `over` once the model has loaded
 * or its load failed (the server tries again at a fill after a wait, or at once on DLM: Retry
 * loading the model; a fill's failure, or its answer, asks again); a failed load tried again
 * (`loading`, its old `loadError` still said) is followed as a first load is; `down` while a remote service does not answer (`reachable` false, with its
 * reason in `loadError`), which it may do again at any time; else, and before any answer,
 * `loading`.  A service down was `over`: the status bar said "unreachable" until the next
 * fill or click, however long ago the service came back.
 */
export function loadFinding(status: ServerStatus | undefined): Finding {
  if (!status) return "loading";
  if (status.loaded) return "over";
  if (status.loading) return "loading";  // a failed load tried again: it may load this time
  if (status.reachable === false) return "down";
  return status.loadError ? "over" : "loading";
}

/** What an explicit fill's answer says of the fill: the holes it found (Fill holes), the
 *  server's own timing of it (dlm/infill's stats). */
export interface FillAnswer {
  holes?: number;
  stats?: { ms?: number };
}

/**
 * The "last fill" latency of an explicit fill (a command) that took `elapsedMs`: the
 * server's timing where it gave one, else the time the command took; undefined where
 * no fill ran, which must leave "last fill" as it was.  A Fill holes that found no
 * holes answers in a few milliseconds, and "last fill: 4 ms" claimed a fill as fast
 * as no model is; nor did a cancelled or failed request (no answer) fill anything.
 */
export function fillLatency(answer: FillAnswer | undefined, elapsedMs: number): number | undefined {
  if (!answer || answer.holes === 0) return undefined;
  return answer.stats?.ms ?? elapsedMs;
}

/**
 * The "last fill" latency of a ghost text request answered with `items` suggestions after
 * `elapsedMs`: undefined where it offered none, which leaves "last fill" as it was.  Asked
 * at the end of a suggestion the user just accepted, the server answers at once with none
 * and runs no fill (its offers.py): "last fill: 3 ms" after each Tab claimed a fill as fast
 * as no model is.  (A fill that offered nothing, its text only whitespace, is not counted
 * either: nothing was shown for it.)
 */
export function suggestionLatency(items: number, elapsedMs: number): number | undefined {
  return items > 0 ? elapsedMs : undefined;
}

/** The requests VS Code makes by itself as the user types: ghost text and completion items. */
export const SUGGESTION_REQUESTS: readonly string[] = ["textDocument/inlineCompletion", "textDocument/completion"];

/**
 * Whether a request of `method` that failed pops up a notification (the language client's
 * "Request ... failed.").  Not a suggestion's: VS Code asks for one at every pause in typing,
 * and where fills fail (the model did not load, the remote service is down) each pause popped
 * up the same error again, with no more to say than the status bar ("failed to load",
 * "unreachable", asked after the failure) and the one notification of the failed load.  The
 * dlm-lsp output still logs each.  A command the user ran says its own failure (a warning).
 */
export function failurePopsUp(method: string): boolean {
  return !SUGGESTION_REQUESTS.includes(method);
}

/**
 * Whether a request's error `code` says its connection ended before the answer came
 * (vscode-jsonrpc's PendingResponseRejected -32097 and ConnectionInactive -32096): the
 * user restarted the server, changed a setting that restarts it, or it stopped, which
 * is said apart (with a Restart button).  The fill was not refused: a warning of the
 * library's "Pending response rejected since connection got disposed" told the user
 * nothing they could act on.
 */
export function endedWithConnection(code: number): boolean {
  return code === -32097 || code === -32096;
}

/** A model setting can be a directory: show its last path component. */
export function modelLabel(model: string | undefined): string {
  if (!model) return "?";
  const parts = model.split(/[\\/]/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : model;
}

export function formatMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** What the status bar says beside the status: seconds until a failed load's next try
 *  (retry.retryWaitS) and the trouble of the suggestions (trouble.ts). */
export interface StatusMore {
  retryInS?: number;
  trouble?: Trouble;
}

/**
 * The status bar text (with a codicon).  With ghost text turned off (`dlm.inline.enabled`,
 * "DLM: Toggle inline suggestions") it says so where the latency would be: a user who
 * paused suggestions must see at a glance why none appear.  While a suggestion or a
 * command's fill is being computed (`busy`) the icon spins, paused or not.  A failed load
 * counts down to its next try (`retryInS`); suggestions that fail for a reason the status
 * does not show (`trouble`: timed out, out of memory) show a warning in place of the latency.
 */
export function statusText(state: ClientState, status?: ServerStatus, lastMs?: number,
                           inline = true, busy = false, more: StatusMore = {}): string {
  // not "starting": nothing is, and a spinner would turn for ever in a window of other files
  if (state === "idle") return "$(circle-outline) dlm: not started";
  if (state === "failed") return "$(error) dlm: server failed";
  if (state === "stopped") return "$(circle-slash) dlm: stopped";
  if (state === "starting" || !status) return "$(loading~spin) dlm: starting";
  // a failed load is not "loading": the spinner would turn for ever (the error's own
  // message went by once, when the server tried); a service that does not answer loads
  // nothing here, and "127.0.0.1:8000 failed to load" sent the user to look for a model
  if (!status.loaded && status.reachable === false) return `$(error) dlm: ${modelLabel(status.model)} unreachable`;
  if (loadFailed(status)) {
    const next = more.retryInS ? ` · retry in ${more.retryInS} s` : "";
    return `$(error) dlm: ${modelLabel(status.model)} failed to load${next}`;
  }
  if (!status.loaded) return `$(loading~spin) dlm: loading ${modelLabel(status.model)}`;
  const parts = [modelLabel(status.model), status.device ?? "?"];
  // a command run while suggestions are off (`busy`) spins the icon too
  if (!inline) return `${busy ? "$(loading~spin)" : "$(eye-closed)"} dlm: ${parts.join(" · ")} · suggestions off`;
  // the latency of fills that work says nothing of the ones failing now
  if (more.trouble) {
    return `${busy ? "$(loading~spin)" : "$(warning)"} dlm: ${[...parts, troubleLabel(more.trouble)].join(" · ")}`;
  }
  const ms = lastMs ?? status.p50Ms ?? undefined;
  if (ms !== undefined && ms !== null) parts.push(formatMs(ms));
  // a suggestion being computed spins the icon: on a CPU a fill takes a noticeable while
  return `${busy ? "$(loading~spin)" : "$(sparkle)"} dlm: ${parts.join(" · ")}`;
}

/** The tooltip: everything known, one fact per line. */
export function statusTooltip(state: ClientState, status?: ServerStatus, lastMs?: number,
                              inline = true, more: StatusMore = {}): string {
  if (state === "idle") return ["dlm-lsp: not started", IDLE_HINT].join("\n");
  const lines = [`dlm-lsp: ${state}`];
  // the status of a server that is gone would describe another process
  if (state === "stopped" || state === "failed") return [...lines, RESTART_HINT].join("\n");
  if (!inline) lines.push("inline suggestions: off (DLM: Toggle inline suggestions)");
  if (status) {
    const unreachable = !status.loaded && status.reachable === false;
    const state = status.loaded ? "loaded" : unreachable ? "unreachable" : status.loading ? "loading"
      : status.loadError ? "failed to load" : "not loaded yet";
    lines.push(`model: ${status.model ?? "?"} (${state})`);
    if (!status.loaded && status.loadError) {
      lines.push(`${unreachable ? "unreachable" : status.loading ? "last load failed" : "load failed"}: ${status.loadError}`);
    }
    if (loadFailed(status)) lines.push(`tried again ${retryWhen(more.retryInS)}; now: click, or ${RETRY_TITLE}`);
    if (status.loaded && more.trouble) lines.push(troubleLine(more.trouble));
    lines.push(`device: ${status.device ?? "?"}`);
    if (lastMs !== undefined) lines.push(`last fill: ${formatMs(lastMs)}`);
    if (status.p50Ms != null) lines.push(`p50 / p95: ${formatMs(status.p50Ms)} / ${formatMs(status.p95Ms ?? status.p50Ms)}`);
    if (status.fills !== undefined) lines.push(`fills: ${status.fills}`);
  }
  return lines.join("\n");
}
