"""`seqtasks.load` and the models it returns, and ensembles (`seqtasks.search.ensemble`), on
tiny untrained checkpoints written the way the CLI writes them."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
from conftest import save_checkpoint
from PIL import Image
from test_bad_input import LUONG, RNN, captioning_checkpoint, parsing_checkpoint

import seqtasks
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.search import SearchSettings, search
from seqtasks.search.ensemble import EnsembleDecoder, EnsembleMemory
from seqtasks.translation.task import TranslationTask

TRANSFORMER = {"d_model": 16, "num_heads": 2, "num_layers": 1, "ff_dim": 32}
SENTENCES = ["Ein Hund rennt.", "", "Zwei Männer spielen Fußball im Park.", "Eine Frau."]


def translation(path, tokenizers, encoder=RNN, decoder=LUONG, seed=0, **settings):
    torch.manual_seed(seed)
    src, tgt = tokenizers
    hparams = {"_class_path": "seqtasks.translation.task.TranslationTask", "encoder": encoder}
    hparams |= {"decoder": decoder, "src_vocab_size": src.vocab_size}
    hparams |= {"tgt_vocab_size": tgt.vocab_size, **settings}
    return save_checkpoint(TranslationTask, hparams, lambda m: m.set_tokenizers(src, tgt), path)


DECODER_ONLY = {  # a single network, the source as its prompt
    "encoder": {"class_path": "seqtasks.encoders.PromptEncoder", "init_args": {"embed_dim": 16}},
    "decoder": {"class_path": "seqtasks.decoders.PromptedTransformerDecoder",
                "init_args": TRANSFORMER},
}  # fmt: skip


@pytest.fixture(scope="module")
def checkpoints(toy_tokenizers, tmp_path_factory):
    """Four translators (two RNN, one Transformer, one decoder-only: an ensemble may mix
    architectures), a parser, a captioner, and a translator with other tokenisers."""
    folder = tmp_path_factory.mktemp("api")
    transformer = {
        "encoder": {"class_path": "seqtasks.encoders.TransformerEncoder", "init_args": TRANSFORMER},
        "decoder": {"class_path": "seqtasks.decoders.TransformerDecoder", "init_args": TRANSFORMER},
    }
    torch.manual_seed(0)
    return {
        "rnn": translation(folder / "rnn.ckpt", toy_tokenizers),
        "rnn2": translation(folder / "rnn2.ckpt", toy_tokenizers, seed=1),
        "transformer": translation(folder / "t.ckpt", toy_tokenizers, **transformer, seed=2),
        "decoder_only": translation(folder / "d.ckpt", toy_tokenizers, **DECODER_ONLY, seed=3),
        "other": translation(folder / "other.ckpt", toy_tokenizers[::-1]),
        "parsing": parsing_checkpoint(folder / "parsing.ckpt"),
        "captioning": captioning_checkpoint(folder / "captioning.ckpt"),
    }


# ---- one model ----------------------------------------------------------------------------------
def test_load_gives_the_model_of_the_checkpoints_task(checkpoints):
    assert isinstance(seqtasks.load(checkpoints["rnn"], device="cpu"), seqtasks.Translator)
    assert isinstance(seqtasks.load(checkpoints["parsing"]), seqtasks.Parser)
    assert isinstance(seqtasks.load(str(checkpoints["captioning"])), seqtasks.Captioner)
    model = seqtasks.load(checkpoints["rnn"])
    assert not model.task.training and model.device == torch.device("cpu")


def test_translate_equals_the_tasks_search_with_n_best_alternatives(checkpoints):
    """Each result is the task's best hypothesis; `alternatives` are its next best, in order."""
    model = seqtasks.load(checkpoints["rnn"])
    results = model.translate(SENTENCES, beam=4, n_best=3)
    settings = model.search_settings(beam=4, n_best=3)
    assert len(results) == len(SENTENCES) and results[1].text == ""
    for sentence, result in zip(SENTENCES, results):
        if not sentence:
            continue
        src = torch.tensor([model.task.src_tokenizer.encode(sentence) + [EOS_ID]])
        with torch.no_grad():
            (nbest,) = search(model.task.decoder, model.task.encoder(src, src != PAD_ID), settings)
        got = [(t.text, t.score) for t in [result, *result.alternatives]]
        decode = model.task.tgt_tokenizer.decode
        assert got == [(decode(h.tokens), pytest.approx(h.score, abs=1e-5)) for h in nbest]
    assert all(len(r.alternatives) == 2 for i, r in enumerate(results) if i != 1)
    scores = [t.score for t in [results[0], *results[0].alternatives]]
    assert scores == sorted(scores, reverse=True)


