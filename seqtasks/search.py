"""Search over any `Decoder` through its contract: greedy, sampling and batched beam search.

Each function decodes a whole batch at once and returns, for every input, a list of
`Hypothesis` (one for greedy and sampling, up to `n_best` for beam search), best first.
An optional `Constraint` removes tokens from the choice at every step (their log-probability
becomes −inf; the others keep theirs), e.g. to allow only well-formed bracket sequences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from seqtasks.decoders.base import Decoder
from seqtasks.memory import Memory


@dataclass
class Hypothesis:
    """One output sequence.

    Attributes:
        tokens: the output ids, without BOS and EOS.
        score: total log-probability (beam search: divided by the length penalty).
        attention: (len(tokens), S) the weights behind each output token over the valid source
            positions, or None when not requested or the decoder has no attention.
        finished: whether the hypothesis ended with EOS (false when cut at the length limit).
    """

    tokens: list[int]
    score: float
    attention: Tensor | None = None
    finished: bool = True


class Constraint(Protocol):
    """Which tokens each search row may choose next. Like a decoder's, its state has a row per
    hypothesis (R = B·K, K adjacent per input) and follows the search's choices."""

    def init_state(self, max_length: Tensor, beam_size: int) -> Any:
        """The state before the first step, given the search's (B,) length limits."""

    def allowed(self, state: Any) -> Tensor:
        """(R, V) bool, true for the tokens row r may choose next (at least one per row)."""

    def advance(self, state: Any, tokens: Tensor) -> Any:
        """The state after row r chose tokens[r] (R,)."""

    def reorder(self, state: Any, index: Tensor) -> Any:
        """Row r of the new state takes old row index[r] (as `Decoder.reorder`)."""


