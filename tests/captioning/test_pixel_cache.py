"""`image_cache`: the images of a caption source decoded once into a uint8 array on disk give
the pixels that decoding each image gives, bit for bit (real Flickr8k JPEGs and generated shapes
PNGs), in DataLoader workers too; the cache is read, not made again, until an image changes;
and a fill that fails leaves no file to read."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import flickr8k_subset
from torch.utils.data import DataLoader

from seqtasks.captioning import pixels as pixel_module
from seqtasks.captioning.data import CaptionData, ShapesData
from seqtasks.captioning.shapes import Counts

TINY = Counts(train=8, val=4, test=4, holdout=4)  # images per split of a level-1 world


def all_pixels(data: CaptionData, stage: str) -> list[torch.Tensor]:
    dataset = data.datasets[stage]
    return [dataset[n][1] for n in range(len(dataset))]


def test_cached_jpegs_give_the_pixels_decoding_gives(tmp_path):
    """Flickr8k's JPEGs (of many sizes) resized to 24 px: every image of the validation and
    test splits, read through the cache, equals `load_image`'s."""
    source = str(flickr8k_subset())
    plain = CaptionData(source, image_size=24, min_freq=5, feature_cache=None)
    cached = CaptionData(source, image_size=24, min_freq=5, feature_cache=None,
                         image_cache=str(tmp_path / "cache"))  # fmt: skip
    for data in (plain, cached):
        data.setup("validate")
        data.setup("test")
    assert cached.datasets["validate"].pixels is not None
    assert plain.datasets["validate"].pixels is None
    for stage in ("validate", "test"):
        for a, b in zip(all_pixels(plain, stage), all_pixels(cached, stage), strict=True):
            assert a.dtype == b.dtype == torch.float32 and torch.equal(a, b)
    (cache,) = (tmp_path / "cache").glob("pixels-*-24px.npy")
    assert cache.stat().st_size > 900 * 24 * 24 * 3  # every image of the source, uint8


@pytest.fixture
def shapes_dir(tmp_path):
    folder = tmp_path / "shapes"
    ShapesData(str(folder), level=1, counts=TINY)
    return folder


def shapes(folder, cache=None, **kwargs) -> ShapesData:
    data = ShapesData(str(folder), level=1, counts=TINY, batch_size=4, image_cache=cache, **kwargs)
    data.setup("fit")
    return data


def test_workers_read_the_cache_as_the_main_process_does(shapes_dir, tmp_path):
    cached = shapes(shapes_dir, str(tmp_path / "cache"))
    plain = shapes(shapes_dir)
    dataset = cached.datasets["fit"]
    batches = []
    for workers in (0, 2):
        loader = DataLoader(dataset, batch_size=4, collate_fn=dataset.collate, num_workers=workers)
        batches.append([batch.images for batch in loader])
    reference = DataLoader(plain.datasets["fit"], batch_size=4, collate_fn=dataset.collate)
    for alone, in_workers, decoded in zip(*batches, (b.images for b in reference), strict=True):
        assert torch.equal(alone, in_workers) and torch.equal(alone, decoded)


def test_the_cache_is_read_and_made_again_only_when_an_image_changes(shapes_dir, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    folder = tmp_path / "cache"
    first = shapes(shapes_dir, str(folder))
    before = all_pixels(first, "fit")

    def refuse(*args, **kwargs):
        raise AssertionError("decoded an image the cache holds")

    monkeypatch.setattr(pixel_module, "decode_image", refuse)
    again = shapes(shapes_dir, str(folder))  # read from the file, nothing decoded
    after = all_pixels(again, "fit")
    assert len(after) == len(before) and all(map(torch.equal, before, after))
    monkeypatch.undo()
    image = sorted((shapes_dir / "images").glob("train_*.png"))[0]
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the image changed
    shapes(shapes_dir, str(folder))
    assert len(list(folder.glob("pixels-*.npy"))) == 2


def test_a_fill_that_fails_leaves_no_file(shapes_dir, tmp_path, monkeypatch):
    decode = pixel_module.decode_image
    calls = []

    def fail_on_the_third(path, size):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(f"cannot read image {path}: damaged")
        return decode(path, size)

    monkeypatch.setattr(pixel_module, "decode_image", fail_on_the_third)
    with pytest.raises(OSError, match="damaged"):
        shapes(shapes_dir, str(tmp_path / "cache"))
    assert list((tmp_path / "cache").iterdir()) == []  # neither the cache nor its temporary
