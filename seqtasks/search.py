"""Search over any `Decoder` through its contract: greedy, sampling and batched beam search.

Each function decodes a whole batch at once and returns, for every input, a list of
`Hypothesis` (one for greedy and sampling, up to `n_best` for beam search), best first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


def max_lengths(memory: Memory, ratio: float, offset: int) -> Tensor:
    """(B,) output length limit per input: ratio · source length + offset."""
    return (memory.lengths.float() * ratio).long() + offset


def _as_limits(max_length: int | Tensor, batch: int, device: torch.device) -> Tensor:
    if isinstance(max_length, Tensor):
        return max_length.to(device)
    return torch.full((batch,), max_length, dtype=torch.long, device=device)


def _trim_attention(weights: Tensor | None, length: int, valid: int) -> Tensor | None:
    return None if weights is None else weights[:length, :valid].detach().cpu()


@torch.no_grad()
def _one_path(
    decoder: Decoder,
    memory: Memory,
    bos: int,
    eos: int,
    max_length: int | Tensor,
    pick: Callable[[Tensor], Tensor],
    return_attention: bool,
) -> list[list[Hypothesis]]:
    """Extend one hypothesis per input, choosing each token with `pick(log_probs)`."""
    batch = memory.states.size(0)
    limits = _as_limits(max_length, batch, memory.states.device)
    state = decoder.init_state(memory)
    prev = torch.full((batch,), bos, dtype=torch.long, device=memory.states.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=prev.device)
    ended_with_eos = torch.zeros_like(finished)
    lengths = torch.zeros(batch, dtype=torch.long, device=prev.device)
    scores = torch.zeros(batch, device=prev.device)
    tokens, weights = [], []
    for t in range(int(limits.max())):
        logits, state, alpha = decoder.step(prev, state)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
        choice = pick(log_probs)  # (B,)
        scores += torch.where(finished, 0.0, log_probs.gather(1, choice[:, None])[:, 0])
        is_eos = (choice == eos) & ~finished
        ended_with_eos |= is_eos
        lengths += (~finished & ~is_eos).long()
        finished |= is_eos | (t + 1 >= limits)
        tokens.append(choice)
        if return_attention and alpha is not None:
            weights.append(alpha)
        if bool(finished.all()):
            break
        prev = choice
    token_rows = torch.stack(tokens, 1).tolist()  # (B, T)
    attention = torch.stack(weights, 1) if weights else None  # (B, T, S)
    valid = memory.lengths.tolist()
    return [
        [
            Hypothesis(
                tokens=token_rows[b][: lengths[b]],
                score=float(scores[b]),
                attention=None
                if attention is None
                else _trim_attention(attention[b], int(lengths[b]), valid[b]),
                finished=bool(ended_with_eos[b]),
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
) -> list[list[Hypothesis]]:
    """The most probable next token at every step, for a whole batch at once."""
    return _one_path(
        decoder, memory, bos, eos, max_length, lambda lp: lp.argmax(-1), return_attention
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
) -> list[list[Hypothesis]]:
    """Ancestral sampling, optionally from the `top_k` tokens only, at `temperature`."""

    def pick(log_probs: Tensor) -> Tensor:
        scaled = log_probs / temperature
        if top_k > 0:
            kth = scaled.topk(top_k, dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.multinomial(scaled.softmax(-1), 1, generator=generator)[:, 0]

    return _one_path(decoder, memory, bos, eos, max_length, pick, return_attention)


def length_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016): lp(Y) = ((5 + |Y|) / 6)^α; α = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


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
) -> list[list[Hypothesis]]:
    """Batched beam search: all inputs and all K beams advance together as B·K rows.

    At each step the 2K best extensions of each input are taken; those ending in EOS (among the
    K best) are set aside as finished, the K best others continue. An input is done once it has
    K finished hypotheses or reaches its length limit, where its live beams are returned
    unfinished, so every input always gets at least one hypothesis. Finished hypotheses are
    ranked by score / lp(length) with the length counted including EOS.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    batch, k = memory.states.size(0), beam_size
    device = memory.states.device
    limits = _as_limits(max_length, batch, device).tolist()
    state = decoder.init_state(memory.repeat_interleave(k))
    offsets = (torch.arange(batch, device=device) * k)[:, None]  # (B, 1)
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    prev = torch.full((batch * k,), bos, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)
    attn_history: Tensor | None = None
    finished: list[list[tuple[float, list[int], Tensor | None, bool]]] = [[] for _ in range(batch)]
    done = [False] * batch
    valid = memory.lengths.tolist()

    def keep(b: int, row: int, score: float, length: int, eos_: bool) -> None:
        """Set aside the hypothesis in `row` (its tokens are in `history`) as finished."""
        tokens = history[row].tolist()
        attention = None
        if attn_history is not None:
            attention = _trim_attention(attn_history[row], len(tokens), valid[b])
        norm = score / length_penalty(length, alpha)
        finished[b].append((norm, tokens, attention, eos_))

    for t in range(max(limits)):
        logits, state, weights = decoder.step(prev, state)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B·K, V)
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(batch, k * vocab)  # (B, K·V)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)  # (B, 2K)
        origin, token = top_index // vocab, top_index % vocab  # (B, 2K)
        is_eos = token == eos

        if return_attention and weights is not None:
            attn_history = (
                weights[:, None, :]
                if attn_history is None
                else torch.cat([attn_history, weights[:, None, :]], dim=1)
            )  # (B·K, t+1, S): row t is the attention behind token t
        # Hypotheses that end here: EOS among the K best candidates.
        eos_hits = (is_eos[:, :k] & (top_scores[:, :k] > float("-inf"))).nonzero().tolist()
        for b, rank in eos_hits:
            if not done[b]:
                row = b * k + int(origin[b, rank])
                keep(b, row, float(top_scores[b, rank]), t + 1, True)
        # The K best non-EOS candidates continue.
        alive_scores = top_scores.masked_fill(is_eos, float("-inf"))
        scores, pick = alive_scores.topk(k, dim=-1)  # (B, K), sorted
        rows = (offsets + origin.gather(1, pick)).view(-1)  # (B·K,) rows they extend
        next_tokens = token.gather(1, pick).view(-1)
        state = decoder.reorder(state, rows)
        history = torch.cat([history.index_select(0, rows), next_tokens[:, None]], dim=1)
        if attn_history is not None:
            attn_history = attn_history.index_select(0, rows)
        prev = next_tokens

        for b in range(batch):
            if done[b]:
                continue
            if len(finished[b]) >= k:
                done[b] = True
            elif t + 1 >= limits[b]:  # length limit: return the live beams unfinished
                for j in range(k):
                    if scores[b, j] > float("-inf"):
                        keep(b, b * k + j, float(scores[b, j]), t + 1, False)
                done[b] = True
        if all(done):
            break

    results = []
    for b in range(batch):
        ranked = sorted(finished[b], key=lambda h: h[0], reverse=True)[:n_best]
        results.append(
            [
                Hypothesis(tokens, score, attention, eos_)
                for score, tokens, attention, eos_ in ranked
            ]
        )
    return results
