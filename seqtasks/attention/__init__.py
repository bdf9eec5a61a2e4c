"""Attention: the score functions of the literature behind one interface (`scores`), and the
Transformer's multi-head attention (`multihead`)."""

from seqtasks.attention.scores import (
    AdditiveAttention,
    Attention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
)

__all__ = [
    "AdditiveAttention",
    "Attention",
    "DotAttention",
    "GeneralAttention",
    "ScaledDotAttention",
]
