"""The denoising loop: one loop, with every control passed in as configuration.

The span starts masked (or, to refine existing code, partly masked).  At each
step the model scores every position; each masked position proposes a token
(greedy, or sampled at the row's temperature within the top-p nucleus), the
*strategy* ranks the masked positions, and the *schedule* says how many of the
best to commit (or a confidence threshold: those at least that confident, in the
strategy's order), within a per-step cap, keeping positions committed together
`spacing` apart.  Committed tokens stay, unless
re-masking is on: then committed tokens the model has come to doubt are masked
again, under a budget that shrinks to zero, so the loop still ends within its
step budget (the last step of the budget commits everything left).

Hybrid orders restrict which positions may commit: the first K positions (or
the first line) go strictly left to right, one per step, while the rest go in
parallel; semi-autoregressive blocks finish left to right, diffusion inside
each block.  Early stopping fills every remaining position at once when the
proposals stop changing (not in a step that re-masked a token: its proposal there
was made with the token in place) and an independent check accepts the result: the mean
log-probability of the span, and the caller's own test (syntax validity).  A loop
also ends once the fill's text is settled: a fill ends at its first pad, so when
every position before a committed pad is committed, no later step can change
the text, and the masked rest becomes pad (as in training, where a shorter
fill's tail is pad).

The span's head (prefix characters moved into the span, see `span.py`) is
committed in the first step as a chain of tokens that spells it exactly, so a
fill always starts with the head's characters.  The chain may take more positions
than the head's own tokens, which the span was sized for (an indentation of 12
spaces, one token, spelled in 6): with `grow_for_head`, the span then grows by
the difference, so the fill keeps the positions it was given.  That step commits
the chain alone, as its other proposals were made for a span that ended too soon.

A model with an expand token (DreamOn's `expand_id`) may grow its span: a
committed expand token becomes two masked positions, until the span holds
`max_tokens` positions or the step budget's last step, after which expansion is
never proposed.  Only a single-row run without blocks grows (rows of different
lengths cannot share one tensor); other runs never propose it.  Such a run also
shrinks, as DreamOn's generator does (its pad_eos_to_right and delete_eos_token):
once the model's delete token (`delete_id`, DreamOn's end-of-text) is committed,
the masked positions after it become delete tokens too, and every delete token
leaves the span, so the suffix follows the fill at once and a token committed after
it earlier stays.  Elsewhere the delete token is the pad, which trimming cuts at.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.schedules import SCHEDULES
from dlm_lsp.span import HeadChain, SpanLayout, head_chain
from dlm_lsp.strategies import STRATEGIES


class Cancelled(Exception):
    """The caller asked the loop to stop; raised between steps."""


@dataclass
class SamplerConfig:
    """How to denoise one span; the defaults are plain confidence-ordered decoding."""

    steps: int = 16  # the budget: forward passes at most
    strategy: str = "confidence"  # which masked positions commit first
    schedule: str = "linear"  # how many commit per step
    temperatures: tuple[float, ...] = (0.0,)  # one per candidate row; 0 is greedy
    top_p: float = 1.0  # nucleus of the sampled rows
    threshold: float | None = None  # commit every position at least this confident (>= 1)
    max_per_step: int | None = None  # cap on commits per step (yields only to the budget)
    spacing: int = 0  # positions committed in one step are more than this apart
    remask: float = 0.0  # share of a block that may be re-masked per step, shrinking to 0
    remask_below: float = 0.5  # only committed tokens whose probability fell below this
    ltr_tokens: int = 0  # hybrid: the first K positions left to right, one per step
    ltr_first_line: bool = False  # hybrid: the fill's first line left to right
    block_size: int | None = None  # semi-autoregressive blocks of this many positions
    early_stop: bool = False  # stop when proposals are stable and the result passes
    early_stop_change: float = 0.0  # share of changed proposals that still counts as stable
    early_stop_logprob: float = -1.0  # quality bar: mean log-probability of the span
    max_tokens: int | None = None  # a span that grows (DreamOn's expand token) stops here
    # End as soon as no step can change the fill's text: every row has committed its end
    # (a pad, or a line break in a one-line fill) with nothing masked before it.  Left to
    # right, the loop then costs the fill's length plus one, as an autoregressive model
    # stops at its end token.
    stop_when_settled: bool = True
    single_line: bool = False  # the fill is cut at its first line break, which settles it too
    # A head's chain longer than the head's own tokens grows the span by the difference
    # (a first pass only).  Off: on 200 held-out lines it raised edit similarity 10.3% ->
    # 12.0% but took 24% more steps, as the fills cut short before wrote their whole line
    # (README, Benchmarks: the head's chain).
    grow_for_head: bool = False
    # A pad (the fill's end) may be proposed only where every position after it holds a
    # pad already: the end grows back from the span's end.  Off, a confident pad early in
    # the span ends the fill there, often empty (see `pads_only_at_the_end`).
    pads_from_end: bool = False
    # Whether the fill may end before the span's end, with a pad.  False where the client
    # gave the length (`exactLength`): every position then holds a token of the fill.
    end_early: bool = True


@dataclass
class Denoised:
    """Outcome of the loop for a batch of candidate rows."""

    span_ids: torch.Tensor  # (B, N) committed tokens of the span
    scores: torch.Tensor  # (B,) mean log-probability of the span's tokens
    steps: int  # forward passes run
    early_stopped: bool = False  # ended before its budget: the early stop, or its text settled
    # positions a head's chain grew the span by (`grow_for_head`): the span was planned
    # with the head's own tokens, and the loop denoised these more
    grown: int = 0


StepCallback = Callable[[int, int, torch.Tensor], None]
AcceptCheck = Callable[[list[int]], bool]  # a row's span ids -> acceptable as a result
Runner = Callable[["Denoising", Callable[[], bool] | None], "Denoised"]


def nucleus(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Logits outside the smallest set of tokens with probability mass >= top_p set to -inf."""
    if top_p >= 1.0:
        return logits
    ordered, order = logits.sort(-1, descending=True)
    probs = ordered.softmax(-1)
    outside = probs.cumsum(-1) - probs >= top_p  # keep the token that crosses top_p
    ordered = ordered.masked_fill(outside, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, ordered)


