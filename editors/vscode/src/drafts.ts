/**
 * The live preview of a fill while it denoises.  With the server setting
 * `drafts: true` the server sends `dlm/draft` after each step: the span as it
 * stands, still-masked tokens shown as `░`.  The extension shows it as a faded
 * decoration at the span; this module decides which notifications to show
 * (the newest step of the current document version) and what fits on one line.
 */

import type { Range } from "./edits";

export interface DraftParams {
  textDocument: { uri: string; version?: number | null };
  range: Range;
  text: string;
  step: number;
  steps: number;
}

/** One line of preview: line breaks shown as ⏎, cut to `maxChars` characters (code points:
 *  a cut by UTF-16 units could leave half of one, such as an emoji) with an ellipsis. */
export function draftLabel(text: string, maxChars = 80): string {
  const flat = Array.from(text.replace(/\r?\n/g, " ⏎ ").replace(/\s+$/, ""));
  return flat.length > maxChars ? flat.slice(0, maxChars - 1).join("") + "…" : flat.join("");
}

/** The progress suffix, e.g. "3/8". */
export function draftProgress(params: DraftParams): string {
  return `${params.step}/${params.steps}`;
}

function sameRange(a: Range, b: Range): boolean {
  return a.start.line === b.start.line && a.start.character === b.start.character
    && a.end.line === b.end.line && a.end.character === b.end.character;
}

/** The draft to show per document. */
export class DraftBoard {
  private readonly shown = new Map<string, DraftParams>();

  /**
   * Keep `params` if it is for the document's current version and newer than
   * what is shown for the same span (notifications of a finished fill can
   * arrive after the next one started).  Returns whether it should be shown.
   */
  accept(params: DraftParams, currentVersion: number | undefined): boolean {
    const version = params.textDocument.version;
    if (version !== undefined && version !== null && currentVersion !== undefined
        && version !== currentVersion) return false;
    const uri = params.textDocument.uri;
    const previous = this.shown.get(uri);
    if (previous && sameRange(previous.range, params.range) && previous.step >= params.step
        && previous.textDocument.version === version) return false;
    this.shown.set(uri, params);
    return true;
  }

  get(uri: string): DraftParams | undefined {
    return this.shown.get(uri);
  }

  /** Forget the document's draft (its fill finished, or the document changed). */
  clear(uri: string): boolean {
    return this.shown.delete(uri);
  }

  uris(): string[] {
    return [...this.shown.keys()];
  }
}
