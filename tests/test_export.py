"""`seqtasks export --to ctranslate2`: the exported folder translates as the checkpoint does.

Small Transformers are trained for a few seconds on 300 Multi30k pairs (so their outputs are
no near-ties), saved as checkpoints, exported, and CTranslate2's greedy output on held-out
sentences is compared with `task.translate(beam_size=1)`, token for token and score for score;
Post-LN and Pre-LN, sinusoidal and learned positions, tied and untied outputs, shared
embeddings. What cannot be exported is refused by name, and OUT is never left half-written.
"""

from __future__ import annotations

import json
import random

import ctranslate2  # the dev extras install it: a missing one fails, never skips
import lightning as L
import pytest
import sentencepiece as spm
import torch
import torch.nn.functional as F
from lightning.pytorch.cli import instantiate_module

from seqtasks.data.batch import pad, teacher_forcing
from seqtasks.data.tokenizer import EOS_ID, PAD_ID, train_sentencepiece
from seqtasks.export import main
from seqtasks.export.ctranslate2_search import length_limit, translate_as_seqtasks
from seqtasks.tasks import TranslationTask

TRANSFORMER = {"d_model": 32, "num_heads": 4, "ff_dim": 64, "dropout": 0.0, "max_positions": 260}
MODELS = {  # name -> (encoder init_args, decoder init_args, task settings)
    "post": ({"num_layers": 2}, {"num_layers": 2}, {}),
    "pre_learned_untied": (  # also: the encoder wider, with fewer heads, than the decoder
        {"num_layers": 1, "norm": "pre", "positions": "learned", "d_model": 48, "num_heads": 2},
        {"num_layers": 2, "norm": "pre", "positions": "learned", "tie_embeddings": False},
        {},
    ),
    "shared": ({"num_layers": 2}, {"num_layers": 1}, {"share_embeddings": True}),
}


def part(class_path: str, **init_args) -> dict:
    return {"class_path": class_path, "init_args": init_args}


def transformer_hparams(encoder: dict, decoder: dict, **settings) -> dict:
    return {
        "_class_path": "seqtasks.tasks.TranslationTask",
        "encoder": part("seqtasks.encoders.TransformerEncoder", **{**TRANSFORMER, **encoder}),
        "decoder": part("seqtasks.decoders.TransformerDecoder", **{**TRANSFORMER, **decoder}),
        **settings,
    }


def save(hparams: dict, tokenizers, path, train_pairs=None, steps: int = 0):
    """A TranslationTask built from CLI-style `hparams`, trained `steps` Adam steps on
    `train_pairs` with teacher forcing, saved as `load_from_checkpoint` reads it."""
    src, tgt = tokenizers
    hparams = hparams | {"src_vocab_size": src.vocab_size, "tgt_vocab_size": tgt.vocab_size}
    torch.manual_seed(0)
    task = instantiate_module(TranslationTask, hparams)
    task.set_tokenizers(src, tgt)
    if steps:
        examples = [(src.encode(s) + [EOS_ID], tgt.encode(t)) for s, t in train_pairs]
        optimizer = torch.optim.Adam(task.parameters(), lr=3e-3)
        draw = random.Random(0)
        for _ in range(steps):
            chosen = draw.sample(examples, 32)
            sources = pad([s for s, _ in chosen])
            tgt_in, tgt_out = teacher_forcing([t for _, t in chosen])
            logits = task(sources, sources != PAD_ID, tgt_in).logits
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    task.eval()
    checkpoint = {
        "state_dict": task.state_dict(),
        "hyper_parameters": hparams | {"_instantiator": "lightning.pytorch.cli.instantiate_module"},
        "pytorch-lightning_version": L.__version__,
    }
    task.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return task


@pytest.fixture(scope="module")
def corpus(multi30k_lines):
    """(300 training pairs, 60 held-out German sentences)."""
    de, en = multi30k_lines["de"], multi30k_lines["en"]
    return list(zip(de[:300], en[:300])), de[300:360]


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, corpus, toy_tokenizers, tmp_path_factory):
    """(name, trained task, its checkpoint, its CTranslate2 folder)."""
    encoder, decoder, settings = MODELS[request.param]
    tokenizers = toy_tokenizers
    if settings.get("share_embeddings"):
        joint = train_sentencepiece([line for pair in corpus[0] for line in pair], 300)
        tokenizers = (joint, joint)
    folder = tmp_path_factory.mktemp(request.param)
    hparams = transformer_hparams(encoder, decoder, **settings)
    task = save(hparams, tokenizers, folder / "model.ckpt", corpus[0], steps=150)
    assert main([str(folder / "model.ckpt"), "--to", "ctranslate2", str(folder / "ct2")]) == 0
    return request.param, task, folder / "model.ckpt", folder / "ct2"


def source_pieces(out, sentences: list[str]) -> list[list[str]]:
    """The sentences as CTranslate2's users tokenise them: `source.model`'s pieces."""
    return spm.SentencePieceProcessor(model_file=str(out / "source.model")).encode(
        sentences, out_type=str
    )


