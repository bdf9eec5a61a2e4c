"""Captioning data (caption folders, Karpathy files, the feature cache) and CaptioningTask
(checkpoints that carry their vocabulary, captioning, a tiny overfit)."""

from __future__ import annotations

import functools
import json

import lightning as L
import pytest
import timm
import torch
from conftest import flickr8k_subset

import seqtasks.tasks.base
from seqtasks.attention.scores import AdditiveAttention
from seqtasks.captioning.captioner import Captioner
from seqtasks.captioning.captions import load_image, read_captions
from seqtasks.captioning.data import CaptionData, ShapesData
from seqtasks.captioning.shapes import Counts
from seqtasks.captioning.task import CaptioningTask
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, UNK_ID
from seqtasks.data.words import WordTokenizer, words
from seqtasks.decoders import SoftAttentionDecoder
from seqtasks.encoders import ConvEncoder, TimmEncoder
from seqtasks.search.hypothesis import Hypothesis


def test_words_and_the_word_tokenizer():
    assert words("A dog's ball, (red)!") == ["a", "dog's", "ball", "red"]
    tokenizer = WordTokenizer.build(["a dog runs", "A dog sits.", "a cat"], min_freq=2)
    assert tokenizer.vocabulary == ["a", "dog"] and tokenizer.vocab_size == 6
    ids = tokenizer.encode("A dog flies")
    assert ids == [4, 5, UNK_ID]
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID]) == "a dog <unk>"
    assert tokenizer.pieces([BOS_ID, 4]) == ["<s>", "a"]


@pytest.fixture(scope="module")
def flickr() -> CaptionData:
    return CaptionData(str(flickr8k_subset()), image_size=32, min_freq=5, batch_size=4)


def test_caption_folder_split_in_order_with_a_vocabulary(flickr):
    sizes = {split: len(images) for split, images in flickr.images.items()}
    assert sizes == {"train": 750, "val": 50, "test": 100}
    assert flickr.images["test"][-1].name == "2065875490_a46b58c12b.jpg"  # the last in the file
    assert all(len(image.captions) == 5 for image in flickr.images["val"])
    assert 300 < flickr.tgt_vocab_size < 1000 and flickr.tokenizer.vocabulary[0] == "a"
    flickr.setup("fit")
    assert len(flickr.datasets["fit"]) == 750 * 5 and len(flickr.datasets["validate"]) == 50
    batch = next(iter(flickr.train_dataloader()))
    assert batch.images.shape == (4, 3, 32, 32) and batch.features is None
    assert 0.0 <= batch.images.min() and batch.images.max() <= 1.0
    words_in, words_out = batch.tgt_in[:, 1:], batch.tgt_out[:, :-1]
    assert (batch.tgt_in[:, 0] == BOS_ID).all() and (words_in == words_out)[words_in != 0].all()
    assert len(batch.references) == 4 and batch.scenes == [None] * 4


