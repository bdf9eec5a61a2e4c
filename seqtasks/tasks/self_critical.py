"""Self-critical sequence training (Rennie et al. 2017, §5): train on the metric itself.

For each input, K outputs w^1..w^K are sampled from the model and rewarded by the task's
metric against the input's references, r(w^k); the gradient is REINFORCE's with a baseline b,

    ∇L = −1/K Σ_k (r(w^k) − b) ∇ log p(w^k),

where b is the reward of the model's own greedy output ("self-critical", Rennie et al. 2017,
eq. 8–9) or the mean reward of the other K − 1 samples (Kool et al. 2019's leave-one-out
baseline, the "average" base of SacreEOS). The samples and the greedy output are searched
without gradients, as the decoder searches (under the task's constraint, if any: the parser's
trees), and log p(w^k) is then computed in one teacher-forced pass of the decoder over all K
samples, under the same constraint, so the gradient is the sampled policy's own: a step costs
K + 1 decodes of the batch (the greedy one is logged against with either baseline: the share of
samples better than greedy) and one forward and backward.

The policy is the model without dropout (sampling, greedy and the teacher-forced pass all run
in eval mode); `cross_entropy` > 0 adds that share of the usual (dropout, label-smoothed)
objective. A sample that ends with EOS is rewarded with its EOS (SacreEOS's "standard"
configuration, Hu et al. 2023): the task's reward sees whether it finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from seqtasks.data.batch import pad
from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.layers.memory import Memory
from seqtasks.search.by_settings import limits
from seqtasks.search.hypothesis import Constraint, Hypothesis
from seqtasks.search.single_path import greedy, sample

SETTING = "model.init_args.self_critical"
BASELINES = ("greedy", "mean")


@dataclass(frozen=True)
class SelfCritical:
    """The settings of self-critical training (`self_critical` in a task's YAML).

    Attributes:
        reward: the task's metric to reward (`EncoderDecoderTask.rewards`; None: its first).
        samples: K, outputs sampled per input.
        baseline: "greedy" (the greedy output's reward) or "mean" (the other samples' mean).
        cross_entropy: the weight of the cross-entropy objective added to the loss.
    """

    reward: str | None = None
    samples: int = 5
    baseline: str = "greedy"
    cross_entropy: float = 0.0

    @classmethod
    def from_setting(cls, setting: dict[str, Any], rewards: tuple[str, ...]) -> SelfCritical:
        """The settings of a task whose metrics are `rewards`; a ValueError naming `SETTING`
        and the field for a value it cannot take."""
        known = set(cls.__dataclass_fields__)
        if unknown := sorted(set(setting) - known):
            raise ValueError(
                f"{SETTING} has no {unknown[0]!r}: it takes {', '.join(sorted(known))}"
            )
        chosen = cls(**setting)
        if not rewards:
            raise ValueError(f"{SETTING}: this task has no metric to reward")
        if chosen.reward is None:
            chosen = cls(**{**setting, "reward": rewards[0]})
        elif chosen.reward not in rewards:
            raise ValueError(
                f"{SETTING}.reward {chosen.reward!r}: this task rewards {' or '.join(rewards)}"
            )
        if chosen.baseline not in BASELINES:
            raise ValueError(f"{SETTING}.baseline {chosen.baseline!r}: greedy or mean")
        if chosen.samples < (2 if chosen.baseline == "mean" else 1):
            raise ValueError(
                f"{SETTING}.samples {chosen.samples}: at least 1, and 2 for the mean baseline"
            )
        if chosen.cross_entropy < 0:
            raise ValueError(f"{SETTING}.cross_entropy {chosen.cross_entropy}: 0 or more")
        return chosen

    def signature(self) -> str:
        """What the rewards were, as SacreEOS writes it (for a caption's CIDEr-D:
        `STANDARD_wInit+Cider-D[n4,s6.0]+average[nspi5]+1.0.0`)."""
        metric = {"cider_d": "Cider-D[n4,s6.0]"}.get(self.reward, self.reward)
        base = "average" if self.baseline == "mean" else "greedy"
        return f"STANDARD_wInit+{metric}+{base}[nspi{self.samples}]+1.0.0"


@dataclass(frozen=True)
class Step:
    """One self-critical step: the loss to minimise and what it logs per batch."""

    loss: Tensor
    reward: float  # mean reward of the samples
    baseline: float  # mean baseline
    better: float  # share of samples rewarded above the greedy output


def sequence_log_probs(
    decoder: Any,
    memory: Memory,
    outputs: list[Hypothesis],
    constraint: Constraint | None,
    cut: Tensor,
) -> Tensor:
    """(N,) log p of each output (with its EOS if it finished) given `memory` (N rows), by one
    teacher-forced pass, each step's distribution renormalised over what `constraint` allows
    within the (N,) length limits `cut`, as search chose under it."""
    tokens = [h.tokens + ([EOS_ID] if h.finished else []) for h in outputs]
    targets = pad(tokens).to(memory.states.device)  # (N, T)
    tgt_in = pad([[BOS_ID, *t[:-1]] for t in tokens]).to(targets.device)
    logits = decoder(memory, tgt_in).logits.float()  # (N, T, V)
    if constraint is not None:
        state, allowed = constraint.start(cut, 1), []
        for t in range(targets.size(1)):
            allowed.append(constraint.allowed(state))
            state = constraint.advance(state, targets[:, t])
        logits = logits.masked_fill(~torch.stack(allowed, dim=1), float("-inf"))
    chosen = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (N, T)
    lengths = torch.tensor([len(t) for t in tokens], device=targets.device)
    written = torch.arange(targets.size(1), device=targets.device) < lengths[:, None]
    return torch.where(written, chosen, 0.0).sum(dim=1)  # by length: a sample may hold PAD


def self_critical_step(task: Any, batch: Any, settings: SelfCritical) -> Step:
    """The loss of one batch: K samples and the greedy output per input, searched without
    gradients and rewarded by `task.sequence_rewards`, then log p of the samples."""
    training, k, rows = task.training, settings.samples, len(batch)
    task.eval()  # the policy is the model without dropout
    try:
        memory = task.encode(batch)
        each = torch.arange(rows, device=memory.mask.device).repeat_interleave(k)
        repeated = memory.index_select(each)  # K adjacent rows per input
        constraint, own = task.search_constraint(repeated), task.search_constraint(memory)
        cut = limits(task.decoder, repeated, task.test_settings, constraint)
        with torch.no_grad():
            drawn = [n[0] for n in sample(task.decoder, repeated, cut, constraint=constraint)]
            best_cut = limits(task.decoder, memory, task.test_settings, own)
            best = [n[0] for n in greedy(task.decoder, memory, best_cut, constraint=own)]
        log_p = sequence_log_probs(task.decoder, repeated, drawn, constraint, cut).view(rows, k)
    finally:
        task.train(training)
    rewards = torch.tensor(task.sequence_rewards(settings.reward, batch, drawn, k)).view(rows, k)
    greedy_rewards = torch.tensor(task.sequence_rewards(settings.reward, batch, best, 1))
    greedy_rewards = greedy_rewards.view(rows, 1).expand(rows, k)
    if settings.baseline == "greedy":
        baseline = greedy_rewards
    else:  # leave one out: the mean of the other samples
        baseline = (rewards.sum(dim=1, keepdim=True) - rewards) / (k - 1)
    advantage = (rewards - baseline).to(log_p)
    return Step(
        loss=-(advantage * log_p).mean(),
        reward=float(rewards.mean()),
        baseline=float(baseline.mean()),
        better=float((rewards > greedy_rewards).float().mean()),
    )
