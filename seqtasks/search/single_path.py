"""Greedy search and ancestral sampling: one hypothesis per input."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seqtasks.decoders.base import Decoder
from seqtasks.layers.memory import Memory
from seqtasks.search.hypothesis import Constraint, Hypothesis, as_limits, constrained_log_probs


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
