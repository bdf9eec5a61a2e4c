"""What a fit records of a model beside its identity (`identity.Identity`'s `data`, `scores` and
`search`): the data it was trained on, with an example input, the validation scores when the
checkpoint was written, and the search settings it answers with by default. A model card and
the server's page start from them."""

from __future__ import annotations

from typing import Any

EXAMPLE_CHARS = 300  # the longest example input a record keeps


def describe_data(datamodule: Any) -> dict[str, Any] | None:
    """The training data as a record keeps it: the data module's class, the data's name (its
    folder's), the languages of a translation corpus, the splits, and an example input (the
    first of the validation split with text, for a page or a card to start from); None
    without a data module."""
    if datamodule is None:
        return None
    folder = getattr(datamodule, "data_dir", None) or getattr(datamodule, "source", None)
    languages = [getattr(datamodule, side, None) for side in ("src_lang", "tgt_lang")]
    splits = getattr(datamodule, "splits", {})
    return {
        "class_path": f"{type(datamodule).__module__}.{type(datamodule).__qualname__}",
        "name": None if folder is None else str(folder).rstrip("/").rsplit("/", 1)[-1],
        "languages": languages if all(languages) else None,
        "splits": {
            "train": splits.get("fit"),
            "validation": splits.get("validate"),
            "test": splits.get("test"),
        },
        "example": _example(datamodule),
    }


def _example(datamodule: Any) -> str | None:
    """The first source text of the data's validation split (a sentence to translate, the
    words of a tree to parse); None when the split holds no text (images) or is not read."""
    examples = getattr(getattr(datamodule, "datasets", {}).get("validate"), "examples", [])
    for example in examples[:50]:
        text = getattr(example, "src_text", None) or getattr(example, "words", None)
        if isinstance(text, str) and text.strip():
            return text.strip()[:EXAMPLE_CHARS]
    return None


SEARCH_FIELDS = ("beam", "length_alpha", "stop", "max_length_ratio", "max_length_offset")


def search_record(settings: Any) -> dict[str, Any]:
    """A task's default search settings (its `test_settings`, a `SearchSettings`) as a record
    keeps them: what a model searches with unless its caller says otherwise; {} for a task
    that does not search (`test_settings` None: pre-training's)."""
    if settings is None:
        return {}
    return {name: getattr(settings, name) for name in SEARCH_FIELDS}


def fit_scores(trainer: Any) -> dict[str, Any] | None:
    """The scores of the last validation before a checkpoint is written ("val/bleu" …, as
    plain floats), with the step and the validation split; None if there was none."""
    if trainer is None:
        return None
    scores = {
        name: round(float(value), 6)
        for name, value in trainer.callback_metrics.items()
        if name.startswith("val/")
    }
    if not scores:
        return None
    datamodule = getattr(trainer, "datamodule", None)
    split = getattr(datamodule, "splits", {}).get("validate")
    return {"metrics": scores, "step": int(trainer.global_step), "split": split}
