"""Every attention behind one output, by layer and head (`attention="all"`; issue 50).

The search runs as it always does, on the fused kernels; then one teacher-forced pass over the
output it chose reads the model's attention as it wrote that output, with every attention module
recording (`seqtasks.attention.recording`). Teacher forcing over a model's own output computes
what its incremental decoding computed (the tested invariant of every decoder), so the maps are
the ones behind the output, at the cost of one more forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from seqtasks.attention.recording import KINDS, recording
from seqtasks.data.batch import pad
from seqtasks.data.tokenizer import BOS_ID
from seqtasks.layers.memory import Memory
from seqtasks.tasks.base import EncoderDecoderTask

Maps = dict[str, list[Tensor]]  # kind -> the maps of its layers, each (H, queries, keys)
AttentionRequest = bool | Literal["all"]  # none, the plotted matrix, or every attention


def wants_every_attention(attention: AttentionRequest) -> bool:
    """Whether `attention` asks for every attention ("all"); a ValueError for what is none of
    False, True and "all"."""
    if attention is True or attention is False or attention == "all":
        return attention == "all"
    raise ValueError(f"attention must be False, True or 'all', got {attention!r}")


@dataclass
class Attentions:
    """Every attention a model computed for one output, each map (H, queries, keys), layer by
    layer from the bottom (a Universal Transformer's one layer: depth step by depth step):

    - `encoder`: the encoder's self-attention, `source` × `source` (none for an encoder
      without self-attention: a recurrent, convolutional or image encoder); for a decoder-only
      model, its one network reading the prompt, causal;
    - `decoder`: the decoder's self-attention, `target` × `inputs`, causal (row i sees inputs
      0 … i); none for a recurrent decoder;
    - `cross`: the decoder's attention over the memory, `target` × `memory` (one layer for
      a recurrent decoder). A decoder-only model's one softmax spans its prompt and its target,
      so there a row's `cross` and `decoder` weights sum to 1 together.

    `target` holds the pieces written, EOS included (the rows), `inputs` what the decoder read
    writing them (BOS, then the target but its EOS), `memory` what the cross-attention reads:
    the source's positions, or a parser's words when it reads pieces, or an image's grid cells.
    """

    source: list[str]
    memory: list[str]
    target: list[str]
    encoder: list[Tensor] = field(repr=False)
    decoder: list[Tensor] = field(repr=False)
    cross: list[Tensor] = field(repr=False)

    @property
    def inputs(self) -> list[str]:
        return ["<s>", *self.target[:-1]]

    def layers(self, kind: str) -> list[Tensor]:
        """The maps of `kind` ("encoder", "decoder" or "cross"), layer by layer."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return getattr(self, kind)

    def get(self, kind: str, layer: int = -1, head: int | None = None) -> Tensor:
        """(queries, keys): one head's map of a layer (counted from 0 at the bottom, from −1
        at the top), or the mean of its heads (`head` None).

        Raises:
            IndexError: for a layer or head the model does not have, naming how many it has.
        """
        maps = self.layers(kind)
        if not -len(maps) <= layer < len(maps):
            raise IndexError(f"layer {layer}: the {kind} attention has {len(maps)} layers")
        weights = maps[layer]
        if head is None:
            return weights.mean(0)
        if not 0 <= head < weights.size(0):
            raise IndexError(f"head {head}: the {kind} attention has {weights.size(0)} heads")
        return weights[head]

    def axes(self, kind: str) -> tuple[list[str], list[str]]:
        """The pieces of `kind`'s (rows, columns): the queries and the keys."""
        return {
            "encoder": (self.source, self.source),
            "decoder": (self.target, self.inputs),
            "cross": (self.target, self.memory),
        }[kind]

    def panels(
        self,
        kind: str,
        layers: Sequence[int] | None = None,
        heads: Sequence[int | str] | None = None,
    ) -> Panels:
        """A grid of `kind`'s maps: a row per layer of `layers` (None: every layer), a panel per
        head of `heads` (None: every head; `MEAN`: the mean of the heads), each titled by its
        layer (counted from 0) and head.

        Raises:
            ValueError: for a kind of attention the model has not (a recurrent encoder's).
            IndexError: for a layer or head it has not (`get`).
        """
        maps = self.layers(kind)
        if not maps:
            raise ValueError(
                f"the model has no {kind} self-attention (a recurrent or "
                "convolutional part, or an image encoder)"
            )
        rows = []
        for layer in range(len(maps)) if layers is None else layers:
            self.get(kind, layer)  # refuses a layer it has not
            number = layer % len(maps)
            row = []
            for head in range(maps[number].size(0)) if heads is None else heads:
                if head == MEAN:
                    row.append((f"layer {number}, mean of heads", self.get(kind, layer)))
                else:
                    row.append((f"layer {number}, head {head}", self.get(kind, layer, int(head))))
            rows.append(row)
        return rows


