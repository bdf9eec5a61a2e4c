"""Keep freed host memory for the next step instead of handing it back to the kernel.

glibc's malloc serves every block over its mmap threshold (at most 32 MB by its own rule) with a
fresh `mmap` and unmaps it on `free`. A training step of the small Transformer allocates and frees
the same tensors every step, several of them far larger (a batch's logits: 4,096 × 6,000 float32,
98 MB), so each step the kernel maps, zero-fills and page-faults those pages in again: measured
on a 2-core Zen 4, +9 % training tokens/s with it off (docs/transformer.md, "Speed"). PyTorch's
CPU allocator is plain malloc, so the fix is malloc's own knobs (`mallopt`), set once per
process before the first large tensor: serve large blocks from the heap, and keep freed memory
at the top of the heap instead of trimming it. Peak memory is unchanged (what was in use at the
peak is what stays mapped); memory once used is not returned until the process ends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
LARGE = 1 << 30  # bytes: every tensor a step makes stays below it
NEVER_TRIM = (1 << 31) - 1


@functools.cache
def keep_freed_memory() -> bool:
    """Ask glibc's malloc to reuse freed large blocks (once per process); True when it took
    effect, False where there is no glibc (macOS, Windows, musl), which keep their own
    behaviour."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, LARGE) == 1 and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
