"""The pre-training task: BERT's corruption and loss against their definitions, next-sentence
pairs, and a masked LM trained by `seqtasks fit` from its config, loaded, filling masks, and
exported to a model folder that fills them alike."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, load_script
from test_matrix import ENCODERS, tiny

import seqtasks
from seqtasks.cli.export import main as export
from seqtasks.cli.main import main
from seqtasks.data.tokenizer import EOS_ID, PAD_ID
from seqtasks.encoders import RNNEncoder, TransformerEncoder
from seqtasks.pretraining.data import MonolingualData, Sentences, collate
from seqtasks.pretraining.masking import FIRST_PIECE, MASK_ID, corrupt
from seqtasks.pretraining.task import MaskedLMTask

monolingual = load_script("data_prep/monolingual.py")
TINY = {"d_model": 32, "num_heads": 2, "num_layers": 1, "ff_dim": 64, "dropout": 0.0}


def test_corruption_chooses_15_percent_and_replaces_80_10_10():
    """Over 200,000 ordinary pieces (and specials, never chosen): the shares chosen, masked,
    replaced at random and kept, each within 4 standard errors of BERT's 15 %, 80/10/10."""
    rng, vocab = random.Random(0), 50
    chosen = masked = randomised = kept = 0
    for _ in range(20_000):
        ids = [rng.randrange(FIRST_PIECE, vocab) for _ in range(10)] + [EOS_ID, PAD_ID]
        inputs, targets = corrupt(ids, vocab, rng)
        assert inputs[-2:] == [EOS_ID, PAD_ID] and targets[-2:] == [PAD_ID, PAD_ID]
        for piece, read, target in zip(ids[:10], inputs, targets):
            if target == PAD_ID:
                assert read == piece  # a piece not chosen is read as it is
                continue
            assert target == piece
            chosen += 1
            masked += read == MASK_ID
            randomised += read not in (MASK_ID, piece)
            kept += read == piece
    n = 200_000

    def near(count: int, total: int, p: float) -> bool:
        return abs(count / total - p) < 4 * (p * (1 - p) / total) ** 0.5

    # at least one piece a sequence: P(none of 10) = 0.85^10 adds 0.85^10 / 10 to the share
    assert near(chosen, n, 0.15 + 0.85**10 / 10)
    # a random replacement is the piece itself 1 time in 46: counted as kept
    assert near(masked, chosen, 0.8) and near(randomised, chosen, 0.1 * 45 / 46)
    assert near(kept, chosen, 0.1 + 0.1 / 46)


def test_every_sequence_predicts_one_piece_at_least_and_specials_never():
    rng = random.Random(1)
    for _ in range(500):
        inputs, targets = corrupt([7, EOS_ID], 10, rng, rate=0.01)
        assert targets == [7, PAD_ID]
    assert corrupt([EOS_ID, PAD_ID], 10, rng) == ([EOS_ID, PAD_ID], [PAD_ID, PAD_ID])


def test_evaluation_masks_are_the_same_every_time_and_training_masks_fresh():
    rows = [(i, Sentences(list(range(FIRST_PIECE, FIRST_PIECE + 30)), str(i))) for i in range(8)]
    once, again = (collate(rows, 100, 0.15, fixed=True) for _ in range(2))
    assert once.src.equal(again.src) and once.targets.equal(again.targets)
    random.seed(0)
    fresh = [collate(rows, 100, 0.15, fixed=False).targets for _ in range(2)]
    assert not fresh[0].equal(fresh[1])


@pytest.mark.parametrize(
    "encoder",
    [partial(TransformerEncoder, **TINY), partial(RNNEncoder, embed_dim=16, hidden_size=16)],
)
def test_the_loss_is_the_cross_entropy_of_the_chosen_pieces_alone(encoder):
    """`MaskedLMTask.loss` against F.cross_entropy of the head's logits at the chosen
    positions, picked out by hand; with next-sentence prediction, plus its weighted mean."""
    torch.manual_seed(0)
    task = MaskedLMTask(encoder, 40, next_sentence_weight=0.5).eval()
    rows = [(0, Sentences([5, 6, 7, 8, 9, 10], "a", 1)), (1, Sentences([11, 12, 13], "b", 0))]
    batch = collate(rows, 40, 0.5, fixed=True)
    logits, nsp = task(batch.src, batch.src_mask)
    at = [
        (b, s) for b in range(2) for s in range(batch.src.size(1)) if batch.targets[b, s] != PAD_ID
    ]
    assert len(at) >= 2
    picked = torch.stack([logits[b, s] for b, s in at])
    expected = F.cross_entropy(picked, torch.tensor([int(batch.targets[b, s]) for b, s in at]))
    expected = expected + 0.5 * F.cross_entropy(nsp, torch.tensor([1, 0]))
    assert torch.allclose(task.loss(task.losses(batch)), expected, atol=1e-6)


