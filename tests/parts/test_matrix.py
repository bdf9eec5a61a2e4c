"""Every encoder × decoder × task: the combinations the design allows train a few steps from a
YAML config with the CLI, load back from their checkpoint and decode greedy and with a beam;
the others are refused when the task is built, with a message that names both parts.

The parts are found by walking the `seqtasks.encoders` and `seqtasks.decoders` packages, so a
new encoder or decoder (one new file) is in the matrix without an edit here. Each is built
tiny: the widths below replace a constructor's defaults where it has a parameter of that name.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import io
import pkgutil
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import two_step_trainer
from jsonargparse import ArgumentParser

import seqtasks
import seqtasks.decoders
import seqtasks.encoders
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.registry import tasks
from seqtasks.tasks.base import EncoderDecoderTask

TINY = {
    "embed_dim": 8,
    "hidden_size": 8,
    "readout_dim": 8,
    "attention_dim": 8,
    "d_model": 8,
    "num_heads": 2,
    "ff_dim": 16,
    "num_layers": 1,
    "channels": [8, 8],
    "project_dim": 8,
    "dropout": 0.0,
}
# the tasks of an encoder and a decoder (pre-training's encoders alone: test_pretraining.py)
TASKS = {
    name: entry.task_class()
    for name, entry in tasks().items()
    if issubclass(entry.task_class(), EncoderDecoderTask)
}


def concrete_parts(package, base: type) -> list[type]:
    """The concrete subclasses of `base` defined in the modules of `package`."""
    found = {}
    for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        for _, value in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(value, base) and not inspect.isabstract(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


ENCODERS = concrete_parts(seqtasks.encoders, Encoder)
DECODERS = concrete_parts(seqtasks.decoders, Decoder)


def tiny(part: type) -> dict:
    """TINY's values for the parameters `part` takes, as jsonargparse reads its signature (the
    ones a subclass passes on to its parent's by keyword included)."""
    parser = ArgumentParser()
    parser.add_class_arguments(part, "part")
    parameters = vars(parser.get_defaults().part)
    return {name: value for name, value in TINY.items() if name in parameters}


def allowed(task: str, encoder: type) -> bool:
    return encoder.reads == TASKS[task].reads


COMBINATIONS = [
    pytest.param(task, encoder, decoder, {}, id=f"{task}-{encoder.__name__}-{decoder.__name__}")
    for task in TASKS
    for encoder in ENCODERS
    for decoder in DECODERS
]
# A part chosen inside a decoder (its `init_args` beyond TINY): a GRU decoder with multi-head
# attention, the Transformer's, as its `attention:`.
MULTI_HEAD = {"class_path": "seqtasks.attention.MultiHeadAttention", "init_args": {"heads": 2}}
COMBINATIONS.append(
    pytest.param(
        "translation",
        seqtasks.encoders.RNNEncoder,
        seqtasks.decoders.BahdanauDecoder,
        {"attention": MULTI_HEAD},
        id="translation-RNNEncoder-BahdanauDecoder-MultiHeadAttention",
    )
)


def test_the_matrix_finds_every_part():
    names = {part.__name__ for part in ENCODERS + DECODERS}
    assert {
        "RNNEncoder",
        "TransformerEncoder",
        "PatchEncoder",
        "ConvEncoder",
        "TimmEncoder",
        "ConvS2SEncoder",
        "PromptEncoder",
        "UniversalTransformerEncoder",
    } <= names
    assert {
        "BahdanauDecoder",
        "GNMTDecoder",
        "LuongDecoder",
        "NoAttentionDecoder",
        "SoftAttentionDecoder",
        "HardAttentionDecoder",
        "ShowTellDecoder",
        "TransformerDecoder",
        "UniversalTransformerDecoder",
        "PromptedRNNDecoder",
        "PromptedTransformerDecoder",
    } <= names
    assert all(
        allowed(t, e) for t in ("translation", "parsing") for e in ENCODERS if e.reads == "tokens"
    )


@pytest.fixture(scope="module")
def tiny_ptb(ptb_dir, tmp_path_factory) -> Path:
    """40 training and 6 dev trees of the WSJ sample."""
    folder = tmp_path_factory.mktemp("tiny_ptb")
    for split, count in (("train", 40), ("dev", 6)):
        lines = (ptb_dir / f"{split}.mrg").read_text().splitlines()[:count]
        (folder / f"{split}.mrg").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def data_configs(toy_data_dir, tiny_ptb, tmp_path_factory) -> dict[str, dict]:
    shapes = tmp_path_factory.mktemp("matrix_shapes") / "w"
    counts = {split: 4 for split in ("train", "val", "test", "holdout")}
    return {
        "translation": {
            "class_path": "seqtasks.translation.data.TranslationData",
            "init_args": {"data_dir": str(toy_data_dir), "max_tokens": 400},
        },
        "parsing": {
            "class_path": "seqtasks.parsing.data.ParsingData",
            "init_args": {"data_dir": str(tiny_ptb), "test_split": "dev", "min_count": 1},
        },
        "captioning": {
            "class_path": "seqtasks.captioning.data.ShapesData",
            "init_args": {"data_dir": str(shapes), "level": 1, "batch_size": 4, "counts": counts},
        },
    }


