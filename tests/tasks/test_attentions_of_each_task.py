"""`attention="all"` beyond translation: the parser's maps over the words it reads (in the
encoder's order) and the pieces it writes, the captioner's over the image grid's cells; the top
cross-attention's mean of heads is what the search attended with (`attention=True`)."""

from __future__ import annotations

import pytest
import torch
from conftest import save_checkpoint
from test_bad_input import LUONG, RNN, sample_trees
from test_model_folders import HARD, SOFT, captioner, some_images

import seqtasks
from seqtasks.data.tokenizer import EOS_ID
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.vocabulary import ParsingVocabulary, unknown_word_class

SENTENCES = ["The dog barked .", "", "Stocks rose sharply ."]
LAYERS = {"d_model": 16, "num_heads": 2, "num_layers": 2, "ff_dim": 32}
TRANSFORMER = {
    part: {"class_path": f"seqtasks.{part}s.Transformer{part.title()}", "init_args": LAYERS}
    for part in ("encoder", "decoder")
}


def parser(path, reverse: bool, **parts):
    vocabulary = ParsingVocabulary.build(sample_trees(20), tags=True, reverse=reverse, min_count=1)
    hparams = {"_class_path": "seqtasks.parsing.task.ParsingTask", **parts}
    hparams |= {"src_vocab_size": len(vocabulary.words), "tgt_vocab_size": len(vocabulary.tokens)}
    return save_checkpoint(ParsingTask, hparams, lambda m: m.set_vocabulary(vocabulary), path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("task_attentions")
    found = {
        "transformer": seqtasks.load(parser(folder / "t.ckpt", False, **TRANSFORMER)),
        "rnn": seqtasks.load(parser(folder / "r.ckpt", True, encoder=RNN, decoder=LUONG)),
        "soft": seqtasks.load(captioner(folder / "s.ckpt", SOFT)),
        "hard": seqtasks.load(captioner(folder / "h.ckpt", HARD)),
    }
    for name in ("soft", "hard"):  # untrained captioners end at once: let them write words
        with torch.no_grad():
            found[name].task.decoder.readout.L_o.bias[EOS_ID] = -30.0
    return found


def test_a_transformer_parsers_every_layer_and_head(models):
    model = models["transformer"]
    found = model.parse(SENTENCES, beam=2, n_best=2, attention="all")
    first = found[0].attentions
    words = SENTENCES[0].split()
    assert first.memory == [*words, "</s>"]
    known = model.task.vocabulary.words
    assert "barked" not in known and "The" in known
    assert first.source == [w if w in known else unknown_word_class(w) for w in words] + [
        "</s>"
    ]  # what the encoder read: an unknown word as its class
    assert first.target == [*found[0].tokens, "</s>"]
    w, t = len(words) + 1, len(first.target)
    assert [m.shape for m in first.encoder] == [(2, w, w)] * 2
    assert [m.shape for m in first.decoder] == [(2, t, t)] * 2
    assert [m.shape for m in first.cross] == [(2, t, w)] * 2
    assert all((m.triu(1) == 0).all() for m in first.decoder)
    torch.testing.assert_close(first.get("cross")[:-1], found[0].attention, rtol=1e-4, atol=1e-5)
    alternative = found[0].alternatives[0]
    assert alternative.attentions.target == [*alternative.tokens, "</s>"]
    assert found[1].attentions is None  # an empty sentence: nothing was searched
    assert model.parse(SENTENCES[:1])[0].attentions is None  # nothing asked, nothing kept


def test_a_reversing_parsers_maps_name_the_words_in_the_order_it_reads_them(models):
    model = models["rnn"]
    (found,) = model.parse(SENTENCES[2:], beam=1, attention="all")
    maps = found.attentions
    assert maps.memory == [*reversed(SENTENCES[2].split()), "</s>"]
    assert len(maps.source) == len(maps.memory)
    assert maps.encoder == [] and maps.decoder == []
    assert [m.shape for m in maps.cross] == [(1, len(maps.target), len(maps.memory))]
    torch.testing.assert_close(maps.get("cross")[:-1], found.attention, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("decoder", ["soft", "hard"])
def test_a_captioners_maps_are_over_its_grid_cells(models, decoder):
    model = models[decoder]
    found = model.caption(some_images()[:2], beam=2, n_best=2, attention="all")
    for caption in found:
        maps = caption.attentions
        rows, columns = caption.grid
        assert maps.memory[0] == "0,0" and maps.memory[-1] == f"{rows - 1},{columns - 1}"
        assert len(maps.memory) == rows * columns
        assert caption.words and maps.target == [*caption.words, "</s>"]
        assert maps.encoder == [] and maps.decoder == []
        (cross,) = maps.cross
        assert cross.shape == (1, len(maps.target), rows * columns)
        torch.testing.assert_close(maps.get("cross")[:-1], caption.attention, rtol=1e-4, atol=1e-5)
        assert caption.alternatives[0].attentions.target == [*caption.alternatives[0].words, "</s>"]


def test_what_neither_asks_for_is_refused(models):
    with pytest.raises(ValueError, match="attention must be False, True or 'all'"):
        models["transformer"].parse(SENTENCES[:1], attention="every")
    with pytest.raises(ValueError, match="attention must be False, True or 'all'"):
        models["soft"].caption(some_images()[:1], attention="every")
