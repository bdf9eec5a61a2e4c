"""Encoders: inputs -> `Memory` (annotations, mask, summary vector, optional grid)."""

from seqtasks.encoders.base import Encoder
from seqtasks.encoders.convolutional import ConvS2SEncoder
from seqtasks.encoders.image import ConvEncoder, GridEncoder, PatchEncoder, TimmEncoder
from seqtasks.encoders.prompt import PromptEncoder
from seqtasks.encoders.rnn import RNNEncoder
from seqtasks.encoders.transformer import TransformerEncoder
from seqtasks.encoders.universal import UniversalTransformerEncoder

__all__ = [
    "ConvEncoder",
    "ConvS2SEncoder",
    "Encoder",
    "GridEncoder",
    "PatchEncoder",
    "PromptEncoder",
    "RNNEncoder",
    "TimmEncoder",
    "TransformerEncoder",
    "UniversalTransformerEncoder",
]
