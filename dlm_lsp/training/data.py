"""Training data: Python source files, a byte-level BPE tokenizer, and a token stream.

Two steps, each with its own section below (the rows cut from the stream are
`rows.py`'s job):

1. `collect_sources` picks source files (the standard library, which every user
   already has, and optionally the permissively licensed packages installed
   beside it) in a deterministic order with a deterministic held-out split, so
   two runs on the same machine see the same data.  Copies of the benchmark and
   duplicate files are dropped on the way, and the corpus records what it
   dropped and which sources (with their licences) it kept.
2. `train_tokenizer` learns a byte-level BPE, which can encode any text at all,
   so the server never meets an unknown character in a user's file, with line
   breaks kept apart from the text around them so that a span cut at a line
   boundary has the tokens it has inside the whole file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as _Backend

from dlm_lsp.directories import not_a_directory
from dlm_lsp.models.tokenizer import SPECIAL_TOKENS, Tokenizer
from dlm_lsp.training.contamination import ContaminationConfig, humaneval_filter
from dlm_lsp.training.licences import (
    Distribution,
    python_files_by_distribution,
    site_packages_dirs,
)
from dlm_lsp.training.nearcopy import SketchIndex, sketch

# ---------------------------------------------------------------------------
# 1. Source files
# ---------------------------------------------------------------------------


@dataclass
class SourceConfig:
    """Where training text comes from, how much of it to use, and what to leave out."""

    include_stdlib: bool = True  # the running interpreter's standard library
    include_site_packages: bool = False  # installed distributions under permissive licences
    extra_roots: list[Path] = field(default_factory=list)  # more directories to walk
    max_bytes: int = 40_000_000  # cap on train + held-out source, in bytes
    max_file_bytes: int = 1_000_000  # larger files are mostly generated data tables
    heldout_fraction: float = 0.02
    # Held out whatever their rank, while another file is left to train on: the files a
    # continued model's earlier runs held out by `collect_sources`'s fallback.
    pinned_heldout: tuple[str, ...] = ()
    # The texts (`text_digest`) a continued model's earlier runs trained on and held out,
    # whatever their paths were then: one trained on is never held out, one held out is
    # held out again (see `collect_sources`).
    trained_before: frozenset[bytes] = frozenset()
    heldout_before: frozenset[bytes] = frozenset()
    # The same runs' near-copy sketches (`nearcopy.sketch`): a file edited as well as
    # moved since is placed as its near-copy was, a trained one's first.
    near_trained: frozenset[bytes] = frozenset()
    near_heldout: frozenset[bytes] = frozenset()
    skip_dirs: tuple[str, ...] = ("site-packages", "dist-packages", "__pycache__", ".git")
    decontaminate: bool = True  # drop files sharing a long n-gram with HumanEval-Infilling
    contamination: ContaminationConfig = field(default_factory=ContaminationConfig)
    dedupe: bool = True  # read identical files (vendored copies) once


@dataclass(frozen=True)
class SourceFile:
    """One file's text and its path relative to the root it was found under."""

    path: str  # posix, root-relative: the split depends on it, not on where Python lives
    text: str


@dataclass
class Corpus:
    """Training files and held-out files (no file is in both), and how they were chosen."""

    train: list[SourceFile]
    heldout: list[SourceFile]
    contaminated: list[str] = field(default_factory=list)  # paths dropped as benchmark copies
    duplicates: int = 0  # files skipped because an identical one was already taken
    origins: list[dict] = field(default_factory=list)  # per source: licence, files, bytes
    # Paths held out beyond the rank rule, by this run's fallback or an earlier run's
    # (`SourceConfig.pinned_heldout`), for the next run of the model to hold out again.
    pinned_heldout: list[str] = field(default_factory=list)
    # Paths the rules held out whose text an earlier run of the model had trained on
    # (`SourceConfig.trained_before`): trained on here, not measured on.
    trained_before: list[str] = field(default_factory=list)
    # Paths placed as near-copies (`SourceConfig.near_trained`, `near_heldout`) of a
    # text an earlier run trained on (trained on here), and of one it held out.
    near_trained_before: list[str] = field(default_factory=list)
    near_heldout_before: list[str] = field(default_factory=list)
    # Each file's near-copy sketch (`nearcopy.sketch`), by path, where it has one.
    sketches: dict[str, bytes] = field(default_factory=dict)


STDLIB = Distribution("Python standard library", platform.python_version(), "PSF-2.0", True)


def unit_hash(key: str) -> float:
    """A number in [0, 1) fixed by `key` alone.

    `hash()` is salted per process, so sha256 is used to keep the file order and
    the held-out split identical across runs, machines and Python versions.
    """
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


