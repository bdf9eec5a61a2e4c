"""A task's encoder started from a pre-trained one (`pretrained_encoder`): taken weight for
weight, frozen for its first steps, with its own rate, and refused in one line when it does not
fit the config's encoder or reads with another tokeniser than the data."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import REPO, write_monolingual

from seqtasks.cli.main import main
from seqtasks.decoders import TransformerDecoder
from seqtasks.encoders import TransformerEncoder
from seqtasks.io.checkpoint_files import read_checkpoint
from seqtasks.tasks import pretrained
from seqtasks.tasks.pretrained import PretrainedEncoderError, pretrained_weights
from seqtasks.translation.task import TranslationTask

TINY = {
    "d_model": 32,
    "num_heads": 2,
    "num_layers": 1,
    "ff_dim": 64,
    "dropout": 0.0,
    "norm": "post",
}


def settings(part: str, **changed) -> list[str]:
    return [f"--model.init_args.{part}.init_args.{k}={v}" for k, v in {**TINY, **changed}.items()]


@pytest.fixture(scope="module")
def german_mlm(toy_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny masked LM of the toy corpus' German side, read with its source tokeniser: 10
    steps of `seqtasks fit` from configs/pretraining/mlm.yaml; its best checkpoint."""
    root = tmp_path_factory.mktemp("german_mlm")
    lines = (toy_data_dir / "train.de").read_text().splitlines()
    write_monolingual(root, lines[:180], lines[180:], (toy_data_dir / "spm.de.model").read_bytes())
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs/pretraining/mlm.yaml"),
            *settings("encoder"),
            f"--data.init_args.data_dir={root}",
            "--data.init_args.max_tokens=512",
            "--trainer.max_steps=10",
            "--trainer.val_check_interval=10",
            f"--trainer.default_root_dir={root / 'run'}",
        ]
    )
    (best,) = (root / "run").rglob("epoch*-accuracy_*.ckpt")
    return best


def fine_tune(data: Path, root: Path, *extra: str, encoder: list[str] | None = None) -> None:
    """A 3-step translation fit of the toy corpus with a tiny Transformer (`encoder`: other
    settings of the encoder than `TINY`)."""
    encoder = settings("encoder") if encoder is None else encoder
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs/translation/transformer.yaml"),
            *encoder,
            *settings("decoder"),
            f"--data.init_args.data_dir={data}",
            "--data.init_args.max_tokens=512",
            "--trainer.max_steps=3",
            "--trainer.val_check_interval=3",
            "--trainer.limit_val_batches=1",
            f"--trainer.default_root_dir={root}",
            *extra,
        ]
    )


def encoder_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    state = read_checkpoint(checkpoint)["state_dict"]
    return {k: v for k, v in state.items() if k.startswith("encoder.")}


@pytest.mark.slow
def test_a_fit_starts_from_the_pretrained_encoder_and_keeps_it_frozen_as_asked(
    german_mlm, toy_data_dir, tmp_path
):
    """Frozen for more steps than the fit takes, the encoder ends as the masked LM left it,
    bit for bit, while the decoder trained; unfrozen, it trains from there."""
    fine_tune(
        toy_data_dir,
        tmp_path / "frozen",
        f"--model.init_args.pretrained_encoder={german_mlm}",
        "--model.init_args.frozen_encoder_steps=100",
    )
    (frozen,) = (tmp_path / "frozen").rglob("last.ckpt")
    start = encoder_weights(german_mlm)
    assert {k: v.equal(start[k]) for k, v in encoder_weights(frozen).items()} == dict.fromkeys(
        start, True
    )
    fine_tune(
        toy_data_dir, tmp_path / "trained", f"--model.init_args.pretrained_encoder={german_mlm}"
    )
    (trained,) = (tmp_path / "trained").rglob("last.ckpt")
    after = encoder_weights(trained)
    assert not all(v.equal(start[k]) for k, v in after.items())
    fine_tune(toy_data_dir, tmp_path / "fresh")  # the same fit without it starts elsewhere
    (fresh,) = (tmp_path / "fresh").rglob("last.ckpt")
    assert not all(v.equal(after[k]) for k, v in encoder_weights(fresh).items())


@pytest.mark.slow
def test_a_fit_with_a_layer_mix_takes_the_pretrained_encoder_and_trains_the_mix_alone(
    german_mlm, toy_data_dir, tmp_path
):
    """The masked LM has no layer mix: a fit with one takes every weight it has, and while
    the encoder is frozen only the mix (the task's own weights) trains."""
    fine_tune(
        toy_data_dir,
        tmp_path,
        f"--model.init_args.pretrained_encoder={german_mlm}",
        "--model.init_args.frozen_encoder_steps=100",
        encoder=settings("encoder", layer_mix="true"),
    )
    (last,) = tmp_path.rglob("last.ckpt")
    start, after = encoder_weights(german_mlm), encoder_weights(last)
    assert {k: after[k].equal(v) for k, v in start.items()} == dict.fromkeys(start, True)
    mix = {k: v for k, v in after.items() if k not in start}
    assert mix.keys() == {"encoder.layer_mix.weights", "encoder.layer_mix.scale"}
    assert not mix["encoder.layer_mix.weights"].equal(torch.zeros(2))  # it trained