def test_a_call_searches_with_the_checkpoints_settings_but_for_what_it_gives(
    checkpoints, toy_tokenizers, tmp_path, monkeypatch
):
    """Without beam, n_best or stop a call searches as the checkpoint says (its `test_beam`,
    `beam_stop`, `length_alpha`, length limits); what a call gives replaces only that."""
    import seqtasks.search.by_settings as base

    path = translation(
        tmp_path / "own.ckpt", toy_tokenizers, test_beam=3, beam_stop="heuristic", length_alpha=0.5
    )
    model = seqtasks.load(path)
    own = SearchSettings(3, 0.5, "heuristic", 1.5, 10)
    assert model.search_settings() == own
    assert model.search_settings(beam=4, n_best=2) == SearchSettings(
        4, 0.5, "heuristic", 1.5, 10, 2
    )
    searched = []  # (beam, α, n-best, stop) of each beam search, "greedy" for each greedy one
    beam_search, greedy = base.beam_search, base.greedy

    def recording_beam(decoder, memory, settings, limits, **options):
        searched.append((settings.beam, settings.length_alpha, settings.n_best, settings.stop))
        return beam_search(decoder, memory, settings, limits, **options)

    def recording_greedy(*args, **options):
        searched.append("greedy")
        return greedy(*args, **options)

    monkeypatch.setattr(base, "beam_search", recording_beam)
    monkeypatch.setattr(base, "greedy", recording_greedy)
    default, three = model.translate(SENTENCES[:1]), model.translate(SENTENCES[:1], beam=3)
    assert default == three and searched == [(3, 0.5, 1, "heuristic")] * 2
    model.translate(SENTENCES[:1], beam=1)
    model.translate(SENTENCES[:1], n_best=2, stop="exact")
    assert searched[2:] == ["greedy", (3, 0.5, 2, "exact")]
    assert seqtasks.load(checkpoints["parsing"]).search_settings().beam == 10  # ParsingTask's
    assert seqtasks.load(checkpoints["captioning"]).search_settings().beam == 3
    with pytest.raises(ValueError, match="^n_best=4 cannot exceed beam=3$"):
        model.translate(SENTENCES[:1], n_best=4)  # over the checkpoint's beam


def test_translate_attention_has_a_row_per_piece_and_a_column_per_source_piece(checkpoints):
    model = seqtasks.load(checkpoints["rnn"])
    (result,) = model.translate(["Ein Hund rennt."], beam=2, attention=True)
    rows, columns = result.attention.shape
    assert rows == len(result.tokens) and columns == len(model.source_pieces("Ein Hund rennt."))
    assert torch.allclose(result.attention.sum(dim=1), torch.ones(rows), atol=1e-5)


def test_bad_arguments_are_refused_by_name(checkpoints):
    model = seqtasks.load(checkpoints["rnn"])
    with pytest.raises(TypeError, match="not a single string"):
        model.translate("Ein Hund rennt.")
    with pytest.raises(ValueError, match="n_best=3 cannot exceed beam=2"):
        model.translate(["Ein Hund."], beam=2, n_best=3)
    with pytest.raises(CheckpointError, match="is a parsing checkpoint, not a translation one"):
        seqtasks.load(checkpoints["parsing"], task="translation")
    folder = checkpoints["rnn"].parent
    with pytest.raises(CheckpointError) as error:  # was "no such checkpoint", though it exists
        seqtasks.load(folder)
    assert str(error.value) == (
        f"{folder} is a folder, not a checkpoint file: name one of the checkpoints in it "
        "(captioning.ckpt, d.ckpt, other.ckpt, parsing.ckpt, rnn.ckpt)"
    )
    for size in ("max_length", "max_tokens"):
        for value in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match=f"^{size} must be a positive integer, got"):
                model.translate(["Ein Hund."], **{size: value})
    with pytest.raises(ValueError, match="^batch_size must be a positive integer, got 0"):
        seqtasks.load(checkpoints["captioning"]).caption([], batch_size=0)