def choose(logits: torch.Tensor, temps: torch.Tensor, top_p: float,
           gen: torch.Generator) -> torch.Tensor:
    """Greedy tokens for rows at temperature 0, Gumbel-max nucleus samples for the others."""
    greedy = logits.argmax(-1)  # (B, N)
    if not bool((temps > 0).any()):
        return greedy
    u = torch.rand(logits.shape, generator=gen, dtype=torch.float64).clamp_(1e-20, 1.0)
    gumbel = (-(-u.log()).log()).to(logits.device, logits.dtype)  # float64: rare tokens stay fair
    scaled = nucleus(logits / temps.clamp_min(1e-6)[:, None, None], top_p)
    return torch.where((temps > 0)[:, None], (scaled + gumbel).argmax(-1), greedy)


def pick(score: list[float], eligible: list[bool], forced: list[int], k: int, spacing: int,
         must: int) -> list[int]:
    """Positions of one row to commit: the forced ones, then the best scored, kept apart.

    Takes at most `k` (never fewer than the forced), skipping positions within
    `spacing` of one already taken; spacing is relaxed only to reach `must`,
    the least the step budget needs.
    """
    taken = list(dict.fromkeys(forced))
    order = sorted((i for i, ok in enumerate(eligible) if ok and i not in taken),
                   key=lambda i: -score[i])
    for i in order:
        if len(taken) >= k:
            break
        if all(abs(i - j) > spacing for j in taken):
            taken.append(i)
    for i in order:
        if len(taken) >= must:
            break
        if i not in taken:
            taken.append(i)
    return taken


@functools.lru_cache(maxsize=32)  # each at most 8 bytes per vocabulary entry
def _allowed(chain: HeadChain, done: int, positions_left: int,
             device: torch.device) -> torch.Tensor:
    """`chain.allowed` as an index tensor, made once: a common head (a space, an
    indentation) allows thousands of tokens, and indexing the logits with that Python
    list cost about a millisecond each time; heads recur (see `head_chain`)."""
    return torch.tensor(chain.allowed(done, positions_left), dtype=torch.long, device=device)


def head_tokens(chain: HeadChain, logits: torch.Tensor) -> list[int]:
    """The most likely token chain (under `logits` (N, V)) that spells the head exactly."""
    tokens, done, n = [], 0, logits.shape[0]
    while done < len(chain.head):
        ids = _allowed(chain, done, n - len(tokens), logits.device)
        best = int(ids[logits[len(tokens)].index_select(0, ids).argmax()])
        tokens.append(best)
        done = chain.advance(done, chain.texts[best])
    return tokens


def head_room(chain: HeadChain, row: torch.Tensor, mask_id: int) -> int:
    """The span positions the head's chain may take in a row: the masked run it starts.

    A repair that writes the head's token again leaves the fill's tokens after it
    committed; a chain longer than the tokens reopened would write over them (and, as
    they count as commits, leave a masked position after the budget's last step).  The
    tokens reopened spelled the head before, so a chain fits in them; where none would
    (not seen), the chain may take the whole span, as on a first pass.
    """
    written = (row != mask_id).nonzero()
    room = int(written[0]) if len(written) else row.shape[0]
    return room if chain.min_tokens[0] <= room else row.shape[0]