@pytest.mark.slow
@pytest.mark.parametrize(
    ("encoder", "data", "said"),
    [
        (
            settings("encoder", ff_dim=128),
            [],
            r"its encoder's layers\.0\.feed_forward\.\w+\.weight is \(64, 32\), "
            r"the config's \(128, 32\)",
        ),
        (
            settings("encoder", norm="pre"),
            [],
            r"its encoder has no stack\.norm\.weight, which the config's has",
        ),
        (
            [
                "--model.init_args.encoder.class_path=seqtasks.encoders.RNNEncoder",
                "--model.init_args.encoder.init_args.hidden_size=16",
            ],
            [],
            "its encoder is a TransformerEncoder, the config's a RNNEncoder",
        ),
        (
            None,
            ["--data.init_args.src_lang=en", "--data.init_args.tgt_lang=de"],
            r"reads with another tokeniser than the data \(source tokenizer: pre-trained unigram",
        ),
    ],
    ids=["width", "norm", "class", "tokeniser"],
)
def test_an_encoder_that_does_not_fit_is_refused_in_one_line_before_a_step(
    german_mlm, toy_data_dir, tmp_path, capsys, encoder, data, said
):
    with pytest.raises(SystemExit) as exit:
        fine_tune(
            toy_data_dir,
            tmp_path,
            f"--model.init_args.pretrained_encoder={german_mlm}",
            *data,
            encoder=encoder,
        )
    assert exit.value.code == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: model.init_args.pretrained_encoder {german_mlm}")
    assert re.search(said, line), line
    assert not list(tmp_path.rglob("*.ckpt"))


def test_a_model_without_an_encoder_is_refused_by_name(monkeypatch):
    class Source:
        spec = {"class_path": "x.Task", "init_args": {"decoder": {"class_path": "y"}}}
        task = "parsing"

    monkeypatch.setattr(pretrained, "open_model", lambda reference: Source())
    encoder = TransformerEncoder(10, **TINY)
    with pytest.raises(PretrainedEncoderError, match="the parsing model has no encoder"):
        pretrained_weights("m", encoder, None)


def test_the_encoders_own_rate_is_a_group_of_its_parameters_alone():
    task = TranslationTask(
        partial(TransformerEncoder, **TINY),
        partial(TransformerDecoder, **TINY),
        40,
        40,
        share_embeddings=True,
        encoder_lr=1e-5,
    )
    encoder, rest = task.parameter_groups()
    assert encoder["lr"] == 1e-5 and "lr" not in rest
    ids = [{id(p) for p in group["params"]} for group in (encoder, rest)]
    assert ids[0] == {id(p) for p in task.encoder.parameters()} and not ids[0] & ids[1]
    assert ids[0] | ids[1] == {id(p) for p in task.parameters()}  # the shared table once


def test_a_captioners_encoder_groups_take_the_encoders_rate_and_frozen_parts_stay_frozen():
    """Captioning builds its own groups (an image backbone's at `backbone_lr`): the encoder's
    groups without a rate of their own take `encoder_lr`; once the frozen steps are over, what
    was built frozen (a backbone) stays frozen."""
    from seqtasks.captioning.task import CaptioningTask
    from seqtasks.decoders import SoftAttentionDecoder
    from seqtasks.encoders import ConvEncoder

    encoder = partial(ConvEncoder, channels=(4, 8))
    decoder = partial(SoftAttentionDecoder, embed_dim=8, hidden_size=8)
    task = CaptioningTask(encoder, decoder, 20, encoder_lr=1e-5, frozen_encoder_steps=1)
    first, *others = task.parameter_groups()
    assert first["lr"] == 1e-5 and all("lr" not in group for group in others)
    assert {id(p) for p in first["params"]} == {id(p) for p in task.encoder.parameters()}
    kept = next(task.encoder.parameters())
    kept.requires_grad_(False)  # built frozen, as a backbone that is not fine-tuned
    seen = []
    for step in (0, 1):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(type(task), "global_step", property(lambda self, s=step: s))
            task.on_train_batch_start(None, 0)
        seen.append({p.requires_grad for p in task.encoder.parameters() if p is not kept})
        assert not kept.requires_grad
    assert seen == [{False}, {True}]
