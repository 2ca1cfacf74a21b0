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
"""

from __future__ import annotations

from dataclasses import dataclass

# What an earlier run's summary keeps of its stats: enough for a model card (how
# long, how much, on what, with what result) without its loss curve.  A note recorded
# beside one of them (`<key>_note`) goes with it: the shipped model's `sources_note` says
# its sources were counted after training, and its `final_train_loss_note` which loss
# that is.
SUMMARY_KEYS = ("date", "device", "precision", "torch", "parameters", "tokens_seen", "steps",
                "seconds", "lr", "batch_size", "seq_len", "seed", "row_seed", "init_from",
                "interrupted", "interim", "train_files", "train_tokens", "heldout_tokens",
                "final_train_loss", "heldout_loss", "heldout_infill_loss",
                "contaminated_files", "sources")


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
