"""The attention contract: what every decoder's attention over the source satisfies.

A decoder holds its source attention as a factory, `attention(query_dim, memory_dim)`, chosen in
YAML by `class_path` (`attention: {class_path: seqtasks.attention.MultiHeadAttention, init_args:
{heads: 4}}`); the decoder gives the sizes. Whatever the variant, the attention

1. derives what it reads of the source once per source (`project_memory`: an `AttentionMemory`
   of keys, values and mask), never at a decoder step;
2. attends with T queries at once (`forward`), K adjacent query rows per input where search
   keeps K hypotheses: the context (R, T, out_dim) and, if asked, the weights α, averaged over
   heads (R, T, S) or per head (R, H, T, S), exactly 0 on padding.

So the RNN decoders (Bahdanau, Luong, Show-Attend-and-Tell) and the Transformer's
cross-attention take any of them: the single-head score functions (`scores.py`) or the
multi-head attention of the Transformer (`multihead.py`).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from seqtasks.attention.recording import RecordsAttention


class AttentionMemory(NamedTuple):
    """What an attention reads of a batch of sources, one row per input: a decoder projects it
    once per source and holds it in its search state."""

    keys: Tensor  # (B, S, D_k), or (B, H, S, d) per head
    values: Tensor  # (B, S, D) the annotations (or a linear map of them), or (B, H, S, d)
    mask: Tensor  # (B, S) true where a position is real

    def select(self, inputs: Tensor) -> AttentionMemory:
        """The rows of the inputs `inputs` (B',) only: search drops finished inputs."""
        return AttentionMemory(*(part.index_select(0, inputs) for part in self))


class Attention(nn.Module, RecordsAttention, metaclass=ABCMeta):
    """Attention from decoder queries to the annotations of a source.

    Attributes:
        out_dim: width of the context it returns (the annotations' for a score function, the
            query's for multi-head attention); a decoder sizes what reads the context by it.
        heads: H, the rows of `per_head` weights.
        values_are_annotations: the values of `project_memory` are the annotations (B, S, D)
            themselves and the context is their α-weighted sum, so a decoder may map them once
            per source by a linear layer (Luong's W_c) or read one of them (hard attention).
    """

    heads: int = 1
    values_are_annotations: ClassVar[bool] = True

    def __init__(self, out_dim: int):
        super().__init__()
        self.out_dim = out_dim

    @abstractmethod
    def project_memory(self, states: Tensor, mask: Tensor) -> AttentionMemory:
        """(B, S, D) annotations and (B, S) mask -> what `forward` reads, once per source."""
        raise NotImplementedError

    @abstractmethod
    def attend_heads(
        self, query: Tensor, memory: AttentionMemory, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, D_q) queries, one row per input -> context (B, T, out_dim) and, with
        `need_weights`, the weights per head (B, H, T, S), else None."""
        raise NotImplementedError

    def forward(
        self,
        query: Tensor,
        memory: AttentionMemory,
        need_weights: bool = True,
        per_head: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """(R, T, D_q) queries, R = K·B with K adjacent rows per input (search's hypotheses,
        K = 1 elsewhere), against the memory kept once per input -> context (R, T, out_dim) and
        the weights: (R, T, S) averaged over heads, (R, H, T, S) with `per_head`, None without
        `need_weights`. The K rows of an input attend together as K·T queries, so the memory is
        never repeated per hypothesis."""
        rows, length = query.shape[:2]
        grouped = query.reshape(memory.mask.size(0), -1, query.size(-1))  # (B, K·T, D_q)
        need = need_weights or self.recording
        context, alpha = self.attend_heads(grouped, memory, need)  # α (B, H, K·T, S)
        context = context.reshape(rows, length, -1)
        if alpha is None:
            return context, None
        heads = alpha.unflatten(2, (-1, length)).transpose(1, 2).flatten(0, 1)  # (R, H, T, S)
        self.keep(heads)
        if not need_weights:
            return context, None
        if per_head:
            return context, heads
        return context, alpha.mean(dim=1).reshape(rows, length, -1)


def context_width(factory: Callable[[int, int], Attention], query_dim: int, memory_dim: int) -> int:
    """The `out_dim` of `factory(query_dim, memory_dim)`, built on the meta device, which holds no
    data and draws no random numbers: a decoder sizes the layers before its attention by it and
    still builds (and registers) its parameters in their usual order."""
    with torch.device("meta"):
        return factory(query_dim, memory_dim).out_dim