TEXT_DIGEST_BYTES = 8  # of 20,000 files' digests, any two alike: about 1 in 10**11


def text_digest(text: str) -> bytes:
    """The identity of a file's text in a model's record of what it trained on and held
    out (`lineage.SplitRecord`): the start of its sha256, the same wherever the file
    lies, so a file that moved keeps it, and a file that changed does not."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:TEXT_DIGEST_BYTES]


def heldout_rank(rel: str) -> float:
    """Where a file (by its root-relative path) ranks for the held-out split: the files
    below `SourceConfig.heldout_fraction` are held out, on every machine and in every
    run, and `dlm-lsp bench heldout` measures on exactly those."""
    return unit_hash("heldout:" + rel)


def source_roots(cfg: SourceConfig) -> list[Path]:
    """The directories to walk, standard library first (site-packages are listed, not
    walked: their files come from the distributions' RECORDs)."""
    roots = [Path(sysconfig.get_paths()["stdlib"])] if cfg.include_stdlib else []
    roots.extend(Path(r) for r in cfg.extra_roots)
    return roots


def python_files(root: Path, skip_dirs: Sequence[str]) -> list[Path]:
    """All `*.py` files under `root`, sorted, not descending into `skip_dirs`."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        found.extend(Path(dirpath) / name for name in filenames if name.endswith(".py"))
    return sorted(found)


def read_source(path: Path) -> str | None:
    """The file's text, or None when it is unreadable or not UTF-8.

    The standard library's test suite deliberately contains files in other
    encodings and with invalid bytes; they are skipped rather than guessed at.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text.removeprefix("\ufeff")  # editors do not send the BOM to the server


def _none_kept(candidates: list, sized: list, corpus: Corpus, cfg: SourceConfig) -> str:
    """Why the `.py` files found gave no source, for the error that says none did: a
    folder of only such files was refused as if it held none, and the user went looking
    for a wrong path."""
    reasons = []
    too_big = len(candidates) - len(sized)  # over the size cap (or empty)
    if too_big:
        reasons.append(f"{too_big} empty or over {cfg.max_file_bytes:,} bytes")
    texts = [read_source(path) for _, path, _, _ in sized]
    unreadable = sum(1 for text in texts if text is None)
    if unreadable:
        reasons.append(f"{unreadable} not UTF-8 or unreadable")
    blank = sum(1 for text in texts if text is not None and not text.strip())
    if blank:
        reasons.append(f"{blank} blank")
    if corpus.contaminated:
        reasons.append(f"{len(corpus.contaminated)} sharing text with HumanEval-Infilling")
    if not reasons:
        return ""
    return f" ({len(candidates)} .py file(s) found: " + "; ".join(reasons) + ")"


def _candidates(cfg: SourceConfig) -> list[tuple[str, Path, Distribution]]:
    """(root-relative path, file, where it comes from) for every file that may be read.

    Site-packages files are those a permissively licensed distribution's RECORD
    lists; a file no distribution claims, or one under another licence, is not
    a candidate (see `licences`).
    """
    found: list[tuple[str, Path, Distribution]] = []
    if not cfg.include_stdlib and not cfg.extra_roots and not cfg.include_site_packages:
        raise FileNotFoundError("no sources: without the standard library, name a folder "
                                "with --extra-root (or add --site-packages)")
    for i, root in enumerate(source_roots(cfg)):
        # a root of theirs is named as the user gave it (the standard library's is not)
        named = "source root" if cfg.include_stdlib and i == 0 else "--extra-root"
        if not root.is_dir():
            raise FileNotFoundError(f"{named} {not_a_directory(root)}")
        origin = STDLIB if cfg.include_stdlib and i == 0 else Distribution(
            root.as_posix(), "", "as given by --extra-root", True)
        files = python_files(root, cfg.skip_dirs)
        if not files:  # a mistyped folder would otherwise be trained without, silently
            raise FileNotFoundError(f"{named} {root} holds no .py files")
        found.extend((path.relative_to(root).as_posix(), path, origin) for path in files)
    if cfg.include_site_packages:
        for root in site_packages_dirs():
            found.extend((rel, root / rel, dist)
                         for rel, dist in python_files_by_distribution(root).items()
                         if dist.permissive)
    return found


def _file_size(path: Path) -> int:
    """The file's size, 0 for one that cannot be read (skipped like an empty one)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_new(sized: list[tuple[str, Path, Distribution, int]], cfg: SourceConfig,
              corpus: Corpus, fits: Callable[[int], bool]
              ) -> Iterator[tuple[str, Distribution, int, str, bytes]]:
    """The files' texts, in order, lazily: those that `fits` the byte cap when their
    turn comes, are readable, not blank and (with `dedupe`) not a copy of one read
    before (counted in `corpus.duplicates`), each with its `text_digest`."""
    seen: set[bytes] = set()
    for rel, path, origin, size in sized:
        if not fits(size):
            continue
        text = read_source(path)
        if text is None or not text.strip():
            continue
        full = hashlib.sha256(text.encode("utf-8")).digest()
        if cfg.dedupe:
            if full in seen:
                corpus.duplicates += 1
                continue
            seen.add(full)
        yield rel, origin, size, text, full[:TEXT_DIGEST_BYTES]


def collect_sources(cfg: SourceConfig) -> Corpus:
    """Read source files under the configured roots into a train/held-out corpus.

    Files are visited in an order given by a hash of their relative path, so a byte
    cap takes a sample spread over the whole library rather than its alphabetical
    beginning.  A file is held out when a second, independent hash of its path
    falls below `heldout_fraction`; at least one file is held out whenever there
    are two or more (but where an earlier run trained on every one, below), so
    held-out loss exists, and at least one is trained on: where every file is held
    out, all but the lowest-ranked are trained on instead.  A file that shares a long
    n-gram with HumanEval-Infilling (see `contamination`) is dropped, train or
    held-out, and so is a second copy of an identical file.

    Where no file ranks below the fraction (at 2%, half of all corpora of 34 files
    and 13% of those of 100) the fallback holds out the one that ranks lowest
    among these files, which another file set may rank above one of its own: a
    run continuing the model on a project that had grown held out the new file
    and trained on the one its model had been measured on.  No rule that looks at
    one file alone can hold out at least one file of every set, so the fallback's
    choice is recorded instead (`Corpus.pinned_heldout`, saved with the model) and
    a continued run holds it out again (`SourceConfig.pinned_heldout`); where it
    is among the files, no other is needed.  Files that rank below the fraction
    are held out as before, and a corpus that has one needs no fallback.

    A path is no identity across runs, though: the standard library moved its
    test packages in 3.12 (3.11's `ctypes/test/test_libc.py`, which the shipped
    model trained on, is 3.12's held-out `test/test_ctypes/test_libc.py`, byte for
    byte), an `--extra-root` one folder up renames every file, and of two identical
    copies the one kept may be another than last time.  So a continued run also
    gets the texts its model's earlier runs trained on and held out
    (`SourceConfig.trained_before`, `heldout_before`, by `text_digest`): a file
    whose text was held out is held out again wherever it lies, and one whose text
    was trained on is trained on, not held out (`Corpus.trained_before` lists
    them), nor chosen by the fallback, which holds out nothing where every file
    was trained on before.  A file edited since is a new text, but where it is a
    near-copy of one (`nearcopy`: Python 3.12's `test/test_tkinter/test_text.py` is
    3.11's `tkinter/test/test_tkinter/test_text.py` with its imports changed) it is
    placed as that text was (`SourceConfig.near_trained`, `near_heldout`): trained on
    where it is a near-copy of a text trained on (`Corpus.near_trained_before`), else
    held out where it is one of a text held out (`Corpus.near_heldout_before`).  Exact
    texts come first, so a text held out before stays held out.
    """
    pinned = set(cfg.pinned_heldout)
    candidates = _candidates(cfg)
    candidates.sort(key=lambda c: (unit_hash("order:" + c[0]), c[0], str(c[1])))
    benchmark = humaneval_filter(cfg.contamination) if cfg.decontaminate else None
    near_trained, near_heldout = SketchIndex(cfg.near_trained), SketchIndex(cfg.near_heldout)

    corpus = Corpus(train=[], heldout=[])
    origins: dict[Distribution, dict] = {}
    total = 0
    sized = [(rel, path, origin, size) for rel, path, origin in candidates
             if (size := _file_size(path)) and size <= cfg.max_file_bytes]
    readable = _read_new(sized, cfg, corpus, lambda size: total + size <= cfg.max_bytes)
    verdicts = None
    if benchmark is not None and sum(c[3] for c in sized) <= cfg.max_bytes:
        # The cap cannot skip a file, so which files are read does not depend on
        # which were dropped before them: read them all, then scan them together
        # (over the cores, see `NgramFilter.shared_ngrams`).
        readable = list(readable)
        verdicts = iter(benchmark.shared_ngrams([text for _, _, _, text, _ in readable]))
    for rel, origin, size, text, digest in readable:
        if benchmark is not None and (next(verdicts) if verdicts is not None
                                      else benchmark.shared_ngram(text)) is not None:
            corpus.contaminated.append(rel)
            continue
        total += size
        sketched = sketch(text)
        if sketched is not None:
            corpus.sketches[rel] = sketched
        is_heldout = (heldout_rank(rel) < cfg.heldout_fraction or rel in pinned
                      or digest in cfg.heldout_before)
        placed = None
        if is_heldout and digest in cfg.trained_before:
            is_heldout, placed = False, corpus.trained_before
        elif digest not in cfg.heldout_before and digest not in cfg.trained_before:
            # A new text, placed as its near-copy was (the trained index, the large one,
            # asked only where the answer can move the file).
            if is_heldout and near_trained.near(sketched):
                is_heldout, placed = False, corpus.near_trained_before
            elif (not is_heldout and near_heldout.near(sketched)
                  and not near_trained.near(sketched)):
                is_heldout, placed = True, corpus.near_heldout_before
        if placed is not None:
            placed.append(rel)
        (corpus.heldout if is_heldout else corpus.train).append(SourceFile(rel, text))
        kept = origins.setdefault(origin, {"name": origin.name, "version": origin.version,
                                           "licence": origin.licence, "files": 0, "bytes": 0})
        kept["files"] += 1
        kept["bytes"] += size

    if not corpus.train and not corpus.heldout:
        smallest = min((size for *_, size in sized), default=None)
        if smallest is not None and smallest > cfg.max_bytes:  # the cap, not the sources
            raise FileNotFoundError(f"--data-bytes {cfg.max_bytes} is smaller than any "
                                    f"source file (the smallest is {smallest:,} bytes)")
        raise FileNotFoundError("no readable Python source files found under "
                                + ", ".join(str(r) for r in source_roots(cfg))
                                + _none_kept(candidates, sized, corpus, cfg))
    if not corpus.train:  # pinned files only while something is left to train on
        corpus.train = [f for f in corpus.heldout if f.path in pinned]
        corpus.heldout = [f for f in corpus.heldout if f.path not in pinned]
    if not corpus.train:  # every file held out (by rank, or as a text held out before):
        # the lowest-ranked stays held out where there are two or more, as the fallback
        # below holds one out; the rest are trained on (a text trained on now leaves the
        # model's record of texts held out, `lineage.SplitRecord.stats`)
        kept = min(corpus.heldout, key=lambda f: heldout_rank(f.path))
        rest = [f for f in corpus.heldout if f is not kept]
        corpus.train, corpus.heldout = (rest, [kept]) if rest else ([kept], [])
    if not corpus.heldout and len(corpus.train) >= 2:
        fresh = [i for i, f in enumerate(corpus.train)  # not trained on by an earlier run
                 if text_digest(f.text) not in cfg.trained_before
                 and not near_trained.near(corpus.sketches.get(f.path))]
        if fresh:
            first = min(fresh, key=lambda i: heldout_rank(corpus.train[i].path))
            corpus.heldout.append(corpus.train.pop(first))
            pinned.add(corpus.heldout[0].path)
    corpus.pinned_heldout = sorted(pinned)
    corpus.origins = sorted(origins.values(), key=lambda o: (-o["bytes"], o["name"]))
    return corpus


# ---------------------------------------------------------------------------
# 2. Tokenizer
# ---------------------------------------------------------------------------


LINE_BREAK = Regex(r"\r\n|\r|\n")


def line_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Every line break a pre-token of its own, then GPT-2's byte-level split of each line.

    Plain byte-level BPE merges a line break with the indentation after it
    (`ĊĠĠĠ`), so a prefix that ends at a line start, or a fill that starts with
    indentation, has tokens the model never saw inside a whole file.  Splitting
    on line breaks first (CRLF kept as one) means BPE never merges across one:
    tokenizing the text before a line start and the text after it gives exactly
    the tokens of the whole.  It costs about 9% more tokens on the standard
    library (3.34 characters per token instead of 3.65 at 8,192 ids).
    """
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(LINE_BREAK, behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192,
                    split_lines: bool = False) -> Tokenizer:
    """Learn a byte-level BPE whose ids 0 and 1 are `<|pad|>` and `<|mask|>`.

    Every one of the 256 byte symbols is in the initial alphabet, so any text
    (non-ASCII identifiers, tabs, CRLF) encodes and decodes back exactly even if
    the training text never contained it.  No prefix space is added, because the
    server encodes fragments of files and must get back exactly what it sent.
    With `split_lines` line breaks are kept apart (`line_pre_tokenizer`), as every
    training run does (TrainConfig.split_lines); without it this is the plain
    byte-level BPE of the bootstrap model, which the tests' random models still
    use.  The pre-tokenizer is saved in tokenizer.json, so a model always loads
    with the one it was trained with.
    """
    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size <= minimum:
        raise ValueError(f"vocab_size must exceed {minimum} (bytes + special tokens)")
    backend = _Backend(models.BPE())
    backend.pre_tokenizer = (line_pre_tokenizer() if split_lines
                             else pre_tokenizers.ByteLevel(add_prefix_space=False))
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    return Tokenizer(backend)


def encode_stream(tokenizer: Tokenizer, files: Sequence[SourceFile],
                  chunk: int = 2048) -> torch.Tensor:
    """Token ids (int32) of the files joined with a newline, as one stream
    (`encode_files` without the file starts)."""
    return encode_files(tokenizer, files, chunk)[0]


def encode_files(tokenizer: Tokenizer, files: Sequence[SourceFile],
                 chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (int32) of the files joined with a newline, as one stream, and flags
    (bool, one per token) of the tokens that start a file.

    Rows are cut from the stream wherever they fall, so one can hold the end of one
    file and the start of another; the flags let `RowSampler` keep an infilling
    middle inside one file and mark each position's file, so that the model attends
    within it (see `RowSampler`).

    Each file is encoded with its joining newline and the results concatenated;
    this equals encoding the joined text except possibly at the seams between
    files.  Within a file, spans cut from the stream therefore have exactly the
    boundaries the server gets when it encodes a whole file.  Text that happens to
    spell a special token (say a literal "<|mask|>" in a string) is encoded as
    ordinary text, so the corpus can never inject a real mask or pad.

    This is most of a GPU run's data preparation (benchmarks/results/
    gpu-run-prep-cpu.md), so: `encode_batch_fast` skips the character offsets,
    which nothing here reads (the ids are the same, ~15% less CPU); the tokenizer
    encodes a chunk's files in parallel, one file per task, so a chunk of 256
    files kept 16 cores busy only ~63% of the time behind its largest file, and
    2,048 keeps them ~92% busy at ~100 bytes per token held until the chunk is
    converted (~1 GB); and the ids gather in one `array` rather than a tensor per
    file (half the Python time, which does not shrink with more cores).
    """
    backend = tokenizer.backend  # `Tokenizer` encodes special-token text as plain text
    ids = array("i")  # C int: 32 bits on every platform torch supports
    starts = array("q")
    for lo in range(0, len(files), chunk):
        batch = [f.text + "\n" for f in files[lo:lo + chunk]]
        for enc in backend.encode_batch_fast(batch, add_special_tokens=False):
            starts.append(len(ids))
            ids.extend(enc.ids)
    if not ids:
        return torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.bool)
    flags = torch.zeros(len(ids), dtype=torch.bool)
    flags[torch.frombuffer(starts, dtype=torch.int64)] = True
    return torch.frombuffer(ids, dtype=torch.int32), flags


def line_start_flags(stream: torch.Tensor, tokenizer: Tokenizer) -> torch.Tensor:
    """flags[i] is True when a span may start (or end) at token i on a line start.

    Plain byte-level BPE glues a newline to the following indentation ("\\n   "
    is one token such as 'ĊĠĠĠ'), so the character where a line starts is often
    inside a token.  A token boundary counts as a line start when token i contains
    a line break (the server moves that line break into the span) or token i-1 ends
    with one.  With `line_pre_tokenizer` the line break is a token of its own and
    both rules mark the boundaries on either side of it.

    A CRLF that the vocabulary has no token for is two tokens, `\\r` then `\\n`, and
    the boundary between them is no line start: the server never cuts a line break in
    two.  Counting only `\\n` marked that one and not the one before the `\\r`, so the
    line-aligned rows of a CRLF file began their middles with a bare `\\n` after a
    prefix ending in `\\r`, and ended them with a lone `\\r`.
    """
    texts = tokenizer.token_texts

    def table(test: Callable[[str], bool]) -> torch.Tensor:
        return torch.tensor([test(t) for t in texts], dtype=torch.bool)

    has_break = table(lambda t: "\n" in t or "\r" in t)
    ends_break = table(lambda t: t.endswith(("\n", "\r")))
    ends_cr, starts_lf = table(lambda t: t.endswith("\r")), table(lambda t: t.startswith("\n"))
    ids = stream.long()
    flags = has_break[ids].clone()
    if len(ids):
        flags[1:] |= ends_break[ids[:-1]]
        flags[1:] &= ~(ends_cr[ids[:-1]] & starts_lf[ids[1:]])  # inside a CRLF
        flags[0] = True  # the stream starts with a file
    return flags
