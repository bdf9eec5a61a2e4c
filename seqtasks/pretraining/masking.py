"""BERT's corruption of its input (Devlin et al. 2019, §3.1 "Task #1: Masked LM" and A.1): a
share of the positions is chosen for prediction; of those, 80 % read [MASK], 10 % a random
token and 10 % themselves, and the loss is taken on the chosen positions alone.

seqtasks' vocabularies have no [MASK] piece, and a source never holds BOS (only targets start
with it), so the encoder reads BOS as [MASK]: the pre-trained embedding table is the very
table of the tokeniser a downstream task reads with, one row a piece, nothing added.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

MASK_ID = BOS_ID
FIRST_PIECE = EOS_ID + 1  # the ids below are special: never chosen, never drawn at random


def corrupt(
    ids: Sequence[int],
    vocab_size: int,
    rng: random.Random,
    rate: float = 0.15,
    replace_share: float = 0.8,
    random_share: float = 0.1,
) -> tuple[list[int], list[int]]:
    """(inputs, targets) of one sequence: each ordinary piece is chosen with probability
    `rate` (at least one per sequence that has one); a chosen piece reads MASK_ID with
    probability `replace_share`, a random ordinary piece with `random_share`, else itself;
    `targets` holds the original piece at chosen positions and PAD_ID elsewhere."""
    inputs, targets = list(ids), [PAD_ID] * len(ids)
    ordinary = [i for i, piece in enumerate(ids) if piece >= FIRST_PIECE]
    chosen = [i for i in ordinary if rng.random() < rate]
    if ordinary and not chosen:
        chosen = [rng.choice(ordinary)]
    for i in chosen:
        targets[i] = ids[i]
        draw = rng.random()
        if draw < replace_share:
            inputs[i] = MASK_ID
        elif draw < replace_share + random_share:
            inputs[i] = rng.randrange(FIRST_PIECE, vocab_size)
    return inputs, targets
