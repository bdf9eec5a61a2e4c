"""A disk cache of a frozen backbone's feature maps, so that training the decoder never runs
the backbone again: on a CPU that is most of the cost of an epoch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from seqtasks.captioning.captions import load_image
from seqtasks.io.files import temporary_path
from seqtasks.io.preparation import Preparation


class FeatureCache:
    """Feature maps per image file, in `folder/<key>-<size>px.pt`.

    The key names the backbone, the stage it is cut after and a digest of its weights
    (`TimmEncoder.feature_key`); with the image size that is everything the maps depend on, so
    a cache file is never stale. Maps are kept in half precision, by resolved image path.

    Args:
        folder: where cache files live.
        key: names the backbone, stage and weights.
        image_size: side of the square images fed to the backbone.
    """

    def __init__(self, folder: str | Path, key: str, image_size: int):
        self.path = Path(folder) / f"{key}-{image_size}px.pt"
        self.image_size = image_size
        self.maps: dict[str, Tensor] = {}
        if self.path.is_file():
            self.maps = torch.load(self.path, map_location="cpu", weights_only=True)

    def __getitem__(self, path: Path) -> Tensor:
        """(C, H, W) float32 feature map of the image at `path`."""
        return self.maps[str(path.resolve())].float()

    @torch.no_grad()
    def fill(
        self, paths: Sequence[Path], extract: Callable[[Tensor], Tensor], batch_size: int = 32
    ) -> None:
        """Compute the maps of the `paths` not cached yet with `extract` ((B, 3, H, W) images in
        [0, 1] -> (B, C, h, w)), and save the cache (atomically) if anything was added, saying
        on stderr how far it has got (`Preparation`)."""
        missing = list(
            dict.fromkeys(p.resolve() for p in paths if str(p.resolve()) not in self.maps)
        )
        if not missing:
            return
        start = f"computing the feature maps of {len(missing):,} images into {self.path}"
        with Preparation("feature cache", start, len(missing), "images") as preparation:
            for first in range(0, len(missing), batch_size):
                chunk = missing[first : first + batch_size]
                images = torch.stack([load_image(p, self.image_size) for p in chunk])
                for path, features in zip(chunk, extract(images).half().cpu()):
                    self.maps[str(path)] = features.clone()
                preparation.advance(len(chunk))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = temporary_path(self.path)
            torch.save(self.maps, tmp)
            tmp.replace(self.path)
