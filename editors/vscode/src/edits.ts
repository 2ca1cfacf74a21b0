/**
 * Text edits as the server sends them, checked and applied without `vscode`.
 *
 * A fill is computed against one version of a document.  The extension applies
 * it only when (1) the server says it answered for the version we asked about,
 * (2) the document is still at that version when the edit is applied
 * (`applyIfFresh`), and (3) every edit lies inside the range we asked to fill:
 * anything else would overwrite what the user typed meanwhile or text the user
 * never offered to the model.
 */

export interface Position {
  line: number;
  character: number; // UTF-16 code units, the LSP default and JavaScript's string index
}

export interface Range {
  start: Position;
  end: Position;
}

export interface TextEdit {
  range: Range;
  newText: string;
}

export type Verdict = { apply: true } | { apply: false; reason: string; nothingWritten?: true };

/**
 * What a fill that is not applied is said as: one the server wrote nothing for (every
 * candidate whitespace) as the commands say they applied nothing, else as a dropped fill.
 * "fill dropped: the model wrote only whitespace ...; nothing applied" read as if the
 * document had changed under it.
 */
export function notAppliedNote(verdict: { reason: string; nothingWritten?: true }): string {
  return verdict.nothingWritten ? nothingApplied(verdict.reason) : droppedNote(verdict.reason);
}

/** What a fill the extension did not apply is said as: as the server says one it dropped
 *  itself (-32801, "fill dropped: the document changed while the fill was computed"), so
 *  that the same event reads the same whichever side noticed it first.  It read
 *  "fill dropped (the document changed (version 3 -> 4))". */
export function droppedNote(reason: string): string {
  return `fill dropped: ${reason}`;
}

/** Whether a result computed for `answered` may be applied to a document now at `current`. */
export function checkVersion(requested: number, answered: number | null | undefined,
                             current: number): Verdict {
  if (answered !== null && answered !== undefined && answered !== requested) {
    return { apply: false, reason: `the server filled version ${answered}, not ${requested}` };
  }
  if (current !== requested) {
    return { apply: false, reason: `the document changed (version ${requested} -> ${current})` };
  }
  return { apply: true };
}

export function comparePositions(a: Position, b: Position): number {
  return a.line - b.line || a.character - b.character;
}

/** Whether `inner` lies within `outer` (edges included). */
export function rangeContains(outer: Range, inner: Range): boolean {
  return comparePositions(outer.start, inner.start) <= 0 && comparePositions(inner.end, outer.end) <= 0;
}

/**
 * The verdict on a whole result: fresh, with an edit (the server gives none, with a
 * `message`, where every candidate was whitespace in place of code), and every edit
 * inside the requested range.
 */
export function checkResult(requested: { version: number; range: Range }, answer: {
  version?: number | null; edits: TextEdit[]; message?: string;
}, currentVersion: number): Verdict {
  const fresh = checkVersion(requested.version, answer.version, currentVersion);
  if (!fresh.apply) return fresh;
  if (answer.edits.length === 0 && answer.message) {
    return { apply: false, reason: answer.message, nothingWritten: true };
  }
  const outside = answer.edits.find((e) => !rangeContains(requested.range, e.range));
  if (outside) return { apply: false, reason: "an edit lies outside the requested range" };
  return { apply: true };
}

/**
 * Said when VS Code refused an edit of a document that had not changed.  VS Code gives the
 * extension no reason (`workspace.applyEdit` resolves false; its main thread logs "IGNORING
 * workspace edit: <error>" in the Window log), so this says none.  It asked "is it
 * read-only?", but a read-only document is no refusal: VS Code (code-server 4.139.1) applies
 * an extension's edit to one (`files.readonlyInclude`, a file without write permission
 * under `files.readonlyFromPermissions`, or set read-only for the session) in the editor,
 * answers true, and leaves the file on disk as it was.
 */
export const EDITOR_REFUSED = "VS Code did not apply the edit and gave no reason (its Window log may say "
  + "why: Output, Window), the document unchanged";

/**
 * Why VS Code did not apply an edit made for `version` of a document now at `current`
 * (read once the refusal is back: the change that made VS Code refuse it reached the
 * extension host before the answer did).  Every refusal was said as "the document changed
 * before the edit could be applied", also where nothing had changed: the user of a
 * read-only file was told to have typed.
 */