def config(
    task: str, encoder: type, decoder: type, data: dict, root: Path, chosen: dict | None = None
) -> dict:
    def part(cls: type, init_args: dict) -> dict:
        return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": init_args}

    model = {
        "encoder": part(encoder, tiny(encoder)),
        "decoder": part(decoder, tiny(decoder) | (chosen or {})),
        "val_beam": 1,
    }
    if task == "captioning":
        model |= {"max_caption_length": 6, "attention_penalty": 0.0}
    return {
        "seed_everything": 0,
        "trainer": two_step_trainer(root),
        "model": {
            "class_path": f"{TASKS[task].__module__}.{TASKS[task].__name__}",
            "init_args": model,
        },
        "data": data,
    }


def decode(task: str, model, data: dict) -> None:
    """Greedy and beam search through the API the apps use; outputs well formed."""
    for beam in (1, 3):
        if task == "translation":
            results = model.translate(["Ein Hund läuft.", "", "Zwei Männer."], beam=beam)
            assert len(results) == 3 and results[1].text == ""
            assert all(isinstance(r.text, str) and not r.alternatives for r in results)
        elif task == "parsing":
            words = [["The", "dog", "barked", "."], ["He", "left"]]
            for sentence, parse in zip(words, model.parse(words, beam=beam)):
                assert parse.tree.leaves() == sentence
        else:
            images = torch.rand(2, 3, model.image_size, model.image_size)
            attention = model.gives_attention
            captions = model.caption(images, beam=beam, attention=attention)
            assert len(captions) == 2
            for caption in captions:
                assert len(caption.words) <= 6
                if caption.words and attention:
                    assert caption.attention.shape == (
                        len(caption.words),
                        caption.grid[0] * caption.grid[1],
                    )


@pytest.mark.slow
@pytest.mark.parametrize("task, encoder, decoder, chosen", COMBINATIONS)
def test_part_by_part(task, encoder, decoder, chosen, data_configs, tmp_path, monkeypatch):
    from seqtasks.cli.main import main

    if not allowed(task, encoder):
        factories = {
            "encoder": functools.partial(encoder, **tiny(encoder)),
            "decoder": functools.partial(decoder, **tiny(decoder)),
        }
        sizes = {"tgt_vocab_size": 10} | ({} if task == "captioning" else {"src_vocab_size": 10})
        reads = TASKS[task].reads
        message = f"{TASKS[task].__name__} gives its encoder {reads}, but {encoder.__name__} reads"
        with pytest.raises(ValueError, match=message):
            TASKS[task](**factories, **sizes)
        return
    path = tmp_path / "config.yaml"
    settings = config(task, encoder, decoder, data_configs[task], tmp_path, chosen)
    path.write_text(yaml.safe_dump(settings))
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    main(["fit", "--config", str(path)])
    checkpoints = sorted(tmp_path.glob("**/*.ckpt"))
    assert checkpoints, "fit wrote no checkpoint"
    model = seqtasks.load(checkpoints[-1], device="cpu", task=task)
    assert type(model.task.encoder) is encoder and type(model.task.decoder) is decoder
    for name, part in chosen.items():
        kind = type(getattr(model.task.decoder, name)).__name__
        assert kind == part["class_path"].split(".")[-1]
    decode(task, model, data_configs[task])


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, encoder, decoder, app, option",
    [
        ("translation", "RNNEncoder", "NoAttentionDecoder", "translate", "--attention-plots"),
        ("captioning", "PatchEncoder", "ShowTellDecoder", "caption", "--attention-maps"),
    ],
)
def test_apps_refuse_to_plot_a_decoder_without_attention(
    task, encoder, decoder, app, option, data_configs, tmp_path, monkeypatch, capsys
):
    from conftest import load_script

    from seqtasks.cli.main import main

    parts = {part.__name__: part for part in ENCODERS + DECODERS}
    settings = config(task, parts[encoder], parts[decoder], data_configs[task], tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    main(["fit", "--config", str(path)])
    checkpoint = str(sorted(tmp_path.glob("**/*.ckpt"))[-1])
    images = Path(data_configs["captioning"]["init_args"]["data_dir"]) / "images"
    inputs = [] if task == "translation" else [str(next(images.glob("*.png")))]
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ein Hund.\n"))
    capsys.readouterr()
    status = load_script(f"apps/{app}.py").main(
        [*inputs, "--checkpoint", checkpoint, option, str(tmp_path / "plots")]
    )
    assert status == 2
    assert (
        capsys.readouterr().err == f"error: {option}: {checkpoint}'s {decoder} has no attention\n"
    )
    assert not (tmp_path / "plots").exists()