@pytest.mark.parametrize(
    "part", [e for e in ENCODERS if e.reads == "tokens"], ids=lambda e: e.__name__
)
def test_every_text_encoder_pretrains_under_the_head(part):
    """Any encoder that reads tokens: the loss back-propagates into its token table."""
    torch.manual_seed(0)
    task = MaskedLMTask(partial(part, **tiny(part)), 40)
    rows = [(0, Sentences([5, 6, 7, 8, 9, 10], "a")), (1, Sentences([11, 12, 13], "b"))]
    loss = task.loss(task.losses(collate(rows, 40, 0.5, fixed=True)))
    loss.backward()
    table = next(p for n, p in task.encoder.named_parameters() if "embed" in n)
    assert torch.isfinite(loss) and table.grad is not None and table.grad.abs().sum() > 0


def test_the_head_is_tied_to_the_encoders_table_when_widths_match():
    task = MaskedLMTask(partial(TransformerEncoder, **TINY), 40)
    assert task.head.embedding.weight is task.encoder.embedding.weight and task.head.output is None
    rnn = MaskedLMTask(partial(RNNEncoder, embed_dim=16, hidden_size=16), 40)  # states 32 wide
    assert rnn.head.embedding is None and rnn.head.output.weight.shape == (40, 32)


def test_next_sentence_pairs_follow_half_the_time_and_else_come_from_another_document(
    tmp_path, toy_tokenizers
):
    documents = [[f"doc {d} sentence {s} ." for s in range(30)] for d in range(20)]
    (tmp_path / "train.txt").write_text("\n".join("".join(f"{s}\n" for s in d) for d in documents))
    (tmp_path / "spm.model").write_bytes(toy_tokenizers[1].proto)
    data = MonolingualData(str(tmp_path), next_sentence=True, seed=3)
    pairs = data.load_split("train", train=True).examples
    assert len(pairs) == 20 * 29
    for pair in pairs:
        a, b = pair.text.split(" ||| ")
        (da, sa), (db, sb) = (map(int, t.split()[1:4:2]) for t in (a, b))
        assert (db, sb) == (da, sa + 1) if pair.is_next else db != da
        assert pair.src.count(EOS_ID) == 1  # A [SEP] B, the last EOS added by collate
    assert abs(sum(p.is_next for p in pairs) / len(pairs) - 0.5) < 4 * (0.25 / len(pairs)) ** 0.5


@pytest.fixture(scope="module")
def mlm_run(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny masked LM fitted by `seqtasks fit` from configs/pretraining/mlm.yaml for 30
    steps on 3,000 Brown sentences (its own tokeniser, 300 pieces): its best checkpoint."""
    root = tmp_path_factory.mktemp("mlm")
    text = root / "brown.txt"
    brown = monolingual.brown(
        monolingual.corpus_zip(str(shared_data / "monolingual"), "brown", root)
    )
    text.write_text("".join(f"{s}\n" for s in [s for d in brown for s in d][:3000]))
    monolingual.main(
        [
            "--corpora",
            "--text",
            str(text),
            "--vocab-size",
            "300",
            "--task-data",
            str(root / "none"),
            "--out",
            str(root / "data"),
        ]
    )
    encoder = [f"--model.init_args.encoder.init_args.{k}={v}" for k, v in TINY.items()]
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs/pretraining/mlm.yaml"),
            *encoder,
            f"--data.init_args.data_dir={root / 'data'}",
            "--data.init_args.max_tokens=1024",
            "--trainer.max_steps=30",
            "--trainer.val_check_interval=15",
            "--trainer.limit_val_batches=3",
            f"--trainer.default_root_dir={root / 'run'}",
        ]
    )
    found = list((root / "run").rglob("epoch*-accuracy_*.ckpt"))
    assert len(found) == 1, sorted(p.name for p in (root / "run").rglob("*.ckpt"))
    (best,) = found
    return best


@pytest.mark.slow
def test_a_fitted_masked_lm_fills_masks_from_its_checkpoint_and_its_folder(mlm_run, tmp_path):
    model = seqtasks.load(mlm_run, device="cpu")
    assert type(model).__name__ == "MaskFiller"
    texts = ["The [MASK] said Friday .", "He was [MASK] in the [MASK] ."]
    filled = model.fill(texts, top_k=3)
    assert [len(f.choices) for f in filled] == [1, 2]
    assert all(len(c) == 3 and c[0][1] >= c[1][1] >= c[2][1] for f in filled for c in f.choices)
    assert filled[0].text.startswith("The ") and filled[0].text.endswith(" said Friday .")
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        model.fill(["nothing to fill"])
    out = tmp_path / "folder"
    assert export([str(mlm_run), str(out), "--to", "folder"]) == 0
    again = seqtasks.load(out, device="cpu").fill(texts, top_k=3)
    assert again == filled
    card = (out / "README.md").read_text()
    assert (
        "## Search" not in card
        and "seqtasks serve" not in card
        and "pipeline_tag: fill-mask" in card
    )
