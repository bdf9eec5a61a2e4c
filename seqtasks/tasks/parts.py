"""Which parts a task accepts: an encoder that reads what the task gives it, and a decoder with
attention when the objective needs its weights. Refused combinations are named when the task
is built, before any training."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder


def part_class(factory: Callable[..., Any], base: type) -> type | None:
    """The subclass of `base` that a part factory builds: a class, a `functools.partial` of
    one, or the partial jsonargparse makes of a `class_path` config; None if it cannot tell."""
    if isinstance(factory, type):
        return factory
    if isinstance(factory, functools.partial):
        for candidate in (factory.func, *factory.args):
            if isinstance(candidate, type) and issubclass(candidate, base):
                return candidate
    return None


class PartError(ValueError):
    """A part that refused its settings, named by its role and class."""


def build_part(role: str, factory: Callable[..., Any], base: type, *sizes: int) -> Any:
    """`factory(*sizes)`, a part's own refusal of a setting (a ValueError: a dropout of 1.5,
    `num_heads` that does not divide `d_model`) said with the part it came from:
    "decoder TransformerDecoder: d_model=64 is not divisible by num_heads=3"."""
    try:
        return factory(*sizes)
    except PartError:
        raise
    except ValueError as error:
        built = part_class(factory, base)
        named = f"{role} {built.__name__}" if built else role
        raise PartError(f"{named}: {error}") from None  # the part's own words, named


def check_encoder(task: Any, factory: Callable[..., Encoder]) -> None:
    """Refuse an encoder that reads other inputs than `task` gives (`Encoder.reads`)."""
    built = part_class(factory, Encoder)
    if built is not None and built.reads != task.reads:
        raise ValueError(
            f"{type(task).__name__} gives its encoder {task.reads}, but {built.__name__} "
            f"reads {built.reads}: choose an encoder that reads {task.reads}"
        )


def check_decoder(task: Any, decoder: Decoder) -> None:
    """Refuse a decoder when a term of `task`'s objective reads its attention as a
    distribution over the memory and it has none (`Decoder.attention_sums_to_one`)."""
    terms = {
        "attention_penalty": task.objective.attention_penalty,
        "entropy_weight": task.objective.entropy_weight,
    }
    needed = {name: value for name, value in terms.items() if value}
    if not needed or (decoder.gives_attention and decoder.attention_sums_to_one):
        return
    settings = " and ".join(f"{name}={value}" for name, value in needed.items())
    why = (
        "has no attention"
        if not decoder.gives_attention
        else "shares one softmax between the memory and its own past, so its attention is no "
        "distribution over the memory"
    )
    raise ValueError(
        f"{type(task).__name__} with {settings} needs attention weights, but "
        f"{type(decoder).__name__} {why}: set them to 0 or choose a decoder with attention"
    )
