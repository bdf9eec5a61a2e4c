"""The fast parser from a pre-trained BiLSTM, as its two shipped configs say: a masked LM of
configs/pretraining/mlm_lstm.yaml, exported to the folder that
configs/parsing/lstm_attention_fast_pretrained.yaml starts from, then the parser fitted from
it over the LM's pieces, at the configs' own widths (only the data and the step counts are
small here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, write_monolingual

import seqtasks
from seqtasks.cli.main import main
from seqtasks.io.checkpoint_files import read_checkpoint
from seqtasks.parsing.trees import read_treebank

SMALL = ["--data.init_args.max_tokens=512", "--trainer.limit_val_batches=2"]


def fit(config: str, root: Path, *extra: str) -> Path:
    """`seqtasks fit` of a shipped config in `root` (its relative paths read from there) for 3
    steps; the last checkpoint."""
    main(
        [
            "fit",
            "--config",
            str(REPO / "configs" / config),
            "--trainer.max_steps=3",
            "--trainer.val_check_interval=3",
            f"--trainer.default_root_dir={root / 'run'}",
            *SMALL,
            *extra,
        ]
    )
    (last,) = (root / "run").rglob("last.ckpt")
    return last


@pytest.mark.slow
def test_the_fast_parser_starts_from_the_bilstm_masked_lm_its_config_names(
    ptb_dir, toy_tokenizers, tmp_path, monkeypatch, run_command
):
    monkeypatch.chdir(tmp_path)
    lines = [" ".join(t.leaves()) for t in read_treebank(ptb_dir / "train.mrg")[:240]]
    # where both configs read the LM's text and pieces
    write_monolingual(
        tmp_path / "data/monolingual", lines[:200], lines[200:], toy_tokenizers[1].proto
    )
    lm = fit("pretraining/mlm_lstm.yaml", tmp_path / "lm")
    code, _, err = run_command(
        "export", str(lm), "runs/pretraining/mlm_lstm_model", "--to", "folder"
    )
    assert code == 0, err

    parser = fit(
        "parsing/lstm_attention_fast_pretrained.yaml",
        tmp_path / "parser",
        f"--data.init_args.data_dir={ptb_dir}",
    )
    state, start = read_checkpoint(parser)["state_dict"], read_checkpoint(lm)["state_dict"]
    encoder = [k for k in state if k.startswith("encoder.")]
    assert encoder and all(state[k].equal(start[k]) for k in encoder)  # frozen for 200 steps

    words = [t.leaves() for t in read_treebank(ptb_dir / "dev.mrg")[:3]]
    parses = seqtasks.load(parser).parse(words, beam=2)
    assert [p.tree.leaves() for p in parses] == words
