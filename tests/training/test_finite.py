"""The training step never waits for the device: `LossWatch` keeps the non-finite-loss check on
the loss's device, batches are pinned for a GPU, and on a GPU a whole training step (forward,
loss, backward, clipping, optimiser) runs under `torch.cuda.set_sync_debug_mode("error")`."""

from __future__ import annotations

import math
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from torch.overrides import TorchFunctionMode

from seqtasks.data.batch import pin_for
from seqtasks.training.finite import LossWatch

HOST_READS = {"__bool__", "item", "__int__", "__float__", "__index__", "tolist", "numpy"}


class RefuseHostReads(TorchFunctionMode):
    """Fails on any read of a tensor's value into Python (a device sync on a GPU)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS or name == "nonzero":
            raise AssertionError(f"host read: {name}")
        return func(*args, **(kwargs or {}))


def test_the_first_non_finite_loss_is_named_with_its_step_and_batch():
    watch = LossWatch()
    for step, loss in enumerate([2.5, 1.0, math.nan, math.inf, 0.5]):
        watch.observe(torch.tensor(loss, requires_grad=True), step, 10 + step)
        if step < 2:
            watch.check()  # nothing wrong yet
    with pytest.raises(FloatingPointError, match=r"loss nan at step 2, batch 12; lower"):
        watch.check()


def test_an_infinite_loss_counts_and_finite_ones_never_raise():
    watch = LossWatch()
    watch.check()  # nothing observed
    for step in range(4):
        watch.observe(torch.tensor(1.0 / (step + 1)), step, step)
    watch.check()
    watch.observe(torch.tensor(-math.inf), 4, 0)
    with pytest.raises(FloatingPointError, match=r"loss -inf at step 4, batch 0"):
        watch.check()


def test_observing_a_loss_reads_nothing_back_to_the_host():
    watch = LossWatch()
    with RefuseHostReads():
        for step, loss in enumerate([1.0, math.nan, 2.0]):
            watch.observe(torch.tensor(loss), step, step)
    with pytest.raises(AssertionError, match="host read"), RefuseHostReads():
        watch.check()  # the detector works: check() does read


def test_batches_are_pinned_only_for_a_cuda_trainer():
    def trainer(device: str) -> SimpleNamespace:
        return SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))

    assert pin_for(trainer("cuda")) and not pin_for(trainer("cpu")) and not pin_for(None)


class NoSyncInSteps(L.Callback):
    """Turns CUDA's synchronisation check to errors from the start of each training batch to
    its end: forward, loss, backward, gradient clipping and the optimiser step."""

    steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        assert batch.src.is_cuda
        torch.cuda.set_sync_debug_mode("error")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        torch.cuda.set_sync_debug_mode("default")
        self.steps += 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run where one is)")
def test_transformer_training_steps_on_a_gpu_do_not_sync(toy_data_dir, tmp_path):
    """Six steps in bf16: none waits for the GPU. (The loss check reads back every
    `log_every_n_steps` steps, 50 here, on purpose: that one sync is the price of stopping.)"""
    from seqtasks.cli.main import SeqtasksCLI

    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", "configs/translation/transformer.yaml",
              "--data.init_args.data_dir", str(toy_data_dir), "--data.init_args.max_tokens", "512",
              "--trainer.accelerator", "gpu", "--trainer.devices", "1",
              "--trainer.precision", "bf16-mixed", "--trainer.max_steps", "6",
              "--trainer.max_time", "null", "--trainer.limit_val_batches", "0",
              "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
              "--trainer.enable_checkpointing", "false", "--trainer.callbacks", "[]",
              "--trainer.default_root_dir", str(tmp_path)],
    )  # fmt: skip
    guard = NoSyncInSteps()
    cli.trainer.callbacks.append(guard)
    try:
        cli.trainer.fit(cli.model, cli.datamodule)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert guard.steps == 6
    assert cli.trainer.train_dataloader.pin_memory
