"""Attention: one contract for every decoder's attention over the source (`base`), the score
functions of the literature (`scores`) and the Transformer's multi-head attention
(`multihead`), all chosen in YAML by `class_path`; and the Transformer's self-attention, softmax
(`multihead`), linear (`linear`) or with relative positions (`relative`), chosen the same way;
linear memories with other writes (`linear_memory`): gated (`gated_linear`), the delta rule
(`delta_rule`), test-time training (`ttt`)."""

from seqtasks.attention.base import Attention, AttentionMemory
from seqtasks.attention.delta_rule import DeltaRuleSelfAttention
from seqtasks.attention.gated_linear import GatedLinearSelfAttention
from seqtasks.attention.linear import LinearSelfAttention
from seqtasks.attention.multihead import MultiHeadAttention, SelfAttention
from seqtasks.attention.relative import RelativeSelfAttention
from seqtasks.attention.scores import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
    ScoredAttention,
)
from seqtasks.attention.ttt import TTTLinearSelfAttention

__all__ = [
    "AdditiveAttention",
    "Attention",
    "AttentionMemory",
    "DeltaRuleSelfAttention",
    "DotAttention",
    "GatedLinearSelfAttention",
    "GeneralAttention",
    "LinearSelfAttention",
    "MultiHeadAttention",
    "RelativeSelfAttention",
    "ScaledDotAttention",
    "ScoredAttention",
    "SelfAttention",
    "TTTLinearSelfAttention",
]