def _log_probs(logits: Tensor, constraint: Constraint | None, state: Any) -> Tensor:
    """(R, V) log-softmax of the logits; −inf where the constraint, if any, forbids a token."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    if constraint is None:
        return log_probs
    return log_probs.masked_fill(~constraint.allowed(state), float("-inf"))


def _row_candidates(
    logits: Tensor, constraint: Constraint | None, state: Any, width: int
) -> tuple[Tensor, Tensor]:
    """The `width` best tokens of every row and their log-probabilities, as `_log_probs`
    gives them: (R, width) scores and token ids.

    The best 2K extensions of an input are among the 2K best tokens of each of its beams, so
    only those are scored: the log-softmax is a logsumexp and a top-k of the logits, and the
    (R, V) table of log-probabilities is never written.
    """
    logits = logits.float()
    log_z = torch.logsumexp(logits, dim=-1, keepdim=True)  # (R, 1)
    if constraint is not None:
        logits = logits.masked_fill(~constraint.allowed(state), float("-inf"))
    top, tokens = logits.topk(min(width, logits.size(-1)), dim=-1)  # (R, width)
    return top - log_z, tokens


def max_lengths(memory: Memory, ratio: float, offset: int) -> Tensor:
    """(B,) output length limit per input: ratio · source length + offset."""
    return (memory.lengths.float() * ratio).long() + offset


def _as_limits(max_length: int | Tensor, batch: int, device: torch.device) -> Tensor:
    if isinstance(max_length, Tensor):
        return max_length.to(device)
    return torch.full((batch,), max_length, dtype=torch.long, device=device)


def _keep_rows(groups: list[int], k: int, device: torch.device) -> Tensor:
    """The rows of the given input groups, K rows each: (len(groups)·K,)."""
    index = torch.tensor(groups, device=device)[:, None] * k + torch.arange(k, device=device)
    return index.view(-1)


@torch.no_grad()
def _one_path(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    pick: Callable[[Tensor], Tensor],
    return_attention: bool,
    constraint: Constraint | None,
) -> list[list[Hypothesis]]:
    """Extend one hypothesis per input, choosing each token with `pick(log_probs)`; inputs that
    are finished leave the batch, so the remaining steps cost only what is still running."""
    batch, device = memory.states.size(0), memory.states.device
    limit_tensor = _as_limits(max_length, batch, device)
    limits = limit_tensor.tolist()
    valid = memory.lengths.tolist()
    state = decoder.init_state(memory)
    constraint_state = constraint.init_state(limit_tensor, 1) if constraint is not None else None
    prev = torch.full((batch,), bos, dtype=torch.long, device=device)
    active = list(range(batch))  # input of each row
    tokens: list[list[int]] = [[] for _ in range(batch)]
    weights: list[list[Tensor]] = [[] for _ in range(batch)]
    scores, ended = [0.0] * batch, [False] * batch
    for _ in range(max(limits)):
        logits, state, alpha = decoder.step(prev, state)
        log_probs = _log_probs(logits, constraint, constraint_state)  # (R, V)
        choice = pick(log_probs)  # (R,)
        if constraint is not None:
            constraint_state = constraint.advance(constraint_state, choice)
        chosen = log_probs.gather(1, choice[:, None])[:, 0].tolist()
        still = []
        for row, (b, token) in enumerate(zip(active, choice.tolist())):
            scores[b] += chosen[row]
            if token == eos:
                ended[b] = True
                continue
            tokens[b].append(token)
            if return_attention and alpha is not None:
                weights[b].append(alpha[row, : valid[b]])
            if len(tokens[b]) < limits[b]:
                still.append(row)
        if not still:
            break
        if len(still) < len(active):
            index = torch.tensor(still, device=device)
            state, choice = decoder.reorder(state, index), choice[index]
            if constraint is not None:
                constraint_state = constraint.reorder(constraint_state, index)
            active = [active[row] for row in still]
        prev = choice
    return [
        [
            Hypothesis(
                tokens=tokens[b],
                score=scores[b],
                attention=torch.stack(weights[b]).float().cpu() if weights[b] else None,
                finished=ended[b],
            )
        ]
        for b in range(batch)
    ]


def greedy(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    return_attention: bool = False,
    constraint: Constraint | None = None,
) -> list[list[Hypothesis]]:
    """The most probable (allowed) next token at every step, for a whole batch at once."""
    return _one_path(
        decoder,
        memory,
        bos,
        eos,
        max_length,
        lambda lp: lp.argmax(-1),
        return_attention,
        constraint,
    )


def sample(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    return_attention: bool = False,
    constraint: Constraint | None = None,
) -> list[list[Hypothesis]]:
    """Ancestral sampling, optionally from the `top_k` tokens only, at `temperature`."""

    def pick(log_probs: Tensor) -> Tensor:
        scaled = log_probs / temperature
        if top_k > 0:
            kth = scaled.topk(top_k, dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.multinomial(scaled.softmax(-1), 1, generator=generator)[:, 0]

    return _one_path(decoder, memory, bos, eos, max_length, pick, return_attention, constraint)


def length_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016): lp(Y) = ((5 + |Y|) / 6)^α; α = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


def _live_may_win(
    finished: list[Hypothesis], best_live: float, t: int, limit: int, alpha: float, n_best: int
) -> bool:
    """Whether the best live beam (raw score `best_live` after step t) could still end up among
    the `n_best` best `finished` ones: its final length is t+2 … limit, its score only falls."""
    if best_live == float("-inf"):
        return False
    ranked = sorted((h.score for h in finished), reverse=True)
    if len(ranked) < n_best:
        return True
    lp = max(length_penalty(t + 2, alpha), length_penalty(max(limit, t + 2), alpha))
    return best_live / lp > ranked[n_best - 1]


@torch.no_grad()
def beam_search(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    beam_size: int = 5,
    alpha: float = 1.0,
    n_best: int = 1,
    return_attention: bool = False,
    constraint: Constraint | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search: all inputs and all K beams advance together as B·K rows.

    At each step the 2K best extensions of each input are taken; those ending in EOS (among the
    K best) are set aside as finished, the K best others continue. An input is done once it has
    K finished hypotheses and no live beam can still beat its `n_best`-th best one (a live
    score s only falls, so it can reach at most s / lp(limit)), or when it reaches its length
    limit, where its live beams are returned unfinished, so every input always gets at least
    one hypothesis; a done input leaves the batch. Finished hypotheses are ranked by
    score / lp(length), the length counted including EOS.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    batch, k, device = memory.states.size(0), beam_size, memory.states.device
    limit_tensor = _as_limits(max_length, batch, device)
    limits = limit_tensor.tolist()
    valid = memory.lengths.tolist()
    state = decoder.init_state(memory, beam_size=k)
    constraint_state = constraint.init_state(limit_tensor, k) if constraint is not None else None
    active = list(range(batch))  # input of each group of K rows
    scores = torch.full((batch, k), float("-inf"), device=device)  # (n, K) for n active inputs
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    prev = torch.full((batch * k,), bos, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)  # (n·K, t)
    attn_history: Tensor | None = None  # (n·K, t, S)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]

    def keep(b: int, row: int, score: float, length: int, ended: bool) -> None:
        """Set input b's hypothesis in `row` aside as finished (its tokens are in `history`)."""
        tokens = history[row].tolist()
        attention = None
        if attn_history is not None:
            attention = attn_history[row, : len(tokens), : valid[b]].float().cpu()
        normalised = score / length_penalty(length, alpha)
        finished[b].append(Hypothesis(tokens, normalised, attention, ended))

    for t in range(max(limits)):
        n = len(active)
        logits, state, weights = decoder.step(prev, state)
        row_scores, row_tokens = _row_candidates(logits, constraint, constraint_state, 2 * k)
        width = row_scores.size(-1)  # 2K, or V if smaller
        candidates = (scores.view(-1, 1) + row_scores).view(n, k * width)  # (n, K·2K)
        top_scores, top_index = candidates.topk(min(2 * k, k * width), dim=-1)  # (n, 2K)
        origin = top_index // width  # (n, 2K) the beam each extends
        token = row_tokens.view(n, k * width).gather(1, top_index)  # (n, 2K)
        is_eos = token == eos
        if return_attention and weights is not None:
            step_weights = weights[:, None, :]  # (n·K, 1, S): the attention behind token t
            attn_history = (
                step_weights
                if attn_history is None
                else torch.cat([attn_history, step_weights], dim=1)
            )

        # Hypotheses that end here: EOS among the K best candidates.
        eos_hits = (is_eos[:, :k] & (top_scores[:, :k] > float("-inf"))).nonzero().tolist()
        for g, rank in eos_hits:
            row = g * k + int(origin[g, rank])
            keep(active[g], row, float(top_scores[g, rank]), t + 1, True)

        # The K best non-EOS candidates continue.
        scores, pick = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=-1)  # (n, K)
        offsets = torch.arange(n, device=device)[:, None] * k
        rows = (offsets + origin.gather(1, pick)).view(-1)  # (n·K,) the rows they extend
        prev = token.gather(1, pick).view(-1)
        history = torch.cat([history.index_select(0, rows), prev[:, None]], dim=1)
        if attn_history is not None:
            attn_history = attn_history.index_select(0, rows)

        # Inputs with K finished hypotheses, or at their length limit, leave the batch.
        still, best_live = [], scores[:, 0].tolist()
        for g, b in enumerate(active):
            if len(finished[b]) >= k and not _live_may_win(
                finished[b], best_live[g], t, limits[b], alpha, n_best
            ):
                continue
            if t + 1 >= limits[b]:  # return the live beams unfinished
                for j, score in enumerate(scores[g].tolist()):
                    if score > float("-inf"):
                        keep(b, g * k + j, score, t + 1, False)
                continue
            still.append(g)
        if not still:
            break
        if len(still) < n:
            index = _keep_rows(still, k, device)
            rows, prev, history = rows[index], prev[index], history[index]
            attn_history = None if attn_history is None else attn_history[index]
            scores = scores[still]
            active = [active[g] for g in still]
        state = decoder.reorder(state, rows)
        if constraint is not None:
            constraint_state = constraint.advance(constraint.reorder(constraint_state, rows), prev)

    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in finished]
