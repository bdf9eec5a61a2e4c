"""Attention: one contract for every decoder's attention over the source (`base`), the score
functions of the literature (`scores`) and the Transformer's multi-head attention
(`multihead`), all chosen in YAML by `class_path`; and the Transformer's self-attention, softmax
(`multihead`) or linear (`linear`), chosen the same way."""

from seqtasks.attention.base import Attention, AttentionMemory
from seqtasks.attention.linear import LinearSelfAttention
from seqtasks.attention.multihead import MultiHeadAttention, SelfAttention
from seqtasks.attention.scores import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
    ScoredAttention,
)

__all__ = [
    "AdditiveAttention",
    "Attention",
    "AttentionMemory",
    "DotAttention",
    "GeneralAttention",
    "LinearSelfAttention",
    "MultiHeadAttention",
    "ScaledDotAttention",
    "ScoredAttention",
    "SelfAttention",
]