def test_text_a_tokeniser_cannot_read_is_refused_naming_the_sentence(checkpoints):
    """A lone surrogate (JSON's "\ud800", or bytes read with surrogateescape) made the
    sentencepiece tokeniser fail deep inside a batch, taking the other sentences with it."""
    translator, parser = seqtasks.load(checkpoints["rnn"]), seqtasks.load(checkpoints["parsing"])
    with pytest.raises(ValueError) as error:
        translator.translate(["Ein Hund.", "Zwei \ud800 Männer"])
    assert str(error.value) == (
        "sentence 1 is not valid Unicode text: it holds an unpaired surrogate U+D800 at character 5"
    )
    with pytest.raises(TypeError, match="^sentence 1 is a NoneType, not a string"):
        translator.translate(["Ein Hund.", None])
    with pytest.raises(ValueError, match="^sentence 0 is not valid Unicode text: .* U\\+DC80"):
        parser.parse(["He \udc80 left ."])
    with pytest.raises(ValueError, match="^sentence 0 is not valid Unicode text: .* U\\+DFFF"):
        parser.parse([["He", "\udfff"]])


@pytest.mark.parametrize(
    "tokens, reason",
    [
        (["", "left"], "token 0 is empty"),
        (["He", "left", " "], "token 2 (' ') holds white space"),
        (["He left", "."], "token 0 ('He left') holds white space"),
        (["He\u00a0left"], "token 0 ('He\\xa0left') holds white space"),
        (["He", "left\n"], "token 1 ('left\\n') holds white space"),
    ],
)
def test_tokens_that_cannot_be_leaves_of_a_tree_are_refused(checkpoints, tokens, reason):
    """A tree over such a token reads back with other leaves than the words sent."""
    parser = seqtasks.load(checkpoints["parsing"])
    with pytest.raises(ValueError) as error:
        parser.parse([["Fine", "."], tokens])
    assert str(error.value).startswith(f"sentence 1: {reason}")
    with pytest.raises(TypeError, match="sentence 0 must be a string or a list of string tokens"):
        parser.parse([["He", 3]])


def test_sources_and_outputs_stay_within_the_positions_a_transformer_has(
    toy_tokenizers, tmp_path, caplog
):
    """A source longer than the encoder's `max_positions` is cut there (with the warning of an
    over-long line) whatever `max_length` asks, and search never takes more steps than the
    decoder has positions: both used to fail inside the model ("exceeds max_positions")."""
    settings = TRANSFORMER | {"max_positions": 12}
    parts = {
        "encoder": {"class_path": "seqtasks.encoders.TransformerEncoder", "init_args": settings},
        "decoder": {"class_path": "seqtasks.decoders.TransformerDecoder", "init_args": settings},
    }
    model = seqtasks.load(translation(tmp_path / "short.ckpt", toy_tokenizers, **parts))
    long = "Zwei Männer spielen Fußball im Park. " * 5
    (result,) = model.translate([long], beam=2, max_length=500, attention=True)
    assert "cut to 11:" in caplog.text
    assert result.attention.shape[1] == 12 == len(model.source_pieces(long, max_length=500))
    assert len(result.tokens) == 12  # cut at the decoder's positions (an untrained model repeats)
    (greedy,) = model.translate([long], beam=1, max_length=500)
    assert len(greedy.tokens) == 12


