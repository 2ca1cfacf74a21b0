"""Keeping the benchmark out of the training data.

We measure the model on HumanEval-Infilling, whose 164 problems are short
Python functions with docstrings and tests.  Copies of them circulate (tutorial
code, test fixtures, installed packages that vendor benchmarks), so a training
file that contains one would turn the benchmark into a memorisation test.  A
file is dropped when it shares one long n-gram with any benchmark prompt,
canonical solution or test.

The n-gram is over *words*: runs of identifier characters (`\\w+`: names,
keywords, numbers), so whitespace, indentation, quoting and line breaks do not
matter, and a reformatted copy is still caught.  Punctuation is left out on
purpose: 12-grams that include it matched 129 innocent stdlib files
(`for i in range ( 0 , len ( s ) ,`).  Plain idioms still match as words
(`for i in range n for j in range i 1 n`, `1 2 3 ... 12`), so an n-gram counts
only when at least 4 of its 12 words are *content words*: not a number, a single
character, a keyword or a builtin name.  Measured on the standard library plus
this machine's site-packages (19,447 files): that rule matches 5 files, all
spelling `one 1 two 2 three 3 ...` (without it, 10, half of them loop idioms),
while every one of the 164 whole solutions and 152 of the 164 tests on their
own are caught.  12 words is close to GPT-3's 13-gram decontamination; shorter
n-grams began to match ordinary code.
"""

from __future__ import annotations

import builtins
import gzip
import json
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

WORD = re.compile(r"\w+")
HUMANEVAL_DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "humaneval_infilling"


COMMON_WORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) \
    | frozenset(dir(builtins)) | {"self", "cls"}


@dataclass(frozen=True)
class ContaminationConfig:
    """How long a shared run of words must be to call a file contaminated."""

    n: int = 12  # words in a shared n-gram (see the module docstring for why 12)
    min_content_words: int = 4  # of the n, words that are not numbers, letters or keywords


def is_content_word(word: str) -> bool:
    """Whether a word says something about the code: not a number, a single character,
    a keyword or a builtin name."""
    return len(word) > 1 and not word.isdigit() and word not in COMMON_WORDS


def words(text: str) -> list[str]:
    """The text's identifier-like words, whitespace and punctuation dropped."""
    return WORD.findall(text)


class NgramFilter:
    """Answers "does this text share an n-gram with the reference texts?" quickly.

    A file can only match where `n` consecutive words all occur somewhere in the
    reference texts, so the scan keeps the length of the current run of such
    words and looks an n-gram up only when the run is long enough.  On the
    standard library (32 MB) this takes about a second.
    """

    def __init__(self, references: Iterable[str], cfg: ContaminationConfig | None = None):
        self.cfg = cfg or ContaminationConfig()
        n = self.cfg.n
        self.vocabulary: set[str] = set()
        self.ngrams: set[tuple[str, ...]] = set()
        for text in references:
            ws = words(text)
            self.vocabulary.update(ws)
            content = [0]  # content[i]: content words before word i
            for w in ws:
                content.append(content[-1] + is_content_word(w))
            need = self.cfg.min_content_words
            self.ngrams.update(tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)
                               if content[i + n] - content[i] >= need)

    def shared_ngram(self, text: str) -> tuple[str, ...] | None:
        """The first n-gram of `text` that a reference text also contains, or None."""
        n, vocabulary, ngrams = self.cfg.n, self.vocabulary, self.ngrams
        ws = words(text)
        run = 0
        for i, w in enumerate(ws):
            if w not in vocabulary:
                run = 0
                continue
            run += 1
            if run >= n:
                gram = tuple(ws[i - n + 1:i + 1])
                if gram in ngrams:
                    return gram
        return None


def humaneval_texts(data: Path = HUMANEVAL_DATA) -> list[str]:
    """Every distinct HumanEval-Infilling solution (prompt + middle + suffix) and test.

    The files are read directly rather than through `dlm_lsp.bench`, so this
    stays importable where only the training dependencies are installed.  All
    splits are read: they cut the same 164 problems differently, so the whole
    functions repeat and are kept once.
    """
    texts: dict[str, None] = {}
    for path in sorted(data.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    row = json.loads(line)
                    texts[row["prompt"] + row["canonical_solution"] + row["suffix"]] = None
                    texts[row["test"]] = None
    if not texts:
        raise FileNotFoundError(f"no HumanEval-Infilling data (*.jsonl.gz) in {data}")
    return list(texts)


@lru_cache(maxsize=4)
def humaneval_filter(cfg: ContaminationConfig = ContaminationConfig()) -> NgramFilter:  # noqa: B008
    """The filter against HumanEval-Infilling, built once per process."""
    return NgramFilter(humaneval_texts(), cfg)
