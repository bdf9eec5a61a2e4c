"""`torch_compile` (`seqtasks.training.compiling`): compiled in the mode asked where
torch.compile can build its kernels, eager with a warning where it cannot, instead of failing
in the first step."""

from __future__ import annotations

import sys

import pytest
import torch
from test_translation_task import make_task
from torch._inductor import config as inductor

from seqtasks.tasks import base
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


class RecordedCompile(torch.nn.Linear):
    """A part that records what `compile` was asked instead of compiling."""

    def compile(self, **options):
        self.options = options


@pytest.mark.parametrize(
    "mode, options",
    [
        (True, {"dynamic": True}),
        ("static", {"dynamic": False}),
        ("reduce-overhead", {"mode": "reduce-overhead"}),
    ],
)
def test_each_mode_reaches_the_parts_compile(mode, options):
    parts = RecordedCompile(3, 2), RecordedCompile(2, 2)
    with inductor.patch({"cpp.cxx": (sys.executable,)}):
        assert compile_parts(*parts, mode=mode) is True
    assert [part.options for part in parts] == [options, options]


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="'max-autotune'"):
        compile_parts(RecordedCompile(3, 2), mode="max-autotune")


def test_a_mode_without_a_compiler_warns_by_its_name(no_compiler):
    part = RecordedCompile(3, 2)
    with pytest.warns(UserWarning, match="torch_compile: reduce-overhead, but running eager"):
        assert compile_parts(part, mode="reduce-overhead") is False
    assert not hasattr(part, "options")


def test_the_task_hands_its_mode_to_compile_parts(toy_tokenizers, monkeypatch):
    asked = []
    monkeypatch.setattr(base, "compile_parts", lambda *parts, mode: asked.append((parts, mode)))
    task = make_task(toy_tokenizers, torch_compile="static")
    task.configure_model()
    task.configure_model()  # compiled once
    assert asked == [((task.encoder, task.decoder), "static")]
