"""`Translator.translate(..., attention="all")`: every attention behind each output, by kind,
layer and head, over the pieces it is over; the top cross-attention's mean of heads is the
matrix `attention=True` gives (what the search computed); batching changes nothing; what cannot
be given is refused."""

from __future__ import annotations

import pytest
import torch
from test_model_folders import BAHDANAU, RNN, translator

import seqtasks

SOURCES = ["Ein Hund rennt im Park .", "", "Eine Frau ."]
LAYERS = {"d_model": 16, "num_heads": 2, "num_layers": 2, "ff_dim": 32}


@pytest.fixture(scope="module")
def models(toy_tokenizers, tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("every_attention")
    parts = {
        part: {"class_path": f"seqtasks.{part}s.Transformer{part.title()}", "init_args": LAYERS}
        for part in ("encoder", "decoder")
    }
    return {
        "transformer": seqtasks.load(translator(folder / "t.ckpt", toy_tokenizers, **parts)),
        "rnn": seqtasks.load(
            translator(folder / "r.ckpt", toy_tokenizers, encoder=RNN, decoder=BAHDANAU)
        ),
    }


def test_every_layer_and_head_over_its_pieces(models):
    model = models["transformer"]
    found = model.translate(SOURCES, beam=2, n_best=2, attention="all", max_length=10)
    first = found[0].attentions
    source = model.source_pieces(SOURCES[0])
    assert first.source == first.memory == source
    assert first.target == [*found[0].tokens, "</s>"]
    assert first.inputs == ["<s>", *found[0].tokens]
    s, t = len(source), len(first.target)
    assert [m.shape for m in first.encoder] == [(2, s, s)] * 2
    assert [m.shape for m in first.decoder] == [(2, t, t)] * 2
    assert [m.shape for m in first.cross] == [(2, t, s)] * 2
    for maps in (first.encoder, first.decoder, first.cross):
        for weights in maps:
            torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert all((m.triu(1) == 0).all() for m in first.decoder)
    # the top layer's mean of heads, but the EOS row, is what the search attended with
    torch.testing.assert_close(first.get("cross")[:-1], found[0].attention, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(first.get("cross", 1, 0), first.cross[1][0])
    torch.testing.assert_close(first.get("encoder", 0), first.encoder[0].mean(0))
    alternative = found[0].alternatives[0]
    assert alternative.attentions.target == [*alternative.tokens, "</s>"]
    assert found[1].attentions is None  # an empty source: nothing was searched


def test_the_maps_do_not_depend_on_the_batch(models):
    model = models["transformer"]
    together = model.translate(SOURCES, beam=1, attention="all", max_length=10)
    alone = [model.translate([s], beam=1, attention="all", max_length=10)[0] for s in SOURCES]
    for a, b in zip(together, alone, strict=True):
        if a.attentions is None:
            continue
        for kind in ("encoder", "decoder", "cross"):
            for x, y in zip(a.attentions.layers(kind), b.attentions.layers(kind), strict=True):
                torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_a_recurrent_decoder_gives_its_one_attention(models):
    model = models["rnn"]
    (found,) = model.translate(SOURCES[:1], beam=1, attention="all", max_length=10)
    maps = found.attentions
    assert maps.encoder == [] and maps.decoder == []
    assert [m.shape for m in maps.cross] == [(1, len(maps.target), len(maps.source))]
    torch.testing.assert_close(maps.get("cross")[:-1], found.attention, rtol=1e-4, atol=1e-5)


def test_what_cannot_be_given_is_refused(models):
    model = models["transformer"]
    with pytest.raises(ValueError, match="attention must be False, True or 'all', got 'every'"):
        model.translate(SOURCES, attention="every")
    (found,) = model.translate(SOURCES[:1], beam=1, attention="all", max_length=10)
    with pytest.raises(IndexError, match="layer 2: the encoder attention has 2 layers"):
        found.attentions.get("encoder", 2)
    with pytest.raises(IndexError, match="head 2: the cross attention has 2 heads"):
        found.attentions.get("cross", 0, 2)
    with pytest.raises(ValueError, match="kind must be one of"):
        found.attentions.get("self")
