"""What a Windows file's `\\r\\n` line breaks do to the shipped model's fills, with and
without the engine giving the model `\\n` (dlm_lsp/line_endings.py).

Fills three candidates at each blank line (`|`) of a small Python module, three
ways: the module with `\\n`; the same with `\\r\\n`, as the engine fills it now (the
model sees `\\n`, the fill gets `\\r\\n` back); and with `\\r\\n` given to the model as
it is, as the engine did before (`for_the_model` left out).  Counts the valid
candidates and those whose line breaks are not the file's.

    python benchmarks/line_endings.py [--model default]
"""

from __future__ import annotations

import argparse
import re

from dlm_lsp import engine as engine_module
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.line_endings import Normalized
from dlm_lsp.results import InfillRequest

MODULE = '''import os


def read_lines(path):
    """Return the lines of a text file, without their line breaks."""
    |


def count_words(text):
    words = text.split()
    |
    return total


class Config:
    def __init__(self, path):
        self.path = path
        |
'''

_BARE_NEWLINE = re.compile(r"(?<!\r)\n")


def as_it_is(req: InfillRequest) -> tuple[InfillRequest, Normalized]:
    """The engine before line_endings.py: the text goes to the model unchanged."""
    return req, Normalized(req.text, req.start, req.end, "\n")


def fill_all(engine: Engine, ending: str) -> tuple[int, int, int, list[str]]:
    """(candidates, valid, with a bare `\\n` in a `\\r\\n` file, the candidates with `\\n`
    line breaks) over every blank line."""
    text = MODULE.replace("\n", ending)
    cursors = [m.start() - i for i, m in enumerate(re.finditer(r"\|", text))]
    text = text.replace("|", "")
    total = valid = bare = 0
    texts = []
    for at in cursors:
        result = engine.infill(InfillRequest(text, at, at, "python", "file:///module.py",
                                             InfillOptions(candidates=3)))
        for candidate in result.candidates:
            total += 1
            texts.append(candidate.text.replace("\r\n", "\n"))
            valid += candidate.valid is True
            bare += ending != "\n" and bool(_BARE_NEWLINE.search(candidate.text))
    return total, valid, bare, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    engine = Engine(ServerConfig(model=args.model, device="cpu", reuse_fills=False))
    print(f"model {engine.model.name} ({getattr(engine.model, 'precision', None)})")
    fills: dict[str, list[str]] = {}
    for label, ending, before in (("\\n", "\n", False), ("\\r\\n, now", "\r\n", False),
                                  ("\\r\\n, as it is (before)", "\r\n", True)):
        kept = engine_module.for_the_model
        if before:
            engine_module.for_the_model = as_it_is
        try:
            total, valid, bare, fills[label] = fill_all(engine, ending)
        finally:
            engine_module.for_the_model = kept
        same = sum(a == b for a, b in zip(fills[label], fills["\\n"], strict=True))
        print(f"{label}: {valid} of {total} candidates valid; {bare} with a bare \\n; "
              f"{same} the same as the \\n file's")


if __name__ == "__main__":
    run_script(main)
