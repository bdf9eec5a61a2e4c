"""Device names are checked before any work (`seqtasks.devices`): an unknown name, or a device
this machine does not have, is one line naming it and the devices that are, from `seqtasks.load`,
the apps and `evaluate.py` alike. The machine's GPUs are simulated, so the tests mean the same
on a machine with or without them."""

from __future__ import annotations

import pytest
import torch
from conftest import load_script
from test_bad_input import parsing_checkpoint

import seqtasks
from seqtasks.devices import DeviceError, available_devices, check_device


@pytest.fixture
def gpus(monkeypatch):
    """Make torch, a CUDA build, see `n` CUDA GPUs (0: none, as on a CPU-only machine)."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def see(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)

    return see


def test_names_are_read_as_torch_devices(gpus):
    gpus(2)
    assert [check_device(n) for n in ("auto", "cpu", "CPU", "gpu", "cuda", " cuda:1 ")] == [
        "cuda",
        "cpu",
        "cpu",
        "cuda",
        "cuda",
        "cuda:1",
    ]
    assert check_device("gpu:01") == "cuda:1"
    assert available_devices() == ["cpu", "cuda", "cuda:0", "cuda:1"]
    gpus(0)
    assert check_device("auto") == "cpu" and available_devices() == ["cpu"]


@pytest.mark.parametrize("name", ["tpu", "cpu:0", "cuda:x", "cuda:²", "cuda:-1", "", "mps:0"])
def test_an_unknown_name_is_refused_naming_the_devices_here(gpus, name):
    gpus(1)
    with pytest.raises(DeviceError) as error:
        check_device(name)
    assert str(error.value) == (
        f"unknown device {name!r}: use auto, cpu, cuda, cuda:N, gpu or mps "
        "(here: cpu, cuda, cuda:0)"
    )


def test_a_device_that_is_not_here_is_refused_naming_the_devices_here(gpus):
    gpus(2)
    with pytest.raises(DeviceError, match=r"^device 'cuda:2' is not here: torch sees 2 CUDA GPUs"):
        check_device("cuda:2")
    gpus(0)
    for name in ("cuda", "gpu", "cuda:0"):
        with pytest.raises(DeviceError) as error:
            check_device(name)
        assert str(error.value).startswith(f"device {name!r} is not here: ")
        assert str(error.value).endswith("(devices here: cpu)")
    with pytest.raises(DeviceError, match="torch sees no MPS"):
        check_device("mps")


def test_why_there_is_no_gpu_is_said_when_torch_can_tell(gpus, monkeypatch):
    gpus(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceError, match="not here: CUDA_VISIBLE_DEVICES is empty"):
        check_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(DeviceError, match="not here: this build of torch has no CUDA support"):
        check_device("cuda")


def test_load_checks_the_device_before_reading_any_checkpoint(gpus, tmp_path):
    """Without a GPU, device="cuda" used to fail inside torch.load ("cannot build the model it
    describes (RuntimeError: Attempting to deserialize …)"); now the device is named first,
    even before a missing file is."""
    gpus(0)
    with pytest.raises(DeviceError, match=r"device 'gpu' is not here.*\(devices here: cpu\)"):
        seqtasks.load(tmp_path / "missing.ckpt", device="gpu")
    path = parsing_checkpoint(tmp_path / "parser.ckpt")
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        seqtasks.load(path, device="tpu")
    assert seqtasks.load(path, device="cpu").device == torch.device("cpu")


@pytest.mark.parametrize(
    "app, args",
    [
        ("apps/translate.py", ["--checkpoint", "x.ckpt"]),
        ("apps/parse.py", ["--checkpoint", "x.ckpt"]),
        ("apps/caption.py", ["x.png", "--checkpoint", "x.ckpt"]),
        ("apps/evaluate.py", ["parsing", "--gold", "g.mrg", "--checkpoint", "x.ckpt"]),
        ("apps/evaluate.py", ["captioning", "--checkpoint", "x.ckpt", "--source", "s"]),
    ],
)
def test_the_apps_refuse_a_device_that_is_not_here_as_an_argument_error(
    gpus, capsys, app, args, tmp_path, monkeypatch
):
    """An argparse error naming --device, before any file is read (x.ckpt is an empty file)."""
    gpus(0)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.ckpt").touch()
    with pytest.raises(SystemExit) as exit:
        load_script(app).main([*args, "--device", "cuda"])
    assert exit.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(
            "error: argument --device: device 'cuda' is not here: torch sees no CUDA GPU "
            "(devices here: cpu)"
        )
    )