def test_a_sentence_longer_than_a_transformer_parser_reads_is_refused_or_skipped(
    tmp_path, capsys, monkeypatch
):
    """A tree must cover every word, so a parser cannot cut a sentence as a translator cuts a
    source: the API refuses it naming it (it used to fail inside the encoder, after the
    batches before), and apps/parse.py skips it with a note, as one over --max-words."""
    import sys

    from conftest import load_script
    from test_bad_input import sample_trees

    from seqtasks.parsing.task import ParsingTask
    from seqtasks.parsing.vocabulary import ParsingVocabulary

    encoder = {
        "class_path": "seqtasks.encoders.TransformerEncoder",
        "init_args": TRANSFORMER | {"max_positions": 6},
    }
    vocabulary = ParsingVocabulary.build(sample_trees(3), tags=False, reverse=False, min_count=1)
    path = save_checkpoint(
        ParsingTask,
        {"_class_path": "seqtasks.parsing.task.ParsingTask", "encoder": encoder, "decoder": LUONG}
        | {"src_vocab_size": len(vocabulary.words), "tgt_vocab_size": len(vocabulary.tokens)},
        lambda model: model.set_vocabulary(vocabulary),
        tmp_path / "short.ckpt",
    )
    parser = seqtasks.load(path)
    assert parser.max_words == 5
    assert parser.parse([["He", "left", "."]], beam=2)[0].tree.leaves() == ["He", "left", "."]
    with pytest.raises(ValueError) as error:
        parser.parse([["He", "left", "."], "He left the board quietly .".split()], beam=2)
    assert str(error.value) == (
        "sentence 1 has 6 tokens; this parser reads at most 5 (its encoder's max_positions, "
        "less one for the EOS)"
    )
    lines = "He left .\nHe left the board quietly .\nShe came .\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    app = load_script("apps/parse.py")
    assert app.main(["--checkpoint", str(path), "--pretokenized", "--beam", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.split("\n")[1] == "" and len(out.splitlines()) == 3
    assert "note: sentence 2 has 6 tokens, more than the model reads (5); not parsed" in err


def test_the_stop_rule_of_a_call_or_of_the_model_reaches_beam_search(
    checkpoints, monkeypatch, tmp_path, capsys
):
    """`stop=` of each API call (`--stop` of the apps), else the task's `beam_stop`, is the
    rule beam search gets; an unknown one is refused by name, by the API, the task and apps."""
    import seqtasks.search.by_settings as base

    rules = []

    def recording(decoder, memory, settings, limits, **options):
        rules.append(settings.stop)
        return beam_search(decoder, memory, settings, limits, **options)

    beam_search = base.beam_search
    monkeypatch.setattr(base, "beam_search", recording)
    translator, parser = seqtasks.load(checkpoints["rnn"]), seqtasks.load(checkpoints["parsing"])
    captioner = seqtasks.load(checkpoints["captioning"])
    pixels = torch.rand(1, 3, captioner.image_size, captioner.image_size)
    translator.translate(["Ein Hund."], beam=2)
    translator.translate(["Ein Hund."], beam=2, stop="heuristic")
    parser.parse(["He said no ."], beam=2, stop="heuristic")
    captioner.caption(pixels, beam=2, stop="heuristic")
    source = tmp_path / "src.de"
    source.write_text("Ein Hund.\n", encoding="utf-8")
    from seqtasks.translation import command as translate

    options = ["--checkpoint", str(checkpoints["rnn"]), "--input", str(source), "--beam", "2"]
    assert translate.main([*options, "--stop", "heuristic"]) == 0
    translator.task.test_settings = translator.task.test_settings.override(stop="heuristic")
    translator.translate(["Ein Hund."], beam=2)
    assert rules == ["exact", "heuristic", "heuristic", "heuristic", "heuristic", "heuristic"]
    with pytest.raises(ValueError, match="stop must be one of exact, heuristic, got 'fast'"):
        translator.translate(["Ein Hund."], stop="fast")
    with pytest.raises(ValueError, match="beam_stop must be one of exact, heuristic"):
        TranslationTask(RNN, LUONG, 10, 10, beam_stop="fast")
    with pytest.raises(SystemExit) as exit_:
        translate.parse_args([*options, "--stop", "fast"])
    assert exit_.value.code == 2
    assert "argument --stop: invalid choice: 'fast'" in capsys.readouterr().err


def test_load_of_a_damaged_or_foreign_file_says_what_is_wrong(checkpoints, tmp_path):
    """The messages of docs/bad_input.md, through `seqtasks.load`."""
    empty = tmp_path / "empty.ckpt"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty.ckpt .*the file is empty"):
        seqtasks.load(empty)
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(checkpoints["rnn"].read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="cut.ckpt .*without its table of contents"):
        seqtasks.load(cut)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"weights": torch.ones(2)}, foreign)
    with pytest.raises(CheckpointError, match="foreign.ckpt is not a Lightning checkpoint"):
        seqtasks.load(foreign)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        seqtasks.load(tmp_path / "missing.ckpt")


