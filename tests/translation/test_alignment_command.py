"""`Translator.align` and `seqtasks evaluate alignment`: the decoder's attention while it reads a
translation is the attention it had while writing it, batching changes nothing, and the
command's AER is `score_alignments` of the model's links, written and read back in the Pharaoh
format; what cannot be scored is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_model_folders import BAHDANAU, RNN, TRANSFORMER, translator

import seqtasks
from seqtasks.search import SearchSettings
from seqtasks.translation.alignment import attention_links, read_links, score_alignments

SOURCES = ["Ein Hund rennt im Park .", "Zwei Männer spielen Fußball .", "Eine Frau ."]
TARGETS = ["A dog runs in the park .", "Two men play soccer .", "A woman ."]
GOLD = ["0-0 1-1 2-2 3-3 3?4 4-5 5-6", "0-0 1-1 2-2 3-3 4-4", "0-0 1-1 2-2"]


@pytest.fixture(scope="module", params=["rnn", "transformer"])
def model_path(request, toy_tokenizers, tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("aligners")
    if request.param == "rnn":
        return translator(folder / "rnn.ckpt", toy_tokenizers, encoder=RNN, decoder=BAHDANAU)
    parts = {
        part: {
            "class_path": f"seqtasks.{part}s.Transformer{part.title()}",
            "init_args": TRANSFORMER,
        }
        for part in ("encoder", "decoder")
    }
    return translator(folder / "transformer.ckpt", toy_tokenizers, **parts)


def test_the_attention_read_is_the_attention_written(model_path):
    """Teacher-forced over the model's own greedy outputs, the attention equals the search's
    step by step, and so the links equal those of the search's attention."""
    model = seqtasks.load(model_path)
    tokenizer = model.task.src_tokenizer
    sources = [tokenizer.encode(s) for s in SOURCES]
    found = model.search_sources(sources, SearchSettings(beam=1, max_length=12), attention=True)
    outputs = [nbest[0] for nbest in found]
    targets = [h.tokens for h in outputs]
    aligned = model.align(SOURCES, [model.task.tgt_tokenizer.decode(t) for t in targets])
    for hypothesis, alignment, ids in zip(outputs, aligned, sources, strict=True):
        weights = alignment.attention  # the one layer of these models: the top, all heads
        torch.testing.assert_close(weights, hypothesis.attention, rtol=1e-4, atol=1e-5)
        pieces = tokenizer.pieces(ids), model.task.tgt_tokenizer.pieces(hypothesis.tokens)
        assert attention_links(weights, *pieces) == attention_links(hypothesis.attention, *pieces)


def test_alignments_do_not_depend_on_the_batch(model_path):
    model = seqtasks.load(model_path)
    together = model.align(SOURCES, TARGETS, max_tokens=4000)
    alone = [model.align([s], [t], max_tokens=40)[0] for s, t in zip(SOURCES, TARGETS)]
    assert [a.links for a in together] == [a.links for a in alone]
    for a, b in zip(together, alone, strict=True):
        torch.testing.assert_close(a.attention, b.attention, rtol=1e-5, atol=1e-6)
        words = len(TARGETS[together.index(a)].split())
        assert len({j for _, j in a.links}) <= words  # a link per target word at most
    assert together[0].pharaoh == " ".join(f"{i}-{j}" for i, j in together[0].links)


def write(folder: Path, name: str, lines: list[str]) -> Path:
    path = folder / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_the_commands_aer_is_that_of_the_models_links(model_path, run_command, tmp_path):
    src, tgt = write(tmp_path, "s.de", SOURCES), write(tmp_path, "t.en", TARGETS)
    gold = write(tmp_path, "gold.align", GOLD)
    output = tmp_path / "model.align"
    status, out, err = run_command(
        "evaluate", "alignment", "--checkpoint", str(model_path), "--src", str(src),
        "--tgt", str(tgt), "--gold", str(gold), "--output", str(output), "--json",
    )  # fmt: skip
    assert status == 0, err
    links = [a.links for a in seqtasks.load(model_path).align(SOURCES, TARGETS)]
    truth = [read_links(line, "gold") for line in GOLD]
    expected = score_alignments(links, truth)
    report = json.loads(out.splitlines()[-1])
    assert report["aer"] == pytest.approx(expected.aer, abs=1e-6)
    assert (report["precision"], report["recall"]) == pytest.approx(
        (expected.precision, expected.recall), abs=1e-6
    )
    assert f"AER = {expected.aer:.2f}" in out
    written = output.read_text().splitlines()
    assert [read_links(line, "o").sure for line in written] == [set(x) for x in links]
    status, out, err = run_command(
        "evaluate", "alignment", "--alignments", str(output), "--gold", str(gold), "--json"
    )
    assert status == 0, err
    assert json.loads(out.splitlines()[-1])["aer"] == pytest.approx(expected.aer, abs=1e-6)