export function whyRefused(version: number | null | undefined, current: number): string {
  if (version !== null && version !== undefined && current !== version) {
    return `the document changed (version ${version} -> ${current})`;
  }
  return EDITOR_REFUSED;
}

/** A `workspace/applyEdit`'s edit, as far as `applyEditFailure` reads it. */
export interface VersionedEdits {
  documentChanges?: ({ textDocument?: { uri: string; version: number | null } } | object)[];
  changes?: Record<string, unknown>;
}

/**
 * The `failureReason` of a `workspace/applyEdit` that VS Code's language client answered
 * `{applied: false}`, which it does with no reason: the server's commands say the editor's
 * reason (`nothing applied (<reason>)` in the status bar), and without one the extension
 * could only guess.  `versionOf` gives an open document's version (undefined: not open).
 */
export function applyEditFailure(edit: VersionedEdits, versionOf: (uri: string) => number | undefined): string {
  const targets: { uri: string; version: number | null }[] = [];
  for (const change of edit.documentChanges ?? []) {
    if ("textDocument" in change && change.textDocument) targets.push(change.textDocument);
  }
  for (const uri of Object.keys(edit.changes ?? {})) targets.push({ uri, version: null });
  for (const { uri, version } of targets) {
    const current = versionOf(uri);  // a document not open VS Code opens to edit it
    if (current !== undefined && whyRefused(version, current) !== EDITOR_REFUSED) return whyRefused(version, current);
  }
  return EDITOR_REFUSED;
}

/**
 * Apply a fill the way that cannot land on another version of the document than the one
 * it was computed for: the edits are converted first (`convert` may await), then the
 * verdict is taken on the document's version *now*, and `apply` is called in the same
 * synchronous stretch.  VS Code's `workspace.applyEdit` stamps each text edit with the
 * version the extension host sees at that call, and its main thread refuses an edit whose
 * document has moved past it (`apply` then resolves false); so nothing may await between
 * the last look at `currentVersion` and `apply`.  The check used to come before the
 * conversion's await: a keystroke that reached the extension host meanwhile was stamped
 * as the fill's version, and the fill landed on text it was not computed for.
 */
export async function applyIfFresh<T>(requested: { version: number; range: Range },
                                      answer: { version?: number | null; edits: TextEdit[]; message?: string },
                                      currentVersion: () => number,
                                      convert: (edits: TextEdit[]) => T | Promise<T>,
                                      apply: (converted: T) => PromiseLike<boolean>): Promise<Verdict> {
  const before = checkResult(requested, answer, currentVersion());
  if (!before.apply) return before;  // no conversion for an answer that cannot be applied
  const converted = await convert(answer.edits);
  const now = checkResult(requested, answer, currentVersion());
  if (!now.apply) return now;
  return (await apply(converted)) ? { apply: true }
    : { apply: false, reason: whyRefused(requested.version, currentVersion()) };
}

/** String index of an LSP position (positions past a line's end clamp to it). */
export function offsetAt(text: string, position: Position): number {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    const next = text.indexOf("\n", offset);
    if (next < 0) return text.length;
    offset = next + 1;
  }
  const lineEnd = text.indexOf("\n", offset);
  const end = lineEnd < 0 ? text.length : lineEnd;
  return Math.min(offset + position.character, end);
}

/** LSP position of a string index. */
export function positionAt(text: string, offset: number): Position {
  const before = text.slice(0, offset);
  const line = before.split("\n").length - 1;
  return { line, character: offset - (before.lastIndexOf("\n") + 1) };
}

/** Apply edits that all refer to `text` (LSP semantics: non-overlapping, applied at once). */
export function applyTextEdits(text: string, edits: TextEdit[]): string {
  const spans = edits.map((e) => ({
    start: offsetAt(text, e.range.start), end: offsetAt(text, e.range.end), newText: e.newText,
  }));
  spans.sort((a, b) => b.start - a.start || b.end - a.end);
  for (const s of spans) text = text.slice(0, s.start) + s.newText + text.slice(s.end);
  return text;
}

/**
 * The hole marker on a line that a cursor at `character` means: the one it is
 * in or touching, else the nearest on the line; undefined when the line has none.
 * Returns [start, end) columns.
 */
