"""Every part travels: a model holding any encoder, any decoder or any self-attention of the
package, exported to a model folder, loads back with the same weights and gives the same
outputs, n-best lists and attention included, as its checkpoint.

The parts are found by walking `seqtasks.encoders`, `seqtasks.decoders` and `seqtasks.attention`
(as the matrix finds them), so a new part is checked here without an edit: each is built tiny
and paired with a partner of the task it fits (a text encoder with a Transformer decoder, an
image encoder with soft attention, a decoder under an RNN encoder, a self-attention in both
halves of a Transformer).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import save_checkpoint
from test_matrix import DECODERS, ENCODERS, concrete_parts, tiny
from test_model_folders import SENTENCES, exported, some_images, translator

import seqtasks
import seqtasks.attention
from seqtasks.attention.multihead import SelfAttention
from seqtasks.captioning.task import CaptioningTask
from seqtasks.data.words import WordTokenizer
from seqtasks.decoders import SoftAttentionDecoder, TransformerDecoder
from seqtasks.encoders import RNNEncoder, TransformerEncoder

SELF_ATTENTIONS = concrete_parts(seqtasks.attention, SelfAttention)


def part(cls: type, **init_args) -> dict:
    return {
        "class_path": f"{cls.__module__}.{cls.__qualname__}",
        "init_args": tiny(cls) | init_args,
    }


def cases() -> list:
    found = []
    for encoder in ENCODERS:
        partner = SoftAttentionDecoder if encoder.reads == "images" else TransformerDecoder
        found.append(pytest.param("encoder", encoder, partner, id=f"encoder-{encoder.__name__}"))
    for decoder in DECODERS:
        found.append(pytest.param("decoder", RNNEncoder, decoder, id=f"decoder-{decoder.__name__}"))
    for attention in SELF_ATTENTIONS:
        found.append(pytest.param("self_attention", attention, None, id=attention.__name__))
    return found


def checkpoint(kind: str, first: type, second: type | None, path: Path, tokenizers) -> Path:
    torch.manual_seed(0)
    if kind == "self_attention":
        layers = {"self_attention": {"class_path": f"{first.__module__}.{first.__qualname__}"}}
        encoder, decoder = part(TransformerEncoder, **layers), part(TransformerDecoder, **layers)
    else:
        encoder, decoder = part(first), part(second)
    if kind != "self_attention" and first.reads == "images":
        return image(path, encoder, decoder)
    return translator(path, tokenizers, encoder=encoder, decoder=decoder)


def image(path: Path, encoder: dict, decoder: dict) -> Path:
    words = WordTokenizer(["a", "dog", "runs", "red", "circle"])
    hparams = {"_class_path": "seqtasks.captioning.task.CaptioningTask", "encoder": encoder}
    hparams |= {"decoder": decoder, "tgt_vocab_size": words.vocab_size}
    return save_checkpoint(CaptioningTask, hparams, lambda m: m.set_preprocessing(words, 32), path)


@pytest.mark.parametrize("kind, first, second", cases())
def test_a_model_of_any_part_is_its_folder(kind, first, second, toy_tokenizers, tmp_path):
    saved = checkpoint(kind, first, second, tmp_path / "model.ckpt", toy_tokenizers)
    folder = exported({"model": saved}, tmp_path / "folders")["model"]
    from_checkpoint, from_folder = seqtasks.load(saved), seqtasks.load(folder)
    ours, theirs = from_folder.task.state_dict(), from_checkpoint.task.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert outputs(from_folder) == outputs(from_checkpoint)


def outputs(model) -> list[tuple]:
    """Its results, n-best lists and attention (where it gives any) included, as plain data
    (attention as exact float64 lists: equal means bit for bit)."""

    def exact(result) -> tuple:
        attention = getattr(result, "attention", None)
        attention = None if attention is None else attention.double().tolist()
        return (result.text, result.score, attention)

    attention = model.gives_attention
    if isinstance(model, seqtasks.Translator):
        results = model.translate(SENTENCES, beam=3, n_best=2, attention=attention)
        results += model.translate(SENTENCES)
    else:
        images = some_images()
        results = model.caption(images, beam=2, n_best=2, attention=attention)
    return [(exact(r), [exact(a) for a in r.alternatives]) for r in results]
