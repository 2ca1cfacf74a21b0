/**
 * Settings: which VS Code settings go to the server, and how the server is started.
 *
 * package.json contributes two sections.  `dlm.client` holds what only the
 * extension reads (how to start the server, ghost-text debounce...).
 * `dlm.server` mirrors the server's `ServerConfig` field by field and is
 * generated from it (scripts/sync_settings.py); those keys, and only those,
 * are sent as initializationOptions and on every configuration change, so the
 * server never sees a key it would reject as unknown.
 */

import { StartTimeout } from "./lifecycle";

export const SERVER_SECTION_ID = "dlm.server";
export const PREFIX = "dlm.";

interface ConfigurationSection {
  id?: string;
  properties?: Record<string, unknown>;
}

/** The server's setting names (camelCase, without "dlm.") from the extension's manifest. */
export function serverSettingKeys(packageJson: {
  contributes?: { configuration?: ConfigurationSection[] | ConfigurationSection };
}): string[] {
  const sections = packageJson.contributes?.configuration ?? [];
  const list = Array.isArray(sections) ? sections : [sections];
  const server = list.find((s) => s.id === SERVER_SECTION_ID);
  return Object.keys(server?.properties ?? {})
    .filter((key) => key.startsWith(PREFIX))
    .map((key) => key.slice(PREFIX.length));
}

/**
 * The settings object the server reads: every server key with its current value.
 * All keys are sent, defaults included, because the server overlays each change
 * on its current settings: a setting the user removes must be sent back at its
 * default to take effect.  `null` stays `null` (the server's "use the default").
 */
export function serverSettings(keys: readonly string[],
                               get: (key: string) => unknown): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const key of keys) {
    const value = get(key);
    if (value !== undefined) settings[key] = value;
  }
  return settings;
}

/** The command line that starts the server: `${workspaceFolder}` and a leading `~` expanded. */
export function serverCommand(path: string, args: readonly string[], workspaceFolder?: string,
                              home?: string): { command: string; args: string[] } {
  const expand = (value: string): string => {
    let out = value;
    if (workspaceFolder !== undefined) out = out.split("${workspaceFolder}").join(workspaceFolder);
    if (home !== undefined && (out === "~" || out.startsWith("~/"))) out = home + out.slice(1);
    return out;
  };
  return { command: expand(path.trim() || "dlm-lsp"), args: args.map(expand) };
}

/** `dlm.server.address`: "HOST:PORT" (IPv6 as "[::1]:PORT") of a shared `dlm-lsp --tcp`
 *  server, parsed; or why it is not one. */
export function parseAddress(address: string): { host: string; port: number } | { error: string } {
  const match = /^(.+):(\d+)$/.exec(address.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || port < 1 || port > 65535) {
    return { error: `dlm.server.address "${address}" is not HOST:PORT (e.g. 127.0.0.1:2087)` };
  }
  return { host: match[1].replace(/^\[(.*)\]$/, "$1"), port };
}

/** The initializationOptions for a shared server: the settings plus its token (the
 *  `dlm.server.token` setting, else the environment's DLM_LSP_TCP_TOKEN), which the
 *  server checks and drops; a server of our own (no address) gets no token. */
export function withToken(settings: Record<string, unknown>, address: string, token: string,
                          env: Record<string, string | undefined>): Record<string, unknown> {
  const value = token.trim() || env.DLM_LSP_TCP_TOKEN || "";
  return address.trim() && value ? { ...settings, token: value } : settings;
}

/**
 * A traced message with the values of its token settings hidden: with `dlm.trace.server`
 * at `verbose` (and the output at Trace), the client wrote the whole `initialize` and each
 * settings change to the dlm-lsp output, the shared server's token and `remoteToken`
 * among them, in a log users are asked to attach to a bug report.
 */
export function hideSecrets(text: string): string {
  // `token` is a secret in the settings only: a progress message's is the progress token,
  // which a reader of the trace matches with the request that began it
  const names = SETTINGS_MESSAGE.test(text) ? "token|remoteToken" : "remoteToken";
  return text.replace(new RegExp(`("(?:${names})"\\s*:\\s*)"(?:[^"\\\\]|\\\\.)*"`, "g"),
                      '$1"(hidden)"');
}

/** A traced message that carries the settings (its method, as the trace names it). */
const SETTINGS_MESSAGE = /["'](?:initialize|workspace\/didChangeConfiguration)\b/;

/** JSON-RPC codes a shared server refuses `initialize` with (dlm_lsp/errors.py). */
export const SERVER_BUSY = -32004;
export const UNAUTHORIZED = -32006;
/** vscode-jsonrpc's code for a request whose connection closed before the answer came. */
export const PENDING_RESPONSE_REJECTED = -32097;
/** ... and for one it could not send: the process had exited already ("Cannot call write
 *  after a stream was destroyed"), which of the two depends on which came first. */
export const MESSAGE_WRITE_ERROR = -32099;

/**
 * What to do when the server could not be started or reached: the fix depends on why.
 * A shared server that refused the token, or is at its --max-clients, is running and
 * reachable, so "start it, or clear the address" would send the user the wrong way.
 */
export function startFailureHint(address: string, error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (address.trim() && code === UNAUTHORIZED) {
    return "Set dlm.server.token (or DLM_LSP_TCP_TOKEN) to the token that server was started with.";
  }
  if (address.trim() && code === SERVER_BUSY) {
    return "That server is serving its most clients (its --max-clients); try again later.";
  }
  // something listens there but never answers (a stuck server, another program)
  if (address.trim() && error instanceof StartTimeout) {
    return "Is `dlm-lsp --tcp` running there, and not stuck? Or clear dlm.server.address.";
  }
  // the executable ran and exited (a Python without the server's packages, a crash at
  // import): it is found, so pointing at dlm.server.path would send the user the wrong way
  if (code === PENDING_RESPONSE_REJECTED || code === MESSAGE_WRITE_ERROR) {
    return address.trim() ? "The server there closed the connection before it answered: is it `dlm-lsp --tcp`?"
      : "The server exited before it answered; the dlm-lsp output says why.";
  }
  return address.trim() ? "Start `dlm-lsp --tcp` there, or clear dlm.server.address."
    : "Set dlm.server.path to the server executable.";
}

/** Where a setting is defined, as `WorkspaceConfiguration.inspect` reports it. */
export interface Inspected<T> {
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/**
 * Where a toggle must write a setting for the change to show: the most specific scope
 * that defines it (a workspace's `dlm.inline.enabled: false` would hide a user-level
 * `true`, and the toggle would seem to do nothing), else the user settings.
 */
export function toggleScope<T>(inspected: Inspected<T> | undefined): "folder" | "workspace" | "user" {
  if (inspected?.workspaceFolderValue !== undefined) return "folder";
  if (inspected?.workspaceValue !== undefined) return "workspace";
  return "user";
}
