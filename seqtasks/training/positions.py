"""Whether the model has positions for every sequence the data will give it, asked once the
splits of a run are read and before its first step: a Transformer with `max_positions` P fails
on the first batch holding a longer source or target, perhaps an hour into training, or in the
validation after it. Training splits are bounded by the DataModule's `max_length`; evaluation
splits keep parsing's trees and captions whole (docs/bad_input.md), so the longest example of
each split read is what counts. A source takes its tokens and EOS, a target its tokens and BOS.
"""

from __future__ import annotations

from typing import Any

STAGE_SPLITS = {"fit": ("fit", "validate"), "validate": ("validate",), "test": ("test",)}
SPLIT_WORDS = {"fit": "training", "validate": "validation", "test": "test", "predict": "predict"}
PARTS = {"source": ("encoder", "EOS"), "target": ("decoder", "BOS")}


class PositionsError(ValueError):
    """A model with fewer positions than a sequence of the data needs (the message says which)."""


def longest(dataset: Any) -> dict[str, int]:
    """The longest source and target of a split, in tokens, as far as its examples are in
    memory: pairs of token ids (translation, parsing), sources alone (pre-training) or captions
    of images (captioning)."""
    examples = getattr(dataset, "examples", None)
    if examples is not None:
        return {
            "source": max((len(example.src) for example in examples), default=0),
            "target": max((len(getattr(example, "tgt", ())) for example in examples), default=0),
        }
    targets, pairs = getattr(dataset, "targets", None), getattr(dataset, "pairs", None)
    if targets is not None and pairs is not None:
        return {"target": max((len(targets[i][j]) for i, j in pairs), default=0)}
    return {}


def check_positions(encoder: Any, decoder: Any, datamodule: Any, stage: str) -> None:
    """Raise a `PositionsError` naming the config keys and values if `encoder` or `decoder`
    (`max_positions`; None: any length) is too short for a split that `stage` reads from
    `datamodule` (its splits read so far; a training split whose examples are not in memory,
    such as shards, counts as `max_length` long)."""
    datasets = getattr(datamodule, "datasets", {})
    max_length = getattr(datamodule, "max_length", None)
    for split_stage in STAGE_SPLITS.get(stage, (stage,)):
        if split_stage not in datasets:
            continue
        lengths = longest(datasets[split_stage])
        if not lengths and split_stage == "fit" and max_length is not None:
            lengths = {"source": max_length, "target": max_length}
        for side, tokens in lengths.items():
            part_name, added = PARTS[side]
            limit = getattr(encoder if side == "source" else decoder, "max_positions", None)
            if limit is None or tokens + 1 <= limit:
                continue
            split = getattr(datamodule, "splits", {}).get(split_stage, split_stage)
            remedy = f"raise it to at least {tokens + 1}"
            if split_stage == "fit" and max_length is not None:
                remedy += f", or lower data.init_args.max_length ({max_length}) to {limit - 1}"
            raise PositionsError(
                f"model.init_args.{part_name}.init_args.max_positions {limit} is too small for "
                f"the {SPLIT_WORDS[split_stage]} split {split!r}: it has a {side} of {tokens} "
                f"tokens, {tokens + 1} positions with {added}; {remedy}"
            )