def test_parse_takes_text_or_tokens_and_gives_trees_over_them(checkpoints):
    model = seqtasks.load(checkpoints["parsing"])
    text, tokens = "He said (quietly) no.", ["He", "said", "-LRB-", "quietly", "-RRB-", "no", "."]
    assert model.tokens(text) == tokens
    by_text, by_tokens, empty = model.parse([text, ["He", "said", "(quietly)", "no", "."], []])
    assert by_text.tree.leaves() == tokens and by_text.text.startswith("(TOP")
    assert by_tokens.tree.leaves() == ["He", "said", "-LRB-quietly-RRB-", "no", "."]
    assert empty.text == "(TOP )"
    (best,) = model.parse([text], beam=3, n_best=2)
    assert len(best.alternatives) == 1 and best.alternatives[0].tree.leaves() == tokens


def test_caption_reads_paths_bytes_images_and_tensors_alike(checkpoints, tmp_path):
    model = seqtasks.load(checkpoints["captioning"])
    picture = Image.effect_noise((40, 30), 60).convert("RGB")
    path = tmp_path / "noise.png"
    picture.save(path)
    encoded = path.read_bytes()
    results = model.caption([path, str(path), encoded, picture], beam=2)
    tensor = model.caption(model.read([path]), beam=2)
    assert len({(r.text, round(r.score, 5)) for r in results + tensor}) == 1
    assert picture.size == (40, 30)  # the caller's image is not closed or changed
    with pytest.raises(OSError, match=r"cannot read image #1 \(9 bytes\)"):
        model.caption([path, b"not a png"])


# ---- ensembles ---------------------------------------------------------------------------------
def test_ensemble_step_is_the_normalised_geometric_mean_of_the_members(checkpoints):
    """log p(y) = log_softmax((1/N) Σ log p_n(y)), checked against Π p_n^(1/N) / Z worked out
    with probabilities."""
    model = seqtasks.load([checkpoints["rnn"], checkpoints["transformer"]])
    task = model.task
    src = torch.tensor([[5, 9, 12, EOS_ID], [7, 8, EOS_ID, PAD_ID]])
    memory = task.encoder(src, src != PAD_ID)
    assert isinstance(memory, EnsembleMemory) and len(memory.members) == 2
    logits, state, _ = task.decoder.step(torch.full((2,), BOS_ID), task.decoder.start(memory))
    probs = [
        member.step(torch.full((2,), BOS_ID), member.start(own))[0].double().softmax(-1)
        for member, own in zip(task.decoder.members, memory.members)
    ]
    geometric = (probs[0] * probs[1]).sqrt()
    expected = geometric / geometric.sum(-1, keepdim=True)
    assert torch.allclose(logits.double().log_softmax(-1).exp(), expected, atol=1e-6)


def test_ensemble_greedy_output_is_argmax_of_the_members_teacher_forced_mean(checkpoints):
    """The ensemble's greedy translation, token by token, is the argmax of the mean of the
    members' teacher-forced log-probabilities (their `forward`, not the search's steps), and its
    score is the sum of the chosen tokens' renormalised log-probabilities."""
    paths = [checkpoints[name] for name in ("rnn", "rnn2", "transformer", "decoder_only")]
    ensemble = seqtasks.load(paths)
    members = [seqtasks.load(path).task for path in paths]
    for sentence in SENTENCES[0], SENTENCES[2]:
        src = torch.tensor([members[0].src_tokenizer.encode(sentence) + [EOS_ID]])
        with torch.no_grad():
            memory = ensemble.task.encoder(src, src != PAD_ID)
            ((best,),) = search(ensemble.task.decoder, memory, ensemble.search_settings(beam=1))
        (result,) = ensemble.translate([sentence], beam=1)
        assert result.text == members[0].tgt_tokenizer.decode(best.tokens)
        tgt_in = torch.tensor([[BOS_ID, *best.tokens]])
        log_probs = [
            m.decoder(m.encoder(src, src != PAD_ID), tgt_in).logits[0].log_softmax(-1)
            for m in members
        ]
        mean = torch.stack(log_probs).mean(0).log_softmax(-1)
        targets = [*best.tokens, EOS_ID] if best.finished else best.tokens  # or cut at its limit
        chosen = mean[torch.arange(len(targets)), torch.tensor(targets)]
        assert torch.all(chosen >= mean.max(-1).values[: len(targets)] - 1e-4)
        assert result.score == pytest.approx(float(chosen.sum()), abs=1e-3)


