"""What `dash -n` adds for POSIX sh scripts (dlm_lsp/bash_syntax.py), and which of this
machine's POSIX sh scripts it would hold to dash.

A script whose shebang names sh, dash or ash has its fills checked by dash too, but only
where the whole script as it is parses with `dash -n`; the README says how many of the
machine's own POSIX sh scripts do.  This counts them (the directories below, every
regular file whose shebang names one of those shells), and times validating a new line
in a script with a `#!/bin/sh` shebang against the same script with `#!/bin/bash`: the
difference is dash's.  The first fill of a version also pays for `dash -n` of the whole
script, the later ones only for the commands around their span.

    python benchmarks/dash_check.py [--lines 200] [--spans 20]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import time
from pathlib import Path

from bash_check import build_script, spans

from dlm_lsp.arguments import positive
from dlm_lsp.bash_syntax import _POSIX_SHELLS, interpreter, run_bash, run_dash
from dlm_lsp.bench.script import run_script
from dlm_lsp.validation import ParsedDocument, _parser

PLACES = ("/usr/bin", "/etc/init.d", "/usr/share/doc/*/examples")


def posix_scripts(places: tuple[str, ...] = PLACES) -> tuple[list[Path], int]:
    """Regular files under `places` (not recursing) whose shebang names sh, dash or ash,
    and how many symbolic links there lead to one: a script is counted once, not once
    per name (`/usr/bin/lzgrep` and `xzgrep` are one file)."""
    found, links = [], 0
    for pattern in places:
        for directory in sorted(glob.glob(pattern)):
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                if not entry.is_file():
                    continue
                with open(entry.path, "rb") as handle:
                    head = handle.read(256)
                if head.startswith(b"#!") and interpreter(
                        head.decode("utf-8", "replace")) in _POSIX_SHELLS:
                    if entry.is_symlink():
                        links += 1
                    else:
                        found.append(Path(entry.path))
    return found, links


def census(scripts: list[Path], links: int, bash: str, dash: str) -> None:
    """How many parse with `dash -n` (and so have fills checked by dash), and with bash."""
    failing = []
    for path in scripts:
        text = path.read_text(encoding="utf-8", errors="replace")
        by_dash = run_dash(dash, text)
        by_bash = run_bash(bash, text)
        if by_dash is None or by_dash.returncode:
            failing.append((path, by_bash is not None and by_bash.returncode == 0))
    print(f"{len(scripts)} POSIX sh scripts in {', '.join(PLACES)}; "
          f"{len(scripts) - len(failing)} parse with dash -n ({links} symbolic links there "
          "to such scripts not counted)")
    for path, bash_parses in failing:
        print(f"  fails dash -n: {path} (bash -n: {'parses' if bash_parses else 'fails too'})")


def fill_ms(text: str, count: int, bash: str) -> tuple[float, list[float]]:
    """ms of the first validation of a version, and of each later one (a new line
    before a command in a body at `count` places, each a new text, each one bash and
    dash pass)."""
    places = spans(text, count)
    document = ParsedDocument(text, "bash", _parser("bash"), bash=bash)
    times = []
    for index, at in enumerate(places):
        began = time.perf_counter()
        verdict = document.validate(at, at, f"  echo checked {index}\n")
        times.append((time.perf_counter() - began) * 1000)
        if not verdict.valid:
            raise SystemExit(f"a fill at offset {at} did not pass: {verdict}")
    return times[0], times[1:]


def timing(name: str, body: str, bash: str, count: int, repeats: int) -> None:
    firsts: dict[str, list[float]] = {"sh": [], "bash": []}
    laters: dict[str, list[float]] = {"sh": [], "bash": []}
    for _ in range(repeats):  # each a new version: the whole script is parsed again
        for shell in ("sh", "bash"):
            first, later = fill_ms(f"#!/bin/{shell}\n" + body, count, bash)
            firsts[shell].append(first)
            laters[shell].append(statistics.median(later))
    print(f"{name}: {len(body)} characters, {count} spans, {repeats} versions")
    for label, data in (("first fill of a version", firsts), ("later fills", laters)):
        sh, plain = data["sh"], data["bash"]
        low, mid = min(sh) - min(plain), statistics.median(sh) - statistics.median(plain)
        print(f"  {label}, min / median: #!/bin/bash {min(plain):.2f} / "
              f"{statistics.median(plain):.2f} ms, #!/bin/sh {min(sh):.2f} / "
              f"{statistics.median(sh):.2f} ms; dash adds {low:.2f} / {mid:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=positive, default=200)
    parser.add_argument("--spans", type=positive, default=20)
    parser.add_argument("--repeats", type=positive, default=20)
    parser.add_argument("--script", type=Path, help="a real POSIX sh script to time too "
                        "(its shebang line replaced)")
    args = parser.parse_args()
    bash, dash = shutil.which("bash"), shutil.which("dash")
    if bash is None or dash is None:
        raise SystemExit("needs bash and dash on PATH")
    run_bash(bash, "true\n")  # the first runs pay for loading the shells
    run_dash(dash, "true\n")
    census(*posix_scripts(), bash, dash)
    timing(f"generated script, {args.lines} lines", build_script(args.lines), bash,
           args.spans, args.repeats)
    if args.script is not None:
        text = args.script.read_text(encoding="utf-8", errors="replace")
        timing(str(args.script), text.split("\n", 1)[1], bash, args.spans, args.repeats)


if __name__ == "__main__":
    run_script(main)
