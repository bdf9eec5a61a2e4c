"""What a resumed run needs beyond Lightning's own state, per process: the global random number
generators a training run draws from (dropout, sampled attention, word dropout) and the
REINFORCE baseline, as values a checkpoint can hold and a resumed run can set back."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

RESUME_KEY = "seqtasks_resume"  # in a checkpoint: a list of per-process states, by rank


def random_state() -> dict[str, Any]:
    """The states of torch's CPU generator (and the current GPU's, once CUDA is in use), of
    Python's `random` and of numpy's global generator, in types `torch.load(weights_only=True)`
    reads back."""
    name, keys, position, has_gauss, gauss = np.random.get_state()  # keys: (624,) uint32
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_random_state(state: dict[str, Any]) -> None:
    """Make the generators continue from `state` (as `random_state` returned it)."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    name, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def process_state(reward_baseline: Tensor | None) -> dict[str, Any]:
    """This process's state to resume from."""
    baseline = None if reward_baseline is None else reward_baseline.detach().cpu()
    return {"reward_baseline": baseline, "random": random_state()}


def from_every_process(value: Any) -> list[Any]:
    """`value` from every process, in rank order (under DDP); otherwise `[value]`."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        values: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(values, value)
        return values
    return [value]


def save_process_states(checkpoint: dict[str, Any], reward_baseline: Tensor | None) -> None:
    """Keep in `checkpoint` every process's state to resume from (`process_state`)."""
    checkpoint[RESUME_KEY] = from_every_process(process_state(reward_baseline))


def saved_process_state(checkpoint: dict[str, Any], rank: int) -> dict[str, Any] | None:
    """Process `rank`'s state in `checkpoint` (None: none saved); a run resumed on fewer
    processes than it was saved on takes rank 0's."""
    states = checkpoint.get(RESUME_KEY)
    if not states:
        return None
    return states[rank if rank < len(states) else 0]


def restore_process_state(state: dict[str, Any], device: torch.device) -> Tensor | None:
    """Set the random generators as `state` has them, and return its REINFORCE baseline on
    `device` (None: none)."""
    set_random_state(state["random"])
    baseline = state["reward_baseline"]
    return None if baseline is None else baseline.to(device)
