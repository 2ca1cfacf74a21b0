"""What tree-sitter's reparse of a new version costs, by where the keystroke lands.

Each new version of a document is reparsed from the last version's tree in the fill
that follows it (`validation.ParsedDocument`).  In a generated Python file of many small
functions (`document_size.generated`) that reparse cost as much as a cold parse for
some keystrokes and a tenth of it for others.  This types one character at named places
of a function at 10%, 50% and 90% of the file and times, for each, tree-sitter alone
(`Parser.parse` given the edited old tree, as a plain tree-sitter user would) and the
server's whole step (`ParsedDocument` from the previous version: encoding, the common
ends of the two texts, the edit, the parse), so that what is ours shows apart from what
is tree-sitter's.  `--why` counts, for a small file, tree-sitter's own log of that
reparse: tokens lexed again, old nodes reused, and old nodes refused because the
Python scanner's state before them differed.

    OMP_NUM_THREADS=1 python benchmarks/reparse_edits.py --mb 1 3 --repeat 3 --why
"""

from __future__ import annotations

import argparse
import collections
import time

from document_size import generated
from tree_sitter import LogType, Parser, Tree

from dlm_lsp import validation
from dlm_lsp.arguments import positive, positive_amount
from dlm_lsp.bench.script import run_script

FRACTIONS = (0.1, 0.5, 0.9)


def places(text: str, fraction: float) -> dict[str, int]:
    """Character offsets, in the function `fraction` of the way through `text`, where a
    keystroke is timed (and the end of the document)."""
    count = text.count("\ndef ")
    function = text.find(f"def handler_{int(count * fraction):06d}(")
    last_line = text.find("    return", function)
    line_end = text.find("\n", last_line)
    return {"inside a line": text.find("value = request", function) + 5,
            "end of the last line": line_end,
            "blank line after it": line_end + 1,
            "indentation of the last line": last_line + 2,
            "start of the next def": text.find("\ndef ", line_end) + 1,
            "end of the document": len(text)}


def _point(data: bytes, byte: int) -> tuple[int, int]:
    return data.count(b"\n", 0, byte), byte - (data.rfind(b"\n", 0, byte) + 1)


def edited(tree: Tree, data: bytes, at: int, typed: bytes) -> tuple[Tree, bytes]:
    """A copy of `tree` told that `typed` was inserted at byte `at`, and the new text."""
    copy, point = tree.copy(), _point(data, at)
    copy.edit(at, at, at + len(typed), point, point, (point[0], point[1] + len(typed)))
    return copy, data[:at] + typed + data[at:]


def _best_ms(run, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return round(best * 1000, 1)


def time_size(megabytes: float, repeat: int) -> None:
    text = generated(megabytes)
    data = text.encode()
    parser = validation.canonical_language("python")[1]
    began = time.perf_counter()
    tree = parser.parse(data)
    print(f"{len(text):,} characters: cold parse {(time.perf_counter() - began) * 1000:.0f} ms; "
          "a space typed at, ms (tree-sitter alone / the server's step):")
    document = validation.ParsedDocument(text, "python", parser)
    for fraction in FRACTIONS:
        cells = []
        for name, at in places(text, fraction).items():
            if name == "end of the document" and fraction != FRACTIONS[-1]:
                continue
            new_text = text[:at] + " " + text[at:]
            old, new_data = edited(tree, data, at, b" ")
            alone = _best_ms(lambda old=old, new_data=new_data: parser.parse(
                new_data, old.copy()), repeat)
            step = _best_ms(lambda new_text=new_text: validation.ParsedDocument(
                new_text, "python", parser, document), repeat)
            cells.append(f"{name} {alone} / {step}")
        print(f"  function at {fraction:.0%}: " + "; ".join(cells))


def why(megabytes: float = 0.1) -> None:
    """tree-sitter's log of one reparse per place, counted."""
    text = generated(megabytes)
    data = text.encode()
    parser: Parser = validation.canonical_language("python")[1]
    tree = parser.parse(data)
    print(f"tree-sitter's log, {len(text):,} characters, {text.count('def ')} functions, "
          "the function at 10%:")
    for name, at in places(text, 0.1).items():
        old, new_data = edited(tree, data, at, b" ")
        events: collections.Counter[str] = collections.Counter()
        parser.logger = lambda kind, message, events=events: (
            events.update([message.split(" ", 1)[0]]) if kind == LogType.PARSE else None)
        try:
            parser.parse(new_data, old)
        finally:
            parser.logger = None
        print(f"  {name}: tokens lexed {events['lexed_lookahead']}, nodes reused "
              f"{events['reuse_node']}, refused for the scanner's state "
              f"{events['reusable_node_has_different_external_scanner_state']}, fragile "
              f"{events['cant_reuse_node_is_fragile']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=positive_amount, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--repeat", type=positive, default=3, help="each timing's best of N")
    parser.add_argument("--why", action="store_true", help="also count tree-sitter's log")
    args = parser.parse_args()
    for megabytes in args.mb:
        time_size(megabytes, args.repeat)
    if args.why:
        why()


if __name__ == "__main__":
    run_script(main)
