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
        "transformer_b": seqtasks.load(translator(folder / "b.ckpt", toy_tokenizers, **parts)),
        "rnn": seqtasks.load(
            translator(folder / "r.ckpt", toy_tokenizers, encoder=RNN, decoder=BAHDANAU)
        ),
        "decoder_only": seqtasks.load(translator(folder / "d.ckpt", toy_tokenizers, **ONE_NETWORK)),
    }


ONE_NETWORK = {  # the decoder-only model: the source as a prompt, one causal stack
    "encoder": {"class_path": "seqtasks.encoders.PromptEncoder", "init_args": {"embed_dim": 16}},
    "decoder": {"class_path": "seqtasks.decoders.PromptedTransformerDecoder", "init_args": LAYERS},
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


def test_a_decoder_only_models_one_attention_is_given_as_the_three_kinds(models):
    """The one causal stack's attention, block by block: the prompt reading itself as the
    encoder's, the target reading the prompt as the cross-attention and itself as the
    decoder's, a row of the two latter summing to 1 together; the top layer's target-on-prompt
    mean of heads is what the search attended with; batching changes nothing."""
    model = models["decoder_only"]
    found = model.translate(SOURCES, beam=2, n_best=2, attention="all", max_length=10)
    first = found[0].attentions
    source = model.source_pieces(SOURCES[0])
    assert first.source == first.memory == source
    s, t = len(source), len(first.target)
    assert [m.shape for m in first.encoder] == [(2, s, s)] * 2
    assert [m.shape for m in first.decoder] == [(2, t, t)] * 2
    assert [m.shape for m in first.cross] == [(2, t, s)] * 2
    assert all((m.triu(1) == 0).all() for m in first.encoder + first.decoder)
    for weights in first.encoder:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    for cross, own in zip(first.cross, first.decoder, strict=True):
        torch.testing.assert_close(cross.sum(-1) + own.sum(-1), torch.ones(2, t))
        assert torch.all(cross.sum(-1) < 1 - 1e-4)  # the rest fell on the target
    torch.testing.assert_close(first.get("cross")[:-1], found[0].attention, rtol=1e-4, atol=1e-5)
    assert found[0].alternatives[0].attentions.target == [*found[0].alternatives[0].tokens, "</s>"]
    (alone,) = model.translate(SOURCES[:1], beam=2, attention="all", max_length=10)
    twice = seqtasks.load(model.checkpoints * 2)  # an ensemble: each member's prompt maps
    (doubled,) = twice.translate(SOURCES[:1], beam=2, attention="all", max_length=10)
    for kind in ("encoder", "decoder", "cross"):
        for x, y, z in zip(
            first.layers(kind), alone.attentions.layers(kind), doubled.attentions.layers(kind),
            strict=True,
        ):  # fmt: skip
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(x, z, rtol=1e-5, atol=1e-6)


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


def test_panels_are_the_layers_and_heads_asked_for(models):
    (found,) = models["transformer"].translate(SOURCES[:1], beam=1, attention="all", max_length=10)
    maps = found.attentions
    every = maps.panels("encoder")
    assert [[title for title, _ in row] for row in every] == [
        ["layer 0, head 0", "layer 0, head 1"],
        ["layer 1, head 0", "layer 1, head 1"],
    ]
    torch.testing.assert_close(every[1][0][1], maps.encoder[1][0])
    (row,) = maps.panels("cross", layers=[-1], heads=[1, "mean"])
    assert [title for title, _ in row] == ["layer 1, head 1", "layer 1, mean of heads"]
    torch.testing.assert_close(row[0][1], maps.cross[1][1])
    torch.testing.assert_close(row[1][1], maps.cross[1].mean(0))
    assert maps.axes("decoder") == (maps.target, maps.inputs)
    assert maps.axes("cross") == (maps.target, maps.memory)
    with pytest.raises(IndexError, match="layer -3: the decoder attention has 2 layers"):
        maps.panels("decoder", layers=[-3])
    (rnn,) = models["rnn"].translate(SOURCES[:1], beam=1, attention="all", max_length=10)
    with pytest.raises(ValueError, match="the model has no encoder self-attention"):
        rnn.attentions.panels("encoder")


def test_translate_plots_a_grid_of_the_layers_and_heads_asked_for(
    models, run_command, tmp_path, monkeypatch
):
    """One image a line with a translation, its panels those `panels` gives; the command's
    light copies of the kinds and of "mean" are the library's."""
    from seqtasks.attention.recording import KINDS
    from seqtasks.cli import attention_options
    from seqtasks.io import plots
    from seqtasks.tasks.attentions import MEAN

    assert (attention_options.KINDS, attention_options.MEAN) == (KINDS, MEAN)
    model = models["transformer"]
    given = tmp_path / "in.de"
    given.write_text("".join(line + "\n" for line in SOURCES))
    drawn = {}
    real = plots.plot_attention_grid
    monkeypatch.setattr(
        plots, "plot_attention_grid", lambda panels, *a, **k: drawn.setdefault(a[2], panels)
    )
    folder = tmp_path / "plots"
    argv = ["translate", "--checkpoint", str(model.checkpoints[0]), "--input", str(given)]
    argv += ["--output", str(tmp_path / "out"), "--beam", "1", "--max-length", "10"]
    status, _, err = run_command(
        *argv, "--attention-plots", str(folder), "--layers", "0", "--heads", "mean,1",
        "--attention-kind", "encoder",
    )  # fmt: skip
    assert status == 0, err
    assert sorted(p.name for p in drawn) == ["line00001.png", "line00003.png"]  # not the empty
    translations = model.translate(SOURCES, beam=1, attention="all", max_length=10)
    panels = drawn[folder / "line00001.png"]
    expected = translations[0].attentions.panels("encoder", [0], ["mean", 1])
    assert [[t for t, _ in row] for row in panels] == [
        ["layer 0, mean of heads", "layer 0, head 1"]
    ]
    for (_, a), (_, b) in zip(panels[0], expected[0], strict=True):
        torch.testing.assert_close(a, b)
    path = real(panels, *translations[0].attentions.axes("encoder"), tmp_path / "real.png")
    assert path.stat().st_size > 1000  # the figure renders
    status, _, err = run_command(*argv, "--attention-plots", str(tmp_path / "p2"), "--layers", "5")
    assert status == 2 and "layer 5: the cross attention has 2 layers" in err, err
    assert not (tmp_path / "p2").exists()
    with pytest.raises(SystemExit):
        run_command(*argv, "--heads", "0")  # without --attention-plots


def test_an_ensembles_maps_are_its_members_mean_layer_by_layer(models):
    """As an ensemble's `attention` is its members' mean, so is each of its maps; members of
    other layers cannot be averaged and are refused by name."""
    one, other = models["transformer"], models["transformer_b"]
    ensemble = seqtasks.load([one.checkpoints[0], other.checkpoints[0]])
    (found,) = ensemble.translate(SOURCES[:1], beam=1, attention="all", max_length=10)
    source, target = one.task.src_tokenizer.encode(SOURCES[0]), [found.attentions.target[:-1]]
    ids = [one.task.tgt_tokenizer.sp.piece_to_id(p) for p in target[0]]
    (a,), (b,) = one.every_attention([source], [ids]), other.every_attention([source], [ids])
    for kind in ("encoder", "decoder", "cross"):
        for mine, x, y in zip(found.attentions.layers(kind), a[kind], b[kind], strict=True):
            torch.testing.assert_close(mine, (x + y) / 2, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        found.attentions.get("cross")[:-1], found.attention, rtol=1e-4, atol=1e-5
    )
    mixed = seqtasks.load([one.checkpoints[0], models["rnn"].checkpoints[0]])
    with pytest.raises(ValueError, match="the 2 members' encoder attention differs"):
        mixed.translate(SOURCES[:1], beam=1, attention="all", max_length=10)
