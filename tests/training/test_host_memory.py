"""`keep_freed_memory`: large tensors freed in one step are reused in the next, not mapped anew
(each fresh page is a minor page fault, counted by the kernel in `ru_minflt`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

STEPS = """
import resource, sys, torch
from seqtasks.training.host_memory import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else None
def step():  # two tensors over glibc's largest mmap threshold (32 MB), made and freed
    a = torch.empty(16 << 20).fill_(1.0)
    b = torch.empty(10 << 20).fill_(2.0)
    del a, b
for _ in range(10):  # the heap grows to its working size
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    step()
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", STEPS, mode], capture_output=True, text=True,
                         check=True)  # fmt: skip
    applied, count = out.stdout.split()
    return applied, int(count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_freed_large_tensors_are_reused_without_page_faults():
    applied, kept = faults("keep")
    _, fresh = faults("default")
    pages = 3 * (26 << 20) * 4 // 4096  # three steps of 104 MB in 4 KiB pages
    assert applied == "True"
    assert fresh > pages // 2  # glibc's default: every step maps (and faults in) its tensors
    assert kept < pages // 20, f"{kept} page faults in 3 steps, {fresh} without"
