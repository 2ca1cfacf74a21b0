"""What `bash -n` adds to validating a fill in a shell script (dlm_lsp/bash_syntax.py).

Builds scripts of whole functions (20 lines each: `local`, `if`, a `while read`
loop with a `case`, a heredoc, a `for`), and validates a new line before commands
in bodies spread over the script: each fill is a new text (no verdict kept), on
the same parsed version, with bash's check and without it (tree-sitter alone).
A valid fill costs one `bash -n` of the commands around the span; an invalid
one also the span's text as it is, once per span.

    python benchmarks/bash_check.py [--lines 200 5000] [--script PATH]
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import statistics
import time
from pathlib import Path

from dlm_lsp.arguments import positive
from dlm_lsp.bash_syntax import run_bash
from dlm_lsp.bench.script import run_script
from dlm_lsp.validation import ParsedDocument, _parser

FUNCTION = """process_{i}() {{
  local input="$1" count=0
  if [[ -z "$input" ]]; then
    echo "usage: process_{i} FILE" >&2
    return 1
  fi
  while IFS= read -r line; do
    case "$line" in
      '#'*) continue ;;
      *) count=$((count + 1)) ;;
    esac
  done < "$input"
  cat <<EOF
process_{i}: $count lines in $input
EOF
  for f in "$input".*; do
    [ -e "$f" ] && echo "also $f"
  done
}}

"""


def build_script(lines: int) -> str:
    """`lines` lines (a multiple of 20) of functions, each valid."""
    return "".join(FUNCTION.format(i=i) for i in range(max(1, lines // 20)))


# a line in a body: indented, a plain command (not a case pattern, not heredoc text)
_BODY_LINE = re.compile(r"^[ \t]+(?:local|echo|func_\w+|\w+=)\b", re.MULTILINE)


def spans(text: str, count: int) -> list[int]:
    """Offsets of `count` line starts spread over the script, each before a command in
    a body, where a new `echo` line is valid."""
    places = [m.start() for m in _BODY_LINE.finditer(text)]
    step = max(1, len(places) // count)
    return places[::step][:count]


def added_ms(text: str, places: list[int], fill: str,
             bash: str) -> tuple[float, float, int]:
    """Median ms per validation without and with bash's check, each fill a new text, and
    how many fills bash's check passed."""
    parser = _parser("bash")
    alone = ParsedDocument(text, "bash", parser)
    checked = ParsedDocument(text, "bash", parser, bash=bash)
    times: dict[str, list[float]] = {"alone": [], "checked": []}
    passed = 0
    for index, at in enumerate(places):
        for name, document in (("alone", alone), ("checked", checked)):
            began = time.perf_counter()
            verdict = document.validate(at, at, fill.format(index) + "\n")
            times[name].append((time.perf_counter() - began) * 1000)
        passed += verdict.valid
    return statistics.median(times["alone"]), statistics.median(times["checked"]), passed


def report(name: str, text: str, bash: str, count: int) -> None:
    places = spans(text, count)
    began = time.perf_counter()
    run_bash(bash, text)
    whole = (time.perf_counter() - began) * 1000
    print(f"{name}: {text.count(chr(10))} lines, {len(text)} characters; "
          f"`bash -n` of the whole script {whole:.1f} ms; {len(places)} spans")
    for label, fill in (("valid fill", "  echo checked {}"),
                        ("invalid fill (first at its span)", "  fi # {}")):
        alone, checked, passed = added_ms(text, places, fill, bash)
        print(f"  {label}: tree-sitter alone {alone:.2f} ms, with bash {checked:.2f} ms "
              f"(+{checked - alone:.2f} ms); {passed} of {len(places)} valid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=positive, nargs="+", default=[200, 5000])
    parser.add_argument("--script", type=Path, help="a real script to measure as well")
    parser.add_argument("--spans", type=positive, default=20)
    args = parser.parse_args()
    bash = shutil.which("bash")
    if bash is None:
        raise SystemExit("no bash on PATH")
    print(f"machine: {platform.machine()} {platform.processor() or ''}".rstrip()
          + f"; bash: {bash}")
    run_bash(bash, "true\n")  # the first run pays for loading bash
    for lines in args.lines:
        report(f"generated script, {lines} lines", build_script(lines), bash, args.spans)
    if args.script is not None:
        text = args.script.read_text(encoding="utf-8", errors="replace")
        report(str(args.script), text, bash, args.spans)


if __name__ == "__main__":
    run_script(main)