def pads_only_at_the_end(logits: torch.Tensor, span: torch.Tensor, pad_id: int) -> None:
    """No pad proposed (`logits` (B, N, V), in place) where a later position of the row's
    `span` (B, N) is masked or holds anything but a pad.

    A fill ends at its first pad, and a pad is often the model's most confident token
    anywhere in a span longer than the fill (the tail of every training row that was
    shorter), so confidence order committed one early and the fill ended there, empty
    more often than not: 35% of the shipped model's single-line HumanEval fills at their
    own length, where no pad belongs (`bench strategies`, 2026-12-04).  With this rule
    the end is decided from the span's end backwards, one position after another, and the
    positions before it propose their best token that is not a pad."""
    later = (span != pad_id).flip(-1).cumsum(-1).flip(-1) - (span != pad_id).long()
    logits[..., pad_id] = logits[..., pad_id].masked_fill(later > 0, float("-inf"))


def blocks(n: int, steps: int, size: int | None) -> list[tuple[int, int, int]]:
    """(start, end, steps) of each block; the budget is shared by block size, >= 1 each."""
    size = max(1, size or n)
    bounds = [(s, min(n, s + size)) for s in range(0, n, size)] or [(0, 0)]
    out, left = [], max(steps, len(bounds))
    for i, (s, e) in enumerate(bounds):
        share = left if i == len(bounds) - 1 else max(1, round(left * (e - s) / (n - s)))
        share = min(share, left - (len(bounds) - 1 - i))
        out.append((s, e, share))
        left -= share
    return out


class _Order:
    """Per-row protected head and left-to-right region of the span."""

    def __init__(self, cfg: SamplerConfig, rows: int, n: int, head: list[int]):
        self.cfg, self.n = cfg, n
        self.head = head  # positions [0, head) hold the head: committed, never re-masked
        self.first_line_end = [n] * rows
        self.head_ends_line = [False] * rows  # the head's last token ends the first line

    def note_head(self, r: int, past_head: str) -> None:
        """The head's last token may go on past the head with the fill's first characters
        (`\n\n` spelling a head `\n`); a line break among them ends the fill's first line
        in the head, where `note_line_breaks` (which reads after the head) never saw it:
        the whole span went left to right, one token a step."""
        if "\n" in past_head:
            self.first_line_end[r] = self.head[r]
            self.head_ends_line[r] = True

    def ltr_end(self, r: int) -> int:
        """End of the region committed strictly left to right (after the head)."""
        if self.cfg.ltr_first_line:
            return self.first_line_end[r]
        return min(self.n, self.head[r] + self.cfg.ltr_tokens) if self.cfg.ltr_tokens else 0

    def protected(self, r: int) -> int:
        """Positions below this are never re-masked."""
        return max(self.head[r], self.ltr_end(r))

    def note_line_breaks(self, span: torch.Tensor, mask_id: int, texts: list[str]) -> None:
        """End the first-line region after the first committed line break."""
        for r in range(span.shape[0]):
            for i in range(self.head[r], self.first_line_end[r]):
                t = int(span[r, i])
                if t == mask_id:
                    break
                if "\n" in texts[t]:
                    self.first_line_end[r] = i + 1
                    break


def _bans_by_position(banned: tuple[tuple[int, int], ...],
                      device: torch.device) -> list[tuple[int, torch.Tensor]]:
    """A layout's banned (position, token) pairs as one index of tokens a position: the
    tokens that may not start a Python line (`python_indents`) are ~2,900 at one
    position, as many tensor writes a step when set one by one."""
    by_position: dict[int, list[int]] = {}
    for position, token in banned:
        by_position.setdefault(position, []).append(token)
    return [(position, torch.tensor(tokens, device=device))
            for position, tokens in by_position.items()]


