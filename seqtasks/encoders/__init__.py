"""Encoders: inputs -> `Memory` (annotations, mask, summary vector, optional grid)."""

from seqtasks.encoders.base import Encoder
from seqtasks.encoders.convolutional import ConvS2SEncoder
from seqtasks.encoders.image import ConvEncoder, GridEncoder, PatchEncoder, TimmEncoder
from seqtasks.encoders.rnn import RNNEncoder
from seqtasks.encoders.transformer import TransformerEncoder

__all__ = [
    "ConvEncoder",
    "ConvS2SEncoder",
    "Encoder",
    "GridEncoder",
    "PatchEncoder",
    "RNNEncoder",
    "TimmEncoder",
    "TransformerEncoder",
]
