/**
 * Completion items answered for the cursor, given to a completion request VS Code made
 * earlier in the same word.  With `editor.quickSuggestions: "on"` VS Code asks for
 * completion items at a word's first key and asks nothing more while that request is
 * pending; the request waits until typing pauses (debounce.ts, `CompletionGate`), and is
 * then answered with the server's items for the cursor, the word typed by then.
 *
 * VS Code (1.139) reads an item's range against the request's position, not the cursor's:
 * it filters the item by the text from the range's start to the cursor, and on accepting
 * it replaces the text from that start to the cursor, plus as many characters after the
 * cursor as the range reaches past the request's position.  The server's range for the
 * word at the cursor (start of the word to the cursor), given as is, would also delete as
 * many characters after the cursor as the user typed after the request's position.  So
 * the range's end is moved back by that much (`reachBack`); its start stays, and must lie
 * at or before the request's position.  None of this imports `vscode`.
 */

/** A place in a document, as VS Code and LSP count it (zero-based line, UTF-16 column). */
export interface Point {
  readonly line: number;
  readonly character: number;
}

export interface Span {
  readonly start: Point;
  readonly end: Point;
}

/**
 * Where to answer a request made at `asked` that the user typed past: at the cursor (the
 * editor's, undefined without one, or with a selection), if it is on the same line at or
 * after `asked`.  Elsewhere (another line, or back before it) VS Code has ended or restarted
 * its request itself; undefined.
 */
export function answerAt(asked: Point, cursor: Point | undefined): Point | undefined {
  if (!cursor || cursor.line !== asked.line || cursor.character < asked.character) return undefined;
  return cursor;
}

/**
 * An item's `range` from the server's answer at `cursor`, as VS Code needs it for the request
 * made at `asked` (see the module's docstring): the same start, the end as far past `asked`
 * as it was past `cursor`.  Undefined for a range VS Code cannot take for that request: one
 * starting after `asked`, ending before `cursor`, or not on their line.
 */
export function reachBack(range: Span, asked: Point, cursor: Point): Span | undefined {
  const { start, end } = range;
  if (start.line !== asked.line || end.line !== asked.line || asked.line !== cursor.line) return undefined;
  if (start.character > asked.character || end.character < cursor.character) return undefined;
  return { start, end: { line: asked.line, character: asked.character + end.character - cursor.character } };
}
