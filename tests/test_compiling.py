"""`torch_compile: true` (`seqtasks.training.compiling`): compiled where torch.compile can build
its kernels, eager with a warning where it cannot, instead of failing in the first step."""

from __future__ import annotations

import sys

import pytest
import torch
from test_translation_task import make_task
from torch._inductor import config as inductor

from seqtasks.training.compiling import compile_parts, missing_compiler


@pytest.fixture
def no_compiler():
    with inductor.patch({"cpp.cxx": ("no-such-cxx-compiler",)}):
        yield


def test_without_a_cxx_compiler_the_parts_stay_eager_and_say_why(no_compiler):
    assert "No working C++ compiler" in missing_compiler()
    part = torch.nn.Linear(3, 2)
    with pytest.warns(UserWarning, match="torch_compile: true, but running eager: No working C"):
        assert compile_parts(part) is False
    assert part._compiled_call_impl is None


def test_with_a_compiler_the_parts_are_compiled():
    """Any program that answers `--version` passes Inductor's check (compiling is lazy: this
    test builds no kernel, so it needs no real compiler)."""
    parts = torch.nn.Linear(3, 2), torch.nn.Linear(2, 2)
    with inductor.patch({"cpp.cxx": (sys.executable,)}):
        assert missing_compiler() is None
        assert compile_parts(*parts) is True
    assert all(part._compiled_call_impl is not None for part in parts)


def test_a_task_asked_to_compile_without_a_compiler_still_trains(toy_tokenizers, no_compiler):
    task = make_task(toy_tokenizers, torch_compile=True)
    with pytest.warns(UserWarning, match="running eager"):
        task.configure_model()
    assert task.encoder._compiled_call_impl is None and task.decoder._compiled_call_impl is None
    src = torch.tensor([[5, 6, 2]])
    output = task(src, src != 0, torch.tensor([[1, 7, 8]]))
    output.logits.sum().backward()
    assert output.logits.shape[:2] == (1, 3)
