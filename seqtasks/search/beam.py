"""Batched beam search with length normalisation and n-best lists."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor

from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.decoders.base import Decoder
from seqtasks.layers.memory import Memory
from seqtasks.search.hypothesis import (
    Constraint,
    Hypothesis,
    as_limits,
    keep_rows,
    row_candidates,
    shrink_threshold,
)
from seqtasks.search.nbest import Candidates, NBest
from seqtasks.search.settings import SearchSettings

INF = float("inf")


def length_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016): lp(Y) = ((5 + |Y|) / 6)^α; α = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Groups:
    """The inputs in the batch, one group of K rows each, and what their stop rule reads: n of
    them, the done ones among them until the batch drops them.

    Attributes:
        inputs: (n,) the input of each group.
        live: (n,) bool, whether its search goes on.
        scores: (n, K) float32 raw log-probabilities of its live beams.
        limit: (n,) its length limit, and `limit_lp` (n,) float64 lp at that length.
        count: (n,) its hypotheses ended with EOS so far.
        best: (n, n_best) float64 the n_best best normalised scores of those (−inf: none).
    """

    inputs: Tensor
    live: Tensor
    scores: Tensor
    limit: Tensor
    limit_lp: Tensor
    count: Tensor
    best: Tensor

    def select(self, index: Tensor) -> Groups:
        return Groups(*(getattr(self, f.name)[index] for f in fields(self)))


def _input_done(stop: str, groups: Groups, ending: Tensor, t: int, alpha: float, k: int) -> Tensor:
    """(n,) whether each input's search ends after step t (`beam_search`'s `stop`), given the
    normalised scores (n, K) of its hypotheses `ending` at t (−inf: none), and updates its
    `count` and `best` by them. A live beam may still win if there are fewer than `n_best`
    finished, or if its best, best_live / lp at the length where lp is largest, beats the
    `n_best`-th best: up to the limit for "exact", at the next step for "heuristic", which also
    waits for K finished."""
    groups.count = groups.count + (ending > -INF).sum(1)
    n_best = groups.best.size(1)
    groups.best = torch.cat([groups.best, ending], dim=1).topk(n_best, dim=1).values
    next_lp = length_penalty(t + 2, alpha)
    lp: Tensor | float = next_lp
    if stop == "exact":  # the largest lp for a length from t + 2 up to the limit
        lp = groups.limit_lp.masked_fill(groups.limit < t + 2, next_lp).clamp(min=next_lp)
    best_live = groups.scores[:, 0]  # −inf `best` while fewer than n_best: any live beam wins
    may_win = (best_live > -INF) & (best_live.double() / lp > groups.best[:, -1])
    return ~may_win if stop == "exact" else (groups.count >= k) & ~may_win


@torch.no_grad()
def beam_search(
    decoder: Decoder,
    memory: Memory,
    settings: SearchSettings,
    max_length: int | Tensor,
    *,
    attention: bool = False,
    constraint: Constraint | None = None,
    shrink_below: float | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search: all inputs and all K = `settings.beam` beams advance together as
    B·K rows, each input ending at its `max_length` (an int, or (B,) limits), and gives the
    `settings.n_best` best of each, with their attention if asked for.

    At each step the 2K best extensions of each input are taken; those ending in EOS (among the
    K best) are set aside as finished, the K best others continue. An input is done when its
    `stop` rule says so, or when it reaches its length limit, where its live beams are returned
    unfinished, so every input always gets at least one hypothesis. Finished hypotheses are
    ranked by score / lp(length), the length counted including EOS (α = `settings.
    length_alpha`). `settings.stop`:

    - "exact": once it has `n_best` finished and no live beam can beat the `n_best`-th best
      at any length up to the limit (a raw score s only falls, so it reaches at most
      s / lp(limit)): searching on to the limit would return the same.
    - "heuristic": once it has K finished and the best live beam, were it to end at the next
      step, would not beat the `n_best`-th best (Hugging Face Transformers' default,
      `early_stopping=False`). A longer output is divided by a larger penalty, so it may stop
      before one that would win: on Multi30k 2 of 1,000 outputs differ from "exact", with
      13 % fewer decoder rows (docs/transformer.md, "Stopping rules").

    A step is tensor operations over the whole batch and one read-back of two numbers (how
    many inputs are live, how many hypotheses ended); what ends is recorded in `NBest` on the
    device. A done input's rows stay in the batch, ignored, until fewer than `shrink_below` of
    the rows are live (`shrink_threshold`: at once on a CPU, below half on a GPU); its results
    do not depend on when.
    """
    k, alpha, n_best, stop = settings.beam, settings.length_alpha, settings.n_best, settings.stop
    batch, device = memory.states.size(0), memory.states.device
    limits = as_limits(max_length, batch, device)  # (B,)
    steps = int(limits.max()) if batch else 0
    penalties = torch.tensor(  # lp(n) for n = 0 … steps, as `length_penalty` gives it
        [length_penalty(n, alpha) for n in range(steps + 1)], dtype=torch.float64, device=device
    )
    shrink = shrink_threshold(shrink_below, device)
    state = decoder.start(memory, beam_size=k)
    constraint_state = constraint.start(limits, k) if constraint is not None else None
    found = NBest(batch, n_best, steps, device)
    scores = torch.full((batch, k), -INF, device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    groups = Groups(
        inputs=torch.arange(batch, device=device),
        live=torch.ones(batch, dtype=torch.bool, device=device),
        scores=scores,
        limit=limits,
        limit_lp=penalties[limits],
        count=torch.zeros(batch, dtype=torch.long, device=device),
        best=torch.full((batch, n_best), -INF, dtype=torch.float64, device=device),
    )
    prev = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)  # (n·K, t)
    kept: Tensor | None = None  # (n·K, t, S) the attention behind each row's tokens
    offsets = torch.arange(batch, device=device)[:, None] * k  # (n, 1) each group's first row

    for t in range(steps):
        n = groups.inputs.numel()
        logits, state, weights = decoder.step(prev, state)
        row_scores, row_tokens = row_candidates(logits, constraint, constraint_state, 2 * k)
        width = row_scores.size(-1)  # 2K, or V if smaller
        candidates = (groups.scores.view(-1, 1) + row_scores).view(n, k * width)  # (n, K·2K)
        top_scores, top_index = candidates.topk(min(2 * k, k * width), dim=-1)  # (n, 2K)
        origin = top_index // width  # (n, 2K) the beam each extends
        token = row_tokens.view(n, k * width).gather(1, top_index)  # (n, 2K)
        is_eos = token == EOS_ID
        old_history, old_kept = history, kept
        if attention and weights is not None:
            step_weights = weights.float()[:, None, :]  # (n·K, 1, S): the attention behind t
            kept = step_weights if kept is None else torch.cat([kept, step_weights], 1)
            old_kept = kept[:, :t]

        # Hypotheses that end here: EOS among the K best candidates of a live input.
        lp = length_penalty(t + 1, alpha)  # of what ends here, EOS counted
        hit = groups.live[:, None] & is_eos[:, :k] & (top_scores[:, :k] > -INF)  # (n, K)
        hit_score = (top_scores[:, :k].double() / lp).masked_fill(~hit, -INF)

        # The K best non-EOS candidates continue.
        groups.scores, pick = top_scores.masked_fill(is_eos, -INF).topk(k, dim=-1)  # (n, K)
        rows = (offsets + origin.gather(1, pick)).view(-1)  # (n·K,) the rows they extend
        prev = token.gather(1, pick).view(-1)
        history = torch.cat([history.index_select(0, rows), prev[:, None]], dim=1)
        if kept is not None:
            kept = kept.index_select(0, rows)

        # Inputs that their stop rule ends, or at their length limit, leave the search; at the
        # limit their live beams are returned unfinished.
        done = _input_done(stop, groups, hit_score, t, alpha, k)
        cut = groups.live & ~done & (groups.limit <= t + 1)
        cut_score = (groups.scores.double() / lp).masked_fill(~cut[:, None], -INF)
        groups.live = groups.live & ~done & ~cut
        n_live, n_ended = torch.stack([groups.live.sum(), hit.sum() + cut.sum()]).tolist()
        if n_ended:
            hit_rows = (offsets + origin[:, :k]).view(-1)  # (n·K,) the rows that ended
            ending = _ending(old_history, old_kept, hit_rows, history, kept, n, k)
            found.add(groups.inputs, Candidates(torch.cat([hit_score, cut_score], 1), *ending))
        if not n_live:
            break
        if n_live < shrink * n:  # drop the done inputs' rows
            keep = groups.live.nonzero()[:, 0]
            index = keep_rows(keep, k)
            rows, prev, history = rows[index], prev[index], history[index]
            kept = None if kept is None else kept[index]
            groups, offsets = groups.select(keep), offsets[: keep.numel()]
        state = decoder.reorder(state, rows)
        if constraint is not None:
            constraint_state = constraint.advance(constraint.reorder(constraint_state, rows), prev)

    return found.hypotheses(memory.lengths.tolist())