def _row_commits(cfg: SamplerConfig, order: _Order, r: int, masked: list[bool],
                 score: list[float], conf: list[float], forced: list[int], schedule_k: int,
                 steps_left: int) -> list[int]:
    """The positions of row `r` to commit at this step."""
    remaining = sum(masked)
    if steps_left <= 1:  # the budget's last step commits everything left
        return pick(score, masked, forced, remaining, 0, remaining)
    end = order.ltr_end(r)
    forced = list(forced)  # the head's chain: masked until now, and committed even outside
    # the region starts after the head: on the first step the chain's own positions are
    # still masked, and taken for the region's next they counted twice (one more commit)
    region = [i for i in range(order.head[r], end) if masked[i]]
    if region:
        forced.append(region[0])
    eligible = [m and i >= end for i, m in enumerate(masked)]
    floor = math.ceil(remaining / steps_left)
    # the least a step commits, whatever a threshold or a cap says: the schedule's count,
    # or an even share of what is left where that is smaller.  The even share alone made
    # any `maxPerStep` or `threshold` a `linear` schedule: `cosine` with a cap of 4096
    # committed 2 on its first steps where it commits 1, a cap raising the count.
    pace = min(schedule_k, floor)
    if cfg.threshold is not None:
        confident = [ok and conf[i] >= cfg.threshold for i, ok in enumerate(eligible)]
        if any(confident):  # the confident positions, whatever the strategy: it orders them
            # beside the forced ones (the head's chain, the left-to-right region's next),
            # which the cap counts but which take no confident position's place
            k = len(set(forced) | {i for i, ok in enumerate(confident) if ok})
            k = k if cfg.max_per_step is None else min(k, cfg.max_per_step)
            taken = pick(score, confident, forced, max(k, len(forced)), cfg.spacing, 0)
            # others only where the budget needs them
            return pick(score, eligible, taken, max(len(taken), pace), cfg.spacing, pace)
        k = 1  # none is confident enough: the strategy's best
    else:
        k = schedule_k
    if cfg.max_per_step is not None:
        k = min(k, cfg.max_per_step)
    return pick(score, eligible, forced, max(k, pace, len(forced)), cfg.spacing, pace)


def _remask(cfg: SamplerConfig, order: _Order, span: torch.Tensor, probs: torch.Tensor,
            just: torch.Tensor, logp: torch.Tensor, mask_id: int, block: tuple[int, int],
            step: int, steps: int) -> bool:
    """Mask again the committed tokens the model now doubts most, within a shrinking budget.
    Says whether it masked any."""
    start, end = block
    budget = math.floor(cfg.remask * (end - start) * (1 - (step + 1) / steps))
    if budget <= 0:
        return False
    taken_back = False
    now = probs.gather(-1, span.unsqueeze(-1)).squeeze(-1)  # (B, N) current belief
    for r in range(span.shape[0]):
        doubted = [i for i in range(max(start, order.protected(r)), end)
                   if span[r, i] != mask_id and not just[r, i] and now[r, i] < cfg.remask_below]
        doubted.sort(key=lambda i: float(now[r, i]))
        for i in doubted[:budget]:
            span[r, i] = mask_id
            logp[r, i] = 0.0
            taken_back = True
    return taken_back


