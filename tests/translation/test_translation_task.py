"""TranslationTask and the `Translator` around it: translating, and checkpoints that carry
their tokenisers."""

from __future__ import annotations

import functools
import logging
import re

import lightning as L
import pytest
import sacrebleu
import torch
from conftest import validate_counting_encodings

from seqtasks.attention.scores import GeneralAttention
from seqtasks.cli.report_progress import VARIABLE, ReportProgress, counting_batches
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders import BahdanauDecoder, LuongDecoder, TransformerDecoder
from seqtasks.encoders import RNNEncoder, TransformerEncoder
from seqtasks.search import run_batches
from seqtasks.translation.data import TranslationData
from seqtasks.translation.task import TranslationTask
from seqtasks.translation.translator import Translator


def make_task(tokenizers, decoder="bahdanau", **kwargs) -> TranslationTask:
    torch.manual_seed(0)
    src, tgt = tokenizers
    decoders = {
        "bahdanau": functools.partial(
            BahdanauDecoder, embed_dim=16, hidden_size=32, readout_dim=16, dropout=0.1
        ),
        "luong": functools.partial(
            LuongDecoder, embed_dim=16, hidden_size=32, attention=GeneralAttention
        ),
    }
    task = TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=16, hidden_size=16, dropout=0.1),
        decoder=decoders[decoder],
        src_vocab_size=src.vocab_size,
        tgt_vocab_size=tgt.vocab_size,
        **kwargs,
    )
    task.set_tokenizers(src, tgt)
    return task


@pytest.fixture(scope="module")
def task(toy_tokenizers):
    return make_task(toy_tokenizers)


@pytest.fixture(scope="module")
def translator(task):
    return Translator(task, [])


def nbest(translation) -> list:
    """A translation and its alternatives, best first."""
    return [translation, *translation.alternatives]


def test_model_is_built_from_the_factories(task, toy_tokenizers):
    assert task.encoder.embedding.num_embeddings == toy_tokenizers[0].vocab_size
    assert task.decoder.vocab_size == toy_tokenizers[1].vocab_size
    assert task.encoder.out_dim == 32


def test_translate_keeps_lines_and_maps_empty_to_empty(translator, task, multi30k_lines):
    sentences = [multi30k_lines["de"][0], "", multi30k_lines["de"][1], "   ", "Ein Hund."]
    results = translator.translate(sentences, beam=2, max_length=50)
    assert len(results) == len(sentences)
    assert all(not r.alternatives for r in results)
    assert results[1].text == "" and results[3].text == ""
    for i in (0, 2, 4):
        best = results[i]
        assert isinstance(best.text, str)
        assert best.score < 0
        assert (
            len(best.tokens) <= int(1.5 * (len(task.src_tokenizer.encode(sentences[i])) + 1)) + 10
        )
    # Order and batching do not change a sentence's translation.
    (alone,) = translator.translate([sentences[2]], beam=2, max_length=50)
    assert alone.text == results[2].text
    assert alone.score == pytest.approx(results[2].score, abs=1e-4)


def test_translate_in_parallel_workers_like_one_batch_at_a_time(translator, multi30k_lines):
    """Small batches shared among one-core worker threads give the same n-best lists."""
    sentences = multi30k_lines["de"][:12] + [""]
    kwargs = dict(beam=3, n_best=2, max_tokens=40, max_length=50)
    alone = list(map(nbest, translator.translate(sentences, workers=1, **kwargs)))
    threads = torch.get_num_threads()
    together = list(map(nbest, translator.translate(sentences, workers=3, **kwargs)))
    assert torch.get_num_threads() == threads
    assert [[t.text for t in r] for r in together] == [[t.text for t in r] for r in alone]
    for mine, theirs in zip(together, alone):
        assert [t.score for t in mine] == pytest.approx([t.score for t in theirs], abs=1e-4)


def test_run_batches_passes_errors_on_and_restores_threads():
    threads = torch.get_num_threads()
    done = []

    def work(batch):
        if batch == [3]:
            raise ValueError("bad batch")
        done.append(batch)

    with pytest.raises(ValueError, match="bad batch"):
        run_batches(work, [[1], [2], [3], [4]], workers=2)
    assert torch.get_num_threads() == threads
    run_batches(work, [[5]], workers=2)  # one batch: run in the caller's thread
    assert [5] in done


def test_translate_cuts_a_very_long_line(translator, task, caplog):
    line = " ".join(["Hund"] * 1000)
    assert len(task.src_tokenizer.encode(line)) >= 1000
    with caplog.at_level(logging.WARNING):
        results = translator.translate([line, "Ein Hund."], beam=1, max_length=60)
    assert len(results) == 2
    assert any("cut to 60" in record.getMessage() for record in caplog.records)
    assert len(results[0].tokens) <= int(1.5 * 61) + 10
    pieces = translator.source_pieces(line, max_length=60)
    assert pieces[-1] == task.src_tokenizer.pieces([3])[0] and len(pieces) == 61