def test_plain_greedy_translate_batch_gives_seqtasks_greedy_output(exported, corpus):
    """`translate_batch(pieces, beam_size=1)`, called as CTranslate2's users do, writes what
    seqtasks' greedy search writes; where seqtasks stopped at its length limit, CTranslate2
    (whose default limit is 256) writes the same and goes on."""
    name, task, _, out = exported
    held_out = corpus[1]
    ours = [r[0] for r in task.translate(held_out, beam_size=1)]
    pieces = source_pieces(out, held_out)
    results = ctranslate2.Translator(str(out), intra_threads=1).translate_batch(pieces, beam_size=1)
    theirs = [r.hypotheses[0] for r in results]
    limits = [length_limit(len(p), task.max_length_ratio, task.max_length_offset) for p in pieces]
    stopped = [len(o.tokens) < limit for o, limit in zip(ours, limits)]
    assert sum(stopped) >= 0.8 * len(held_out), f"{name}: the model was not trained enough"
    assert len({tuple(o.tokens) for o in ours}) >= 0.8 * len(held_out), "outputs too alike"
    for o, t, finished in zip(ours, theirs, stopped):
        assert (t if finished else t[: len(o.tokens)]) == o.tokens, name
    target = spm.SentencePieceProcessor(model_file=str(out / "target.model"))
    assert [target.decode(t) for t, s in zip(theirs, stopped) if s] == [
        o.text for o, s in zip(ours, stopped) if s
    ]


def test_greedy_scores_equal_seqtasks(exported, corpus):
    """With seqtasks' length limits, every output and its total log-probability agree."""
    name, task, _, out = exported
    held_out = corpus[1]
    ours = [r[0] for r in task.translate(held_out, beam_size=1)]
    translator = ctranslate2.Translator(str(out), intra_threads=1)
    search = (task.length_alpha, task.max_length_ratio, task.max_length_offset)
    theirs = translate_as_seqtasks(translator, source_pieces(out, held_out), 1, *search)
    assert [t.pieces for t in theirs] == [o.tokens for o in ours], name
    assert [t.score for t in theirs] == pytest.approx([o.score for o in ours], abs=2e-3)


def test_beam_search_as_seqtasks(exported, corpus):
    """Beam 4 with Wu et al.'s length penalty (re-ranked CTranslate2 n-best lists)."""
    name, task, _, out = exported
    held_out = corpus[1]
    ours = [r[0] for r in task.translate(held_out, beam_size=4)]
    translator = ctranslate2.Translator(str(out), intra_threads=1)
    search = (task.length_alpha, task.max_length_ratio, task.max_length_offset)
    theirs = translate_as_seqtasks(translator, source_pieces(out, held_out), 4, *search)
    same = [t.pieces == o.tokens for t, o in zip(theirs, ours)]
    assert sum(same) >= 0.95 * len(held_out), name
    pairs = [(t.score, o.score) for t, o, s in zip(theirs, ours, same) if s]
    assert [t for t, _ in pairs] == pytest.approx([o for _, o in pairs], abs=2e-3)


def test_folder_holds_vocabularies_tokenisers_and_metadata(exported):
    name, task, checkpoint, out = exported
    assert (out / "source.model").read_bytes() == task.src_tokenizer.proto
    assert (out / "target.model").read_bytes() == task.tgt_tokenizer.proto
    pieces = task.tgt_tokenizer.pieces(range(task.tgt_tokenizer.vocab_size))
    vocabularies = {p.name: json.loads(p.read_text()) for p in out.glob("*_vocabulary.json")}
    if name == "shared":
        assert vocabularies == {"shared_vocabulary.json": pieces}
    else:
        assert vocabularies["target_vocabulary.json"] == pieces
        assert vocabularies["source_vocabulary.json"][:4] == pieces[:4]
    config = json.loads((out / "config.json").read_text())
    assert (config["decoder_start_token"], config["eos_token"]) == ("<s>", "</s>")
    assert config["add_source_eos"] is True and config["layer_norm_epsilon"] == 1e-5
    stored = json.loads((out / "seqtasks_export.json").read_text())
    assert stored["exported_from"] == str(checkpoint)
    assert stored["seqtasks_search"]["length_alpha"] == task.length_alpha
    assert not list(out.parent.glob(".ct2*")), "a staging folder was left behind"


@pytest.mark.parametrize("exported", ["post"], indirect=True)
def test_int8_export_is_smaller_and_mostly_agrees(exported, corpus, tmp_path):
    name, task, checkpoint, out = exported
    args = [str(checkpoint), "--to", "ctranslate2", str(tmp_path / "int8")]
    assert main([*args, "--quantization", "int8"]) == 0
    assert (tmp_path / "int8/model.bin").stat().st_size < 0.5 * (out / "model.bin").stat().st_size
    pieces = source_pieces(out, corpus[1])
    translators = [
        ctranslate2.Translator(str(f), intra_threads=1) for f in (out, tmp_path / "int8")
    ]
    outputs = [[r.hypotheses[0] for r in t.translate_batch(pieces)] for t in translators]
    assert sum(a == b for a, b in zip(*outputs)) >= 0.5 * len(pieces)