def test_karpathy_split_file(tmp_path):
    folder = flickr8k_subset() / "images"
    names = sorted(p.name for p in folder.iterdir())[:4]
    entries = [
        {
            "filename": name,
            "split": split,
            "sentences": [{"tokens": ["a", "dog", str(i)]}, {"tokens": ["a", "cat"]}],
        }
        for i, (name, split) in enumerate(zip(names, ["train", "restval", "val", "test"]))
    ]
    path = tmp_path / "dataset_flickr8k.json"
    path.write_text(json.dumps({"images": entries}))
    splits = read_captions(path, image_dir=folder)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [2, 1, 1]
    assert splits["train"][1].captions == ["a dog 1", "a cat"]
    assert splits["test"][0].path == folder / names[3]
    data = CaptionData(str(path), image_dir=str(folder), image_size=16, min_freq=1)
    assert data.tokenizer.vocabulary == ["a", "cat", "dog", "0", "1"]  # by frequency, then name


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such caption folder"):
        read_captions(tmp_path / "missing")
    (tmp_path / "captions.txt").write_text("picture;text\nx.jpg;a dog\n")
    with pytest.raises(ValueError, match="header 'image,caption'"):
        read_captions(tmp_path)
    (tmp_path / "captions.txt").write_text("image,caption\nx.jpg,a dog\n")
    with pytest.raises(ValueError, match="cannot give 50 validation"):
        read_captions(tmp_path)
    (tmp_path / "x.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(OSError, match="cannot read image .*x.jpg"):
        load_image(tmp_path / "x.jpg", 16)


def test_frozen_backbone_trains_on_cached_features(tmp_path):
    data = CaptionData(
        str(flickr8k_subset()),
        image_size=32,
        val_images=4,
        test_images=890,
        batch_size=3,
        feature_cache=str(tmp_path / "features"),
    )
    task = CaptioningTask(
        encoder=functools.partial(TimmEncoder, "tf_efficientnet_lite0", project_dim=16),
        decoder=functools.partial(SoftAttentionDecoder, embed_dim=8, hidden_size=16),
        tgt_vocab_size=data.tgt_vocab_size,
    ).eval()
    data.setup("fit")
    data.use_features(task.encoder.extract, task.encoder.feature_key)
    assert (tmp_path / "features" / f"{task.encoder.feature_key}-32px.pt").is_file()
    batch = next(iter(data.val_dataloader()))
    assert batch.images is None and batch.features.shape == (3, 320, 1, 1)
    pixels = torch.stack([load_image(image.path, 32) for image in data.images["val"][:3]])
    with torch.no_grad():
        cached, direct = task.encode(batch), task.encoder(pixels)
    torch.testing.assert_close(cached.states, direct.states, atol=2e-2, rtol=2e-2)


# ---- the task ---------------------------------------------------------------------------------


def shapes_task(vocab_size: int, **kwargs) -> CaptioningTask:
    torch.manual_seed(0)
    return CaptioningTask(
        encoder=functools.partial(ConvEncoder, channels=(8, 16, 32)),
        decoder=functools.partial(
            SoftAttentionDecoder,
            embed_dim=16,
            hidden_size=64,
            dropout=0.0,
            attention=functools.partial(AdditiveAttention, attention_dim=32),
        ),
        tgt_vocab_size=vocab_size,
        **kwargs,
    )


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> ShapesData:
    folder = tmp_path_factory.mktemp("shapes") / "level1"
    return ShapesData(str(folder), level=1, counts=Counts(16, 4, 4, 4), batch_size=8)


def test_checkpoint_carries_vocabulary_and_image_size(shapes, tmp_path):
    task = shapes_task(shapes.tgt_vocab_size, val_beam=2)
    trainer = L.Trainer(
        max_steps=2,
        limit_val_batches=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
    )
    trainer.fit(task, datamodule=shapes)
    assert {"val/cider", "val/bleu4", "val/truthful", "val/loss"} <= set(trainer.callback_metrics)
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    stored = torch.load(path, map_location="cpu", weights_only=False)["seqtasks"]
    assert stored == {
        "task": "captioning",
        "vocabulary": shapes.tokenizer.vocabulary,
        "image_size": 48,
    }
    # Built in Python, the hyperparameters hold functools.partial factories (CLI ones do not).
    loaded = CaptioningTask.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    assert loaded.tokenizer.vocabulary == shapes.tokenizer.vocabulary and loaded.image_size == 48
    images = torch.stack([load_image(i.path, 48) for i in shapes.images["test"]])
    ours = Captioner(task, []).caption(images, beam=2)
    theirs = Captioner(loaded, []).caption(images, beam=2)
    assert [c.text for c in ours] == [c.text for c in theirs]
    (first, *_) = Captioner(loaded, []).caption(images, beam=1, attention=True)
    assert first.grid == (6, 6) and first.attention.shape == (len(first.words), 36)


def test_validation_scores_what_search_said_about_each_image(shapes, monkeypatch):
    """Validation with a search that says the first reference for the images of even index and
    "a red" for the others: exact match is the even share, and BLEU-1 and CIDEr-D equal
    pycocoevalcap's on those captions. Each image is encoded once (loss and search share it),
    and each caption is scored against its own image's references."""
    from pycocoevalcap.bleu.bleu import Bleu

    task = shapes_task(shapes.tgt_vocab_size)
    task.set_preprocessing(shapes.tokenizer, 48)
    batches = []
    encode = task.encode
    monkeypatch.setattr(task, "encode", lambda batch: batches.append(batch) or encode(batch))

    def oracle(decoder, memory, settings, constraint=None, attention=False):
        batch = batches[-1]
        said = [
            refs[0] if int(i) % 2 == 0 else "a red"
            for i, refs in zip(batch.index, batch.references)
        ]
        return [[Hypothesis(shapes.tokenizer.encode(text), 0.0)] for text in said]

    monkeypatch.setattr(seqtasks.tasks.base, "search", oracle)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    (metrics,) = trainer.validate(task, datamodule=shapes, verbose=False)
    assert len(batches) == len(shapes.val_dataloader())

    images = shapes.images["val"]
    said = {i: image.captions[0] if i % 2 == 0 else "a red" for i, image in enumerate(images)}
    assert metrics["val/exact_match"] == pytest.approx(100 * sum(i % 2 == 0 for i in said) / 4)
    references = {i: image.captions for i, image in enumerate(images)}
    bleu, _ = Bleu(4).compute_score(references, {i: [c] for i, c in said.items()}, verbose=0)
    assert metrics["val/bleu1"] == pytest.approx(100 * bleu[0], rel=1e-6)
    assert metrics["val/bleu4"] == pytest.approx(100 * bleu[3], rel=1e-6)


def test_a_checkpoint_rebuilds_its_encoder_without_pretrained_weights(tmp_path):
    """The state dict holds the backbone's weights: loading needs neither the network nor the
    weights file (or package) the model was first built from."""
    torch.manual_seed(0)
    weights = tmp_path / "weights.pt"
    torch.save(timm.create_model("tf_efficientnet_lite0").state_dict(), weights)
    task = CaptioningTask(
        encoder=functools.partial(TimmEncoder, pretrained=True, weights=str(weights)),
        decoder=functools.partial(SoftAttentionDecoder, embed_dim=8, hidden_size=16),
        tgt_vocab_size=6,
    )
    task.set_preprocessing(WordTokenizer(["a", "dog"]), 32)
    checkpoint = {
        "state_dict": task.state_dict(),
        "hyper_parameters": dict(task.hparams),
        "pytorch-lightning_version": L.__version__,
    }
    task.on_save_checkpoint(checkpoint)
    assert checkpoint["hyper_parameters"]["encoder"].keywords["pretrained"] is False
    assert task.hparams["encoder"].keywords["pretrained"] is True, "the model's own are kept"
    torch.save(checkpoint, tmp_path / "model.ckpt")
    weights.unlink()
    loaded = CaptioningTask.load_from_checkpoint(tmp_path / "model.ckpt", weights_only=False)
    torch.testing.assert_close(
        loaded.encoder.backbone.conv_stem.weight, task.encoder.backbone.conv_stem.weight
    )


def test_a_model_without_vocabulary_says_so(shapes):
    task = shapes_task(shapes.tgt_vocab_size)
    with pytest.raises(ValueError, match="^the model has no vocabulary: load it from a checkpoint"):
        Captioner(task, [])
    with pytest.raises(RuntimeError, match="^cannot save a captioning checkpoint without its voc"):
        task.on_save_checkpoint({})
    with pytest.raises(ValueError, match="not a captioning checkpoint"):
        task.on_load_checkpoint({"seqtasks": {"task": "translation"}})
    with pytest.raises(ValueError, match="vocabulary has 5 entries"):
        task.set_preprocessing(WordTokenizer(["x"]), 64)


@pytest.mark.slow
def test_soft_attention_learns_to_describe_sixteen_images(shapes):
    """A tiny overfit: the inventory captions of 16 shapes images, word for word, greedy."""
    task = shapes_task(shapes.tgt_vocab_size, attention_penalty=0.1)
    task.set_preprocessing(shapes.tokenizer, 48)
    train = shapes.images["train"]
    images = torch.stack([load_image(image.path, 48) for image in train])
    encoded = [shapes.tokenizer.encode(image.captions[0]) for image in train]
    tgt_in = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor([BOS_ID, *ids]) for ids in encoded], True
    )
    tgt_out = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor([*ids, EOS_ID]) for ids in encoded], True
    )
    optimizer = torch.optim.Adam(task.parameters(), lr=0.01)
    task.train()
    for _ in range(300):  # it stops at loss 0.01; 150 steps were too few for some roundings
        memory = task.encoder(images)
        output = task.decoder(memory, tgt_in)
        loss = task.loss(output, tgt_out, memory.mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        words_loss, _ = task.objective.token_loss(output.logits, tgt_out)  # without the penalty
        if words_loss < 0.01:
            break
    task.eval()  # batch norm now uses running statistics: settle them on the training images
    with torch.no_grad():
        task.encoder.train()
        for _ in range(20):
            task.encoder(images)
    said = [c.text for c in Captioner(task, []).caption(images, beam=1)]
    assert said == [image.captions[0] for image in train]
