"""Per-example evaluation records, gathered across processes by torchmetrics and scored once.

Corpus-level scores are not means of per-example scores (BLEU adds n-gram counts over the
corpus, CIDEr-D weighs n-grams by document frequency, EVALB adds bracket counts), so a split is
scored from all its examples at once. `RecordMetric` keeps a split's records as tensor states:
numbers as they are, text as UTF-8 bytes with their lengths. torchmetrics concatenates the
states of every process when `compute` is called, so under DDP each process scores the whole
split, and since the DDP sampler evens out the shards by repeating batches, `records` keeps one
record per example index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

R = TypeVar("R")
_SEPARATOR = "\n"  # between the references of one example (no reference holds a line break)


def _bytes(texts: Sequence[str]) -> tuple[Tensor, Tensor]:
    """Strings -> (their UTF-8 bytes, concatenated) (N,) uint8 and (their byte lengths) (n,)."""
    encoded = [text.encode("utf-8") for text in texts]
    data = torch.tensor(bytearray(b"".join(encoded)), dtype=torch.uint8)
    return data, torch.tensor([len(b) for b in encoded], dtype=torch.long)


def _texts(data: Tensor, lengths: Tensor) -> list[str]:
    raw, out, start = bytes(data.cpu().tolist()), [], 0
    for length in lengths.tolist():
        out.append(raw[start : start + length].decode("utf-8"))
        start += length
    return out


def _holds_any(state: list[Tensor] | Tensor) -> bool:
    """Whether a "cat" state holds values: a list before syncing, a tensor after."""
    return state.numel() > 0 if isinstance(state, Tensor) else any(t.numel() for t in state)


class RecordMetric(Metric, Generic[R]):
    """Records of a dataclass type `record` whose fields are `int`, `bool`, `float`, `str` or
    `tuple[str, ...]`, and which has an `index` (its position in the split). Subclasses say how
    a split is scored in `score`; `compute` returns that, for the whole split."""

    full_state_update = False
    _KINDS = {"int": torch.long, "bool": torch.long, "float": torch.float64}

    def __init__(self, record: type[R], **kwargs: Any):
        super().__init__(**kwargs)
        self.record = record
        self.fields = {field.name: str(field.type) for field in dataclasses.fields(record)}
        for name, kind in self.fields.items():
            if kind in self._KINDS:
                self.add_state(name, default=[], dist_reduce_fx="cat")
            elif kind in ("str", "tuple[str, ...]"):
                self.add_state(f"{name}_bytes", default=[], dist_reduce_fx="cat")
                self.add_state(f"{name}_lengths", default=[], dist_reduce_fx="cat")
            else:
                raise TypeError(f"{record.__name__}.{name}: cannot hold a field of type {kind}")

    def update(self, records: Sequence[R]) -> None:
        if not records:
            return
        for name, kind in self.fields.items():
            values = [getattr(record, name) for record in records]
            if kind in self._KINDS:
                tensor = torch.tensor(values, dtype=self._KINDS[kind], device=self.device)
                getattr(self, name).append(tensor)
                continue
            if kind != "str":
                values = [_SEPARATOR.join(value) for value in values]
            data, lengths = _bytes(values)
            getattr(self, f"{name}_bytes").append(data.to(self.device))
            getattr(self, f"{name}_lengths").append(lengths.to(self.device))

    def records(self) -> list[R]:
        """Every example of the split once, in split order."""
        if not _holds_any(self.index):
            return []
        columns: dict[str, list] = {}
        for name, kind in self.fields.items():
            if kind in self._KINDS:
                values = dim_zero_cat(getattr(self, name)).tolist()
                columns[name] = [bool(v) for v in values] if kind == "bool" else values
            else:
                data = dim_zero_cat(getattr(self, f"{name}_bytes"))
                texts = _texts(data, dim_zero_cat(getattr(self, f"{name}_lengths")))
                is_tuple = kind != "str"
                columns[name] = [tuple(t.split(_SEPARATOR)) if is_tuple else t for t in texts]
        unique = {}
        for row in zip(*columns.values()):
            record = self.record(**dict(zip(columns, row)))
            unique[record.index] = record
        return [unique[index] for index in sorted(unique)]

    def compute(self) -> dict[str, float]:
        records = self.records()
        return self.score(records) if records else {}

    def score(self, records: list[R]) -> dict[str, float]:
        raise NotImplementedError


def loss_per_token(records: list) -> dict[str, float]:
    """`loss`: the split's objective per target token, each example counted once."""
    tokens = sum(record.tokens for record in records)
    return {"loss": sum(record.loss for record in records) / max(tokens, 1)}