export function holeNear(lineText: string, character: number, marker: string): [number, number] | undefined {
  if (!marker) return undefined;
  let best: [number, number] | undefined;
  let bestDistance = Infinity;
  for (let at = lineText.indexOf(marker); at >= 0; at = lineText.indexOf(marker, at + marker.length)) {
    const end = at + marker.length;
    const distance = character < at ? at - character : character > end ? character - end : 0;
    if (distance < bestDistance) {
      best = [at, end];
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * What to warn about after applying fills the syntax check rejected, or undefined.
 * An explicit fill is applied even when no candidate parsed (the best one is still a
 * draft worth editing), so the user must be told to look at it: `valid` is a
 * `dlm/infill` candidate's verdict, a `dlm.rewriteSelection` result's, or
 * `dlm.fillHoles`' list of them (null where nothing was checked: no warning).
 */
export function syntaxWarning(valid: boolean | null | undefined | (boolean | null)[]): string | undefined {
  const verdicts = Array.isArray(valid) ? valid : [valid];
  const bad = verdicts.filter((v) => v === false).length;
  if (bad === 0) return undefined;
  // "does not parse" was wrong for most: the names check (a name nothing defines), the
  // calls' and the others reject code that parses and would fail when run
  if (verdicts.length === 1) return "the check rejected the fill (it does not parse, or would fail when run)";
  return `the check rejected ${bad} of ${verdicts.length} fills (they do not parse, or would fail when run)`;
}

/**
 * What a command that applied nothing says: the server's `why` in brackets, or alone
 * where it says so itself ("...; nothing applied", which read twice).
 */
export function nothingApplied(why: string): string {
  return why.endsWith("nothing applied") ? why : `nothing applied (${why})`;
}

/**
 * What **Fill holes** says once its edit is applied, of `holes` holes, `blank` of which
 * the model filled with whitespace only: a blank fill is applied (nothing may be what goes
 * in a hole), and "filled 1 hole" of a model that wrote nothing hid that it did.
 */
export function holesFilled(holes: number, blank = 0): string {
  const filled = `filled ${holes} hole${holes === 1 ? "" : "s"}`;
  if (blank <= 0) return filled;
  const which = blank < holes ? `${blank} blank` : holes === 1 ? "blank" : "all blank";
  return `${filled} (${which}: the model wrote no code there)`;
}

/**
 * The document a server command's arguments name (`dlm.fillHoles [uri]`,
 * `dlm.rewriteSelection [uri, range]` or `[{uri, range, ...}]`), as the server's code
 * actions give them; undefined for arguments of another shape (run as they are).
 */
export function commandDocument(args: unknown[]): string | undefined {
  const first = args[0];
  if (typeof first === "string") return first;
  const uri = first !== null && typeof first === "object" ? (first as { uri?: unknown }).uri : undefined;
  return typeof uri === "string" ? uri : undefined;
}

/**
 * What **Fill selection** says once its edits are applied where they only take a hole
 * marker away (the server applies no blanks in place of code, nor at a cursor): as
 * **Fill holes** says it of one hole; undefined where the fill wrote code.
 */
export function blankHoleNote(edits: { newText: string }[]): string | undefined {
  return edits.length && edits.every((edit) => !edit.newText.trim()) ? holesFilled(1, 1) : undefined;
}

/**
 * What **Fill selection** says, once its fill is applied, of the editor's `count`
 * selections (cursors included): it fills the primary one only, and with several the
 * others were left as they were without a word.  Filling each is not offered: one
 * request each, every edit moving the ranges of those below it, each fill seeing the
 * ones before as text the user wrote.  Undefined with one selection.
 */
export function primaryOnlyNote(count: number): string | undefined {
  if (count <= 1) return undefined;
  const others = count - 1;
  return `dlm: filled the primary selection only (${others} other selection${others > 1 ? "s" : ""} left as ${others > 1 ? "they were" : "it was"})`;
}

/**
 * What **Rewrite block** rewrites for the editor's `selections` (a line's length is
 * `lineLength(line)`): a selection as it is, a cursor's whole line, and several
 * selections (a column selection, Alt+Shift+drag, or cursors on several lines) the lines
 * from the first one's to the last one's, whole.  Only the primary selection was read: a
 * column selection over a block's lines rewrote a few columns of one of them.
 */
export function rewriteRange(selections: readonly Range[], lineLength: (line: number) => number): Range {
  if (selections.length === 1 && comparePositions(selections[0].start, selections[0].end) !== 0) {
    return selections[0];
  }
  const first = Math.min(...selections.map((s) => s.start.line));
  const last = Math.max(...selections.map((s) => s.end.line));
  return { start: { line: first, character: 0 }, end: { line: last, character: lineLength(last) } };
}
