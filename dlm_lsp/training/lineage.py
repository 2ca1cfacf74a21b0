"""What a continued run (a warm restart) carries over from the runs before it.

A saved model's config.json records the run that wrote it under "training".  A run
that continued a model wrote its own stats there in place of the earlier run's; only
the count of tokens seen in all was carried over.  A model trained in three GPU
sessions, each continuing the last, thus kept the record of the third alone: not how
long the first two trained, on how many tokens of which sources under which licences,
nor their losses, which the model card has to report.  A continued run now copies
the earlier runs' summaries forward and adds itself to their totals.

Every run also drew its rows from `--seed` (0 unless given), so a run continuing a
model on the same corpus drew the same rows, with the same masks and noise levels, in
the same order as the run before it: the second session repeated the first one's
data order instead of drawing new rows.  `Lineage.row_seed` moves the seed on by one
for each earlier run.

The held-out split is by path (`data.heldout_rank`), and paths change between runs:
a GPU machine's Python 3.12 holds out `test/test_ctypes/test_libc.py`, which the
shipped model trained on as 3.11's `ctypes/test/test_libc.py`, so a continued run's
held-out loss could be measured on text the model had trained on.  Each run now
records which texts it trained on and held out (`SplitRecord`, with those of the runs
before it), and a continued run keeps them apart by text, whatever their paths; and
their near-copy sketches (`nearcopy`), so that a file moved and edited a little
(3.12's `test/test_tkinter/test_text.py`) is placed as the text it came from was.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass

from dlm_lsp.training import nearcopy
from dlm_lsp.training.data import TEXT_DIGEST_BYTES, Corpus, text_digest

# What an earlier run's summary keeps of its stats: enough for a model card (how
# long, how much, on what, with what result) without its loss curve, but with its fill
# curve (a point an evaluation, `fill_probe`): the card's quality curve spans all runs.
# A note recorded beside one of them (`<key>_note`) goes with it: the shipped model's
# `sources_note` says its sources were counted after training, and its
# `final_train_loss_note` which loss that is.
SUMMARY_KEYS = ("date", "device", "precision", "torch", "parameters", "tokens_seen", "steps",
                "seconds", "lr", "batch_size", "seq_len", "seed", "row_seed", "init_from",
                "interrupted", "interim", "train_files", "train_tokens", "heldout_tokens",
                "final_train_loss", "heldout_loss", "heldout_infill_loss",
                "contaminated_files", "sources", "fill_curve", "fill_probe")


def summary(stats: dict) -> dict:
    """What a run's history keeps of its `stats`: the SUMMARY_KEYS it has, each with its
    note where one was recorded."""
    return {name: stats[name] for key in SUMMARY_KEYS for name in (key, f"{key}_note")
            if name in stats}


@dataclass(frozen=True)
class Lineage:
    """The runs behind a checkpoint: one summary each, oldest first, and their totals."""

    earlier: tuple[dict, ...] = ()
    tokens_seen: int = 0
    seconds: float = 0.0

    @classmethod
    def of(cls, previous: dict) -> Lineage:
        """The lineage a run continuing a checkpoint inherits, from the checkpoint's
        "training" stats ({} for a new model: no earlier run)."""
        if not previous:
            return cls()
        before = previous.get("earlier_runs")
        if before is None:  # saved before runs kept their history: the shipped bootstrap
            record = previous.get("previous_run")  # recorded its first run by hand here
            before = [record] if isinstance(record, dict) else []
        earlier = (*before, summary(previous))
        tokens = previous.get("cumulative_tokens_seen",
                              sum(run.get("tokens_seen", 0) for run in earlier))
        return cls(earlier, int(tokens), sum(float(run.get("seconds", 0.0)) for run in earlier))

    def row_seed(self, seed: int) -> int:
        """The seed this run draws its rows from: `seed` for a new model, moved on by one
        for each earlier run so that a continued run draws rows they did not."""
        return seed if not self.earlier else (seed + len(self.earlier)) % 2**64

    def stats(self, tokens_seen: int, seconds: float) -> dict:
        """The lineage's entries in this run's stats, totals including this run."""
        return {"earlier_runs": list(self.earlier),
                "cumulative_tokens_seen": self.tokens_seen + tokens_seen,
                "cumulative_seconds": round(self.seconds + seconds, 1)}


def _packed(digests: Iterable[bytes]) -> str:
    return base64.b64encode(b"".join(sorted(digests))).decode("ascii")


def _unpacked(text: str) -> frozenset[bytes]:
    raw = base64.b64decode(text)
    return frozenset(raw[i:i + TEXT_DIGEST_BYTES] for i in range(0, len(raw), TEXT_DIGEST_BYTES))


@dataclass(frozen=True)
class SplitRecord:
    """The texts a model was trained on and measured on (held out) in all its runs, by
    `data.text_digest`, as config.json's "training"."split" keeps them: ~11 bytes of
    base64 a file, 164 KB for the 15,366 files of the GPU recipe's sources on the 2-core
    VM.  `complete` is False where a run before the record existed (the shipped CPU
    bootstrap's, until its record was rebuilt: MODEL_CARD.md): what it trained on is not
    known, so files it may have trained on can still be held out."""

    trained: frozenset[bytes] = frozenset()
    heldout: frozenset[bytes] = frozenset()
    complete: bool = True
    pinned: tuple[str, ...] = ()  # "heldout_pinned": see collect_sources
    # Near-copy sketches (`nearcopy.sketch`) of the texts trained on and held out, and
    # whether the record has them: "split"."near", written by runs since 2026-12-03
    # (8 bytes a file, another 154 KB for the GPU recipe's 15,366 files on the 2-core VM).
    near_trained: frozenset[bytes] = frozenset()
    near_heldout: frozenset[bytes] = frozenset()
    has_near: bool = True

    @classmethod
    def of(cls, previous: dict) -> SplitRecord:
        """The record a run continuing a checkpoint starts from, from its "training"
        stats ({} for a new model)."""
        pinned = tuple(previous.get("heldout_pinned", ()))
        split = previous.get("split")
        if not isinstance(split, dict):
            return cls(complete=not previous, pinned=pinned, has_near=not previous)
        near = split.get("near")
        near = near if isinstance(near, dict) else None
        return cls(_unpacked(split.get("trained", "")), _unpacked(split.get("heldout", "")),
                   bool(split.get("complete", False)), pinned,
                   nearcopy.unpacked(near.get("trained", "")) if near else frozenset(),
                   nearcopy.unpacked(near.get("heldout", "")) if near else frozenset(),
                   bool(near.get("complete", False)) if near else False)

    def stats(self, corpus: Corpus) -> dict:
        """This run's entries in its stats: the record with the corpus's texts added (a
        text trained on now is no longer held out), the paths it held out, and those
        the rules held out but an earlier run had trained on (or on a near-copy of), and
        those it held out as near-copies of texts held out before."""
        trained = self.trained | {text_digest(f.text) for f in corpus.train}
        heldout = (self.heldout | {text_digest(f.text) for f in corpus.heldout}) - trained
        near_trained = self.near_trained | {corpus.sketches[f.path] for f in corpus.train
                                            if f.path in corpus.sketches}
        near_heldout = (self.near_heldout | {corpus.sketches[f.path] for f in corpus.heldout
                                             if f.path in corpus.sketches}) - near_trained
        return {"heldout_files": sorted(f.path for f in corpus.heldout),
                "heldout_trained_before": corpus.trained_before,
                "heldout_near_trained_before": corpus.near_trained_before,
                "near_heldout_before": corpus.near_heldout_before,
                "split": {"digest": f"sha256 of each file's text, first {TEXT_DIGEST_BYTES} "
                                    "bytes, sorted, base64",
                          "complete": self.complete, "trained_files": len(trained),
                          "heldout_files": len(heldout), "trained": _packed(trained),
                          "heldout": _packed(heldout),
                          "near": {"sketch": f"nearcopy.sketch of each file with one: "
                                             f"{nearcopy.SLOTS} {nearcopy.SLOT_BITS}-bit "
                                             f"MinHash slots of its {nearcopy.SHINGLE_LINES}"
                                             "-line shingles, sorted, base64",
                                   "complete": self.complete and self.has_near,
                                   "trained": nearcopy.packed(near_trained),
                                   "heldout": nearcopy.packed(near_heldout)}}}
