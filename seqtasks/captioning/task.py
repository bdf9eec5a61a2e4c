"""Image captioning: an image in, a sentence out, scored with BLEU and CIDEr-D, and on the
shapes world also against the scene."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from torch import Tensor

from seqtasks.captioning import TASK
from seqtasks.captioning.data import CaptionBatch
from seqtasks.captioning.judgements import judge
from seqtasks.captioning.metrics import CiderD, ptb_tokenize
from seqtasks.captioning.scores import Captioned, CaptionScores
from seqtasks.data.words import WordTokenizer
from seqtasks.decoders.base import Decoder
from seqtasks.encoders.base import Encoder
from seqtasks.layers.memory import Memory
from seqtasks.search import Hypothesis
from seqtasks.tasks.base import EncoderDecoderTask, Losses
from seqtasks.tasks.stored import StoredEntries


def _without_pretrained(factory: Any) -> Any:
    """An encoder factory (a CLI config or a partial) with its `pretrained` flag off."""
    if isinstance(factory, dict) and factory.get("init_args", {}).get("pretrained"):
        return {**factory, "init_args": {**factory["init_args"], "pretrained": False}}
    if isinstance(factory, functools.partial) and factory.keywords.get("pretrained"):
        keywords = {**factory.keywords, "pretrained": False}
        return functools.partial(factory.func, *factory.args, **keywords)
    return factory


class CaptioningTask(StoredEntries, EncoderDecoderTask):
    """Caption images with an image encoder and any decoder; validate with CIDEr-D.

    The word vocabulary and the image size come from the DataModule when training starts and
    are stored in every checkpoint, so `CaptioningTask.load_from_checkpoint(path)` (or
    `seqtasks.load`, which captions with it: `seqtasks.captioning.captioner.Captioner`) is all
    an app needs.
    With a frozen backbone the DataModule serves cached feature maps instead of images
    (`CaptionData.use_features`). On the shapes world validation also reports exact match,
    truthfulness and the attention hit rate (`seqtasks.captioning.judgements`).

    Args:
        encoder: built as `encoder()`: a `GridEncoder`.
        decoder: built as `decoder(tgt_vocab_size, encoder.out_dim)`.
        tgt_vocab_size: linked from the DataModule by the CLI.
        max_caption_length: decoding stops after this many words.
        attention_penalty: λ of the doubly stochastic attention, 1 as in Xu et al.
        **settings: the rest `EncoderDecoderTask`'s, by keyword, among them `entropy_weight` and
            `reward_scale`, the REINFORCE terms of hard attention, `seqtasks.tasks.objective`, for
            which the authors' code uses 0.002 and 0.1; length_alpha 0 ranks beams by log-
            probability
    """

    reads = "images"
    Scores = CaptionScores
    entry = TASK
    stored_keys, stored_as = ("vocabulary", "image_size"), "vocabulary"
    rewards = ("cider_d",)

    def __init__(
        self,
        encoder: Callable[[], Encoder],
        decoder: Callable[[int, int], Decoder],
        tgt_vocab_size: int,
        max_caption_length: int = 50,
        attention_penalty: float = 1.0,
        label_smoothing: float = 0.0,
        monitor: str = "val/cider",
        test_beam: int = 3,
        length_alpha: float = 0.0,
        **settings: Any,
    ):
        super().__init__(
            label_smoothing=label_smoothing,
            monitor=monitor,
            test_beam=test_beam,
            length_alpha=length_alpha,
            max_length_ratio=0.0,
            max_length_offset=max_caption_length,
            attention_penalty=attention_penalty,
            **settings,
        )
        self.save_hyperparameters()
        self.build_parts(encoder, decoder, tgt_vocab_size)
        self.tokenizer: WordTokenizer | None = None
        self.image_size: int | None = None
        self.cider_d: CiderD | None = None  # over the training captions, to reward with

    # ---- vocabulary and image size travel with the checkpoint ----------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if datamodule is None:
            return
        if self.tokenizer is None:
            self.set_preprocessing(datamodule.tokenizer, datamodule.image_size)
        if self.self_critical is not None and self.cider_d is None:
            training = datamodule.images.get("train", [])
            self.cider_d = CiderD([[with_eos(c) for c in image.captions] for image in training])
        key = self.encoder.feature_key
        if key is not None:
            datamodule.use_features(self._extract, key)

    def _extract(self, images: Tensor) -> Tensor:
        return self.encoder.extract(images.to(self.device))

    def set_preprocessing(self, tokenizer: WordTokenizer, image_size: int) -> None:
        if tokenizer.vocab_size != self.hparams.tgt_vocab_size:
            raise ValueError(
                f"the vocabulary has {tokenizer.vocab_size} entries but the model was built for "
                f"{self.hparams.tgt_vocab_size}"
            )
        self.tokenizer, self.image_size = tokenizer, image_size

    def stored(self) -> dict[str, Any] | None:
        if self.tokenizer is None:
            return None
        return {"vocabulary": self.tokenizer.vocabulary, "image_size": self.image_size}

    def restore(self, entries: dict[str, Any]) -> None:
        self.set_preprocessing(WordTokenizer(entries["vocabulary"]), entries["image_size"])

    @classmethod
    def data_entries(cls, datamodule: Any) -> dict[str, Any]:
        return {"vocabulary": datamodule.tokenizer.vocabulary, "image_size": datamodule.image_size}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        # The state dict holds the encoder's weights, so rebuilding it from the checkpoint must
        # not fetch pretrained ones (from the network, or a package the app may not have).
        hparams = checkpoint.get("hyper_parameters", {})
        if "encoder" in hparams:
            encoder = _without_pretrained(hparams["encoder"])
            checkpoint["hyper_parameters"] = {**hparams, "encoder": encoder}

    # ---- training and evaluation ------------------------------------------------------------
    def encode(self, batch: CaptionBatch) -> Memory:
        if batch.features is not None:
            return self.encoder.annotate(batch.features)
        return self.encoder(batch.images)

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The encoder's groups (a fine-tuned backbone's at `backbone_lr`; those without a rate
        of their own at `encoder_lr`, when it is set) and the decoder's."""
        encoder = self.encoder.parameter_groups()
        if self.encoder_lr is not None:
            encoder = [{"lr": self.encoder_lr, **group} for group in encoder]
        groups = [*encoder, {"params": list(self.decoder.parameters())}]
        return [group for group in groups if group["params"]]

    def evaluation_attention(self, batch: CaptionBatch) -> bool:
        """On the shapes world (scenes known), to read the attention against the scene."""
        return batch.scenes[0] is not None

    def evaluation_records(
        self, batch: CaptionBatch, found: list[list[Hypothesis]], memory: Memory, losses: Losses
    ) -> list[Captioned]:
        """Captions; on the shapes world (scenes known) also read against the scene."""
        shapes = batch.scenes[0] is not None
        records = []
        for i, nbest in enumerate(found):
            best = nbest[0]
            loss, tokens = losses[i]
            record = Captioned(
                int(batch.index[i]),
                loss,
                tokens,
                self.tokenizer.decode(best.tokens),
                tuple(batch.references[i]),
            )
            if shapes:
                said = self.tokenizer.pieces(best.tokens)
                judged = judge(
                    said, batch.references[i], batch.scenes[i], best.attention, memory.grid
                )
                record = replace(record, judged=True, **vars(judged))
            records.append(record)
        return records

    def sequence_rewards(
        self, reward: str, batch: CaptionBatch, outputs: list[Hypothesis], k: int
    ) -> list[float]:
        """Each caption's CIDEr-D against its image's references, the document frequencies
        the training captions'; a caption that ended and every reference end with an EOS word
        (SacreEOS's standard configuration), so ending a caption well is rewarded."""
        if self.cider_d is None:
            raise ValueError("CIDEr-D rewards need the training captions: fit with their data")
        references = [[with_eos(c) for c in refs] for refs in batch.references]
        return [
            self.cider_d.score(
                ptb_tokenize(self.tokenizer.decode(h.tokens)) + [EOS_WORD] * h.finished,
                references[i // k],
            )
            for i, h in enumerate(outputs)
        ]

    def predict_step(self, batch: CaptionBatch, batch_idx: int) -> list[tuple[int, str]]:
        """(index in the split, caption) for each image of the batch."""
        return [
            (int(i), self.tokenizer.decode(nbest[0].tokens))
            for i, nbest in zip(batch.index, self.predicted(batch))
        ]


EOS_WORD = "<eos>"  # the end of a caption, as a word of its reward


def with_eos(caption: str) -> list[str]:
    """A reference caption's words, then the EOS word."""
    return [*ptb_tokenize(caption), EOS_WORD]