# ---- refusals and the output folder --------------------------------------------------------
RNN = part("seqtasks.encoders.RNNEncoder", embed_dim=8, hidden_size=8)
LUONG = part("seqtasks.decoders.LuongDecoder", embed_dim=8, hidden_size=16)
REFUSED = {  # name -> (hparams, what the message must say)
    "resi_dual": (
        transformer_hparams({"norm": "resi_dual"}, {"norm": "resi_dual"}),
        "its encoder uses norm: resi_dual (ResiDual)",
    ),
    "linear": (
        transformer_hparams({}, {"self_attention": "linear"}),
        "its decoder uses self_attention: linear",
    ),
    "rnn": (
        {"_class_path": "seqtasks.tasks.TranslationTask", "encoder": RNN, "decoder": LUONG},
        "its encoder is a RNNEncoder",
    ),
    "rnn_decoder": (
        transformer_hparams({}, {}) | {"decoder": LUONG},
        "its decoder is a LuongDecoder",
    ),
    "rnn_encoder": (transformer_hparams({}, {}) | {"encoder": RNN}, "its encoder is a RNNEncoder"),
}


@pytest.fixture(scope="module")
def refused(toy_tokenizers, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("refused")
    for name, (hparams, _) in REFUSED.items():
        save(hparams, toy_tokenizers, folder / f"{name}.ckpt")
    return {name: folder / f"{name}.ckpt" for name in REFUSED}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refuses_what_ctranslate2_cannot_run(name, refused, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(refused[name]), "--to", "ctranslate2", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {refused[name]} cannot be exported to CTranslate2: ")
    assert REFUSED[name][1] in error
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("task", ["captioning", "parsing"])
def test_refuses_other_tasks_by_name(task, refused, tmp_path, capsys):
    stored = torch.load(refused["rnn"], map_location="cpu", weights_only=True)
    stored["seqtasks"]["task"] = task
    torch.save(stored, tmp_path / "other.ckpt")
    assert main([str(tmp_path / "other.ckpt"), "--to", "ctranslate2", str(tmp_path / "o")]) == 2
    assert f"other.ckpt is a {task} checkpoint and cannot be exported" in capsys.readouterr().err


def test_damaged_or_missing_checkpoint(tmp_path, capsys):
    (tmp_path / "bad.ckpt").write_bytes(b"\x00not a checkpoint")
    for path, says in [("bad.ckpt", "not a readable PyTorch checkpoint"), ("no.ckpt", "no such")]:
        assert main([str(tmp_path / path), "--to", "ctranslate2", str(tmp_path / "o")]) == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def snapshot(folder) -> dict:
    """The folder's files and their bytes (not the README, which names the folder)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "README.md"}


@pytest.mark.parametrize("exported", ["post"], indirect=True)
def test_existing_out_is_replaced_only_with_force_and_never_half_written(
    exported, refused, tmp_path, monkeypatch, capsys
):
    name, _, checkpoint, good = exported
    out = tmp_path / "out"
    out.mkdir()  # empty: used without --force
    args = [str(checkpoint), "--to", "ctranslate2", str(out)]
    assert main(args) == 0 and snapshot(out) == snapshot(good)
    (out / "note.txt").write_text("mine")
    before = snapshot(out)
    assert main(args) == 2 and "not empty; pass --force" in capsys.readouterr().err
    assert main([str(refused["resi_dual"]), "--to", "ctranslate2", str(out), "--force"]) == 2
    assert snapshot(out) == before

    import seqtasks.export.ctranslate2 as export

    def fail(*_):  # after model.bin and the sentencepiece models are in the staging folder
        raise OSError("disk full")

    monkeypatch.setattr(export, "metadata", fail)
    with pytest.raises(OSError, match="disk full"):
        export.export_ctranslate2(checkpoint, out, force=True)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "staging folder left behind"
    monkeypatch.undo()
    assert main([*args, "--force"]) == 0 and snapshot(out) == snapshot(good)


def test_command_line_usage(tmp_path, capsys):
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: seqtasks export")
    for args in (["x.ckpt", "out"], ["x.ckpt", "--to", "onnx", "out"], ["x.ckpt", "--to"]):
        assert main(args) == 2
    assert main(["x.ckpt", "--to", "ctranslate2", "out", "--quantization", "int3"]) == 2
    assert "invalid choice: 'int3'" in capsys.readouterr().err


def test_quantizations_are_ctranslate2s():
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    from seqtasks.export.ctranslate2 import QUANTIZATIONS

    assert set(QUANTIZATIONS) == {"none", *ACCEPTED_MODEL_TYPES}
