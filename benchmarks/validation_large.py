"""Validation cost on a large document: cold, warm, and after a keystroke elsewhere.

Builds a ~5 MB Python document from the standard library, validates a fill in
its middle cold (the document parsed from scratch), then warm (the document's
tree reused: each candidate and baseline is an incremental reparse), and after a
keystroke elsewhere (the new version parsed from the previous version's tree).

    python benchmarks/validation_large.py [--mb 5]
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sysconfig
import time
from pathlib import Path

from dlm_lsp.arguments import positive_amount
from dlm_lsp.bench.script import run_script
from dlm_lsp.validation import parsed_document, validate_fill


def build_document(megabytes: float) -> str:
    """Concatenate stdlib modules (each valid on its own) up to the size asked."""
    parts, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        size += len(text)
        if size >= megabytes * 1e6:
            break
    return "\n".join(parts)


def best_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=positive_amount, default=5.0)
    args = parser.parse_args()
    text = build_document(args.mb)
    at = text.index("\n    return ", len(text) // 2) + len("\n    return ")
    end = text.index("\n", at)  # the fill replaces the returned expression
    uri = "file:///large.py"
    print(f"document: {len(text) / 1e6:.1f} M characters, {text.count(chr(10))} lines; "
          f"machine: {platform.machine()} {platform.processor() or ''}".rstrip())
    cold = best_ms(lambda: validate_fill(text, at, end, "x + 1", "python"), 3)
    doc = parsed_document(text, "python", uri)
    # a fill not validated before each time: a document keeps the verdict of each fill it
    # checked, and the same fill five times measured that lookup (0.00 ms), not a check
    fills = itertools.count(2)
    good = best_ms(lambda: doc.validate(at, end, f"x + {next(fills)}"))
    bad = best_ms(lambda: doc.validate(at, end, f"(x + {next(fills)}"))
    low, high = doc.window(at, end)
    versions = iter([text[:at] + "#" * k + text[at:] for k in range(1, 6)])
    keystroke = best_ms(lambda: parsed_document(next(versions), "python", uri))
    print(f"window: {high - low} characters; verdicts: "
          f"{doc.validate(at, end, 'x + 1').valid} / {doc.validate(at, end, '(x + 1').reason}")
    print(f"cold (full parse each time): {cold:.1f} ms")
    print(f"warm, valid fill:            {good:.2f} ms")
    print(f"warm, invalid fill:          {bad:.2f} ms")
    print(f"new version after a keystroke (incremental reparse): {keystroke:.1f} ms")


if __name__ == "__main__":
    run_script(main)
