"""`torch_compile: true`: the encoder's and decoder's forward passes compiled, or left eager with
a warning where torch.compile could not build its kernels (no C++ compiler on the machine)."""

from __future__ import annotations

import warnings

from torch import nn


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


def compile_parts(*parts: nn.Module) -> bool:
    """Compile each part's forward (dynamic shapes: every batch has its own lengths); whether
    it did. Without a compiler the parts stay eager, with a warning that says why."""
    reason = missing_compiler()
    if reason is not None:
        warnings.warn(f"torch_compile: true, but running eager: {reason}", stacklevel=2)
        return False
    for part in parts:
        part.compile(dynamic=True)
    return True
