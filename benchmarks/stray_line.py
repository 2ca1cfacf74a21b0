"""How often one line the user left broken far below refuses a good fill, over real
files (dlm_lsp/python_syntax.py `parses_below`, the second look of the CPython and bash
checks; tree-sitter's own comparison is counted apart).

For lines spread over each file, the line's text is taken out (its indentation kept)
and written back as the fill: the fill is the file's own text, so it is good.  It is
validated in the document without the line, and again with one broken line appended
at the end (`x = = 1` in Python, `;;` in a shell script: lines no fill above can make
whole).  Each fill that passes without the broken line and is refused with it counts,
by the parser that refused it.  Bad fills too (the line cut in half; the line with a
closer added, `)` or `fi`): the broken line must give none of them a pass it does not
get without it ("bad: gained").

    python benchmarks/stray_line.py [--lines 40] FILE...
"""

from __future__ import annotations

import argparse
import collections
import random
from pathlib import Path

from joined_lines import source

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.validation import ParsedDocument, parsed_document

BROKEN = {"python": "x = = 1\n", "bash": ";;\n"}
CLOSER = {"python": ")", "bash": " fi"}


def refused_by(reason: str) -> str:
    """Which parser a refusal's reason names: bash, dash, Python, else tree-sitter."""
    for parser in ("bash", "dash", "Python"):
        if f"({parser}:" in reason:
            return parser
    return "tree-sitter"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--lines", type=positive, default=40, help="lines a file, at random")
    args = parser.parse_args()
    rng = random.Random(0)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for path in args.files:
        read = source(path)
        if read is None or read[0] not in BROKEN:
            continue
        language, text = read
        text += "" if text.endswith("\n") else "\n"
        lines = text.split("\n")
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        rows = [row for row, line in enumerate(lines[:-1])
                if line.strip() and not line.strip().startswith("#")]
        rng.shuffle(rows)
        for row in rows[:args.lines]:
            line = lines[row]
            start = starts[row] + len(line) - len(line.lstrip())
            fill, without = line.lstrip(), text[:start] + text[starts[row] + len(line):]
            documents = [parsed_document(document_text, language, path.as_uri())
                         for document_text in (without, without + "\n" + BROKEN[language])]
            if not all(isinstance(document, ParsedDocument) for document in documents):
                continue
            clean, broken = (document.validate(start, start, fill) for document in documents)
            counts[language, "fills"] += 1
            counts[language, "pass"] += clean.valid
            if clean.valid and not broken.valid:
                counts[language, "refused by " + refused_by(broken.reason)] += 1
            for bad in (fill[:len(fill) // 2], fill + CLOSER[language]):
                clean, broken = (document.validate(start, start, bad) for document in documents)
                counts[language, "bad"] += 1
                counts[language, "bad: gained"] += broken.valid and not clean.valid
    print("| language | fills | pass | refused with the broken line, by | bad | bad: gained |")
    print("| --- | --- | --- | --- | --- | --- |")
    for language in sorted({key[0] for key in counts}):
        by = ", ".join(f"{kind[len('refused by '):]} {n:,}" for (lang, kind), n
                       in sorted(counts.items()) if lang == language
                       and kind.startswith("refused by ")) or "none"
        print(f"| {language} | {counts[language, 'fills']:,} | {counts[language, 'pass']:,} "
              f"| {by} | {counts[language, 'bad']:,} | {counts[language, 'bad: gained']:,} |")


if __name__ == "__main__":
    run_script(main)
