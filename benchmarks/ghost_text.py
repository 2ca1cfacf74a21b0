"""What an editor user gets as ghost text: `textDocument/inlineCompletion` through the real server.

Starts `python -m dlm_lsp` (stdio), opens the standard library's `textwrap.py`, and
asks for ghost text one request at a time, as an editor does when typing pauses, at
two kinds of cursor:

- mid-line: after the `= ` of assignment lines (a single-line fill);
- new line: at a blank line inside a function body, holding the indentation of the
  code below it, as an editor leaves a line just opened (a multi-line fill).

For each it reports the share of requests answered with a suggestion (the server
leaves out fills of whitespace only and, unless `suggestInvalid`, fills its syntax
check rejected) and the client-side p50 / p95 latency.  Recent-fill reuse is off so
every request runs the model.

    OMP_NUM_THREADS=2 python benchmarks/ghost_text.py --requests 40 [--settings JSON]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sysconfig
import time
from pathlib import Path

from lsp_latency import _p95, cursors, server_settings, stdio_server

from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script


def new_lines(text: str, count: int) -> tuple[str, list[tuple[int, int]]]:
    """The text with `count` evenly spaced blank lines inside function bodies given the
    indentation of the code after them, and the cursor at the end of each."""
    lines = text.split("\n")
    inside = []
    for number in range(1, len(lines) - 1):
        above, below = lines[number - 1], lines[number + 1]
        if (not lines[number].strip() and above.startswith("    ") and below.strip()
                and below.startswith("    ") and not below.lstrip().startswith("#")):
            inside.append(number)
    chosen = inside[::max(1, len(inside) // count)][:count]
    points = []
    for number in chosen:
        below = lines[number + 1]
        lines[number] = below[:len(below) - len(below.lstrip())]
        points.append((number, len(lines[number])))
    return "\n".join(lines), points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=positive, default=40, help="per kind of cursor")
    parser.add_argument("--model", default="default")
    parser.add_argument("--settings", default="{}", help="more server settings, as JSON")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    args = parse_script_arguments(parser)
    source = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"
    settings = {"model": args.model, "reuseFills": False, **server_settings(args.settings)}
    text = source.read_text()
    blank_text, blank_points = new_lines(text, args.requests)
    kinds = {"mid-line": ("file:///bench/mid.py", text, cursors(text, args.requests)),
             "new line": ("file:///bench/new.py", blank_text, blank_points)}
    with stdio_server(settings) as (_, client):
        for uri, body, _ in kinds.values():
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": body}})

        def ghost(uri: str, line: int, column: int) -> tuple[float, bool]:
            began = time.perf_counter()
            answer = client.request("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": line, "character": column},
                "context": {"triggerKind": 2}})
            items = answer["items"] if isinstance(answer, dict) else answer
            return (time.perf_counter() - began) * 1000, bool(items)

        first_uri, _, first_points = kinds["mid-line"]
        ghost(first_uri, *first_points[0])  # warm-up: loads the model
        machine = describe_machine(client.request("dlm/status", {})["device"])
        print(f"machine: {machine_line(machine)}; settings {settings}")
        report = {"machine": machine, "settings": settings}
        for kind, (uri, _, points) in kinds.items():
            runs = [ghost(uri, *p) for p in points]
            ms = sorted(t for t, _ in runs)
            shown = sum(offered for _, offered in runs)
            report[kind] = {"requests": len(runs), "suggestions": shown,
                            "p50_ms": statistics.median(ms), "p95_ms": _p95(ms)}
            print(f"{kind}: {len(runs)} requests, a suggestion for {shown} "
                  f"({100 * shown / len(runs):.0f}%), p50 {statistics.median(ms):.0f} ms, "
                  f"p95 {_p95(ms):.0f} ms")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
