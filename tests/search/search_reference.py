"""The searches as they were before issue 29, kept as the reference the rewritten ones must
equal (`test_search_equivalence`): `beam_search`, `greedy` and `sample`, which read results back
row by row in Python at every step and dropped finished inputs as soon as they ended. Copied
unchanged but for the imports; not used by the package.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seqtasks.decoders.base import Decoder
from seqtasks.layers.memory import Memory
from seqtasks.search.beam import length_penalty
from seqtasks.search.hypothesis import (
    Constraint,
    Hypothesis,
    as_limits,
    constrained_log_probs,
    row_candidates,
)
from seqtasks.search.settings import check_stop


def keep_rows(groups: list[int], k: int, device: torch.device) -> Tensor:
    """The rows of the given input groups, K rows each: (len(groups)·K,)."""
    index = torch.tensor(groups, device=device)[:, None] * k + torch.arange(k, device=device)
    return index.view(-1)


def _live_may_win(
    finished: list[Hypothesis],
    best_live: float,
    lengths: tuple[int, int],
    alpha: float,
    n_best: int,
) -> bool:
    """Whether the best live beam (raw score `best_live`) could still end up among the
    `n_best` best `finished` ones if its final length (EOS included) is within `lengths`
    (shortest, longest): its raw score only falls, so its best is best_live / lp at the end of
    `lengths` where lp is largest."""
    if best_live == float("-inf"):
        return False
    ranked = sorted((h.score for h in finished), reverse=True)
    if len(ranked) < n_best:
        return True
    lp = max(length_penalty(lengths[0], alpha), length_penalty(lengths[1], alpha))
    return best_live / lp > ranked[n_best - 1]


def _input_done(
    stop: str,
    finished: list[Hypothesis],
    best_live: float,
    t: int,
    limit: int,
    alpha: float,
    n_best: int,
    k: int,
) -> bool:
    """Whether an input's search ends after step t (`beam_search`'s `stop`)."""
    if stop == "exact":  # no final length up to the limit lets a live beam in
        return not _live_may_win(finished, best_live, (t + 2, max(limit, t + 2)), alpha, n_best)
    # heuristic: K finished, and a live beam ending at the next step would not get in
    return len(finished) >= k and not _live_may_win(
        finished, best_live, (t + 2, t + 2), alpha, n_best
    )


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
    stop: str = "exact",
) -> list[list[Hypothesis]]:
    """Batched beam search: all inputs and all K beams advance together as B·K rows.

    At each step the 2K best extensions of each input are taken; those ending in EOS (among the
    K best) are set aside as finished, the K best others continue. An input is done when its
    `stop` rule says so, or when it reaches its length limit, where its live beams are returned
    unfinished, so every input always gets at least one hypothesis; a done input leaves the
    batch. Finished hypotheses are ranked by score / lp(length), the length counted including
    EOS. `stop`:

    - "exact": once it has `n_best` finished and no live beam can beat the `n_best`-th best
      at any length up to the limit (a raw score s only falls, so it reaches at most
      s / lp(limit)): searching on to the limit would return the same.
    - "heuristic": once it has K finished and the best live beam, were it to end at the next
      step, would not beat the `n_best`-th best (Hugging Face Transformers' default,
      `early_stopping=False`). A longer output is divided by a larger penalty, so it may stop
      before one that would win: on Multi30k 2 of 1,000 outputs differ from "exact", with
      13 % fewer decoder rows (docs/transformer.md, "Stopping rules").
    """
    check_stop(stop)
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    batch, k, device = memory.states.size(0), beam_size, memory.states.device
    limit_tensor = as_limits(max_length, batch, device)
    limits = limit_tensor.tolist()
    valid = memory.lengths.tolist()
    state = decoder.start(memory, beam_size=k)
    constraint_state = constraint.start(limit_tensor, k) if constraint is not None else None
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
        row_scores, row_tokens = row_candidates(logits, constraint, constraint_state, 2 * k)
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

        # Inputs that their stop rule ends, or at their length limit, leave the batch.
        still, best_live = [], scores[:, 0].tolist()
        for g, b in enumerate(active):
            if _input_done(stop, finished[b], best_live[g], t, limits[b], alpha, n_best, k):
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
            index = keep_rows(still, k, device)
            rows, prev, history = rows[index], prev[index], history[index]
            attn_history = None if attn_history is None else attn_history[index]
            scores = scores[still]
            active = [active[g] for g in still]
        state = decoder.reorder(state, rows)
        if constraint is not None:
            constraint_state = constraint.advance(constraint.reorder(constraint_state, rows), prev)

    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in finished]


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
    limit_tensor = as_limits(max_length, batch, device)
    limits = limit_tensor.tolist()
    valid = memory.lengths.tolist()
    state = decoder.start(memory)
    constraint_state = constraint.start(limit_tensor, 1) if constraint is not None else None
    prev = torch.full((batch,), bos, dtype=torch.long, device=device)
    active = list(range(batch))  # input of each row
    tokens: list[list[int]] = [[] for _ in range(batch)]
    weights: list[list[Tensor]] = [[] for _ in range(batch)]
    scores, ended = [0.0] * batch, [False] * batch
    for _ in range(max(limits)):
        logits, state, alpha = decoder.step(prev, state)
        log_probs = constrained_log_probs(logits, constraint, constraint_state)  # (R, V)
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
