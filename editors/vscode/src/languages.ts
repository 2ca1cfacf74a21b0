/**
 * Which documents the server is for (`dlm.languages`), and so when it is started.
 *
 * VS Code activates an extension on the events its package.json lists, and that list is
 * fixed when the extension is built: `onLanguage:python` and the other defaults.  A
 * language the user added to `dlm.languages` (say Haskell) activated nothing, so a user
 * who opened only Haskell files got no ghost text and no status bar until a DLM command
 * ran.  The extension now also activates once VS Code has started (`onStartupFinished`),
 * but the server is a Python process that imports torch (~5 s, ~300 MB with the shipped
 * model): it starts only once a document it serves is open (or a DLM command needs it),
 * never for a window of other files.  Until then it is idle, and says why.
 *
 * No `vscode` import: unit-tested with plain objects.
 */

import type { ClientState } from "./status";

/** The URI schemes of the documents the server is sent: files on disk, unsaved ones and
 *  the cells of notebooks (not a git diff's or an output channel's). */
export const SERVED_SCHEMES = ["file", "untitled", "vscode-notebook-cell"] as const;

/**
 * `dlm.languages` as VS Code gives it, as a list of language ids, and what was wrong with
 * it (undefined where nothing was).  A string written in settings.json (`"python"`, the
 * Settings UI's type not checked there) stopped the server at its start with "n.flatMap
 * is not a function": it is read as a list of that one id; anything else that is no list
 * of strings is left for `fallback` (the default list), the ids that are strings kept.
 */
export function languageIds(value: unknown, fallback: readonly string[]): { ids: string[]; problem?: string } {
  if (typeof value === "string") {
    return { ids: [value], problem: `dlm.languages should be a list of language ids, got the string "${value}": read as ["${value}"]` };
  }
  if (!Array.isArray(value)) {
    return { ids: [...fallback], problem: `dlm.languages should be a list of language ids, got ${value === null ? "null" : typeof value}: the default list is used` };
  }
  const ids = value.filter((id): id is string => typeof id === "string");
  return ids.length === value.length
    ? { ids }
    : { ids, problem: "dlm.languages should hold language ids (strings) only: the others are left out" };
}

/** `vscode.NotebookCellKind.Code` (a markdown cell is `Markup`, 1). */
export const CODE_CELL = 2;

/** What the cell filter needs of a notebook cell (a `vscode.NotebookCell` is one). */
export interface NotebookCell {
  kind: number;
  document: { languageId: string };
}

/**
 * The cells of a notebook the client sends the server (`notebookDocumentOptions.filterCells`):
 * its code cells of `languages`.  The server advertises notebook sync for every cell and
 * picks a cell's context itself (the code cells of its language); markdown and the cells
 * of other languages would only be kept there, and counted against maxOpenDocuments.
 */
export function syncedCells<Cell extends NotebookCell>(languages: readonly string[], cells: Cell[]): Cell[] {
  return cells.filter((cell) => cell.kind === CODE_CELL && languages.includes(cell.document.languageId));
}

/** What the decision needs of an open document (a `vscode.TextDocument` is one). */
export interface OpenDocument {
  languageId: string;
  uri: { scheme: string };
}

/** The language client's document selector: the documents of `languages` it syncs. */
export function documentSelector(languages: readonly string[]): { scheme: string; language: string }[] {
  return languages.flatMap((language) => SERVED_SCHEMES.map((scheme) => ({ scheme, language })));
}

/** Whether the server is sent `document` (the selector above, as a predicate). */
export function serves(languages: readonly string[], document: OpenDocument): boolean {
  return (SERVED_SCHEMES as readonly string[]).includes(document.uri.scheme) && languages.includes(document.languageId);
}

/**
 * Why a fill command cannot run on `document`, or undefined where it can.  The context
 * menu and the key binding are offered only in files of `dlm.languages`, but the command
 * palette offers the commands everywhere: run there, a fill started the server and then
 * failed with "document ... is not open" (the server is never sent such a document).
 */
export function unservedReason(languages: readonly string[], document: OpenDocument | undefined,
): string | undefined {
  // run from the palette with no text editor active (a settings page, a notebook with no
  // cell being edited): the command did nothing and said nothing
  if (!document) return "no text editor is active: click into a file or a notebook cell to fill it";
  if (!(SERVED_SCHEMES as readonly string[]).includes(document.uri.scheme)) {
    return `dlm fills files, unsaved documents and notebook cells, not a ${document.uri.scheme} view`;
  }
  if (!languages.includes(document.languageId)) {
    return `${document.languageId} is not one of dlm.languages (${languages.join(", ") || "none"}): `
      + "add it there to fill this file";
  }
  return undefined;
}

/**
 * Whether a server that was never started (`idle`) starts now, with `documents` open: as
 * soon as one of them is the server's.  Once started (or failed, or stopped) it is not
 * started again by opening a file: a start that failed is said once, not at every file.
 */
export function startsNow(state: ClientState, languages: readonly string[],
                          documents: Iterable<OpenDocument>): boolean {
  if (state !== "idle") return false;
  for (const document of documents) if (serves(languages, document)) return true;
  return false;
}

/**
 * Whether a change of the settings that make the server (`dlm.languages`, `dlm.server.*`)
 * restarts it: a server that was started, to apply them, and an idle one when the change
 * makes it the server of an open document (a language added to `dlm.languages`); an idle
 * one that still serves nothing open stays idle.
 */
export function restartsOnSettingsChange(state: ClientState, languages: readonly string[],
                                         documents: Iterable<OpenDocument>): boolean {
  return state !== "idle" || startsNow(state, languages, documents);
}

/**
 * Whether a change of a server setting (`dlm.model`, `dlm.steps`, ...) is sent to the
 * server in `state` (`didChangeConfiguration`): to a running one, and to a starting one
 * once its start has ended.  Its settings were taken when it was launched, and a change
 * made while the first start was under way (seconds: the server imports torch) was sent
 * to no one, the server going on with the old ones.  An idle, stopped or failed one is
 * sent nothing (to a stopped one it failed, "Client is not running", unseen): its next
 * start sends the settings as they are then (`initializationOptions`).
 */
export function sendsSettingChange(state: ClientState): boolean {
  return state === "running" || state === "starting";
}

/** Why the server is not started, and what starts it (DLM: Show server status, a click
 *  on the status bar). */
export function idleReason(languages: readonly string[], documents: Iterable<OpenDocument>): string {
  const open = new Set<string>();
  for (const document of documents) {
    if ((SERVED_SCHEMES as readonly string[]).includes(document.uri.scheme)) open.add(document.languageId);
  }
  const files = open.size ? `the open files are ${[...open].sort().join(", ")}` : "no file is open";
  return `the dlm-lsp server is not started: ${files}, and dlm.languages is ${languages.join(", ") || "empty"}. `
    + "It starts when a file of one of those languages is open, when the language of an open file is added "
    + "to dlm.languages, or when DLM: Restart server runs.";
}
