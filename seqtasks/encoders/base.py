"""The encoder contract."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import ClassVar, Literal

from torch import Tensor, nn

from seqtasks.layers.memory import Memory

Inputs = Literal["tokens", "images"]


class Encoder(nn.Module, metaclass=ABCMeta):
    """Turns a batch of inputs into `Memory`.

    `reads` says what the inputs are: "tokens", (B, S) ids with a (B, S) mask, built as
    `encoder(vocab_size)`; or "images", (B, 3, H, W) RGB in [0, 1], built as `encoder()`. A task
    refuses an encoder that reads what it does not give. Subclasses set `out_dim`, the width D
    of the states. `max_positions` is the longest input it reads (None: any length), so that
    callers cut or refuse longer inputs before encoding rather than fail inside it.
    """

    reads: ClassVar[Inputs] = "tokens"
    out_dim: int
    max_positions: int | None = None

    @abstractmethod
    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        raise NotImplementedError

    def task_specific(self, key: str) -> bool:
        """Whether the weight `key` (as `state_dict` names it) is the task's own rather than
        part of what the encoder learned to read (ELMo's mix of its layers, `ScalarMix`): a
        fine-tuning neither takes it from a pre-trained encoder nor gives it one, starts it
        afresh, trains it while the rest of the encoder is frozen, and at the task's rate."""
        return False
