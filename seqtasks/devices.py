"""Device names, checked before any work: `seqtasks.load`, the apps and `seqtasks serve` take
"auto", "cpu", "cuda" (or "gpu", Lightning's word for it), "cuda:N" or "mps", and refuse a name
they do not know, or a device that is not on this machine, in one line that names the devices
that are, instead of failing deep inside `torch.load` or leaving a server without workers.
"""

from __future__ import annotations

import os
import re

import torch

NAMES = "auto, cpu, cuda, cuda:N, gpu or mps"
_NAME = re.compile(r"(auto|cpu|cuda|gpu|mps)(?::(\d+))?", re.ASCII)


class DeviceError(ValueError):
    """A device name that is unknown, or names a device this machine does not have."""


def available_devices() -> list[str]:
    """The devices torch can use here, by the names `check_device` accepts."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def _why_no_cuda() -> str:
    """Why torch sees no CUDA GPU, as far as it can tell."""
    if torch.version.cuda is None:
        return "this build of torch has no CUDA support"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return "CUDA_VISIBLE_DEVICES is empty"
    return "torch sees no CUDA GPU"


def check_device(name: str) -> str:
    """The torch device `name` stands for, once it is known to be here: "auto" is "cuda" when
    a GPU is visible and "cpu" otherwise; "gpu" is "cuda"; "cuda:N" must name a GPU that exists.

    Raises:
        DeviceError: for an unknown name, or a device that is not on this machine, naming it
            and the devices that are.
    """
    here = ", ".join(available_devices())
    match = _NAME.fullmatch(name.strip().lower()) if isinstance(name, str) else None
    if match is None or (match[2] is not None and match[1] in ("auto", "cpu", "mps")):
        raise DeviceError(f"unknown device {name!r}: use {NAMES} (here: {here})")
    kind, index = match[1], match[2]
    if kind == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return "cpu"
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceError(
                f"device {name!r} is not here: torch sees no MPS (Apple) GPU (devices here: {here})"
            )
        return "mps"
    if not torch.cuda.is_available():
        raise DeviceError(f"device {name!r} is not here: {_why_no_cuda()} (devices here: {here})")
    if index is None:
        return "cuda"
    count = torch.cuda.device_count()
    if int(index) >= count:
        raise DeviceError(
            f"device {name!r} is not here: torch sees {count} CUDA GPU{'s' * (count != 1)} "
            f"(devices here: {here})"
        )
    return f"cuda:{int(index)}"