def _ending(
    old_history: Tensor,
    old_attention: Tensor | None,
    hit_rows: Tensor,
    history: Tensor,
    attention: Tensor | None,
    n: int,
    k: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The tokens (n, 2K, t + 1), lengths, ended flags and attention (n, 2K, t + 1, S) of what
    may end at step t = `old_history`.size(1), in the order hypotheses end: K ending with EOS
    per group (their t tokens before this step, in `hit_rows`), then its K live beams, cut at
    the limit (their t + 1 tokens)."""
    t = old_history.size(1)
    ended_tokens = F.pad(old_history.index_select(0, hit_rows), (0, 1))  # (n·K, t + 1)
    tokens = torch.cat([ended_tokens.view(n, k, t + 1), history.view(n, k, t + 1)], dim=1)
    length = torch.tensor([t] * k + [t + 1] * k, device=history.device).expand(n, -1)
    ended = torch.tensor([True] * k + [False] * k, device=history.device).expand(n, -1)
    weights = None
    if attention is not None and old_attention is not None:
        ended_weights = F.pad(old_attention.index_select(0, hit_rows), (0, 0, 0, 1))
        sources = attention.size(-1)
        weights = torch.cat(
            [ended_weights.view(n, k, t + 1, sources), attention.view(n, k, t + 1, sources)], 1
        )
    return tokens, length, ended, weights