Panels = list[list[tuple[str, Tensor]]]  # rows of (title, (queries, keys) map): a plot's grid
MEAN = "mean"  # the mean of a layer's heads, as a head of a panel grid


def recorded_maps(
    task: EncoderDecoderTask,
    encode: Callable[[], Memory],
    targets: Sequence[list[int]],
    source_lengths: Sequence[int],
) -> list[Maps]:
    """One batch's teacher-forced pass, every attention recorded: `encode()` gives the memory
    (encoding under the recording, so the encoder's self-attention is kept), the decoder reads
    BOS and each target's ids (without EOS). Per row, each kind's maps cut to its real
    positions: the encoder's to `source_lengths` (its input's, EOS included), the decoder's
    rows to the target and EOS, the cross-attention's columns to the memory's length."""
    tgt_in = pad([[BOS_ID, *target] for target in targets]).to(task.device)
    steps = tgt_in.size(1)
    parts = {"encoder": task.encoder, "decoder": task.decoder}
    with torch.inference_mode(), recording(parts) as log:
        memory = encode()
        task.decoder(memory, tgt_in)
        # an ensemble's members (its parts' `members`), each recorded apart; or the one model
        encoders = list(getattr(task.encoder, "members", [task.encoder]))
        decoders = list(getattr(task.decoder, "members", [task.decoder]))
        each = [  # a kind's maps may come from either part (a decoder-only model's "encoder")
            {
                "encoder": log.layers("encoder", within=member),
                "decoder": log.layers("decoder", steps, within=member),
                "cross": log.layers("cross", steps, within=member),
            }
            for member in zip(encoders, decoders, strict=True)
        ]
        maps = {kind: members_mean([m[kind] for m in each], kind) for kind in KINDS}
    memory_lengths = memory.lengths.tolist()
    found = []
    for row, (target, source) in enumerate(zip(targets, source_lengths, strict=True)):
        rows, keys = len(target) + 1, memory_lengths[row]
        found.append(
            {
                "encoder": [m[row, :, :source, :source].float().cpu() for m in maps["encoder"]],
                "decoder": [m[row, :, :rows, :rows].float().cpu() for m in maps["decoder"]],
                "cross": [m[row, :, :rows, :keys].float().cpu() for m in maps["cross"]],
            }
        )
    return found


def members_mean(members: list[list[Tensor]], kind: str) -> list[Tensor]:
    """The `kind` maps of an ensemble's members (each member's layers), as their mean layer by
    layer, as the ensemble's `attention` is its members' mean; one model's as they are.

    Raises:
        ValueError: for members whose `kind` attention differs in layers or heads.
    """
    first, *others = members
    if any(
        len(m) != len(first) or any(a.shape != b.shape for a, b in zip(m, first)) for m in others
    ):
        raise ValueError(
            f"attention='all' averages an ensemble's members layer by layer and head by head, "
            f"but the {len(members)} members' {kind} attention differs in its layers or heads"
        )
    return [torch.stack(layer).mean(0) for layer in zip(*members, strict=True)]
