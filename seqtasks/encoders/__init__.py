"""Encoders: inputs -> `Memory` (annotations, mask, summary vector, optional grid)."""

from seqtasks.encoders.base import Encoder
from seqtasks.encoders.image import ConvEncoder, GridEncoder, PatchEncoder, TimmEncoder
from seqtasks.encoders.rnn import RNNEncoder
from seqtasks.encoders.transformer import TransformerEncoder

__all__ = [
    "ConvEncoder",
    "Encoder",
    "GridEncoder",
    "PatchEncoder",
    "RNNEncoder",
    "TimmEncoder",
    "TransformerEncoder",
]