def test_translate_n_best_and_attention(translator, multi30k_lines):
    sentences = [multi30k_lines["de"][3], "", multi30k_lines["de"][4]]
    found = translator.translate(sentences, beam=4, n_best=3, max_length=50, attention=True)
    results = list(map(nbest, found))
    assert [len(r) for r in results] == [3, 1, 3]  # nothing has no other translation
    assert results[1][0].text == "" and results[1][0].tokens == []
    for i in (0, 2):
        scores = [t.score for t in results[i]]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(t.tokens) for t in results[i]}) == 3
        columns = len(translator.source_pieces(sentences[i]))
        for translation in results[i]:
            assert translation.attention.shape == (len(translation.tokens), columns)


def test_tokenisers_must_match_the_vocabularies(task, toy_tokenizers):
    from seqtasks.data.tokenizer import train_sentencepiece

    src, _ = toy_tokenizers
    smaller = train_sentencepiece(["ein hund läuft", "zwei katzen schlafen"] * 20, 30)
    assert smaller.vocab_size != task.hparams.tgt_vocab_size
    with pytest.raises(ValueError, match="vocabularies"):
        task.set_tokenizers(src, smaller)
    assert task.tgt_tokenizer is toy_tokenizers[1], "a rejected tokeniser is not kept"


def task_without_tokenisers(tokenizers) -> TranslationTask:
    """A tiny task sized for `tokenizers` that was never given them."""
    src, tgt = tokenizers
    return TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=8, hidden_size=8),
        decoder=functools.partial(BahdanauDecoder, embed_dim=8, hidden_size=8, readout_dim=8),
        src_vocab_size=src.vocab_size,
        tgt_vocab_size=tgt.vocab_size,
    )


def test_translate_without_tokenisers_says_so(toy_tokenizers):
    bare = task_without_tokenisers(toy_tokenizers)
    with pytest.raises(ValueError, match="^the model has no tokenisers: load it from a checkpoint"):
        Translator(bare, [])


# ---- checkpoints --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_checkpoint(toy_data_dir, tmp_path_factory):
    """A checkpoint written by a two-step Lightning run on the toy corpus."""
    root = tmp_path_factory.mktemp("run")
    data = TranslationData(str(toy_data_dir), max_tokens=300)
    model = TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=16, hidden_size=16),
        decoder=functools.partial(LuongDecoder, embed_dim=16, hidden_size=32),
        src_vocab_size=data.src_vocab_size,
        tgt_vocab_size=data.tgt_vocab_size,
        val_beam=2,
    )
    trainer = L.Trainer(
        max_steps=2,
        limit_val_batches=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 2
    saved = list(root.glob("**/*.ckpt"))
    assert saved, "the default ModelCheckpoint wrote nothing"
    path = root / "explicit.ckpt"
    trainer.save_checkpoint(path)
    return path, model


def test_checkpoint_carries_tokenisers(trained_checkpoint, toy_tokenizers, multi30k_lines):
    path, trained = trained_checkpoint
    stored = torch.load(path, map_location="cpu", weights_only=False)["seqtasks"]
    assert stored["task"] == "translation"
    assert stored["src_tokenizer"] == toy_tokenizers[0].proto
    assert stored["tgt_tokenizer"] == toy_tokenizers[1].proto

    # Built in Python, the hyperparameters hold functools.partial factories, which torch's
    # weights-only unpickler refuses (CLI checkpoints hold plain config: see test_cli.py).
    loaded = TranslationTask.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    assert loaded.src_tokenizer.proto == toy_tokenizers[0].proto
    assert loaded.tgt_tokenizer.proto == toy_tokenizers[1].proto
    for name, tensor in trained.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, msg=name)
    sentences = multi30k_lines["de"][10:13]
    ours = Translator(trained, []).translate(sentences, beam=2, max_length=50)
    theirs = Translator(loaded, []).translate(sentences, beam=2, max_length=50)
    assert [r.text for r in theirs] == [r.text for r in ours]