def test_an_ensemble_of_one_model_twice_is_that_model(checkpoints):
    alone = seqtasks.load(checkpoints["transformer"]).translate(SENTENCES, beam=3, n_best=2)
    twice = seqtasks.load([checkpoints["transformer"]] * 2).translate(SENTENCES, beam=3, n_best=2)
    for a, b in zip(alone, twice):
        assert [t.text for t in [a, *a.alternatives]] == [t.text for t in [b, *b.alternatives]]
        assert a.score == pytest.approx(b.score, abs=1e-4)


def test_ensemble_members_must_share_task_and_vocabularies(checkpoints):
    with pytest.raises(
        CheckpointError, match="other.ckpt with .*rnn.ckpt: source tokenizer: rnn.ckpt unigram 250"
    ):
        seqtasks.load([checkpoints["rnn"], checkpoints["other"]])
    with pytest.raises(CheckpointError, match="it is a parsing checkpoint, not a translation one"):
        seqtasks.load([checkpoints["rnn"], checkpoints["parsing"]])
    task = seqtasks.load(checkpoints["rnn"]).task
    src = torch.tensor([[5, EOS_ID]])
    with pytest.raises(TypeError, match="EnsembleMemory"):
        EnsembleDecoder([task.decoder]).start(task.encoder(src, src != PAD_ID))


def test_ensembles_parse_and_caption_too(checkpoints):
    parser = seqtasks.load([checkpoints["parsing"]] * 2)
    (tree,) = parser.parse(["A dog runs ."], beam=2)
    assert tree.tree.leaves() == ["A", "dog", "runs", "."]
    captioner = seqtasks.load([checkpoints["captioning"]] * 2)
    image = Image.new("RGB", (32, 32), "red")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    (alone,) = seqtasks.load(checkpoints["captioning"]).caption([image], beam=2, attention=True)
    (both,) = captioner.caption([buffer.getvalue()], beam=2, attention=True)
    assert both.text == alone.text and math.isclose(both.score, alone.score, abs_tol=1e-4)
    assert torch.allclose(both.attention, alone.attention, atol=1e-5)


def test_the_apps_decode_an_ensemble_as_the_api_does(checkpoints, tmp_path, capsys, monkeypatch):
    """`apps/translate.py --checkpoint A B` prints the API's ensemble translations, and
    `apps/evaluate.py … --ensemble` scores them as one model."""
    from conftest import load_script

    pair = [str(checkpoints["rnn"]), str(checkpoints["transformer"])]
    expected = [t.text for t in seqtasks.load(pair).translate(SENTENCES, beam=3)]
    alone = [t.text for t in seqtasks.load(pair[0]).translate(SENTENCES, beam=3)]
    assert expected != alone  # so that an app reading only the first checkpoint would fail
    source, reference = tmp_path / "src.de", tmp_path / "ref.en"
    source.write_text("".join(f"{s}\n" for s in SENTENCES), encoding="utf-8")
    reference.write_text("".join(f"{t}\n" for t in expected), encoding="utf-8")
    translate = load_script("apps/translate.py")
    assert translate.main(["--checkpoint", *pair, "--beam", "3", "--input", str(source)]) == 0
    assert capsys.readouterr().out == "".join(f"{t}\n" for t in expected)
    evaluate = load_script("apps/evaluate.py")
    options = ["--src", str(source), "--ref", str(reference), "--beam", "3", "--json"]
    assert evaluate.main(["translation", "--checkpoint", *pair, "--ensemble", *options]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(report["models"]) == 1 and report["bleu"] == pytest.approx(100.0)
