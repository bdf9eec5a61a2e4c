"""TTT-Linear (Sun et al. 2024, "Learning to (Learn at Test Time): RNNs with Expressive Hidden
States", §2.1–2.4; the deck `001_2cca2ede84a6a055.txt`, "Test Time Training (TTT)"): the memory
is the weight W (d, d per head) of a linear model f(k; W) = k W, trained on the sequence itself
while it is read, one gradient step a position on a self-supervised loss that reconstructs the
"label view" θ_V x from the "training view" θ_K x, read through a third view θ_Q x:

    ℓ(W; x_t) = ‖θ_K x_t W − θ_V x_t‖²,   ∇ℓ(W; x_t) = 2 k_tᵀ (k_t W − v_t),
    W_t = W_{t−1} − η ∇ℓ(W_{t'}; x_t),     z_t = θ_Q x_t W_t = q_t W_t,

with k, v, q = θ_K x, θ_V x, θ_Q x (the fused projection), W_0 = 0, and t' the last position of
the mini-batch of b positions before t's (their mini-batch gradient descent): b = 1 is online
gradient descent, each gradient at W_{t−1}; b ≥ T is batch gradient descent, each at W_0.

What this is, exactly (tested):
- b ≥ T: every gradient is taken at W_0 = 0, so W_t = 2η Σ_{s≤t} k_sᵀ v_s and
  z_t = 2η Σ_{s≤t} (q_t·k_s) v_s: un-normalised linear attention with the identity feature map
  (the deck's "Exactly linear transformer", with η = 1/2; their Theorem 1).
- b = 1: W_t = W_{t−1} + 2η k_tᵀ (v_t − k_t W_{t−1}), the delta rule (`delta_rule.py`) with
  β_t = 2η and the identity feature map. It equals linear attention at the first position only;
  after it, by the term −2η k_tᵀ (k_t W_{t−1}) that linear attention lacks.
So the causal forward runs `delta_chunks` with β = 2η and the mini-batches as its runs: their
dual form, all positions of a chunk at once. η = learning_rate / d, divided by the head width as
in their implementation, so that one setting suits every width: a step scales the error along a
key k by 1 − 2η‖k‖², inside (−1, 1) while ‖k‖² < d / learning_rate. It is per head, optionally
learnt (`learnable_rate`: η_h = e^{ρ_h} learning_rate / d, ρ_h from 0).
Left out of theirs: the learnt W_0, η depending on the token, and the LayerNorm and residual
inside f.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqtasks.attention.delta_rule import delta_chunks
from seqtasks.attention.linear_memory import LinearMemorySelfAttention, continued
from seqtasks.attention.multihead import merge_heads


class TTTLinearSelfAttention(LinearMemorySelfAttention):
    """Multi-head self-attention whose memory is a linear model trained by gradient descent as
    the sequence is read (above). The Transformer's `self_attention` (YAML: `{class_path:
    seqtasks.attention.TTTLinearSelfAttention, init_args: {mini_batch: 1}}`). Its search cache
    is W_{t'} and W_{t−1} (R, H, 2, d, d) and the positions written (R,).

    Args:
        d_model, num_heads, dropout: as `SelfAttention`'s (given by the Transformer).
        learning_rate: η·d, the inner loop's step size times the head width (1, theirs).
        mini_batch: b, the positions whose gradients are taken at one W (1: online).
        learnable_rate: learn η per head (from `learning_rate`) with the other parameters.
        chunk_size: positions written at once in the causal forward, rounded down to whole
            mini-batches, one at least (speed and memory only).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float,
        learning_rate: float = 1.0,
        mini_batch: int = 1,
        learnable_rate: bool = False,
        chunk_size: int = 64,
    ):
        super().__init__(d_model, num_heads, dropout, chunk_size)
        if learning_rate <= 0:
            raise ValueError(
                f"TTTLinearSelfAttention's learning_rate must be positive, got {learning_rate}"
            )
        if mini_batch < 1:
            raise ValueError(
                f"TTTLinearSelfAttention's mini_batch must be at least 1, got {mini_batch}"
            )
        self.learning_rate = learning_rate
        self.mini_batch = mini_batch
        log_rate = torch.zeros(num_heads)  # ρ
        if learnable_rate:
            self.log_rate = nn.Parameter(log_rate)
        else:
            self.register_buffer("log_rate", log_rate, persistent=False)

    def eta(self) -> Tensor:
        """η per head (H,): e^ρ learning_rate / d."""
        return self.log_rate.exp() * (self.learning_rate / self.key_width)

    def scan(self, x: Tensor, key_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.project(x)
        if key_mask is not None:
            k = k * key_mask[:, None, :, None].to(k.dtype)  # a zero key has zero gradient
        batch, _, length, d = v.shape
        rate = 2 * self.eta()  # the delta rule's β that a step of −η ∇ℓ is
        beta = rate[None, :, None].expand(batch, -1, length)
        weights = v.new_zeros(batch, self.heads, d, d)  # W_0
        outputs, weights = delta_chunks(q, k, v, beta, weights, self.chunk_size, self.mini_batch)
        return q, outputs, weights

    def empty_cache(self, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """W_{t'} and W_{t−1} before the first position, zeros (rows, H, 2, d, d), and no
        position written, zeros (rows,)."""
        d = like.size(-1) // self.heads
        written = torch.zeros(rows, dtype=torch.long, device=like.device)
        return like.new_zeros(rows, self.heads, 2, d, d), written

    def step(
        self, x: Tensor, weights: Tensor, written: Tensor, rows: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One new position per row, by the recurrence: x (R, 1, D); W_{t'} and W_{t−1}
        (R', H, 2, d, d) and the positions written (R',); `rows` (R,), if given, the row each
        row continues (beam search's reordering) -> the output (R, 1, D) and the caches with
        this position's gradient step taken."""
        q, k, v = (part[:, :, 0] for part in self.project(x))  # (R, H, d) each
        weights, written = continued(rows, weights, written)
        base, current = weights.unbind(2)  # W_{t'}, W_{t−1}: (R, H, d, d) each
        starts = (written % self.mini_batch == 0)[:, None, None, None]
        base = torch.where(starts, current, base)  # a new mini-batch's gradients: at W_{t−1}
        gradient = 2 * k[..., :, None] * (k[..., None, :] @ base - v[..., None, :])  # 2kᵀ(kW − v)
        current = current - self.eta()[:, None, None] * gradient
        z = (q[..., None, :] @ current)[..., 0, :]  # (R, H, d): q W_t
        return self.out(merge_heads(z[:, :, None])), torch.stack([base, current], 2), written + 1
