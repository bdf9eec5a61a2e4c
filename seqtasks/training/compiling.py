"""`torch_compile`: the encoder's and decoder's forward passes compiled, in one of three modes,
or left eager with a warning where torch.compile could not build its kernels (no C++ compiler
on the machine).

- `true`: dynamic shapes, one graph for every batch's own lengths.
- "static": a graph per batch shape, each specialised to its sizes; for data padded to a few
  shapes (`pad_to_multiple`, `length_buckets` of the DataModule), else it recompiles per batch.
- "reduce-overhead": CUDA graphs, a whole forward (and backward) replayed by one launch, where
  eager PyTorch launches each kernel from Python; a graph is recorded per batch shape, so this
  too wants the data padded to a few shapes. The compilation itself follows torch.compile's
  default (static at first, dynamic once a second shape comes), so few shapes cost two
  compilations, not one each. A CPU has no graphs to record: it compiles as that default.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from torch import nn

CompileMode = bool | Literal["static", "reduce-overhead"]
OPTIONS: dict[Any, dict[str, Any]] = {  # what each mode asks of `nn.Module.compile`
    True: {"dynamic": True},
    "static": {"dynamic": False},
    "reduce-overhead": {"mode": "reduce-overhead"},
}


def missing_compiler() -> str | None:
    """Why torch.compile's default backend (Inductor) cannot build kernels here, or None.

    Inductor compiles the CPU kernels it generates with a C++ compiler (`g++`, or
    `torch._inductor.config.cpp.cxx`); a missing one fails only inside the first training
    step (`InductorError: InvalidCxxCompiler`, at the forward or, for a graph whose forward
    needs no generated kernel, at the backward); this asks the same question up front.
    """
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except RuntimeError as error:  # InvalidCxxCompiler
        return str(error)
    return None


def compile_parts(*parts: nn.Module, mode: CompileMode = True) -> bool:
    """Compile each part's forward in `mode` (see the module docstring); whether it did.
    Without a compiler the parts stay eager, with a warning that says why."""
    if mode not in OPTIONS:
        raise ValueError(
            f"torch_compile must be true, false, 'static' or 'reduce-overhead', got {mode!r}"
        )
    reason = missing_compiler()
    if reason is not None:
        name = "true" if mode is True else mode
        warnings.warn(f"torch_compile: {name}, but running eager: {reason}", stacklevel=2)
        return False
    for part in parts:
        part.compile(**OPTIONS[mode])
    return True
