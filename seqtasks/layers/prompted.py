"""A layer of the decoder-only Transformer (`seqtasks.decoders.PromptedTransformerDecoder`):
one causal self-attention over [prompt; target], then the feed-forward net.

A target position attends to every real prompt position and to the target positions up to
itself (`visible`). In search the prompt's keys and values are kept once per input and each
step's query reads them beside its own row's growing target caches
(`prompt_and_target_attention`). Under a recording the one attention is kept block by block
as the three kinds an encoder–decoder has (`seqtasks.attention.recording.RecordsBlock`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from seqtasks.attention.multihead import (
    SelfAttention,
    attention_weights,
    fused_attention,
    merge_heads,
)
from seqtasks.attention.recording import KINDS, RecordsBlock
from seqtasks.layers.transformer import FeedForward, Residual, Stream, TransformerSettings

Prompt = tuple[Tensor, Tensor]  # one layer's prompt keys and values, (B, H, S, D/H) each


class PromptedLayer(nn.Module):
    """Causal self-attention over prompt and target, then the feed-forward net."""

    def __init__(self, s: TransformerSettings):
        super().__init__()
        self.self_attention = s.self_attention_layer()
        if type(self.self_attention) is not SelfAttention:
            raise ValueError(
                f"PromptedTransformerDecoder reads its prompt under a padding mask, which "
                f"{type(self.self_attention).__name__} does not take: its self_attention must "
                "be seqtasks.attention.SelfAttention"
            )
        self.dropout = s.attention_dropout
        self.feed_forward = FeedForward(s.d_model, s.ff_dim)
        self.residual_attention = Residual(s.d_model, s.norm, s.dropout)
        self.residual_ff = Residual(s.d_model, s.norm, s.dropout)
        # the one attention's blocks, as a recording keeps them (`RecordsBlock`)
        self.blocks = nn.ModuleDict({kind: RecordsBlock(kind) for kind in KINDS})

    def forward(
        self, stream: Stream, allowed: Tensor, prompt: int, need_weights: bool = False
    ) -> tuple[Stream, Prompt, Tensor | None]:
        """Every position at once, position i attending to j where `allowed` (B, 1, L, L), the
        first `prompt` positions the prompt's: the stream, this layer's keys and values
        (B, H, L, D/H), and if `need_weights` the target's weights over the prompt per head
        (B, H, L − prompt, prompt)."""
        kept = weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal kept, weights
            q, k, v = self.self_attention.project(h)
            kept = (k, v)
            if need_weights or self.blocks["cross"].recording:
                joint = attention_weights(q, k, allowed)
                weights = joint[..., prompt:, :prompt]
                own = joint[..., prompt:, prompt:]
                self.keep(encoder=joint[..., :prompt, :prompt], cross=weights, decoder=own)
            p = self.dropout if self.training else 0.0
            context = fused_attention(q, k, v, attn_mask=allowed, dropout_p=p)
            return self.self_attention.out(merge_heads(context))

        stream = self.residual_attention(stream, attend)
        return self.residual_ff(stream, self.feed_forward), kept, weights if need_weights else None

    def step(
        self, stream: Stream, prompt: Prompt, mask: Tensor, keys: Tensor, values: Tensor,
        rows: Tensor | None,
    ) -> tuple[Stream, Tensor, Tensor, Tensor]:  # fmt: skip
        """One new target position per row: the stream, the target caches extended by it
        (their `rows` taken first, if given), and its weights over the prompt (R, H, 1, S)."""
        extended = weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal extended, weights
            q, k, v = self.self_attention.project(h)  # (R, H, 1, d)
            old_k, old_v = (keys, values) if rows is None else (keys[rows], values[rows])
            extended = torch.cat([old_k, k], 2), torch.cat([old_v, v], 2)
            context, weights, on_target = prompt_and_target_attention(q, prompt, mask, *extended)
            self.keep(cross=weights, decoder=on_target)
            return self.self_attention.out(merge_heads(context))

        stream = self.residual_attention(stream, attend)
        return self.residual_ff(stream, self.feed_forward), *extended, weights

    def keep(self, **blocks: Tensor) -> None:
        """Record each block given by its kind that has queries, if recording."""
        for kind, weights in blocks.items():
            if weights.size(-2):
                self.blocks[kind].keep(weights)


def prompt_and_target_attention(
    q: Tensor, prompt: Prompt, mask: Tensor, keys: Tensor, values: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """softmax(q [K_p; K_t]ᵀ/√d) [V_p; V_t] for queries q (R, H, 1, d), R = B·K rows: the
    prompt's keys and values (B, H, S, d) read once per input by its K rows, masked by `mask`
    (B, S); the rows' own target keys and values (R, H, t, d) -> the context (R, H, 1, d) and
    the weights on the prompt (R, H, 1, S) and on the target (R, H, 1, t)."""
    (prompt_k, prompt_v), batch = prompt, mask.size(0)
    group = q.view(batch, -1, *q.shape[1:])  # (B, K, H, 1, d)
    scale = 1 / math.sqrt(q.size(-1))
    on_prompt = torch.einsum("bkhqd,bhsd->bkhqs", group, prompt_k) * scale
    on_prompt = on_prompt.masked_fill(~mask[:, None, None, None, :], float("-inf"))
    on_target = (q @ keys.transpose(-1, -2)).view(*group.shape[:-1], -1) * scale
    weights = torch.softmax(torch.cat([on_prompt, on_target], -1), dim=-1)
    w_prompt, w_target = weights.split([prompt_k.size(2), keys.size(2)], dim=-1)
    context = torch.einsum("bkhqs,bhsd->bkhqd", w_prompt, prompt_v)
    w_target = w_target.flatten(0, 1)
    context = context.flatten(0, 1) + w_target @ values
    return context, w_prompt.flatten(0, 1), w_target


def visible(mask: Tensor, steps: int) -> Tensor:
    """(B, 1, L, L) for a prompt of mask (B, S) and `steps` target positions, L = S + steps:
    position i sees j ≤ i where j is real, and itself (so a padded prompt position, whose
    output nothing reads, never attends to nothing)."""
    batch, length = mask.size(0), mask.size(1) + steps
    real = torch.cat([mask, mask.new_ones(batch, steps)], 1)  # (B, L)
    causal = torch.ones(length, length, dtype=torch.bool, device=mask.device).tril()
    itself = torch.eye(length, dtype=torch.bool, device=mask.device)
    return ((causal & real[:, None, :]) | itself)[:, None]
