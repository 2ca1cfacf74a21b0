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
import multiprocessing
import os
import re
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

WORD = re.compile(r"\w+")
ASCII_WORD = re.compile(r"\w+", re.ASCII)  # the same words in ASCII text, ~25% faster
PARALLEL_MIN_CHARS = 20_000_000  # below this (~0.7 s on one core) a process pool costs more
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
    """The text's identifier-like words, whitespace and punctuation dropped.

    Most sources are pure ASCII, where the ASCII-only `\\w` matches exactly what
    the Unicode one does, faster; other text keeps the Unicode pattern."""
    return (ASCII_WORD if text.isascii() else WORD).findall(text)


def pool_workers() -> int:
    """The cores this process may run on (the pool's size)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_WORKER_FILTER: NgramFilter | None = None  # the filter a pool worker scans with


def _set_worker_filter(ngram_filter: NgramFilter) -> None:
    global _WORKER_FILTER
    _WORKER_FILTER = ngram_filter


def _worker_shared_ngram(text: str) -> tuple[str, ...] | None:
    assert _WORKER_FILTER is not None
    return _WORKER_FILTER.shared_ngram(text)


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

    def shared_ngrams(self, texts: Sequence[str], workers: int | None = None,
                      min_chars: int = PARALLEL_MIN_CHARS) -> list[tuple[str, ...] | None]:
        """`shared_ngram` of each text, in order, over a process pool when it pays.

        The scan is pure Python on one thread: the whole training corpus (244 MB)
        takes ~8 s of one core, which more cores do not shorten unless the files
        are split between processes.  Each text's answer depends on that text alone,
        so the pool changes no verdict.  The pool forks (Linux only): the workers
        inherit the filter and import nothing, where "spawn" or "forkserver" would
        re-import the caller's main module (torch, ~2 s a worker, under gpu_run).
        Fork is safe here because the workers only run this scan; the training
        calls it while reading sources, before any tokenizer has encoded (the
        tokenizers library turns its threads off in a child forked after that).
        A worker that dies (killed for memory) raises `BrokenProcessPool` here
        rather than hanging the run, as `multiprocessing.Pool` would.  Below
        `min_chars`, or with one core, the texts are scanned here.
        """
        workers = pool_workers() if workers is None else workers
        if workers < 2 or len(texts) < 2 or sys.platform != "linux" \
                or sum(map(len, texts)) < min_chars:
            return [self.shared_ngram(text) for text in texts]
        workers = min(workers, len(texts))
        chunk = max(1, min(64, len(texts) // (workers * 8)))  # ~8 chunks a worker: balance
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_set_worker_filter, initargs=(self,)) as pool:
            return list(pool.map(_worker_shared_ngram, texts, chunksize=chunk))


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
