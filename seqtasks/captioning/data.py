"""The captioning DataModules: images (or cached feature maps) with word-level captions."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from seqtasks.captioning.captions import (
    TEST_IMAGES,
    VAL_IMAGES,
    CaptionedImage,
    load_image,
    read_captions,
)
from seqtasks.captioning.features import FeatureCache
from seqtasks.captioning.pixels import PixelCache
from seqtasks.captioning.shapes import DEFAULT_COUNTS, LEVELS, Counts, Scene, write_world
from seqtasks.data.batch import Travels, pin_for, teacher_forcing
from seqtasks.data.module import BucketedData, report_skipped
from seqtasks.data.words import WordTokenizer


@dataclass
class CaptionBatch(Travels):
    """A batch of images, each with one target caption and all its references.

    `tgt_in` is BOS y_1 … y_n and `tgt_out` y_1 … y_n EOS, padded; `index` numbers the images in
    their split, so results gathered from several processes can be put back in order.
    """

    images: Tensor | None  # (B, 3, H, W) RGB in [0, 1]
    features: Tensor | None  # (B, C, h, w) cached backbone maps, instead of images
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)
    index: Tensor  # (B,)
    references: list[list[str]]
    scenes: list[Scene | None]

    def __len__(self) -> int:
        return self.tgt_in.size(0)


class CaptionDataset(Dataset):
    """(image, caption) pairs of one split: for training every caption of every image up to
    `max_length` words (longer ones are skipped with a warning that counts them), for
    evaluation the first caption of each image (the scores use all of them).

    Images are read from disk (from `pixels`, decoded once, when it is set), or their
    backbone maps from `features` once it is set.
    """

    def __init__(
        self,
        images: list[CaptionedImage],
        tokenizer: WordTokenizer,
        image_size: int,
        every_caption: bool,
        max_length: int,
        source: str = "",
    ):
        self.images, self.image_size = images, image_size
        self.targets = [[tokenizer.encode(c) for c in image.captions] for image in images]
        self.pairs = [
            (i, j)
            for i, image in enumerate(images)
            for j in (range(len(image.captions)) if every_caption else [0])
        ]
        if every_caption:
            short = [(i, j) for i, j in self.pairs if len(self.targets[i][j]) <= max_length]
            reasons = {
                f"with more than max_length {max_length} words": len(self.pairs) - len(short)
            }
            report_skipped(source, len(self.pairs), "captions", reasons)
            self.pairs = short
        self.features: FeatureCache | None = None
        self.pixels: PixelCache | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, n: int) -> tuple[int, Tensor, list[int]]:
        i, j = self.pairs[n]
        path = self.images[i].path
        if self.features is not None:
            return i, self.features[path], self.targets[i][j]
        decoded = self.pixels is not None
        pixels = self.pixels[path] if decoded else load_image(path, self.image_size)
        return i, pixels, self.targets[i][j]

    def collate(self, items: list[tuple[int, Tensor, list[int]]]) -> CaptionBatch:
        index, inputs, targets = zip(*items)
        stacked, cached = torch.stack(inputs), self.features is not None
        tgt_in, tgt_out = teacher_forcing(targets)
        return CaptionBatch(
            images=None if cached else stacked,
            features=stacked if cached else None,
            tgt_in=tgt_in,
            tgt_out=tgt_out,
            index=torch.tensor(index),
            references=[self.images[i].captions for i in index],
            scenes=[self.images[i].scene for i in index],
        )


class CaptionData(BucketedData):
    """Captioned images from a `captions.txt` folder or a Karpathy split file (see
    `seqtasks.captioning.captions`), with a word vocabulary built from the training captions.

    An image costs the same whatever its caption says, so batches count images (`batch_size`,
    shuffled anew every epoch; Lightning shards them under DDP) rather than tokens.

    The splits come from the source (Karpathy's, or a folder's `splits.json`); a source without
    any is split in order (`seqtasks.captioning.captions.assign_splits`). The vocabulary is built in
    `__init__`, so its size is known as soon as the module exists (the CLI links it).

    Args:
        source: the folder or the `.json` file.
        image_dir: where the images are, if not in the usual place.
        image_size: images are resized to image_size × image_size.
        min_freq: words seen fewer times in the training captions become UNK.
        val_images, test_images: split sizes for a source without splits.
        test_split: the split `test` and `predict` use ("holdout" for the shapes world's
            compositional hold-out).
        batch_size: (image, caption) pairs per training batch; evaluation batches are images.
        max_length: training captions with more words are skipped, with a warning that
            counts them (evaluation keeps every reference).
        feature_cache: folder for the feature maps of a frozen backbone (None: no cache).
        num_workers: DataLoader worker processes.
        image_cache: folder for the images decoded and resized once (`PixelCache`: uint8,
            memory-mapped, filled at setup); None: each image is decoded whenever it is read.
            The pixels are the same either way.
    """

    def __init__(
        self,
        source: str = "data/flickr8k",
        image_dir: str | None = None,
        image_size: int = 224,
        min_freq: int = 5,
        val_images: int = VAL_IMAGES,
        test_images: int = TEST_IMAGES,
        test_split: str = "test",
        batch_size: int = 32,
        max_length: int = 100,
        feature_cache: str | None = "data/features",
        num_workers: int = 0,
        image_cache: str | None = None,
    ):
        super().__init__("train", "val", test_split, batch_size, max_length, num_workers, seed=0)
        self.source, self.image_size, self.batch_size = source, image_size, batch_size
        self.image_cache = image_cache
        self.pixels: PixelCache | None = None
        self.feature_cache = feature_cache
        self.images = read_captions(source, image_dir, val_images, test_images)
        if test_split not in self.images:
            raise ValueError(f"{source} has no split '{test_split}' (it has {sorted(self.images)})")
        training = [c for image in self.images.get("train", []) for c in image.captions]
        if not training:
            raise ValueError(f"{source} has no training images")
        missing = [
            i.path for images in self.images.values() for i in images if not i.path.is_file()
        ]
        if missing:
            raise FileNotFoundError(
                f"{len(missing)} images of {source} are missing, e.g. {missing[0]}"
            )
        self.tokenizer = WordTokenizer.build(training, min_freq)

    @property
    def tgt_vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def load_split(self, split: str, train: bool) -> CaptionDataset:
        return CaptionDataset(
            self.images.get(split, []),
            self.tokenizer,
            self.image_size,
            every_caption=train,
            max_length=self.max_length,
            source=self.source,
        )

    def collate(self, stage: str) -> Callable[[list], CaptionBatch]:
        return self.datasets[stage].collate

    def setup(self, stage: str) -> None:
        """The stage's datasets; with an `image_cache`, every image of the source decoded into
        it once (on the first setup) and read from it."""
        super().setup(stage)
        if self.image_cache is not None and self.pixels is None:
            paths = [image.path for images in self.images.values() for image in images]
            self.pixels = PixelCache(self.image_cache, paths, self.image_size)
            self.pixels.fill()
        for dataset in self.datasets.values():
            dataset.pixels = self.pixels

    def use_features(self, extract: Callable[[Tensor], Tensor], key: str) -> None:
        """Serve the feature maps of a frozen backbone instead of images, from the cache:
        `extract` ((B, 3, H, W) -> (B, C, h, w)) computes those not cached yet. No-op without
        a `feature_cache` folder."""
        if self.feature_cache is None:
            return
        cache = FeatureCache(self.feature_cache, key, self.image_size)
        cache.fill([image.path for d in self.datasets.values() for image in d.images], extract)
        for dataset in self.datasets.values():
            dataset.features = cache

    def loader(self, stage: str, train: bool) -> DataLoader:
        return DataLoader(
            self.datasets[stage],
            batch_size=self.batch_size,
            shuffle=train,
            collate_fn=self.collate(stage),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=pin_for(getattr(self, "trainer", None)),
        )


class ShapesData(CaptionData):
    """`CaptionData` over the shapes world (`seqtasks.captioning.shapes`), generated into `data_dir`
    on first use (as `data_prep/shapes.py` would); its splits are train, val, test and the
    compositional holdout.

    Args:
        data_dir: where the world is (or will be) written.
        level: difficulty, 1–4 (`seqtasks.captioning.shapes.LEVELS`).
        counts: images per split (`seqtasks.captioning.shapes.Counts`), as `world.json`
            records them.
        seed: seed of the world.
        test_split, batch_size, num_workers, image_cache: as in `CaptionData`.
    """

    # 0.1's settings, answered with their names now (`seqtasks.old_names`)
    RENAMED: ClassVar[dict[str, str]] = {
        f"num_{split}": f"counts.{split}" for split in ("train", "val", "test", "holdout")
    }

    def __init__(
        self,
        data_dir: str = "data/shapes",
        level: int = 3,
        counts: Counts = DEFAULT_COUNTS,
        seed: int = 0,
        test_split: str = "test",
        batch_size: int = 64,
        num_workers: int = 0,
        image_cache: str | None = None,
    ):
        world = LEVELS[level]
        path = Path(data_dir)
        sizes = asdict(counts)
        wanted = json.loads(json.dumps({"world": asdict(world), "counts": sizes, "seed": seed}))
        if (path / "world.json").is_file():
            found = json.loads((path / "world.json").read_text())
            if found != wanted:
                raise ValueError(
                    f"{path} holds another shapes world ({found}); delete it or choose another "
                    f"data_dir for level {level} with {sizes} and seed {seed}"
                )
        else:
            write_world(path, world, sizes, seed)
        super().__init__(
            str(path),
            image_size=world.image_size,
            min_freq=1,
            test_split=test_split,
            batch_size=batch_size,
            feature_cache=None,
            num_workers=num_workers,
            image_cache=image_cache,
        )