class Denoising:
    """One span's denoising as a resumable state: each `advance` is one step of the loop.

    `denoise` drives it with one forward pass per step; a serving worker can
    instead interleave the steps of many requests, giving each its own rows of
    a shared forward pass, and drop a request between any two steps.  The
    state owns its random generator, so a request's result does not depend on
    what it shared a batch with.
    """

    def __init__(self, model: DiffusionModel, layout: SpanLayout, cfg: SamplerConfig,
                 seed: int, on_step: StepCallback | None = None,
                 accept: AcceptCheck | None = None):
        self.model, self.layout, self.cfg = model, layout, cfg
        self.on_step, self.accept = on_step, accept
        self.schedule, self.strategy = SCHEDULES[cfg.schedule], STRATEGIES[cfg.strategy]
        self.gen = torch.Generator().manual_seed(seed)
        self.rows, device = len(cfg.temperatures), model.device
        self.temps = torch.tensor(cfg.temperatures, dtype=torch.float32, device=device)
        self.x = torch.tensor([layout.sequence(model.mask_id)] * self.rows, device=device)
        self.lo, self.hi = layout.span_start, layout.span_end
        n = self.hi - self.lo
        self.chain: HeadChain | None = None
        # the head is spelled on the first step whenever its first position is masked:
        # a first pass, or a repair that writes the token carrying the head again
        if layout.head and (layout.init_ids is None or layout.init_ids[0] == model.mask_id):
            self.chain = head_chain(model.tokenizer, layout.head)
            if not self.chain.reproducible:
                raise ValueError(f"head {layout.head!r} cannot be reproduced by this "
                                 "vocabulary; build the layout with move_head=False")
        self.order = _Order(cfg, self.rows, n,
                            [layout.head_tokens if layout.init_ids else 0] * self.rows)
        if self.chain is None and layout.head and layout.init_ids is not None:
            past = model.tokenizer.decode(list(layout.init_ids[:layout.head_tokens]))
            for r in range(self.rows):  # a head written in the span already
                self.order.note_head(r, past[len(layout.head):])
        self.logp = torch.zeros(self.rows, n, device=device)  # log-prob of committed tokens
        self.bans = _bans_by_position(layout.banned, device)
        self.expand_id: int | None = getattr(model, "expand_id", None)
        self.grows = (self.expand_id is not None and self.rows == 1 and cfg.block_size is None
                      and layout.init_ids is None)
        # DreamOn: a committed delete token leaves the span (only where it grows)
        self.delete_id: int | None = getattr(model, "delete_id", None) if self.grows else None
        room = model.max_length - self.x.shape[1]  # the sequence may not outgrow the model
        self.cap = n + max(0, min((cfg.max_tokens or n) - n, room))
        self.plan = blocks(n, max(1, cfg.steps), cfg.block_size)
        self.budget = sum(k for _, _, k in self.plan)
        self.asked = self.budget  # the steps it was given: `regain` never goes past them
        self.cut = False  # `shorten` took steps off its budget
        self.steps, self.early_stopped = 0, False
        self.grown = 0  # positions the head's chain added (`_append_masks`)
        self.block, self.b_step, self.previous = 0, 0, None
        # positions the current block's schedule spreads over its steps: those masked when
        # the block starts (a refinement or a repair starts partly masked), plus growth
        self.total = 0
        self.breaks: torch.Tensor | None = None  # line-break ids, where a one-line fill ends
        if cfg.single_line and cfg.stop_when_settled:
            self.breaks = torch.tensor(sorted(model.tokenizer.line_break_ids), device=device)
        self._settle()

    @property
    def done(self) -> bool:
        return self.block >= len(self.plan)

    @property
    def inputs(self) -> torch.Tensor:
        """The (rows, T) sequence to score next."""
        return self.x

    @property
    def steps_left(self) -> int:
        """The steps the budget still allows (the last commits everything left)."""
        return 0 if self.done else sum(k for _, _, k in self.plan[self.block:]) - self.b_step

    def shorten(self, steps: int) -> None:
        """Take at most `steps` more steps (at least one a block left): a serving worker
        that finds the fill sharing its passes with more requests than its budget was
        timed for (`StepBatcher`) cuts it so that it still meets its latency target.
        The blocks left share the steps as `blocks` shares a budget; the block under way
        keeps the steps it has taken, and its schedule spreads what is masked over the
        steps it has left.  A left-to-right run is never cut: it writes a token a step over
        a budget of a step per position, and cut it committed all it had left at once on
        its last step (the baseline, and the retry after repair, with a latency target in
        shared rounds)."""
        if self.done or steps >= self.steps_left or self.cfg.strategy == "left-to-right":
            return
        self.cut = True
        self._replan(steps)

    def regain(self, steps: int) -> None:
        """Take up to `steps` more steps again, after `shorten` cut them: the worker that cut
        the fill for the passes it shared finds its rounds cheaper again (the other fills
        ended) and gives it back what its target affords, never more than the steps the
        fill was given (`asked`, the steps taken counted).  A fill never cut keeps its plan."""
        steps = min(steps, self.asked - self.steps)
        if not self.cut or self.done or steps <= self.steps_left:
            return
        self._replan(steps)

    def _replan(self, steps: int) -> None:
        """Share `steps` among the blocks left as `blocks` shares a budget; the block under
        way keeps the steps it has taken."""
        rest = self.plan[self.block:]
        start, end = rest[0][0], rest[-1][1]
        shares = blocks(end - start, max(1, steps), self.cfg.block_size)
        self.plan[self.block:] = [(start + s, start + e, k + (self.b_step if i == 0 else 0))
                                  for i, (s, e, k) in enumerate(shares)]
        self.budget = sum(k for _, _, k in self.plan)

    def _masked(self) -> torch.Tensor:
        start, end, _ = self.plan[self.block]
        masked = self.x[:, self.lo:self.hi] == self.model.mask_id
        masked[:, :start] = False
        masked[:, end:] = False
        return masked

    def _settle(self) -> None:
        """Move on past finished blocks (budget spent, or nothing masked in them)."""
        while not self.done and (self.b_step >= self.plan[self.block][2]
                                 or not bool(self._masked().any())):
            self.block, self.b_step = self.block + 1, 0

    def advance(self, logits: torch.Tensor) -> None:
        """One step, given the model's logits for `inputs`: of the whole sequence
        (rows, T, V), or of the span alone (rows, N, V) from a context cache."""
        cfg, order, rows, mask_id = self.cfg, self.order, self.rows, self.model.mask_id
        start, end, block_steps = self.plan[self.block]
        b_step, device = self.b_step, self.x.device
        span = self.x[:, self.lo:self.hi]  # a view: commits write into x
        masked = self._masked()
        if logits.shape[1] != span.shape[1]:  # logits of the whole sequence: keep the span's
            logits = logits[:, self.lo:self.hi]
        logits = logits.float()  # (B, N, V)
        logits[..., mask_id] = float("-inf")
        for position, tokens in self.bans:
            logits[:, position, tokens] = float("-inf")
        if not cfg.end_early:
            logits[..., self.model.pad_id] = float("-inf")
        elif cfg.pads_from_end:
            pads_only_at_the_end(logits, span, self.model.pad_id)
        last = b_step == block_steps - 1
        if self.expand_id is not None and not (self.grows and not last
                                               and self.hi - self.lo < self.cap):
            logits[..., self.expand_id] = float("-inf")
        chosen = choose(logits, self.temps, cfg.top_p, self.gen)
        forced: list[list[int]] = [[] for _ in range(rows)]
        extra = 0  # positions the span grows by, for a chain longer than the head's tokens
        if self.chain is not None:  # first step: the head's chain, whatever else happens
            for r in range(rows):
                room = head_room(self.chain, span[r], mask_id)
                spelled = head_tokens(self.chain, logits[r, :room])
                chosen[r, :len(spelled)] = torch.tensor(spelled, device=device)
                forced[r] = list(range(len(spelled)))
                order.head[r] = len(spelled)
                texts = self.chain.texts
                order.note_head(r, "".join(texts[t] for t in spelled)[len(self.chain.head):])
            self.chain = None
            extra = 0 if last else self._head_growth()
        probs = logits.softmax(-1)
        conf = probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)  # (B, N)
        score = self.strategy(probs, chosen, self.gen).float()
        commit = torch.zeros_like(masked)
        remaining = int(masked.sum(1).max())
        if b_step == 0:
            self.total = remaining
        k = self.schedule(b_step, block_steps, remaining, self.total)
        for r in range(rows):
            picked = forced[r] if extra else _row_commits(
                cfg, order, r, masked[r].tolist(), score[r].tolist(), conf[r].tolist(),
                forced[r], k, block_steps - b_step)
            commit[r, picked] = True
        span[commit] = chosen[commit]
        self.logp = torch.where(commit, conf.clamp_min(1e-12).log(), self.logp)
        if cfg.ltr_first_line:
            order.note_line_breaks(span, mask_id, self.model.tokenizer.token_texts)
        remasked = cfg.remask > 0 and not last and _remask(
            cfg, order, span, probs, commit, self.logp, mask_id, (start, end), b_step,
            block_steps)
        expanded = commit[0] & (span[0] == self.expand_id)
        kept = self._delete(masked[0])
        if kept is not None:
            expanded = expanded[kept]
        grew = self.grows and (self._grow(expanded) or kept is not None)
        if extra:
            self._append_masks(extra)
            grew = True
        if grew:
            span = self.x[:, self.lo:self.hi]
        self.steps += 1
        self.b_step += 1
        if self.on_step is not None:
            self.on_step(self.steps, self.budget, span)
        # the stops look past the block under way, over the whole span: a block's last step
        # may end the loop too (skipped there, one-step blocks never stopped: `blockSize: 1`
        # spent a step a position), not the run's last, which commits all that is left
        final = last and self.block == len(self.plan) - 1
        if (cfg.early_stop and not final and not grew
                and self._stop_early(span, chosen, conf, remasked)):
            self.early_stopped = True
            self.block = len(self.plan)
            return
        if cfg.stop_when_settled and not final and not grew and self._text_settled(span, probs):
            # ended before its budget too: `fill` said "3 steps" of `--steps 16`, which read
            # as the option ignored, where the early stop's end said "(stopped early)"
            self.early_stopped = True
            self.block = len(self.plan)
            return
        self._settle()

    def _head_growth(self) -> int:
        """Positions the span grows by once the head's chains are spelled (`order.head`):
        the longest chain's beyond the head's own tokens, within the model's length and
        `max_tokens`.  Only a span that starts masked grows: a repair or a refinement
        rewrites a span of its own length.  Its rows then held the same tokens when the
        chain was spelled (the greedy chain under each row's logits), so every candidate
        row spells the same chain and the longest is each row's own (with the shipped
        model, 3 candidates at temperature 0.8 on 60 held-out lines: 55 passes grew, and
        in none did two rows' chains differ)."""
        if not self.cfg.grow_for_head or self.layout.init_ids is not None:
            return 0
        room = self.model.max_length - self.x.shape[1]
        if self.cfg.max_tokens is not None:
            room = min(room, self.cfg.max_tokens - (self.hi - self.lo))
        return max(0, min(max(self.order.head) - self.layout.head_tokens, room))

    def _append_masks(self, k: int) -> None:
        """`k` masked positions more at the span's end, in every row (rows share one
        tensor; their chains are the same: `_head_growth`)."""
        n = self.hi - self.lo
        more = torch.full((self.rows, k), self.model.mask_id, dtype=self.x.dtype,
                          device=self.x.device)
        self.x = torch.cat([self.x[:, :self.hi], more, self.x[:, self.hi:]], 1)
        self.logp = torch.cat([self.logp, self.logp.new_zeros(self.rows, k)], 1)
        self.hi += k
        self.grown += k
        self.total += k
        self.order.n += k
        self.order.first_line_end = [n + k if e == n else e for e in self.order.first_line_end]
        start, end, share = self.plan[-1]
        self.plan[-1] = (start, end + k, share)
        self.previous = None  # proposals of another shape: stability starts over

    def _delete(self, was_masked: torch.Tensor) -> torch.Tensor | None:
        """DreamOn's shrinking, in row 0 (`was_masked`: its positions masked before this
        step): from the first delete token committed, the masked positions after it become
        delete tokens, and every delete token leaves the span.  A span that would be left
        with nothing keeps that first one, a pad the fill is cut at.  Says which of the
        positions stayed (None where none went)."""
        if self.delete_id is None:
            return None
        span = self.x[0, self.lo:self.hi]
        ends = was_masked & (span == self.delete_id)
        if not bool(ends.any()):
            return None
        at = torch.arange(span.shape[0], device=span.device)
        first = int(ends.nonzero()[0])
        filled = (span == self.model.mask_id) & (at > first)
        kept = ~(ends | filled)
        if not bool(kept.any()):
            kept[first] = True
        left = int(kept.sum())
        self.x = torch.cat([self.x[:, :self.lo], self.x[:, self.lo:self.hi][:, kept],
                            self.x[:, self.hi:]], 1)
        self.logp = self.logp[:, kept]
        self.total -= int(filled.sum())  # positions no step need fill any more
        line_end = self.order.first_line_end[0]
        self.order.first_line_end[0] = (left if line_end >= self.order.n
                                        else int(kept[:line_end].sum()))
        self.order.n = left
        self.hi = self.lo + left
        start, _, share = self.plan[0]
        self.plan[0] = (start, left, share)
        self.previous = None  # proposals of another shape: stability starts over
        return kept

    def _grow(self, expanded: torch.Tensor) -> bool:
        """Each committed expand token (positions of row 0) becomes two masked positions;
        past the cap it is masked again instead.  Says whether the span changed."""
        at = expanded.nonzero().flatten().tolist()
        if not at:
            return False
        mask_id = self.model.mask_id
        for i in sorted(at, reverse=True):  # right to left: earlier positions stay put
            if self.hi - self.lo >= self.cap:
                self.x[0, self.lo + i] = mask_id
                self.logp[0, i] = 0.0
                continue
            p = self.lo + i
            two = torch.full((1, 2), mask_id, dtype=self.x.dtype, device=self.x.device)
            self.x = torch.cat([self.x[:, :p], two, self.x[:, p + 1:]], 1)
            self.logp = torch.cat([self.logp[:, :i], self.logp.new_zeros(1, 2),
                                   self.logp[:, i + 1:]], 1)
            self.hi += 1
            self.total += 1
            self.order.n += 1
            if self.order.first_line_end[0] > i:
                self.order.first_line_end[0] += 1
        start, _, share = self.plan[0]
        self.plan[0] = (start, self.hi - self.lo, share)
        self.previous = None  # proposals of another shape: stability starts over
        return True

    def _stop_early(self, span: torch.Tensor, chosen: torch.Tensor, conf: torch.Tensor,
                    remasked: bool = False) -> bool:
        """Fill every masked position at once if proposals are stable and the result passes.

        Not in a step that re-masked a token (`remasked`): the step's proposal there was
        made with the doubted token in place, not for a masked position, and the stop
        wrote that token straight back (with the shipped model, 1 of the 6 early stops of
        50 held-out lines at `remask: 0.3`, the same token each time), undoing the
        re-masking.  A later step proposes for it as masked, and may stop then.  Nor
        where it would write a delete token in a span that shrinks (`_delete`): its
        check saw the fill cut there, and the steps delete it instead."""
        cfg, mask_id = self.cfg, self.model.mask_id
        still = span == mask_id
        previous, self.previous = self.previous, chosen
        if previous is None or remasked or not bool(still.any()):
            return False
        changed = int(((chosen != previous) & still).sum()) / int(still.sum())
        done = torch.where(still, chosen, span)
        if self.delete_id is not None and bool((still & (done == self.delete_id)).any()):
            return False  # it would write a delete token in place: the steps delete it
        quality = torch.where(still, conf.clamp_min(1e-12).log(), self.logp).mean(-1)
        if changed > cfg.early_stop_change or not bool((quality >= cfg.early_stop_logprob).all()):
            return False
        if self.accept is not None and not all(self.accept(row) for row in done.tolist()):
            return False
        self.logp = torch.where(still, conf.clamp_min(1e-12).log(), self.logp)
        span.copy_(done)
        return True

    def _text_settled(self, span: torch.Tensor, probs: torch.Tensor) -> bool:
        """Whether no later step can change any row's text: in each row a committed pad
        (or, in a one-line fill, a line break after the head) comes before every masked
        position, since the fill is cut there.  Then the masked rest becomes pad, scored
        as the model scores pad there.  Not with re-masking, which may take a committed
        token back, nor in a span that grows."""
        if self.cfg.remask > 0 or self.grows:
            return False
        still = span == self.model.mask_id
        if not bool(still.any()):
            return False  # nothing left to skip
        n = span.shape[1]
        at = torch.arange(n, device=span.device)
        first_mask = torch.where(still, at, n).min(1).values
        ends = span == self.model.pad_id
        if self.breaks is not None:  # a line break after the head ends a one-line fill, as
            # does the head's last token where its line break is past the head (`note_head`)
            order = self.order
            fill_from = [h - e for h, e in zip(order.head, order.head_ends_line, strict=True)]
            after_head = at[None, :] >= torch.tensor(fill_from, device=span.device)[:, None]
            ends |= torch.isin(span, self.breaks) & after_head
        first_end = torch.where(ends, at, n).min(1).values
        if not bool(((first_end < first_mask) | (first_mask == n)).all()):
            return False
        pad = self.model.pad_id
        self.logp = torch.where(still, probs[..., pad].clamp_min(1e-12).log(), self.logp)
        span[still] = pad
        return True

    def result(self) -> Denoised:
        return Denoised(self.x[:, self.lo:self.hi].clone(), self.logp.mean(-1), self.steps,
                        self.early_stopped, self.grown)


