"""Linear memories in general (the deck `001_2cca2ede84a6a055.txt`, "Further Nonlinearization"):
a self-attention whose whole prefix is one fixed-size memory M per head, written and read once a
position,

    M_t = f(M_{t−1}, x_t)   (the write),        y_t = g(M_t, x_t)   (the read),

of which linear attention is the first case (`linear.py`: M_t = M_{t−1} + K_tᵀ V_t, y_t = Q_t M_t,
the deck's "Memory matrix"). The memories here all read y_t = q̃_t M_t, with a read query q̃_t of
their own, and differ in the write: gated (`gated_linear.py`), the delta rule (`delta_rule.py`)
and a gradient step of test-time training (`ttt.py`).

Their causal forward runs the write over the sequence a chunk at a time, exactly (all positions
of a chunk at once, the memory carried from chunk to chunk); `step` runs the recurrence one
position at a time; both give the same outputs. Padding keys (`key_mask` false) write nothing
and forget nothing: the memory passes them unchanged.

Non-causal use (an encoder's self-attention) has no standard form for a write that depends on
the order of positions; here every query reads the memory left after the whole sequence,
y_i = q̃_i M_T, which is linear attention's non-causal form (without its normaliser) when the
write is additive.

Legend: B batch, H heads, T positions, R search rows, d = D/H, d_k the width of keys and read
queries (d, or a feature map's d_φ).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

from torch import Tensor

from seqtasks.attention.multihead import SelfAttention, merge_heads


class LinearMemorySelfAttention(SelfAttention, metaclass=ABCMeta):
    """A self-attention with a fixed-size memory per head (above): `SelfAttention`'s
    projections (one fused Q/K/V, one output), a `scan` of the write over a sequence, and a
    `step` of it, whose cache is the memory (R, H, d_k, d) and an empty (R, 0) beside it (the
    Transformer decoder carries two tensors a layer, softmax's keys and values; these need one).
    `dropout` goes unused: there is no matrix of weights to drop from.

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        chunk_size: positions written at once in the causal forward; only speed and memory
            depend on it, not the outputs.
        key_width: d_k, the width of the memory's keys (d by default).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float,
        chunk_size: int,
        key_width: int | None = None,
    ):
        super().__init__(d_model, num_heads, dropout)
        if chunk_size < 1:
            raise ValueError(
                f"{type(self).__name__}'s chunk_size must be at least 1, got {chunk_size}"
            )
        self.chunk_size = chunk_size
        self.key_width = d_model // num_heads if key_width is None else key_width

    @abstractmethod
    def scan(self, x: Tensor, key_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D), padding keys false in `key_mask` (B, T) -> the read queries q̃
        (B, H, T, d_k), every position's causal output q̃_t M_t (B, H, T, d) and the memory
        after the last position M_T (B, H, d_k, d)."""
        raise NotImplementedError

    def forward(self, x: Tensor, key_mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """(B, T, D) -> (B, T, D): causal, each position reads the memory of its prefix; else
        every position reads the memory of the whole sequence (above)."""
        queries, outputs, memory = self.scan(x, key_mask)
        if not causal:
            outputs = queries @ memory  # (B, H, T, d)
        return self.out(merge_heads(outputs))

    def empty_cache(self, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """The memory before the first position, zeros (rows, H, d_k, d), and the empty
        (rows, 0) beside it."""
        d = like.size(-1) // self.heads
        return like.new_zeros(rows, self.heads, self.key_width, d), like.new_zeros(rows, 0)


def continued(rows: Tensor | None, *caches: Tensor) -> tuple[Tensor, ...]:
    """The caches' rows `rows` (R,) in that order (beam search's reordering), or all if None."""
    return caches if rows is None else tuple(cache.index_select(0, rows) for cache in caches)
