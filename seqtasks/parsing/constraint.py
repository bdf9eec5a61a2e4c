"""Grammar-constrained search for parsing: only well-formed bracket sequences over the words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from seqtasks.parsing.linearisation import MAX_DEPTH, is_close, is_leaf, is_open


@dataclass
class BracketState:
    """Where each search row (R = B·K) stands in the bracket grammar."""

    depth: Tensor  # (R,) brackets open
    stack: Tensor  # (R, max depth) label index of each open bracket, outermost first
    words_left: Tensor  # (R,) preterminals still to write
    length: Tensor  # (R,) tokens written
    limit: Tensor  # (R,) the most tokens (EOS not counted) the output may have
    fresh: Tensor  # (R,) bool: the innermost bracket was just opened and has no child yet


class BracketConstraint:
    """Keeps search inside the well-formed sequences (a `seqtasks.search.Constraint`): every
    finished output is one constituent over exactly the input's words.

    At each step it allows: an opening bracket while words remain, fewer than MAX_DEPTH are
    open and the length limit leaves room to fill and close it; a preterminal inside a bracket
    while words remain; the closing bracket of the innermost label once it has a child (the
    outermost only once all words are used); EOS once every bracket is closed and every word
    used; nothing else.

    Args:
        vocabulary: the token of every target id.
        words: (B,) the number of words of each input.
        eos: the id of EOS.
        specials: ids below this are special tokens (padding, BOS, EOS, …), never chosen
            except EOS.
    """

    def __init__(self, vocabulary: Sequence[str], words: Tensor, eos: int, specials: int):
        labels = sorted({t[1:] for t in vocabulary[specials:] if is_close(t)})
        label_index = {label: i for i, label in enumerate(labels)}
        ids = {token: i for i, token in enumerate(vocabulary)}
        real = [i >= specials for i in range(len(vocabulary))]
        device = words.device

        def flags(test) -> Tensor:
            return torch.tensor([r and test(t) for r, t in zip(real, vocabulary)], device=device)

        self.opens = flags(lambda t: is_open(t) and t[1:] in label_index)  # (V,)
        self.closes = flags(is_close)  # (V,)
        self.leaves = flags(is_leaf)  # (V,)
        self.label_of = torch.tensor(  # (V,) label index of a bracket token, else 0
            [label_index.get(t[1:], 0) for t in vocabulary], device=device
        )
        self.close_of = torch.tensor([ids[f"){label}"] for label in labels] or [eos], device=device)
        self.words, self.eos = words, eos

    def room(self, limits: Tensor) -> Tensor:
        """At least the words and one bracket around them (and EOS): words + 3."""
        return torch.maximum(limits, self.words + 3)

    def start(self, max_length: Tensor, beam_size: int) -> BracketState:
        limit = max_length.to(self.words.device) - 1  # EOS is chosen at step max_length − 1
        if bool((limit < self.words + 2).any()):
            raise ValueError("max_length must leave room for a bracket around all the words")
        words = self.words.repeat_interleave(beam_size)  # (R,)
        zeros = torch.zeros_like(words)
        return BracketState(
            depth=zeros,
            stack=words.new_zeros(len(words), MAX_DEPTH),
            words_left=words,
            length=zeros,
            limit=limit.repeat_interleave(beam_size),
            fresh=zeros.bool(),
        )

    def allowed(self, state: BracketState) -> Tensor:
        depth, left = state.depth, state.words_left
        room = state.limit - state.length
        open_ok = (left > 0) & (room >= left + depth + 2) & (depth < MAX_DEPTH)
        leaf_ok = (depth > 0) & (left > 0)
        close_ok = (depth > 0) & ~state.fresh & ((depth > 1) | (left == 0))
        mask = (open_ok[:, None] & self.opens) | (leaf_ok[:, None] & self.leaves)  # (R, V)
        innermost = state.stack.gather(1, (depth - 1).clamp(min=0)[:, None])[:, 0]  # (R,)
        rows = torch.arange(len(depth), device=depth.device)
        mask[rows, self.close_of[innermost]] |= close_ok
        mask[:, self.eos] = (depth == 0) & (left == 0)
        return mask

    def advance(self, state: BracketState, tokens: Tensor) -> BracketState:
        opened = self.opens[tokens]
        top = state.depth.clamp(max=state.stack.size(1) - 1)[:, None]  # (R, 1)
        pushed = torch.where(opened, self.label_of[tokens], state.stack.gather(1, top)[:, 0])
        return BracketState(
            depth=(state.depth + opened.long() - self.closes[tokens].long()).clamp(min=0),
            stack=state.stack.scatter(1, top, pushed[:, None]),
            words_left=(state.words_left - self.leaves[tokens].long()).clamp(min=0),
            length=state.length + 1,
            limit=state.limit,
            fresh=opened,
        )

    def reorder(self, state: BracketState, index: Tensor) -> BracketState:
        return BracketState(*(getattr(state, f.name).index_select(0, index) for f in fields(state)))
