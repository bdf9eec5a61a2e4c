"""The `seqtasks` command: LightningCLI over every task, encoder and decoder.

    seqtasks fit --config configs/translation/rnn_bahdanau.yaml
    seqtasks test --config configs/translation/rnn_bahdanau.yaml --ckpt_path best

The task, encoder and decoder are chosen by `class_path` in YAML; vocabulary sizes flow from
the DataModule into the model, so they are never typed twice.
"""

from __future__ import annotations

from lightning.pytorch.cli import LightningCLI


class SeqtasksCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size"):
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")


def main(args: list[str] | None = None) -> None:
    SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
    )


if __name__ == "__main__":
    main()
