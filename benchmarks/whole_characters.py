"""Broken bytes and stray control characters in fills beside non-ASCII text
(dlm_lsp/characters.py, `Tokenizer.decode`, the repair rounds that write them again).

Fills 16 Python sites next to accented, CJK and emoji text (a comment above an empty
body line, and a string being typed), one candidate each and then four, with the
shipped model and with two random tiny models like the tests' (seeds 0 and 1), which
write arbitrary bytes.  Counts the fills and candidates whose text holds U+FFFD or a
control character other than tab and line feed (none should, now), those that still
lost bytes or controls after the repair rounds (`Candidate.broken`), and the repair
rounds and forward passes spent; and, with repair off, how many fills and candidates the
model wrote such a byte or control into (what the fill held before these were left out).

    PYTHONPATH=. python benchmarks/whole_characters.py
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

# the test suite's random model: `python benchmarks/whole_characters.py` from the
# checkout, as every script runs, ended in ModuleNotFoundError (even for --help)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tiny_model import write_random_model  # noqa: E402

from dlm_lsp.bench.script import run_script  # noqa: E402
from dlm_lsp.config import InfillOptions, ServerConfig  # noqa: E402
from dlm_lsp.engine import Engine  # noqa: E402
from dlm_lsp.results import InfillRequest  # noqa: E402

TEXTS = ("café crème brûlée", "naïve façade, Ærøskøbing", "日本語のテキスト", "中文注释和说明",
         "한국어 설명", "emoji 🎉🚀✨", "Ünïcödé ñ ü ß", "混合 text ✅ ok")
# a comment with the text above an empty body line; a string with the text being typed
SITES = ("# {text}\ndef describe(value):\n    |\n", 'LABEL = "{text} |"\nprint(LABEL)\n')
# U+FFFD, and the controls a fill may not hold unshown (tab and line feed are fine)
_FLAW = re.compile("[\ufffd\x00-\x08\x0b-\x1f\x7f-\x9f]")


def documents() -> list[str]:
    return [site.format(text=text) for text in TEXTS for site in SITES]


def measure(engine: Engine, candidates: int, repair: bool = True) -> dict[str, int]:
    """Counts over the sites; with repair off, "fills that lost some" are those the model
    wrote a broken byte or control into, left out at once."""
    counts = dict.fromkeys(("fills", "flawed fills", "candidates", "flawed candidates",
                            "fills that lost some", "candidates that lost some",
                            "repair rounds", "forward passes"), 0)
    off = {} if repair else {"repair_rounds": 0, "fallback": False}
    for index, doc in enumerate(documents()):
        at = doc.index("|")
        result = engine.infill(InfillRequest(
            doc.replace("|", ""), at, at, "python", f"file:///site{index}.py",
            InfillOptions(candidates=candidates, **off)))
        best = result.candidates[0]
        counts["fills"] += 1
        counts["flawed fills"] += bool(_FLAW.search(best.text))
        counts["fills that lost some"] += bool(best.broken)
        counts["candidates that lost some"] += sum(bool(c.broken) for c in result.candidates)
        counts["candidates"] += len(result.candidates)
        counts["flawed candidates"] += sum(bool(_FLAW.search(c.text))
                                           for c in result.candidates)
        counts["repair rounds"] += result.repair_rounds
        counts["forward passes"] += result.steps
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        models = {"shipped": args.model}
        for seed in (0, 1):
            models[f"random tiny, seed {seed}"] = str(write_random_model(
                Path(scratch) / f"tiny{seed}", d_model=96, seed=seed))
        for name, model in models.items():
            engine = Engine(ServerConfig(model=model, device="cpu", reuse_fills=False))
            for candidates, repair in ((1, True), (4, True), (1, False), (4, False)):
                counts = measure(engine, candidates, repair)
                print(f"{name}, {candidates} candidate(s), repair {'on' if repair else 'off'}: "
                      + ", ".join(f"{key} {value}" for key, value in counts.items()))


if __name__ == "__main__":
    run_script(main)