def denoise(model: DiffusionModel, layout: SpanLayout, cfg: SamplerConfig, seed: int,
            on_step: StepCallback | None = None,
            should_stop: Callable[[], bool] | None = None,
            accept: AcceptCheck | None = None,
            runner: Runner | None = None,
            forward: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Denoised:
    """Fill the masked span of `layout` for len(cfg.temperatures) candidate rows.

    With a `runner` (a batching worker's `run`), the steps are run there,
    sharing forward passes with other requests; otherwise here, one pass a step,
    with `forward` (a context cache's span logits) instead of `model.logits`.
    """
    run = Denoising(model, layout, cfg, seed, on_step, accept)
    if runner is not None:
        return runner(run, should_stop)
    while not run.done:
        if should_stop is not None and should_stop():
            raise Cancelled()
        step = forward or span_forward(model, run.lo, run.hi)  # a span may grow
        run.advance(step(run.inputs))
    return run.result()


def span_forward(model: DiffusionModel, lo: int, hi: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """Logits of positions [lo, hi) only, when the model can give hidden states (the
    output head then runs on the span alone), else the model's full logits."""
    hidden, head = getattr(model, "hidden", None), getattr(model, "head", None)
    if hidden is None or head is None:
        return model.logits
    return lambda ids: head(hidden(ids)[:, lo:hi])


def refine_start(model: DiffusionModel, layout: SpanLayout, strength: float, by: str,
                 seed: int) -> list[int]:
    """Mask `strength` of the old code's tokens (least likely first, or at random), and the
    pad positions after it, the room a rewrite may grow into.

    The span of `layout.init_ids` holds the code being rewritten, then pads; its head
    positions are never masked.  Strength 0 keeps it all; any more masks at least one
    token of the code (where the head leaves any) and the room: rounded alone, 0.5 over
    one token masked nothing, and the rewrite could change nothing.  Strength 1 masks
    everything: a full re-generation.  The share was of the code and the pads together,
    which by confidence took the pads first: strength 0.5 over `return a + b` masked 1
    of its 3 tokens and 5 pads.
    """
    init = list(layout.init_ids or ())
    if strength <= 0:
        return init
    free = [i for i in range(layout.head_tokens, len(init)) if init[i] != model.pad_id]
    room = [i for i in range(layout.head_tokens, len(init)) if init[i] == model.pad_id]
    count = max(1, round(strength * len(free))) if free else 0
    if by == "confidence":
        x = torch.tensor([layout.prefix_ids + init + layout.suffix_ids], device=model.device)
        lo = layout.span_start
        probs = model.logits(x)[0, lo:lo + len(init)].float().softmax(-1)
        belief = probs.gather(-1, torch.tensor(init, device=model.device)[:, None])[:, 0]
        order = sorted(free, key=lambda i: float(belief[i]))
    else:
        gen = torch.Generator().manual_seed(seed)
        order = [free[i] for i in torch.randperm(len(free), generator=gen).tolist()]
    for i in order[:count] + room:
        init[i] = model.mask_id
    return init