def test_validation_scores_equal_scores_worked_out_another_way(
    trained_checkpoint, toy_data_dir, toy_tokenizers, monkeypatch
):
    """`validate` on the toy val split (20 pairs) against the same figures computed another
    way: sacreBLEU called directly on `translate`'s output (one sentence at a time, beam 2 as
    `val_beam`), and the label-smoothed cross-entropy per target token summed sentence by
    sentence without padding. The encoder runs once per batch: the loss and the search share
    its output."""
    _, model = trained_checkpoint
    data = TranslationData(str(toy_data_dir), max_tokens=300)
    metrics, encodings = validate_counting_encodings(model, data, monkeypatch)
    assert encodings == len(data.val_dataloader())

    src_lines = (toy_data_dir / "val.de").read_text(encoding="utf-8").splitlines()
    ref_lines = (toy_data_dir / "val.en").read_text(encoding="utf-8").splitlines()
    translator = Translator(model, [])
    hypotheses = [translator.translate([s], beam=2)[0].text for s in src_lines]
    assert metrics["val/bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [ref_lines]).score
    )
    assert metrics["val/chrf"] == pytest.approx(
        sacrebleu.corpus_chrf(hypotheses, [ref_lines]).score
    )

    src_tok, tgt_tok = toy_tokenizers
    total, tokens = 0.0, 0
    with torch.no_grad():
        for src, ref in zip(src_lines, ref_lines):
            source = torch.tensor([src_tok.encode(src) + [EOS_ID]])
            target = tgt_tok.encode(ref)
            tgt_in, tgt_out = torch.tensor([[BOS_ID, *target]]), torch.tensor(target + [EOS_ID])
            logits = model.decoder(model.encoder(source, source != PAD_ID), tgt_in).logits[0]
            log_p = torch.log_softmax(logits.double(), dim=-1)  # (T, V)
            smoothed = 0.9 * -log_p[range(len(tgt_out)), tgt_out] - 0.1 * log_p.mean(-1)
            total, tokens = total + smoothed.sum().item(), tokens + len(tgt_out)
    assert metrics["val/loss"] == pytest.approx(total / tokens, rel=1e-4)


def test_checkpoint_without_seqtasks_entry_is_rejected(trained_checkpoint, tmp_path):
    path, _ = trained_checkpoint
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    del checkpoint["seqtasks"]
    foreign = tmp_path / "foreign.ckpt"
    torch.save(checkpoint, foreign)
    with pytest.raises(ValueError, match="not a translation checkpoint"):
        TranslationTask.load_from_checkpoint(foreign, map_location="cpu", weights_only=False)


def test_saving_without_tokenisers_fails(toy_tokenizers, tmp_path):
    bare = task_without_tokenisers(toy_tokenizers)
    with pytest.raises(RuntimeError, match="tokenisers"):
        bare.on_save_checkpoint({})


def transformer_task(src_vocab: int, tgt_vocab: int, **kwargs) -> TranslationTask:
    sizes = dict(d_model=16, num_heads=2, num_layers=1, ff_dim=32)
    return TranslationTask(
        encoder=functools.partial(TransformerEncoder, **sizes),
        decoder=functools.partial(TransformerDecoder, **sizes),
        src_vocab_size=src_vocab,
        tgt_vocab_size=tgt_vocab,
        **kwargs,
    )


def test_shared_embeddings_are_one_table(toy_tokenizers):
    src, _ = toy_tokenizers
    task = transformer_task(src.vocab_size, src.vocab_size, share_embeddings=True)
    assert task.encoder.embedding.weight is task.decoder.embedding.weight
    task.set_tokenizers(src, src)  # one joint model: accepted
    with pytest.raises(ValueError, match="joint vocabulary"):
        transformer_task(src.vocab_size, src.vocab_size + 1, share_embeddings=True)


def test_shared_embeddings_need_one_tokeniser(toy_tokenizers):
    src, tgt = toy_tokenizers
    task = transformer_task(src.vocab_size, src.vocab_size, share_embeddings=True)
    assert src.vocab_size == tgt.vocab_size  # same size, different pieces
    with pytest.raises(ValueError, match="joint sentencepiece"):
        task.set_tokenizers(src, tgt)


def test_an_empty_sentence_lists_no_alternative_whatever_the_n_best(translator):
    """An n-best list holds different outputs, never the best again: an empty sentence has
    its one empty translation."""
    for n_best in (1, 2, 3):
        (empty,) = translator.translate([""], beam=3, n_best=n_best)
        assert (empty.text, empty.tokens, empty.score, empty.alternatives) == ("", [], 0.0, [])
    (found,) = translator.translate(["Ein Hund rennt."], beam=3, n_best=3, max_length=50)
    assert len({tuple(t.tokens) for t in nbest(found)}) == len(nbest(found)) == 3


def test_counting_batches_counts_each_input_once_as_worker_threads_finish_them(
    translator, multi30k_lines, monkeypatch, capsys
):
    """Decoding in small batches shared by three threads: the inputs done only grow, one
    batch at a time, and reach every input (the empty one too) when the call returns."""
    sentences = multi30k_lines["de"][:24] + [""]
    monkeypatch.setenv(VARIABLE, "0")  # a line at every count
    with ReportProgress("x").stage("decoding", len(sentences), "sentences") as stage:
        with counting_batches(translator.task.encoder, stage):
            translator.translate(sentences, beam=2, max_tokens=60, max_length=50, workers=3)
    assert not translator.task.encoder._forward_hooks  # the hook is gone
    lines = capsys.readouterr().err.splitlines()
    done = [int(m.group(1)) for m in map(re.compile(r"x: (\d+)/25 sentences").match, lines) if m]
    assert len(done) > 3 and done == sorted(set(done)) and done[-1] == 25
    assert lines[-1].startswith("x: done, 25 sentences in ")
