"""Every attention a model computes, by layer and head, when asked (the decks' "Layer 5,
attention input–input" figures; issue 50).

Attention modules keep no weights by default: self-attention runs the fused kernel, which
computes none. Under `recording(parts)` every attention module of the parts appends the weights
it attends with, per head, to its `records` as it runs: a self-attention its (B, H, T, T)
weights (the causal mask and the padding mask applied, as the fused kernel applies them), a
cross-attention its (R, H, T, S). They are computed from the module's own projections beside the
fused path, whose outputs stay what they were; outside a recording nothing is computed or kept.

Which module is which is read off the parts by their contracts alone: each `Attention` (the
attention over the source, `base.py`) records as "cross", each `RecordsBlock` as the kind it
names (one kind's block of an attention that is several at once: the decoder-only
Transformer's), each other module with `RecordsAttention` as its part's self-attention
("encoder" or "decoder"). A module applied several times in one pass (a Universal
Transformer's one layer, at every depth step) records once per application; a recurrent
decoder's attention records once per target position, and `Recording.layers` joins those
positions into one map.

Kinds that keep no matrix of weights record nothing: the linear memories with other writes than
linear attention's (gated, delta rule, test-time training: `linear_memory.py`), linear attention
in incremental decoding (its running sums keep no keys), and the fixed-cache steps that a CUDA
graph replays.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

KINDS = ("encoder", "decoder", "cross")  # the encoder's self-attention, the decoder's, its cross


class RecordsAttention:
    """A module whose attention weights a `recording` collects in `records` (None: not
    recording, and nothing is computed for it)."""

    records: list[Tensor] | None = None

    @property
    def recording(self) -> bool:
        return self.records is not None

    def keep(self, weights: Tensor) -> None:
        """Append (R, H, T, S) weights to the records, if recording."""
        if self.records is not None:
            self.records.append(weights.detach())


class RecordsBlock(nn.Module, RecordsAttention):
    """Where a recording keeps one kind's block of an attention that is several kinds at once,
    recorded as that kind: the decoder-only Transformer's one causal self-attention over
    [prompt; target] is, block by block, the prompt reading itself ("encoder", as an encoder's
    self-attention reads the source), the target reading the prompt ("cross") and the target
    reading itself ("decoder"). It holds no parameters."""

    def __init__(self, kind: str):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind

    def extra_repr(self) -> str:
        return repr(self.kind)


class Recording:
    """The attention modules of a recording, each with its kind (`KINDS`), in the order the
    parts hold them (layer by layer)."""

    def __init__(self, modules: list[tuple[str, RecordsAttention]]):
        self.modules = modules

    def layers(
        self, kind: str, queries: int | None = None, within: Sequence[nn.Module] | None = None
    ) -> list[Tensor]:
        """Every map of `kind` recorded (by the modules inside the parts `within` alone, if
        given: one member of an ensemble, its encoder and decoder), layer by layer (an
        applied-again module's in the order of its applications), each (B, H, `queries`,
        keys): a module whose records are one query position each (a recurrent decoder's) has
        them joined, `queries` at a time; with `queries` None, each record is a map.

        Raises:
            RuntimeError: after the recording's block.
            ValueError: for an unknown kind, or records that do not make maps of `queries`
                rows (a recording over more than one pass, or a partial one).
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if any(module.records is None for _, module in self.modules):
            raise RuntimeError("the recording has ended: read its layers inside its with block")
        inside = None if within is None else {id(m) for part in within for m in part.modules()}
        maps: list[Tensor] = []
        for module_kind, module in self.modules:
            if module_kind != kind or not module.records:
                continue
            if inside is not None and id(module) not in inside:
                continue
            records = module.records
            if queries is None or all(record.size(-2) == queries for record in records):
                maps += records
            elif all(record.size(-2) == 1 for record in records) and len(records) % queries == 0:
                maps += [
                    torch.cat(records[i : i + queries], dim=-2)
                    for i in range(0, len(records), queries)
                ]
            else:
                rows = sorted({record.size(-2) for record in records})
                raise ValueError(
                    f"{type(module).__name__} recorded {len(records)} maps of {rows} query rows, "
                    f"which do not make maps of {queries}"
                )
        return maps


@contextmanager
def recording(parts: Mapping[str, nn.Module]) -> Iterator[Recording]:
    """Within the block, every attention module of `parts` ({"encoder": …, "decoder": …})
    records its weights (above); outside it, none does, whatever happens in the block."""
    from seqtasks.attention.base import Attention

    modules = []
    for name, part in parts.items():
        if name not in ("encoder", "decoder"):
            raise ValueError(f"parts are 'encoder' and 'decoder', got {name!r}")
        for module in part.modules():
            if isinstance(module, RecordsAttention):
                if isinstance(module, RecordsBlock):
                    kind = module.kind
                else:
                    kind = "cross" if isinstance(module, Attention) else name
                modules.append((kind, module))
    for _, module in modules:
        module.records = []
    try:
        yield Recording(modules)
    finally:
        for _, module in modules:
            module.records = None
