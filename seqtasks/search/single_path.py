"""Greedy search and ancestral sampling: one hypothesis per input."""

from __future__ import annotations

from collections.abc import Callable

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
    constrained_log_probs,
    shrink_threshold,
)


@torch.no_grad()
def _one_path(
    decoder: Decoder,
    memory: Memory,
    max_length: int | Tensor,
    pick: Callable[[Tensor], Tensor],
    attention: bool,
    constraint: Constraint | None,
    shrink_below: float | None,
) -> list[list[Hypothesis]]:
    """Extend one hypothesis per input, choosing each token with `pick(log_probs)`.

    Each step writes every row's choice, its log-probability (and attention) into per-input
    tensors on the device, at column t, and reads back one number, the rows still live. A live
    row has written t tokens, so a finished row writes past its end, and where each output
    ends (its first EOS, else its limit) is found once the search is over. A finished row
    stays in the batch, ignored, until fewer than `shrink_below` of the rows are live
    (`shrink_threshold`); then the batch drops them, so the remaining steps cost only what is
    still running. With `shrink_below` 0 no row is ever dropped, and the count is read one step
    late (`CountInFlight`): the device is never waited for, and a search whose rows have all
    ended takes one step more, which writes only past every output's end.
    """
    batch, device = memory.states.size(0), memory.states.device
    limits = as_limits(max_length, batch, device)  # (B,)
    steps = int(limits.max()) if batch else 0
    shrink = shrink_threshold(shrink_below, device)
    state = decoder.start(memory)
    constraint_state = constraint.start(limits, 1) if constraint is not None else None
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    inputs, limit = torch.arange(batch, device=device), limits  # (R,) each row's input, limit
    live = torch.ones(batch, dtype=torch.bool, device=device)  # (R,)
    tokens = torch.full((batch, steps), EOS_ID, dtype=torch.long, device=device)  # (B, T)
    log_probs_chosen = torch.zeros((batch, steps), device=device)  # (B, T)
    kept: Tensor | None = None  # (B, T, S) the attention behind each token
    in_flight: CountInFlight | None = None  # with shrink 0: the step before's live count
    for t in range(steps):
        logits, state, weights = decoder.step(prev, state)
        log_probs = constrained_log_probs(logits, constraint, constraint_state)  # (R, V)
        choice = pick(log_probs)  # (R,)
        if constraint is not None:
            constraint_state = constraint.advance(constraint_state, choice)
        tokens[inputs, t] = choice
        log_probs_chosen[inputs, t] = log_probs.gather(1, choice[:, None])[:, 0]
        if attention and weights is not None:
            if kept is None:
                kept = weights.new_zeros((batch, steps, weights.size(-1)), dtype=torch.float)
            kept[inputs, t] = weights.float()
        live &= (choice != EOS_ID) & (limit > t + 1)
        if not shrink:  # every row stays: learn a step late that none is live
            none_live = in_flight is not None and not in_flight.read()
            in_flight = CountInFlight(live.sum())
            if none_live:
                break
        else:
            rows = live.sum().item()  # the step's one read-back
            if not rows:
                break
            if rows < shrink * len(live):  # drop the finished rows
                index = live.nonzero()[:, 0]
                state, choice = decoder.reorder(state, index), choice[index]
                if constraint is not None:
                    constraint_state = constraint.reorder(constraint_state, index)
                inputs, limit, live = inputs[index], limit[index], live[index]
        prev = choice
    return _read_back(tokens, log_probs_chosen, limits, kept, memory.lengths.tolist())


class CountInFlight:
    """A count (0-d) copied to the host behind the device's queued work, so that queuing the
    next step need not wait for it; `read` waits only for the work queued before the copy (on a
    CPU, none)."""

    def __init__(self, count: Tensor):
        self.event: torch.cuda.Event | None = None
        if count.is_cuda:
            self.host = torch.empty((), dtype=count.dtype, pin_memory=True)
            self.host.copy_(count, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.host = count

    def read(self) -> int:
        if self.event is not None:
            self.event.synchronize()
        return int(self.host.item())


def _read_back(
    tokens: Tensor,
    log_probs: Tensor,
    limits: Tensor,
    attention: Tensor | None,
    valid: list[int],
) -> list[list[Hypothesis]]:
    """One `Hypothesis` per input from the (B, T) tokens and log-probabilities the search
    wrote: an output ends at its first EOS (finished), else at its limit (at least 1, at most
    T: the steps taken); its score is the sum of its log-probabilities, EOS's included, added
    in order in float64 as Python adds floats. Its attention is over its `valid` source
    positions (None for an empty output)."""
    steps = tokens.size(1)
    written = limits.clamp(min=1, max=steps)  # (B,) a first step is taken even at limit 0
    past = torch.arange(steps, device=tokens.device) >= written[:, None]  # (B, T)
    stops = torch.cat([(tokens == EOS_ID) | past, past.new_ones(len(past), 1)], 1)  # (B, T + 1)
    length = stops.int().argmax(1)  # (B,) the first stop
    ended = length < written
    sums = F.pad(log_probs.double().cumsum(1), (1, 0))  # (B, T + 1) the sums of the first j
    score = sums.gather(1, (length + ended.long())[:, None])[:, 0]
    lengths, tokens = length.tolist(), tokens.tolist()  # lists: no tensor per row
    attention = None if attention is None else attention.cpu()
    results = []
    for b, (n, value, finished) in enumerate(zip(lengths, score.tolist(), ended.tolist())):
        weights = None if attention is None or not n else attention[b, :n, : valid[b]].clone()
        results.append([Hypothesis(tokens[b][:n], value, weights, finished)])
    return results


def greedy(
    decoder: Decoder,
    memory: Memory,
    max_length: int | Tensor,
    *,
    attention: bool = False,
    constraint: Constraint | None = None,
    shrink_below: float | None = None,
) -> list[list[Hypothesis]]:
    """The most probable (allowed) next token at every step, for a whole batch at once, each
    input ending at its `max_length` (an int, or (B,) limits)."""
    return _one_path(
        decoder, memory, max_length, _most_probable, attention, constraint, shrink_below
    )


def _most_probable(log_probs: Tensor) -> Tensor:
    """(R,) each row's most probable token."""
    return log_probs.argmax(-1)


def sample(
    decoder: Decoder,
    memory: Memory,
    max_length: int | Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    attention: bool = False,
    constraint: Constraint | None = None,
) -> list[list[Hypothesis]]:
    """Ancestral sampling, optionally from the `top_k` tokens only, at `temperature`. A draw
    takes one number from `generator` per row, so finished rows leave the batch at once
    (`shrink_below` 1): a seeded generator gives the samples it always gave."""

    def pick(log_probs: Tensor) -> Tensor:
        scaled = log_probs / temperature
        if top_k > 0:
            kth = scaled.topk(top_k, dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.multinomial(scaled.softmax(-1), 1, generator=generator)[:, 0]

    return _one_path(decoder, memory, max_length, pick, attention, constraint, 1.0)
