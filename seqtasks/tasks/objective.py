"""The training objective every task shares: label-smoothed cross-entropy and the loss terms of
Show, Attend and Tell (Xu et al. 2015, §4) on a decoder's attention and stochastic choices."""

from __future__ import annotations

from torch import Tensor, nn

from seqtasks.data.tokenizer import PAD_ID
from seqtasks.decoders.base import DecoderOutput
from seqtasks.layers.cross_entropy import smoothed_cross_entropy


def token_nll(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """(B, T, V) logits, (B, T) targets -> (B, T) cross-entropy per token, 0 on padding
    (`F.cross_entropy`'s, with a third of its memory: `layers.cross_entropy`)."""
    flat = smoothed_cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), label_smoothing, PAD_ID
    )
    return flat.view_as(targets)


class Objective(nn.Module):
    """Each example's objective, summed over its tokens: the label-smoothed cross-entropy plus
    the terms of Xu et al. (2015, §4), per example like the words, so that their weight
    relative to log p(y) is the paper's:

        + λ Σ_i (1 − Σ_t α_ti)²                        doubly stochastic attention
        − λ_e Σ_t H(α_t)                               entropy bonus
        − λ_r (log p(y | s) − b) Σ_t log p(s_t)        REINFORCE for the choices s
        + the parts' own terms                         `DecoderOutput.auxiliary_loss`

    The sums over t skip padding, the sum over i padded source positions. α is the decoder's
    attention as the contract gives it (heads averaged). REINFORCE applies in training (this
    module's `training`, which follows the task's) to the examples whose choices a decoder
    sampled (`DecoderOutput.sampled`; hard attention's others used the expected context). The
    reward is the unsmoothed log-likelihood of the output given the choices, and the baseline b
    a moving average of it over the sampled examples of earlier batches, as in the authors'
    code: b starts at 0 and after each batch b ← 0.9 b + 0.1 · mean reward. Using only earlier
    batches keeps the gradient estimate unbiased.

    Args:
        label_smoothing: ε of label smoothing (Szegedy et al. 2016).
        attention_penalty: λ of the doubly stochastic attention penalty (§4.2.1).
        entropy_weight: λ_e of the entropy bonus on the attention (§4.1).
        reward_scale: λ_r of the REINFORCE term. (0 turns a term off.)
    """

    def __init__(
        self,
        label_smoothing: float = 0.0,
        attention_penalty: float = 0.0,
        entropy_weight: float = 0.0,
        reward_scale: float = 1.0,
    ):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.attention_penalty = attention_penalty
        self.entropy_weight = entropy_weight
        self.reward_scale = reward_scale
        self.baseline: Tensor | None = None  # b of REINFORCE (None: 0); not a weight

    @property
    def needs_attention(self) -> bool:
        """Whether a term reads the decoder's attention."""
        return bool(self.attention_penalty or self.entropy_weight)

    def forward(self, output: DecoderOutput, targets: Tensor, source_mask: Tensor) -> Tensor:
        """(B, T, V) logits with (B, T) targets and the (B, S) source mask -> (B,)."""
        mask = targets != PAD_ID  # (B, T)
        nll = token_nll(output.logits, targets, self.label_smoothing)  # (B, T)
        total = nll.sum(dim=1)  # (B,)
        if output.auxiliary_loss is not None:  # the parts' own terms, per example
            total = total + output.auxiliary_loss
        if output.attention is not None and self.needs_attention:
            alpha = output.attention.float() * mask[:, :, None]  # (B, T, S)
            if self.attention_penalty:
                coverage = alpha.sum(dim=1)  # (B, S) Σ_t α_ti
                shortfall = ((1 - coverage) ** 2) * source_mask  # (B, S)
                total = total + self.attention_penalty * shortfall.sum(dim=1)
            if self.entropy_weight:  # H(α_t); the clamp keeps the gradient finite at α = 0
                entropy = -(alpha * alpha.clamp(min=1e-12).log()).sum(dim=(1, 2))  # (B,)
                total = total - self.entropy_weight * entropy
        if output.choice_log_prob is not None and self.training and self.reward_scale:
            if self.label_smoothing:
                nll = token_nll(output.logits, targets)
            reward = -nll.sum(dim=1).detach()  # (B,) log p(y | s, a)
            sampled = output.sampled  # (B,)
            baseline = 0.0 if self.baseline is None else self.baseline
            advantage = (reward - baseline) * sampled  # (B,), 0 for the expectation's rows
            choices = (output.choice_log_prob * mask).sum(dim=1)  # (B,) Σ_t log p(s_t)
            total = total - self.reward_scale * advantage * choices
            if sampled.any():
                self.baseline = 0.9 * baseline + 0.1 * reward[sampled].mean()
        return total

    def per_token(self, output: DecoderOutput, targets: Tensor, source_mask: Tensor) -> Tensor:
        """The loss that training minimises: the batch's objective over its target tokens."""
        tokens = (targets != PAD_ID).sum().clamp(min=1)
        return self(output, targets, source_mask).sum() / tokens

    def token_loss(self, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Label-smoothed cross-entropy per target token alone; returns (mean, token count)."""
        total = token_nll(logits, targets, self.label_smoothing).sum()
        tokens = (targets != PAD_ID).sum()
        return total / tokens.clamp(min=1), tokens
