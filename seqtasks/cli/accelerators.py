"""The accelerator and devices a `seqtasks` run asks for, checked against this machine before
the Trainer is built: Lightning would refuse them with a traceback (`No supported gpu backend
found!`, `You requested gpu: [0, 1, 2] But your machine only has: [0]`), or, for an accelerator
name it does not know, a `ValueError` from deep inside its connector."""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.accelerators import AcceleratorRegistry

from seqtasks.devices import DeviceError, available_devices, check_device

NAMES = "auto, cpu, gpu, cuda, mps or tpu"


def _requested(devices: Any) -> int | list[int] | None:
    """`trainer.devices` as a count (-1: all) or a list of indices; None for "auto"."""
    if isinstance(devices, str):
        text = devices.strip()
        if text == "auto":
            return None
        if "," in text:
            return [int(index) for index in text.split(",") if index.strip()]
        return int(text)
    return list(devices) if isinstance(devices, (list, tuple)) else devices


def _check_gpus(devices: Any, here: str) -> None:
    """Refuse more CUDA GPUs, or other indices, than torch sees."""
    requested, count = _requested(devices), torch.cuda.device_count()
    if requested is None or requested == -1:
        return
    if isinstance(requested, int):
        if requested < 1:
            raise DeviceError(
                f"trainer.devices {devices!r}: give a number of GPUs >= 1 or -1 (all)"
            )
        if requested > count:
            raise DeviceError(
                f"trainer.devices {devices!r} asks for {requested} GPUs, but torch sees "
                f"{count} here (devices here: {here})"
            )
        return
    missing = [index for index in requested if not 0 <= index < count]
    if missing:
        raise DeviceError(
            f"trainer.devices {devices!r} names GPU {missing[0]}, but torch sees {count} here "
            f"(devices here: {here})"
        )


def check_accelerator(accelerator: Any, devices: Any) -> None:
    """Raise a `DeviceError` naming `trainer.accelerator` or `trainer.devices`, what is asked
    and the devices here, if the run cannot have them. An `Accelerator` object is left to
    Lightning."""
    if not isinstance(accelerator, str):
        return
    name, here = accelerator.strip().lower(), ", ".join(available_devices())
    try:
        if name == "gpu" and torch.backends.mps.is_available():
            name = "mps"
        if name in ("gpu", "cuda", "mps"):
            check_device(name)
    except DeviceError as error:
        raise DeviceError(f"trainer.accelerator: {error}") from None
    if name not in ("auto", "gpu") and name not in AcceleratorRegistry:
        raise DeviceError(f"trainer.accelerator {accelerator!r} is not known: use {NAMES}")
    if name in AcceleratorRegistry and not AcceleratorRegistry[name]["accelerator"].is_available():
        raise DeviceError(
            f"trainer.accelerator {accelerator!r} is not available here (devices here: {here})"
        )
    try:
        requested = _requested(devices)
    except (TypeError, ValueError):
        raise DeviceError(
            f"trainer.devices {devices!r}: give a number, a list of GPU indices, -1 or auto"
        ) from None
    if name in ("gpu", "cuda") or (name == "auto" and torch.cuda.is_available()):
        _check_gpus(devices, here)
    elif isinstance(requested, list):
        raise DeviceError(
            f"trainer.devices {devices!r} names GPUs, but the run has none: give a number of "
            f"processes (devices here: {here})"
        )
    elif isinstance(requested, int) and requested < 1 and requested != -1:
        raise DeviceError(f"trainer.devices {devices!r}: give a number of processes >= 1 or -1")