def test_what_cannot_be_scored_is_refused_in_one_line(model_path, run_command, tmp_path, capsys):
    src, tgt = write(tmp_path, "s.de", SOURCES), write(tmp_path, "t.en", TARGETS)
    gold = write(tmp_path, "gold.align", GOLD)
    short = write(tmp_path, "short.align", GOLD[:2])
    bad = write(tmp_path, "bad.align", [GOLD[0], "0-0 1=1", GOLD[2]])
    model = ("--checkpoint", str(model_path))
    cases = [
        ((*model, "--src", str(src), "--gold", str(gold)), "give --src and --tgt"),
        (("--alignments", str(gold), "--src", str(src), "--gold", str(gold)), "--src, --tgt"),
        ((*model, "--src", str(src), "--tgt", str(tgt), "--gold", str(gold), "--beam", "2"),
         "not from a search"),
        (("--alignments", str(short), "--gold", str(gold)),
         f"{gold} has 3 lines but {short} has 2"),
        (("--alignments", str(bad), "--gold", str(gold)), f"{bad}:2: '1=1' is not a link"),
    ]  # fmt: skip
    for argv, said in cases:
        try:
            status, _, err = run_command("evaluate", "alignment", *argv)
        except SystemExit as exit:  # the argument parser's refusals
            status, err = exit.code, capsys.readouterr().err
        assert status == 2, (argv, err)
        (line,) = [x for x in err.splitlines() if "error:" in x]
        assert said in line, line


def test_translate_writes_each_lines_alignment_by_the_attention_that_wrote_it(
    model_path, run_command, tmp_path
):
    lines = [SOURCES[0], "", SOURCES[1]]
    given = write(tmp_path, "in.de", lines)
    out, written = tmp_path / "out.en", tmp_path / "out.align"
    status, _, err = run_command(
        "translate", "--checkpoint", str(model_path), "--input", str(given),
        "--output", str(out), "--alignments", str(written), "--beam", "2", "--max-length", "12",
    )  # fmt: skip
    assert status == 0, err
    model = seqtasks.load(model_path)
    results = model.translate(lines, beam=2, max_length=12, attention=True)
    expected = []
    for line, best in zip(lines, results, strict=True):
        if best.attention is None:
            expected.append(set())
            continue
        source = model.source_pieces(line, max_length=12)[:-1]
        expected.append(attention_links(best.attention, source, best.tokens))
    assert [read_links(x, "o").sure for x in written.read_text().splitlines()] == expected
    assert expected[1] == set() and expected[0]  # the empty line aligns nothing
    assert out.read_text().splitlines() == [r.text for r in results]


def test_a_translation_longer_than_the_decoder_reads_is_refused_by_its_number(
    toy_tokenizers, tmp_path
):
    short = {"d_model": 16, "num_heads": 2, "num_layers": 1, "ff_dim": 32, "max_positions": 8}
    parts = {
        part: {"class_path": f"seqtasks.{part}s.Transformer{part.title()}", "init_args": short}
        for part in ("encoder", "decoder")
    }
    model = seqtasks.load(translator(tmp_path / "short.ckpt", toy_tokenizers, **parts))
    assert len(model.align(SOURCES[2:], ["A woman ."])[0].target) < 8  # fits
    with pytest.raises(ValueError, match=r"^translation 1 has \d+ pieces; .* reads at most 7$"):
        model.align(SOURCES[1:], ["A woman .", "A dog runs through the park in the snow ."])


@pytest.mark.parametrize("units", ["words", "pieces"])
def test_translates_alignments_count_the_target_units_asked_for(model_path, units):
    """`--target-units` reaches the links: a translation with a two-piece word (▁hou se) has
    one position fewer in words than in pieces."""
    from argparse import Namespace
    from types import SimpleNamespace

    from seqtasks.translation.command import alignments

    model = seqtasks.load(model_path)
    line = SOURCES[2]
    width = len(model.source_pieces(line))
    attention = torch.zeros(1, 4, width)  # one head; three pieces and the EOS row
    attention[:, :, 0] = 1.0  # every target piece on the first source word
    best = SimpleNamespace(
        attentions=SimpleNamespace(cross=[attention]), tokens=["▁the", "▁hou", "se"]
    )
    args = Namespace(
        max_length=None, target_units=units, alignment_layer=None, alignment_heads=None
    )
    written = alignments(model, [line], [best], args)
    assert written == {"words": "0-0 0-1\n", "pieces": "0-0 0-1 0-2\n"}[units]


