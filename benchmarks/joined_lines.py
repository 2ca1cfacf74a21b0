"""How often validation's operator-join rule refuses a fill (dlm_lsp/validation.py,
`ParsedDocument._joins_by_operator`), over real source files.

A fill whose line ends in an operator of its own (`const x = a +`, `echo a &&`) is
refused where it takes the user's next line of code into its expression.  Real code
also ends lines in operators, so the rule's false refusals are measured on real code:
for lines spread over each file (a line with code below it), the line's own text is
validated as the fill over itself ("own": each refusal of one that passed is a line
of real code the rule calls a join), and the line cut right after one of its operators
or separators, a fill the model might stop early at ("cut": the rule's reach), and the
empty fill at the line's end ("empty": the document as it is, each refusal a line the
user ends in an operator that joins the next, no deeper, to it, read as incomplete).  The
rule only turns a pass into a refusal, so "passed before" counts the fills that pass
now or are refused by it.  Refusals are sampled to a JSON file to read.

    python benchmarks/joined_lines.py [--lines 40] [--samples joins.json] FILE...
"""

from __future__ import annotations

import argparse
import collections
import json
import random
from pathlib import Path

from tree_sitter import Node

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.validation import ParsedDocument, language_for, parsed_document

# Tokens a line is not cut after: brackets and quotes open or close, they join nothing.
_NOT_CUT = frozenset({"(", "[", "{", ")", "]", "}", ";", '"', "'", "`"})


def _leaves(node: Node):
    if node.child_count == 0:
        yield node
    for child in node.children:
        yield from _leaves(child)


def _operator(leaf: Node) -> bool:
    """Whether `leaf` is unnamed, or named as its node's operator (Scala's grammar
    names them: `operator_identifier`)."""
    return not leaf.is_named or (leaf.parent is not None
                                 and leaf.parent.child_by_field_name("operator") == leaf)


def fills(document: ParsedDocument, rows: list[int], rng: random.Random):
    """(kind, row, start, end, fill) for each line of `rows`: its own text, the empty
    fill at its end, and its text cut after a token of the line that is an operator
    (`_operator`), not a bracket."""
    text = document.text
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    tokens = collections.defaultdict(list)
    for leaf in _leaves(document.tree.root_node):
        if not leaf.is_extra and leaf.start_point[0] == leaf.end_point[0]:
            tokens[leaf.start_point[0]].append(leaf)
    for row in rows:
        line = lines[row]
        start = starts[row] + len(line) - len(line.lstrip())
        end = starts[row] + len(line.rstrip())
        yield "own", row, start, end, text[start:end]
        yield "empty", row, end, end, ""
        cuts = [t for t in tokens[row] if _operator(t) and not t.is_missing
                and start < t.start_byte and t.end_byte < end and t.type not in _NOT_CUT]
        if cuts:
            yield "cut", row, start, end, text[start:rng.choice(cuts).end_byte]


def source(path: Path) -> tuple[str, str] | None:
    """(language, text) of a file the benchmarks read: a language validation knows,
    ASCII (the tree's bytes are the text's characters), no `\r`, at most 150,000
    characters; None for any other."""
    language = language_for(None, path.as_uri())
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if language is None or not text.isascii() or "\r" in text or len(text) > 150_000:
        return None
    return language, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--lines", type=positive, default=40, help="lines a file, at random")
    parser.add_argument("--samples", type=Path, help="write the refusals here (JSON)")
    args = parser.parse_args()
    rng = random.Random(0)
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    refused: dict[str, list[dict]] = collections.defaultdict(list)
    for path in args.files:
        read = source(path)
        if read is None:
            continue
        language, text = read
        document = parsed_document(text, language, path.as_uri())
        if not isinstance(document, ParsedDocument):
            continue
        lines = text.split("\n")
        rows = [row for row in range(len(lines) - 1) if lines[row].strip()]
        rng.shuffle(rows)
        for kind, row, start, end, fill in fills(document, rows[:args.lines], rng):
            verdict = document.validate(start, end, fill)
            joined = "joins line" in verdict.reason and "backslash" not in verdict.reason
            counts[language, kind, "pairs"] += 1
            counts[language, kind, "passed before"] += verdict.valid or joined
            counts[language, kind, "refused now"] += joined
            if joined:
                refused[f"{language} {kind}"].append({
                    "file": str(path), "line": row + 1, "fill": fill,
                    "below": lines[row + 1:row + 3], "reason": verdict.reason})
    print("| language | fills | pairs | passed before | refused now |")
    print("| --- | --- | --- | --- | --- |")
    for language, kind in sorted({key[:2] for key in counts}):
        print(f"| {language} | {kind} | {counts[language, kind, 'pairs']:,} | "
              f"{counts[language, kind, 'passed before']:,} | "
              f"{counts[language, kind, 'refused now']:,} |")
    if args.samples:
        args.samples.write_text(json.dumps(refused, indent=1))


if __name__ == "__main__":
    run_script(main)