@pytest.fixture(scope="module")
def two_layers(toy_tokenizers, tmp_path_factory) -> Path:
    torch.manual_seed(1)
    layers = TRANSFORMER | {"num_layers": 2}
    parts = {
        part: {"class_path": f"seqtasks.{part}s.Transformer{part.title()}", "init_args": layers}
        for part in ("encoder", "decoder")
    }
    return translator(tmp_path_factory.mktemp("two") / "t.ckpt", toy_tokenizers, **parts)


def test_alignments_come_from_the_layer_and_heads_asked_for(two_layers, run_command, tmp_path):
    """By default the penultimate layer, all heads (Garg et al.); `layer`/`heads` and the
    commands' --alignment-layer/--alignment-heads choose another; each equals the links of that
    map of `attention="all"`."""
    model = seqtasks.load(two_layers)
    found = model.translate(SOURCES, beam=1, max_length=12, attention="all")
    targets = [t.text for t in found]
    tokenizer = model.task.src_tokenizer
    target_tokenizer = model.task.tgt_tokenizer
    kept = [  # the outputs whose text reads back as the same pieces (untrained models' may not)
        i
        for i, t in enumerate(found)
        if target_tokenizer.pieces(target_tokenizer.encode(t.text)) == t.tokens
    ]
    assert kept
    for layer, heads in ((None, None), (-1, [1]), (0, [0, 1])):
        aligned = model.align(SOURCES, targets, layer=layer, heads=heads)
        for i in kept:
            source, translation, alignment = SOURCES[i], found[i], aligned[i]
            cross = translation.attentions.cross
            chosen = cross[0 if layer is None else layer][heads or slice(None)].mean(0)[:-1]
            torch.testing.assert_close(alignment.attention, chosen, rtol=1e-4, atol=1e-5)
            pieces = tokenizer.pieces(tokenizer.encode(source)), translation.tokens
            assert set(alignment.links) == attention_links(chosen, *pieces)
    given = write(tmp_path, "in.de", SOURCES)
    out, written = tmp_path / "out.en", tmp_path / "out.align"
    status, _, err = run_command(
        "translate", "--checkpoint", str(two_layers), "--input", str(given), "--output",
        str(out), "--alignments", str(written), "--beam", "1", "--max-length", "12",
        "--alignment-layer", "-1", "--alignment-heads", "1",
    )  # fmt: skip
    assert status == 0, err
    expected = [set(a.links) for a in model.align(SOURCES, targets, layer=-1, heads=[1])]
    assert [read_links(x, "o").sure for x in written.read_text().splitlines()] == expected
    tgt, gold = write(tmp_path, "t.en", targets), write(tmp_path, "gold.align", GOLD)
    status, report, err = run_command(
        "evaluate", "alignment", "--checkpoint", str(two_layers), "--src", str(given),
        "--tgt", str(tgt), "--gold", str(gold), "--alignment-layer", "-1",
        "--alignment-heads", "1", "--json",
    )  # fmt: skip
    assert status == 0, err
    truth = [read_links(line, "gold") for line in GOLD]
    assert json.loads(report.splitlines()[-1])["aer"] == pytest.approx(
        score_alignments(expected, truth).aer, abs=1e-6
    )
    assert "read from the cross-attention of layer -1, head 1" in report


def test_a_layer_or_head_the_model_has_not_is_refused_and_nothing_written(
    two_layers, run_command, tmp_path, capsys
):
    given = write(tmp_path, "in.de", SOURCES)
    out, written = tmp_path / "out.en", tmp_path / "out.align"
    for option, value, said in (
        ("--alignment-layer", "2", "layer 2: the decoder's cross-attention has 2 layers"),
        ("--alignment-heads", "0,2", "heads [0, 2]: the decoder's cross-attention has 2 heads"),
    ):
        status, _, err = run_command(
            "translate", "--checkpoint", str(two_layers), "--input", str(given), "--output",
            str(out), "--alignments", str(written), option, value,
        )  # fmt: skip
        assert status == 2 and said in err, err
        assert not out.exists() and not written.exists()
    with pytest.raises(SystemExit):
        run_command("translate", "--checkpoint", str(two_layers), "--alignment-heads", "one")
    with pytest.raises(SystemExit) as refused:
        run_command(
            "evaluate", "alignment", "--alignments", str(given), "--gold", str(given),
            "--alignment-layer", "0",
        )  # fmt: skip
    assert refused.value.code == 2
    assert "--alignment-layer/--alignment-heads are for --checkpoint" in capsys.readouterr().err
